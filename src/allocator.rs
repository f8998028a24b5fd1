//! glibc allocator settings for a process that moves tens of megabytes per request.
//!
//! By default glibc gives every allocating thread its own arena (up to 8 per core), raises its
//! mmap threshold each time a large buffer is freed, and trims the heap top after frees. For
//! this server that means RSS creeping up as 60 MB voices are loaded and dropped on changing
//! worker threads, and page faults on every multi-megabyte decoder buffer. Two arenas, a fixed
//! 64 MiB mmap threshold and no trimming keep freed memory where the next request reuses it:
//! measured 1.16× → 1.05× onnxruntime's time for one sentence, and no RSS growth across voice
//! switches (docs/performance.md).

/// Applies the settings. Call it once, first thing in `main`, before any other thread exists.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes plain integers (no pointers to keep valid) and changes only
    // allocator parameters; `tune` runs first in `main`, before any other thread could be
    // allocating while they change.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}
