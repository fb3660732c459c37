//! What the runtime's integration tests share: the imported image as the runtime's
//! `ImageSpec`, and a `ContainerdRuntime` on a private containerd without CNI.

use std::path::Path;

use cairn_runtime::{
    CniConfig, ContainerdRuntime, ContainerdRuntimeConfig, ImageConfig, ImageSpec, RuntimeError,
};
use cairn_testsupport::Containerd;

pub fn image_spec(info: &cairn_image::ImageInfo) -> ImageSpec {
    ImageSpec {
        name: info.name.clone(),
        id: info.repo_digest.clone(),
        chain_id: info.chain_id.clone(),
        config: ImageConfig {
            entrypoint: info.config.entrypoint.clone(),
            cmd: info.config.cmd.clone(),
            env: info.config.env.clone(),
            working_dir: info.config.working_dir.clone(),
            user: info.config.user.clone(),
        },
    }
}

/// The runtime over `containerd` in `namespace`, its state under `work`.
pub async fn connect(
    containerd: &Containerd,
    namespace: &str,
    work: &Path,
    cgroup_root: &str,
) -> Result<ContainerdRuntime, RuntimeError> {
    ContainerdRuntime::connect(ContainerdRuntimeConfig {
        socket: containerd.socket.clone(),
        namespace: namespace.into(),
        snapshotter: "overlayfs".into(),
        state_dir: work.join("state"),
        cni: CniConfig {
            conf_dir: work.join("net.d"),
            bin_dirs: vec!["/usr/lib/cni".into()],
            ifname: "eth0".into(),
        },
        cgroup_root: cgroup_root.into(),
    })
    .await
}
