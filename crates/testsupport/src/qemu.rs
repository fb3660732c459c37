//! A throwaway qemu guest running Debian's stock kernel, for tests that need a kernel this
//! host does not have (pure cgroup v2, IPVS).
//!
//! The guest boots `linux-image-amd64` under TCG (this host's `/dev/kvm` cannot run a normal
//! guest) with a busybox initramfs built in a temp dir. The initramfs loads the virtio/9p
//! modules, mounts the host's `/` read-only over 9p as the guest's root, adds writable
//! tmpfs dirs, `/proc`, `/sys`, `/sys/fs/cgroup` (cgroup2, the only hierarchy:
//! `cgroup_no_v1=all`), `/dev`, then `switch_root`s and runs the script with the host's
//! `/bin/sh`, so host-built binaries (test executables included) run unchanged. The script's
//! stdout/stderr and its exit code come back over a second serial port; the kernel's console
//! is kept separately. qemu always exits 0, so the exit code is read from a marker line.
//!
//! ```no_run
//! # use std::time::Duration;
//! let out = cairn_testsupport::qemu::Guest::new()?
//!     .share("/tmp/results")
//!     .run("cat /sys/fs/cgroup/cgroup.controllers", Duration::from_secs(120))?;
//! assert_eq!(out.exit_code, Some(0), "{out}");
//! # anyhow::Ok(())
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The qemu binary (Debian's `qemu-system-x86`).
pub const QEMU_BIN: &str = "qemu-system-x86_64";
/// Static busybox for the initramfs (Debian's `busybox-static`).
const BUSYBOX_BIN: &str = "/bin/busybox";
/// Modules the initramfs needs to reach the host's root over virtio 9p (with dependencies,
/// resolved from `modules.dep`; skipped when built in).
const BOOT_MODULES: &[&str] = &["virtio_pci", "9pnet_virtio", "9p"];
/// Written by the guest's init after the script; the number is the script's exit code.
const EXIT_MARKER: &str = "CAIRN-GUEST-EXIT ";
const ROOT_TAG: &str = "cairnroot";
const SHARE_TAG: &str = "cairnshare";
/// Set to `1` in the environment of every guest script: a test run by [`Guest::run_test`]
/// checks it (see [`in_guest`]) to tell the guest side from a plain host run.
pub const IN_GUEST_ENV: &str = "CAIRN_IN_GUEST";
/// Dirs that get an empty tmpfs in every guest (the host's root is read-only).
pub const DEFAULT_TMPFS: &[&str] = &["/tmp", "/run", "/var/tmp", "/var/lib", "/var/log", "/root"];

/// A bootable guest: the kernel (uncompressed, extracted once into a temp dir) and the
/// settings of the next [`Guest::run`].
pub struct Guest {
    kernel_release: String,
    vmlinux: PathBuf,
    dir: tempfile::TempDir,
    memory_mib: u32,
    cpus: u32,
    tmpfs: Vec<PathBuf>,
    share: Option<PathBuf>,
    env: Vec<(String, String)>,
    kernel_args: Vec<String>,
    instruction_clock: bool,
}

/// What a guest run left behind.
#[derive(Debug, Clone)]
pub struct GuestOutput {
    /// The script's exit code; `None` when the guest never reported one (kernel panic,
    /// init failure, timeout: see `console`).
    pub exit_code: Option<i32>,
    /// The script's stdout and stderr, interleaved as written.
    pub output: String,
    /// The kernel console (boot messages, panics, OOM reports at error level, init's own errors).
    pub console: String,
    /// Whether qemu was killed at the deadline.
    pub timed_out: bool,
    /// Wall time of the qemu run (boot to power-off).
    pub elapsed: Duration,
}

impl GuestOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// The last output line starting with `prefix` (e.g. a test's `RESULT ` line).
    pub fn last_line_starting_with(&self, prefix: &str) -> Option<&str> {
        self.output.lines().rev().find(|l| l.starts_with(prefix))
    }
}

impl fmt::Display for GuestOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "guest exit code {:?}{} after {:.1?}",
            self.exit_code,
            if self.timed_out { " (timed out)" } else { "" },
            self.elapsed
        )?;
        writeln!(f, "--- guest output ---\n{}", self.output.trim_end())?;
        write!(f, "--- guest console ---\n{}", self.console.trim_end())
    }
}

