//! Test harnesses: private containerd, local registry, test images, network namespaces.
//!
//! Test-only code: failures are `anyhow` errors with context, and the lints that keep
//! production code free of panics are relaxed here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod api_client;
pub mod containerd;
pub mod control_plane;
pub mod images;
pub mod netns;
mod proc_util;
pub mod qemu;
pub mod ready;

pub use proc_util::{kill_tree, pids_whose_cmdline_contains, remove_cgroup, unmount_under};
pub mod registry;

pub use containerd::{Containerd, ContainerdOptions};
pub use images::{
    busybox_image, busybox_index, write_docker_archive_tar, write_oci_layout_tar, Blob, BuiltImage,
    BuiltIndex, ImageSpec, ManifestFormat,
};
pub use netns::NetNs;
pub use ready::ReadyWatch;
pub use registry::Registry;
