//! The daemons' one allocator setup. Linking this crate makes mimalloc the global
//! allocator of the binary (`cairn-control` and `cairn-proxy` use it; a binary says so with
//! `use cairn_alloc as _;` or by calling [`purge_freed_pages_at_once`]).
//!
//! Why mimalloc instead of glibc's malloc: the API server and scheduler allocate many
//! small, short-lived JSON values per request, where glibc spent ~18 % of the API server's
//! CPU in malloc/free/consolidation under the scheduler benchmark; and glibc's per-thread
//! arenas kept the proxy's RSS high after a 10,000-service sync.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (v3 `mimalloc.h`; the Rust bindings name no constant).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc's `mi_option_allow_thp` (v3 `mimalloc.h`).
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

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

/// Gives freed memory back to the system after mimalloc's purge delay (1 s in v3) rather
/// than at once, from a thread that asks every `every`: mimalloc runs delayed purges only
/// on later allocator activity, so without it an idle process would keep them.
///
/// For a process whose hot path frees and reuses memory within the delay (the Ingress
/// data plane's per-connection buffers): purging at once made each burst of new
/// connections madvise pages away and fault them back in, zeroed. In `ingress_rate`
/// (same run) the proxy's CPU per new-connection request fell from 38 to 30 us.
#[allow(unsafe_code)]
pub fn purge_freed_pages_in_background(every: std::time::Duration) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("purge-freed".into())
        .spawn(move || {
            // mimalloc collects nothing for a thread that has never allocated.
            drop(std::hint::black_box(Box::new(0u64)));
            loop {
                std::thread::sleep(every);
                // SAFETY: mi_collect takes a plain bool and may be called from any thread
                // at any time; it frees nothing that is in use.
                unsafe { libmimalloc_sys::mi_collect(false) };
            }
        })?;
    Ok(())
}

/// Keeps the heap of the binary that invokes it in 4 KiB pages, from before mimalloc
/// starts: mimalloc asks for transparent huge pages on its arenas (`MADV_HUGEPAGE`), so on
/// a host whose THP mode is `madvise` (Debian's) or `always`, touching one small object
/// makes 2 MiB resident. cairn-proxy's heap was 16 MiB resident on an idle node, half of
/// it huge pages; without them, 3-4 MiB.
///
/// It must run before mimalloc's own constructor (which reserves the first arena, and
/// applies `PR_SET_THP_DISABLE` when the option is off), so it is an entry of the
/// executable's `.preinit_array`, which runs before every constructor. Invoke it once,
/// in a binary crate (the linker may drop a library's). It overrides mimalloc's
/// `MIMALLOC_ALLOW_THP` (the environment is not readable that early).
#[macro_export]
macro_rules! small_pages_from_start {
    () => {
        // SAFETY: the entry is a plain `extern "C" fn()`, which the loader calls once
        // before any constructor; it only sets an allocator option.
        #[allow(unsafe_code)]
        #[used]
        #[link_section = ".preinit_array"]
        static CAIRN_ALLOC_SMALL_PAGES: extern "C" fn() = $crate::disallow_huge_pages;
    };
}

/// What [`small_pages_from_start!`] runs: mimalloc's `allow_thp` off.
#[allow(unsafe_code)]
pub extern "C" fn disallow_huge_pages() {
    // SAFETY: as in `purge_freed_pages_at_once`; before mimalloc's initialisation it only
    // records the value, which its initialisation then reads.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0) };
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    crate::small_pages_from_start!();

    /// The process's resident anonymous huge pages, in KiB.
    fn huge_kib() -> u64 {
        let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap();
        let line = rollup
            .lines()
            .find(|l| l.starts_with("AnonHugePages:"))
            .unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Allocates 64 MiB, touches one byte in each 2 MiB, and returns how many KiB of
    /// huge pages that made resident.
    fn sparse_touch() -> u64 {
        let before = huge_kib();
        let mut block = vec![0u8; 64 << 20];
        for i in (0..block.len()).step_by(2 << 20) {
            block[i] = 1;
        }
        // The writes must reach memory, not be folded into the zeroed allocation.
        std::hint::black_box(&mut block);
        let grown = huge_kib().saturating_sub(before);
        drop(block);
        grown
    }

    /// The whole heap, the arena reserved before `main` included, is in small pages.
    /// (Without the macro above this fails on a host whose THP mode is `madvise` or
    /// `always`, as Debian's is: the flag is unset and the block gets huge pages.)
    #[test]
    fn the_heap_is_in_small_pages_from_the_start() {
        assert!(nix::sys::prctl::get_thp_disable().unwrap());
        assert_eq!(huge_kib(), 0, "huge pages before the test");
        assert_eq!(sparse_touch(), 0, "huge pages for a sparse 64 MiB block");
    }
}