impl Guest {
    /// Finds qemu, busybox and the newest Debian kernel under `/boot` (with its modules in
    /// `/lib/modules`), and extracts the kernel's uncompressed image (TCG boots it faster
    /// than decompressing in the guest). Fails with what to install when something is missing.
    pub fn new() -> Result<Self> {
        let missing = |what: &str, package: &str| {
            anyhow::anyhow!(
                "{what} not found: install Debian's {package} (scripts/install-deps.sh does)"
            )
        };
        if find_in_path(QEMU_BIN).is_none() {
            return Err(missing(QEMU_BIN, "qemu-system-x86"));
        }
        for tool in ["cpio", "xz"] {
            if find_in_path(tool).is_none() {
                return Err(missing(
                    tool,
                    if tool == "xz" { "xz-utils" } else { "cpio" },
                ));
            }
        }
        if !Path::new(BUSYBOX_BIN).is_file() {
            return Err(missing(BUSYBOX_BIN, "busybox-static"));
        }
        let (release, vmlinuz) = find_kernel(Path::new("/boot"), Path::new("/lib/modules"))?
            .ok_or_else(|| {
                missing(
                    "a kernel (/boot/vmlinuz-* with /lib/modules/<release>/modules.dep)",
                    "linux-image-amd64",
                )
            })?;
        let dir = tempfile::Builder::new()
            .prefix("cairn-guest-")
            .tempdir()
            .context("creating guest temp dir")?;
        let vmlinux = dir.path().join("vmlinux");
        extract_vmlinux(&vmlinuz, &vmlinux)?;
        Ok(Guest {
            kernel_release: release,
            vmlinux,
            dir,
            memory_mib: 1024,
            cpus: 1,
            tmpfs: DEFAULT_TMPFS.iter().map(PathBuf::from).collect(),
            share: None,
            env: Vec::new(),
            kernel_args: Vec::new(),
            instruction_clock: false,
        })
    }

    /// The guest kernel's release (`uname -r` inside).
    pub fn kernel_release(&self) -> &str {
        &self.kernel_release
    }

    /// Guest RAM (default 1024 MiB).
    pub fn memory_mib(mut self, mib: u32) -> Self {
        self.memory_mib = mib;
        self
    }

    /// vCPUs (default 1: under TCG one is faster than two unless the work is parallel).
    pub fn cpus(mut self, cpus: u32) -> Self {
        self.cpus = cpus;
        self
    }

    /// Another dir that gets an empty tmpfs in the guest (besides [`DEFAULT_TMPFS`]).
    pub fn tmpfs(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tmpfs.push(dir.into());
        self
    }

    /// Shares the host dir `dir` read-write with the guest, at the same path, for results
    /// and logs. It is mounted after the tmpfs dirs, so it may live under `/tmp`.
    pub fn share(mut self, dir: impl Into<PathBuf>) -> Self {
        self.share = Some(dir.into());
        self
    }

    /// An environment variable for the script.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// An extra kernel command-line argument.
    pub fn kernel_arg(mut self, arg: impl Into<String>) -> Self {
        self.kernel_args.push(arg.into());
        self
    }

    /// Runs the guest on an instruction-counted clock (`-icount shift=0,sleep=off`): its
    /// time advances 1 ns per instruction executed (and jumps over idle), whatever the host
    /// is doing, so a rate measured inside is a repeatable count of the guest's work per
    /// operation rather than a reading of a shared host's speed. Slower to run.
    pub fn instruction_clock(mut self) -> Self {
        self.instruction_clock = true;
        self
    }

