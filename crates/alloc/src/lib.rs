//! The daemons' one allocator setup. Linking this crate makes mimalloc the global
//! allocator of the binary (`cairn-control` and `cairn-proxy` use it; a binary says so with
//! `use cairn_alloc as _;` or by calling [`purge_freed_pages_at_once`] or
//! [`purge_freed_pages_soon`]).
//!
//! Why mimalloc instead of glibc's malloc: the API server and scheduler allocate many
//! small, short-lived JSON values per request, where glibc spent ~18 % of the API server's
//! CPU in malloc/free/consolidation under the scheduler benchmark; and glibc's per-thread
//! arenas kept the proxy's RSS high after a 10,000-service sync.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

/// mimalloc's `mi_option_purge_delay` (`mimalloc.h`; the Rust bindings name no constant).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// mimalloc's `mi_option_arena_purge_mult` (v3): arenas purge after delay × this.
const MI_OPTION_ARENA_PURGE_MULT: libmimalloc_sys::mi_option_t = 24;

/// How long [`purge_freed_pages_soon`] lets freed pages wait, and how often it sweeps.
const PURGE_DELAY_MS: std::ffi::c_long = 100;
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Makes mimalloc return freed pages at once. It runs its delayed purges only on later
/// allocator activity, so a process idle after a burst keeps them: the standalone
/// controllers kept ~10 MiB after a 10,000-pod scale-up, the proxy its initial lists and
/// first full ruleset. Purging at once costs a few madvise calls per burst; the API server
/// keeps the default delay, where it saves them on the hot path.
#[allow(unsafe_code)]
pub fn purge_freed_pages_at_once() {
    // SAFETY: mi_option_set takes plain integers and may be called at any time; options
    // are read on the next allocator operation that consults them.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

/// Makes mimalloc return freed pages within about a second, in batches: after
/// [`PURGE_DELAY_MS`] (at most one purge pass per tenth of it while busy), and, since
/// mimalloc runs expired purges only on allocator activity, from a thread that sweeps
/// every [`SWEEP_EVERY`] so a process idle after a burst gives them back too. For a
/// process whose hot path frees and reuses pages all the time (the Ingress data plane),
/// where purging at once was a madvise per freed page, each stalling that thread's
/// requests (p99 2-3x nginx's in `ingress_rate`, 1x without).
#[allow(unsafe_code)]
pub fn purge_freed_pages_soon() -> std::io::Result<()> {
    // SAFETY: as in purge_freed_pages_at_once.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
        libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_PURGE_MULT, 1);
    }
    std::thread::Builder::new()
        .name("alloc-purge".into())
        .spawn(|| {
            // mi_collect does nothing for a thread that never allocated.
            let first = std::hint::black_box(vec![0u8; 16]);
            loop {
                std::thread::sleep(SWEEP_EVERY);
                // SAFETY: mi_collect takes a flag and may be called from any thread; the
                // arenas' purges it runs are process-wide and guarded inside mimalloc.
                unsafe { libmimalloc_sys::mi_collect(false) };
                std::hint::black_box(&first);
            }
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident pages, read without allocating (an allocation could run the purges the
    /// test waits for the sweeping thread to run).
    fn resident_pages(statm: &std::fs::File) -> u64 {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 128];
        let n = statm.read_at(&mut buf, 0).unwrap();
        let text = std::str::from_utf8(&buf[..n]).unwrap();
        text.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Freed memory goes back to the kernel while the process allocates nothing more.
    #[test]
    fn an_idle_process_gets_its_freed_pages_purged() {
        purge_freed_pages_soon().unwrap();
        let statm = std::fs::File::open("/proc/self/statm").unwrap();
        let before = resident_pages(&statm);
        // 64 MiB in 64 KiB blocks, written so they are resident, then freed.
        let blocks: Vec<Vec<u8>> = (0..1024).map(|_| vec![1u8; 64 * 1024]).collect();
        let peak = resident_pages(&statm);
        assert!(peak > before + 15_000, "{before} -> {peak} pages");
        drop(std::hint::black_box(blocks));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while resident_pages(&statm) > before + 4096 {
            let now = resident_pages(&statm);
            assert!(
                std::time::Instant::now() < deadline,
                "{before} -> {now} pages"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
