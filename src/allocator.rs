//! The binary's allocator: mimalloc, with arenas reserved 64 MiB at a time.
//!
//! mimalloc rather than glibc's malloc: a command's buffers and messages are allocated on
//! one thread and freed on another, which glibc serialises on its arena locks (with its
//! consolidation, ~24 % of the NATS throughput bench's CPU; BENCHMARKS.md, issue 19).
//!
//! mimalloc reserves its first arena at the first allocation, 1 GiB of address space by
//! default, and initialises that arena's bitmaps at once: 43 pages written (one page
//! fault each) before `main` of every one-shot `cmdr exec`. Arenas of 64 MiB have
//! bitmaps of 3 pages; mimalloc doubles the size of the arenas it adds every eighth one,
//! so a large server still gets large arenas (BENCHMARKS.md, X3). A
//! `MIMALLOC_ARENA_RESERVE` in the environment still wins: only the default is set.

use std::ffi::{c_int, c_long};

/// The global allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_arena_reserve` in `mimalloc.h`'s `mi_option_t` (the enum keeps its order
/// across releases: retired options are renamed, not removed). Its value is in KiB.
const ARENA_RESERVE_OPTION: c_int = 23;

/// The first arena's size, in KiB.
const ARENA_RESERVE_KIB: c_long = 64 * 1024;

extern "C" {
    /// mimalloc's `mi_option_set_default`: the value unless the environment sets one.
    fn mi_option_set_default(option: c_int, value: c_long);
}

/// Run by the C library before `main` (and before Rust's runtime allocates anything).
#[used]
#[link_section = ".init_array"]
static SMALL_FIRST_ARENA: extern "C" fn() = small_first_arena;

extern "C" fn small_first_arena() {
    // SAFETY: sets one of mimalloc's options; no allocation has been made yet.
    unsafe { mi_option_set_default(ARENA_RESERVE_OPTION, ARENA_RESERVE_KIB) }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        /// mimalloc's `mi_option_get_size`: a size option's value in bytes (the value as
        /// is for other options).
        fn mi_option_get_size(option: c_int) -> usize;
        /// mimalloc's `mi_option_get`.
        fn mi_option_get(option: c_int) -> c_long;
    }

    #[test]
    fn the_option_set_is_the_arena_reserve_and_it_is_set() {
        // SAFETY: reads options.
        let (bytes, previous) = unsafe {
            (
                mi_option_get_size(ARENA_RESERVE_OPTION),
                mi_option_get(ARENA_RESERVE_OPTION - 1),
            )
        };
        // A size option (counted in KiB: the arena reserve), set before `main`.
        assert_eq!(bytes, 64 << 20);
        // Its neighbour is `mi_option_destroy_on_exit`, off by default.
        assert_eq!(previous, 0);
    }
}