    /// Boots the guest, runs `script` with `/bin/sh` as root in `/` (loopback up, `PATH` set)
    /// and powers off. `timeout` bounds the whole run (boot included); qemu is killed then.
    pub fn run(&self, script: &str, timeout: Duration) -> Result<GuestOutput> {
        let run_dir = tempfile::Builder::new()
            .prefix("run-")
            .tempdir_in(self.dir.path())
            .context("creating guest run dir")?;
        let initrd = run_dir.path().join("initrd.cpio");
        self.build_initramfs(&run_dir.path().join("initramfs"), script, &initrd)?;
        let console = run_dir.path().join("console.log");
        let output = run_dir.path().join("output.log");

        let mut append = vec![
            "console=ttyS0".to_owned(),
            "quiet".to_owned(),
            "panic=-1".to_owned(),
            "cgroup_no_v1=all".to_owned(),
        ];
        append.extend(self.kernel_args.iter().cloned());
        let mut cmd = Command::new("timeout");
        cmd.arg("--kill-after=10")
            .arg(format!("{}", timeout.as_secs().max(1)))
            .arg(QEMU_BIN)
            .args(["-accel", "tcg", "-nodefaults", "-no-reboot"])
            .args(["-display", "none", "-monitor", "none"])
            .arg("-m")
            .arg(self.memory_mib.to_string())
            .arg("-smp")
            .arg(self.cpus.to_string())
            .arg("-kernel")
            .arg(&self.vmlinux)
            .arg("-initrd")
            .arg(&initrd)
            .arg("-append")
            .arg(append.join(" "))
            .arg("-serial")
            .arg(format!("file:{}", console.display()))
            .arg("-serial")
            .arg(format!("file:{}", output.display()))
            .arg("-virtfs")
            .arg(format!(
                "local,path=/,mount_tag={ROOT_TAG},security_model=none,readonly=on,multidevs=remap,id={ROOT_TAG}"
            ));
        if self.instruction_clock {
            cmd.args(["-icount", "shift=0,sleep=off"]);
        }
        if let Some(share) = &self.share {
            cmd.arg("-virtfs").arg(format!(
                "local,path={},mount_tag={SHARE_TAG},security_model=none,multidevs=remap,id={SHARE_TAG}",
                share.display()
            ));
        }
        let started = Instant::now();
        let result = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .with_context(|| format!("running {QEMU_BIN} under timeout"))?;
        let elapsed = started.elapsed();
        // timeout(1) exits 124 when it had to stop qemu (137 if it needed SIGKILL).
        let timed_out = matches!(result.status.code(), Some(124) | Some(137));
        if !timed_out && !result.status.success() {
            bail!(
                "{QEMU_BIN} failed ({}): {}",
                result.status,
                String::from_utf8_lossy(&result.stderr).trim()
            );
        }
        let console = read_lossy(&console);
        let (output, exit_code) = split_exit_marker(&read_lossy(&output));
        Ok(GuestOutput {
            exit_code,
            output,
            console,
            timed_out,
            elapsed,
        })
    }

    /// Runs the test `name` of the current test binary inside the guest
    /// (`<exe> --exact <name> --nocapture`). The usual shape is one test that asks
    /// [`in_guest`]: outside, it prepares and calls this for itself; inside, it does the
    /// guest-side work. The test's output and libtest's verdict are in `output`.
    pub fn run_test(&self, name: &str, timeout: Duration) -> Result<GuestOutput> {
        let exe = std::env::current_exe().context("finding the current test binary")?;
        let script = format!(
            "exec {} --exact {} --nocapture --test-threads=1",
            shell_quote(&exe.display().to_string()),
            shell_quote(name)
        );
        self.run(&script, timeout)
    }

    fn build_initramfs(&self, root: &Path, script: &str, archive: &Path) -> Result<()> {
        for d in ["bin", "dev", "proc", "sys", "newroot", "modules", "cairn"] {
            std::fs::create_dir_all(root.join(d))
                .with_context(|| format!("creating {}", root.join(d).display()))?;
        }
        std::fs::copy(BUSYBOX_BIN, root.join("bin/busybox"))
            .with_context(|| format!("copying {BUSYBOX_BIN}"))?;
        let modules_dir = Path::new("/lib/modules").join(&self.kernel_release);
        let order = module_load_order(&modules_dir, BOOT_MODULES)?;
        let mut names = Vec::new();
        for rel in &order {
            names.push(copy_module(&modules_dir.join(rel), &root.join("modules"))?);
        }
        write_executable(&root.join("init"), &self.stage1_init(&names))?;
        write_executable(&root.join("cairn/stage2"), &stage2_init())?;
        let mut full_script = String::from("set -a\n");
        for (k, v) in &self.env {
            writeln!(full_script, "{k}={}", shell_quote(v))?;
        }
        full_script.push_str("set +a\n");
        full_script.push_str(script);
        full_script.push('\n');
        std::fs::write(root.join("cairn/script"), full_script).context("writing guest script")?;

        let cpio = std::fs::File::create(archive)
            .with_context(|| format!("creating {}", archive.display()))?;
        let status = Command::new("sh")
            .arg("-c")
            .arg("find . -print0 | cpio --null -o -H newc -R 0:0 --quiet")
            .current_dir(root)
            .stdout(cpio)
            .status()
            .context("running find | cpio")?;
        if !status.success() {
            bail!("building the initramfs with cpio failed ({status})");
        }
        Ok(())
    }

