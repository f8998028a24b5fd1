//! What the kernels' tests and hand-run timings share: deterministic operands and a clock that
//! other processes on a shared machine do not move.

/// `n` values in [−1, 1), spread by a multiplicative hash of their index and `seed`.
pub(super) fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            ((i.wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// This thread's CPU time in seconds: time spent waiting for a core does not count.
pub(super) fn thread_secs() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}
