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

/// mimalloc's `mi_option_purge_delay` (v2 `mimalloc.h`; the Rust bindings name no constant).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

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