    /// PID 1 in the initramfs: modules, the host root over 9p, the guest's mounts, then
    /// `switch_root` into stage 2.
    fn stage1_init(&self, modules: &[String]) -> String {
        let mut s = String::from(
            "#!/bin/busybox sh\n\
             /bin/busybox --install -s /bin\n\
             export PATH=/bin\n\
             fail() { echo \"cairn-guest init: $*\"; echo o > /proc/sysrq-trigger; reboot -f; }\n\
             mount -t proc proc /proc\n\
             mount -t sysfs sysfs /sys\n\
             mount -t devtmpfs devtmpfs /dev\n",
        );
        for m in modules {
            let _ = writeln!(s, "insmod /modules/{m} || fail insmod {m}");
        }
        let _ = writeln!(
            s,
            "mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose {ROOT_TAG} /newroot || fail mounting the host root\n\
             R=/newroot\n\
             mount -t proc proc $R/proc || fail proc\n\
             mount -t sysfs sysfs $R/sys || fail sysfs\n\
             mount -t cgroup2 -o nsdelegate cgroup2 $R/sys/fs/cgroup || fail cgroup2\n\
             mount -t devtmpfs devtmpfs $R/dev || fail devtmpfs\n\
             mkdir -p $R/dev/pts $R/dev/shm $R/dev/mqueue\n\
             mount -t devpts -o newinstance,ptmxmode=0666 devpts $R/dev/pts || fail devpts\n\
             mount -t tmpfs shm $R/dev/shm || fail shm\n\
             mount -t mqueue mqueue $R/dev/mqueue || fail mqueue"
        );
        for d in &self.tmpfs {
            let d = shell_quote(&d.display().to_string());
            let _ = writeln!(
                s,
                "mkdir -p $R{d} && mount -t tmpfs -o mode=0755 tmpfs $R{d} || fail tmpfs {d}"
            );
        }
        if let Some(share) = &self.share {
            let d = shell_quote(&share.display().to_string());
            let _ = writeln!(
                s,
                "mkdir -p $R{d}; mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 {SHARE_TAG} $R{d} || fail mounting the share {d}"
            );
        }
        s.push_str(
            "mkdir -p $R/run/cairn-guest || fail /run is not writable\n\
             cp /cairn/stage2 /cairn/script /bin/busybox $R/run/cairn-guest/ || fail copying stage 2\n\
             exec switch_root $R /run/cairn-guest/busybox sh /run/cairn-guest/stage2\n\
             fail switch_root\n",
        );
        s
    }
}

/// Whether this process runs inside a [`Guest`].
pub fn in_guest() -> bool {
    std::env::var_os(IN_GUEST_ENV).is_some_and(|v| v == "1")
}

/// PID 1 after `switch_root` (busybox sh on the host's root): runs the script with its
/// output on the second serial port, reports the exit code, powers off (a reboot, which
/// `-no-reboot` turns into qemu's exit).
fn stage2_init() -> String {
    format!(
        "B=/run/cairn-guest/busybox\n\
         export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root {IN_GUEST_ENV}=1\n\
         $B ip link set lo up\n\
         cd /\n\
         /bin/sh /run/cairn-guest/script </dev/null >/dev/ttyS1 2>&1\n\
         echo \"{EXIT_MARKER}$?\" >/dev/ttyS1\n\
         $B sync\n\
         $B reboot -f\n"
    )
}

/// Copies a module into `dir` as a plain `.ko` (busybox `insmod` cannot read the xz or
/// zstd compressed modules newer Debian releases ship); returns its file name.
fn copy_module(path: &Path, dir: &Path) -> Result<String> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stem, decompressor) = if let Some(stem) = file_name.strip_suffix(".xz") {
        (stem, Some("xz"))
    } else if let Some(stem) = file_name.strip_suffix(".zst") {
        (stem, Some("zstd"))
    } else {
        (file_name.as_str(), None)
    };
    let target = dir.join(stem);
    match decompressor {
        None => {
            std::fs::copy(path, &target).with_context(|| format!("copying {}", path.display()))?;
        }
        Some(tool) => {
            let out = std::fs::File::create(&target)
                .with_context(|| format!("creating {}", target.display()))?;
            let status = Command::new(tool)
                .arg("-dc")
                .arg(path)
                .stdout(out)
                .status()
                .with_context(|| format!("running {tool} for {}", path.display()))?;
            if !status.success() {
                bail!("{tool} could not decompress {} ({status})", path.display());
            }
        }
    }
    Ok(stem.to_owned())
}

fn write_executable(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", path.display()))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn read_lossy(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

fn find_in_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The script's output without the exit marker, and the code the marker carries.
fn split_exit_marker(text: &str) -> (String, Option<i32>) {
    match text.rfind(EXIT_MARKER) {
        Some(at) => {
            let code = text[at + EXIT_MARKER.len()..]
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok());
            (text[..at].to_owned(), code)
        }
        None => (text.to_owned(), None),
    }
}

/// The newest `vmlinuz-<release>` under `boot` whose modules are installed under `modules`.
fn find_kernel(boot: &Path, modules: &Path) -> Result<Option<(String, PathBuf)>> {
    let Ok(entries) = std::fs::read_dir(boot) else {
        return Ok(None);
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let release = name.strip_prefix("vmlinuz-")?.to_owned();
            modules
                .join(&release)
                .join("modules.dep")
                .is_file()
                .then(|| (release, e.path()))
        })
        .collect();
    found.sort_by_key(|a| version_key(&a.0));
    Ok(found.pop())
}

/// Numeric-aware sort key: `6.1.0-9` < `6.1.0-10`.
fn version_key(release: &str) -> Vec<(u64, String)> {
    release
        .split(['.', '-'])
        .map(|p| (p.parse().unwrap_or(0), p.to_owned()))
        .collect()
}

/// Writes the ELF kernel inside a bzImage: the xz stream after the setup code, decompressed
/// with `xz` (Debian's kernels are xz-compressed; anything else is refused with a message).
fn extract_vmlinux(bzimage: &Path, out: &Path) -> Result<()> {
    const XZ_MAGIC: &[u8] = b"\xfd7zXZ\x00";
    let data = std::fs::read(bzimage).with_context(|| format!("reading {}", bzimage.display()))?;
    let Some(at) = data.windows(XZ_MAGIC.len()).position(|w| w == XZ_MAGIC) else {
        bail!(
            "{} holds no xz-compressed kernel (only xz kernels, like Debian's, are supported)",
            bzimage.display()
        );
    };
    let file = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut child = Command::new("xz")
        .args(["-dc", "--single-stream"])
        .stdin(Stdio::piped())
        .stdout(file)
        .stderr(Stdio::piped())
        .spawn()
        .context("spawning xz")?;
    let mut stdin = child.stdin.take().context("xz stdin")?;
    let payload = data[at..].to_vec();
    // Feed from a thread: xz writes its output while we write its input.
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(&payload)
    });
    let result = child.wait_with_output().context("waiting for xz")?;
    let fed = feeder.join();
    if !result.status.success() {
        bail!(
            "decompressing the kernel in {} failed: {}",
            bzimage.display(),
            String::from_utf8_lossy(&result.stderr).trim()
        );
    }
    // xz stops reading after the stream; a broken pipe on the trailing bytes is fine.
    if let Ok(Err(e)) = fed {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e).context("feeding xz");
        }
    }
    Ok(())
}

/// Module files (relative to `modules_dir`) to `insmod`, dependencies first, for `wanted`
/// module names; built-in modules are skipped.
fn module_load_order(modules_dir: &Path, wanted: &[&str]) -> Result<Vec<String>> {
    let dep_path = modules_dir.join("modules.dep");
    let deps_text = std::fs::read_to_string(&dep_path)
        .with_context(|| format!("reading {}", dep_path.display()))?;
    let builtin = std::fs::read_to_string(modules_dir.join("modules.builtin")).unwrap_or_default();
    let name_of = |path: &str| {
        Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .split(".ko")
            .next()
            .unwrap_or_default()
            .replace('-', "_")
    };
    let mut deps: std::collections::HashMap<String, (String, Vec<String>)> = Default::default();
    for line in deps_text.lines() {
        let Some((module, rest)) = line.split_once(':') else {
            continue;
        };
        deps.insert(
            name_of(module),
            (
                module.to_owned(),
                rest.split_whitespace().map(str::to_owned).collect(),
            ),
        );
    }
    let builtin: BTreeSet<String> = builtin.lines().map(name_of).collect();
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    fn visit(
        path: &str,
        deps: &std::collections::HashMap<String, (String, Vec<String>)>,
        name_of: &dyn Fn(&str) -> String,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<String>,
    ) {
        if !seen.insert(path.to_owned()) {
            return;
        }
        if let Some((_, needs)) = deps.get(&name_of(path)) {
            for n in needs {
                visit(n, deps, name_of, seen, order);
            }
        }
        order.push(path.to_owned());
    }
    for want in wanted {
        let key = want.replace('-', "_");
        match deps.get(&key) {
            Some((path, _)) => visit(path, &deps, &name_of, &mut seen, &mut order),
            None if builtin.contains(&key) => {}
            None => bail!(
                "kernel module {want} is neither in {} nor built in",
                dep_path.display()
            ),
        }
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_marker_is_split_off() {
        let (out, code) = split_exit_marker("hello\nCAIRN-GUEST-EXIT 3\n");
        assert_eq!(out, "hello\n");
        assert_eq!(code, Some(3));
        assert_eq!(split_exit_marker("boom").1, None);
    }

    #[test]
    fn modules_load_dependencies_first() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("modules.dep"),
            "kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/netfs/netfs.ko\n\
             kernel/net/9p/9pnet.ko:\n\
             kernel/fs/netfs/netfs.ko:\n\
             kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("modules.builtin"),
            "kernel/drivers/virtio/virtio_pci.ko\n",
        )
        .unwrap();
        let order = module_load_order(dir.path(), &["virtio_pci", "9pnet_virtio", "9p"]).unwrap();
        assert_eq!(
            order,
            [
                "kernel/net/9p/9pnet.ko",
                "kernel/net/9p/9pnet_virtio.ko",
                "kernel/fs/netfs/netfs.ko",
                "kernel/fs/9p/9p.ko"
            ]
        );
        assert!(module_load_order(dir.path(), &["nope"]).is_err());
    }

    #[test]
    fn compressed_modules_are_unpacked() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("m.ko");
        std::fs::write(&src, b"module bytes").unwrap();
        let status = Command::new("xz").arg("-k").arg(&src).status().unwrap();
        assert!(status.success());
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let name = copy_module(&dir.path().join("m.ko.xz"), &out).unwrap();
        assert_eq!(name, "m.ko");
        assert_eq!(std::fs::read(out.join("m.ko")).unwrap(), b"module bytes");
    }

    #[test]
    fn kernel_versions_sort_numerically() {
        let boot = tempfile::tempdir().unwrap();
        let modules = tempfile::tempdir().unwrap();
        for r in ["6.1.0-9-amd64", "6.1.0-10-amd64", "6.1.0-11-amd64"] {
            std::fs::write(boot.path().join(format!("vmlinuz-{r}")), "").unwrap();
            if r != "6.1.0-11-amd64" {
                std::fs::create_dir_all(modules.path().join(r)).unwrap();
                std::fs::write(modules.path().join(r).join("modules.dep"), "").unwrap();
            }
        }
        let (release, _) = find_kernel(boot.path(), modules.path()).unwrap().unwrap();
        assert_eq!(release, "6.1.0-10-amd64");
    }

    /// Boots the real guest: pure cgroup v2, writable tmpfs and share, exit codes and env
    /// come back.
    #[test]
    fn guest_runs_a_script_on_pure_cgroup_v2() {
        let share = tempfile::tempdir().unwrap();
        let guest = Guest::new()
            .unwrap()
            .share(share.path())
            .env("GREETING", "it's me");
        let script = format!(
            "echo \"$GREETING\"\n\
             stat -f -c %T /sys/fs/cgroup\n\
             cat /proc/self/cgroup\n\
             echo \"in guest: $CAIRN_IN_GUEST\"\n\
             modprobe ip_vs && grep -q '^ip_vs ' /proc/modules && echo ip_vs loaded\n\
             touch /tmp/writable /var/lib/writable\n\
             ip -o link show lo | grep -q UP || echo lo-down\n\
             echo from-guest > {}/result\n\
             exit 7",
            share.path().display()
        );
        let out = guest.run(&script, Duration::from_secs(120)).unwrap();
        assert_eq!(out.exit_code, Some(7), "{out}");
        assert_eq!(
            out.output.lines().collect::<Vec<_>>(),
            [
                "it's me",
                "cgroup2fs",
                "0::/",
                "in guest: 1",
                "ip_vs loaded"
            ],
            "{out}"
        );
        assert_eq!(
            std::fs::read_to_string(share.path().join("result")).unwrap(),
            "from-guest\n"
        );
        eprintln!("guest run took {:.1?}", out.elapsed);
    }
}
