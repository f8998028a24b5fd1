//! Spare cores, lent to the work that a listener is waiting on.
//!
//! Every kernel runs on its caller's thread (see the module docs): the server runs one
//! inference worker per core, and a convolution that fanned out over all cores would slow
//! the other workers down. But on a server with one request in flight the other cores idle.
//! So a thread computing a forward pass holds a [`Computing`] token, and inside a [`Lending`]
//! scope a kernel may borrow a core that no token holds and share its work, in parts, with a
//! helper thread there. `Vits` opens the scope where the caller waits: for all of a whole-body
//! synthesis, and for a stream's stages before its first audio (the text encoder, the
//! duration predictor, the first window); a stream's later windows only have to stay ahead
//! of its listener. The decision is made per kernel call: the helper takes no further part
//! once a worker needs its core, and between calls it polls for the next one for at most
//! [`WARM_FOR`] and only while its core is spare. A worker that starts meanwhile therefore
//! shares its core for one part of one call at most.
//!
//! The helpers are a rayon pool, but the decision to use one is ours: rayon's scheduling
//! knows its own threads, not which cores the inference workers (plain blocking threads)
//! are computing on, and a helper that had gone to sleep took 0.1–0.4 ms to wake here,
//! as long as a part of a small convolution.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// The process's cores, counted by who holds them. A plain value, so that the policy can be
/// tested without threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cores {
    total: usize,
    /// Threads computing a forward pass.
    computing: usize,
    /// Cores lent to helper threads.
    lent: usize,
}

impl Cores {
    /// Cores computing or lent.
    fn busy(&self) -> usize {
        self.computing + self.lent
    }

    /// Whether a core is free, and takes it if so.
    fn try_lend(&mut self) -> bool {
        let free = self.busy() < self.total;
        if free {
            self.lent += 1;
        }
        free
    }
}

/// How long a helper keeps polling for the next shared call after its last one, while a
/// lending scope is open. Waking a sleeping thread took 0.1–0.4 ms on the 2-core virtual
/// machine of docs/performance.md (its idle virtual CPU has to be rescheduled by the host),
/// as long as a part of a 1×1 convolution itself; the gaps between two shared calls are
/// shorter.
const WARM_FOR: Duration = Duration::from_millis(2);

/// The core counts and the helper threads that borrowed work runs on.
struct Lender {
    cores: Mutex<Cores>,
    /// One thread per core but the caller's; `None` on one core.
    helpers: Option<rayon::ThreadPool>,
    /// Lending scopes open on any thread.
    open_scopes: AtomicUsize,
    /// Shared calls handed to the helpers and not yet started.
    pending: AtomicUsize,
    /// Whether a helper is polling (see [`Lender::warm_up`]).
    warming: AtomicBool,
}

impl Lender {
    fn new(total: usize) -> Self {
        Self::with_helpers(total, total.saturating_sub(1))
    }

    fn with_helpers(total: usize, threads: usize) -> Self {
        let helpers = match threads {
            0 => None,
            threads => rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("omnivoice-spare-{i}"))
                .build()
                .map_err(|e| tracing::warn!(error = %e, "no helper threads for spare cores"))
                .ok(),
        };
        Self {
            cores: Mutex::new(Cores {
                total,
                computing: 0,
                lent: 0,
            }),
            helpers,
            open_scopes: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            warming: AtomicBool::new(false),
        }
    }

    fn update<R>(&self, f: impl FnOnce(&mut Cores) -> R) -> R {
        // Each change is one statement, so the counts stay consistent even if a holder of
        // the lock panicked.
        let mut cores = self.cores.lock();
        f(&mut cores)
    }

    /// Runs `work(part)` for every part in `0..parts`, each once. With a spare core, this
    /// thread and a helper there both take the next part as they finish one; the helper
    /// takes no more once a worker needs its core, which that worker then shares for one
    /// part at most.
    fn share(&'static self, parts: usize, work: &(dyn Fn(usize) + Sync)) {
        let helpers = self
            .helpers
            .as_ref()
            .filter(|_| self.update(Cores::try_lend));
        let next = AtomicUsize::new(0);
        let take = || Some(next.fetch_add(1, Ordering::SeqCst)).filter(|&p| p < parts);
        match helpers {
            Some(helpers) => {
                let loan = Loan(self);
                self.pending.fetch_add(1, Ordering::SeqCst);
                helpers.in_place_scope(|scope| {
                    scope.spawn(|_| {
                        self.pending.fetch_sub(1, Ordering::SeqCst);
                        let _loan = loan;
                        // Its own loan is among the busy cores.
                        while self.update(|c| c.busy() <= c.total) {
                            let Some(part) = take() else { break };
                            work(part);
                        }
                    });
                    while let Some(part) = take() {
                        work(part);
                    }
                });
                self.warm_up();
            }
            None => (0..parts).for_each(work),
        }
    }

    /// Whether a core is neither computing nor lent.
    fn has_spare(&self) -> bool {
        self.update(|c| c.busy() < c.total)
    }

    /// Has a helper poll for the next shared call for up to [`WARM_FOR`], while a lending scope is
    /// open and a core is spare, so that handing it over does not wait for a wake-up. It
    /// stops as soon as a worker starts computing on that core.
    fn warm_up(&'static self) {
        let Some(helpers) = &self.helpers else { return };
        if !self.has_spare() || self.open_scopes.load(Ordering::SeqCst) == 0 {
            return;
        }
        if self.warming.swap(true, Ordering::SeqCst) {
            return;
        }
        helpers.spawn(move || {
            let since = Instant::now();
            while self.pending.load(Ordering::SeqCst) == 0
                && self.open_scopes.load(Ordering::SeqCst) > 0
                && since.elapsed() < WARM_FOR
                && self.has_spare()
            {
                std::hint::spin_loop();
            }
            self.warming.store(false, Ordering::SeqCst);
        });
    }
}

/// The process's lender, over its physical cores (the workers' unit too), but no more than
/// it may run on: a CPU affinity mask or a container's CPU quota leaves nothing to lend on
/// the cores outside it.
fn lender() -> &'static Lender {
    static LENDER: OnceLock<Lender> = OnceLock::new();
    LENDER.get_or_init(|| {
        let allowed = std::thread::available_parallelism().map_or(1, usize::from);
        Lender::new(num_cpus::get_physical().min(allowed).max(1))
    })
}

/// Held by a thread while it computes for the model: its core is not spare. Tokens nest
/// (an engine holds one over a whole batch, phonemization included, and `Vits` takes its
/// own): only a thread's first one counts. Not `Send`: the count is per thread.
#[must_use = "the core counts as busy only while the token is held"]
pub struct Computing {
    _this_thread: PhantomData<*const ()>,
}

thread_local! {
    /// Computing tokens this thread holds.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// Marks the current thread as computing until the token is dropped.
pub fn computing() -> Computing {
    if HELD.replace(HELD.get() + 1) == 0 {
        lender().update(|c| c.computing += 1);
    }
    Computing {
        _this_thread: PhantomData,
    }
}

impl Drop for Computing {
    fn drop(&mut self) {
        HELD.set(HELD.get() - 1);
        if HELD.get() == 0 {
            lender().update(|c| c.computing -= 1);
        }
    }
}

thread_local! {
    /// Who lends to kernels called on this thread: nobody outside a [`Lending`] scope.
    static LENDING: Cell<Option<&'static Lender>> = const { Cell::new(None) };
}

/// While held, kernels called on this thread may borrow spare cores. Not `Send`: it
/// restores its own thread's scope when dropped.
#[must_use = "kernels may borrow cores only while the scope is held"]
pub struct Lending {
    lender: &'static Lender,
    was: Option<&'static Lender>,
    _this_thread: PhantomData<*const ()>,
}

/// Opens a lending scope on the current thread (scopes nest).
pub fn lending() -> Lending {
    Lending::open(lender())
}

/// A lending scope whose lender always has a core to spare, whatever else runs: tests of
/// the kernels use it so that they take the split path on any machine.
#[cfg(test)]
pub(super) fn lending_always() -> Lending {
    static ALWAYS: OnceLock<Lender> = OnceLock::new();
    Lending::open(ALWAYS.get_or_init(|| Lender::with_helpers(usize::MAX / 2, 2)))
}

impl Lending {
    fn open(lender: &'static Lender) -> Self {
        lender.open_scopes.fetch_add(1, Ordering::SeqCst);
        lender.warm_up();
        Self {
            lender,
            was: LENDING.replace(Some(lender)),
            _this_thread: PhantomData,
        }
    }
}

impl Drop for Lending {
    fn drop(&mut self) {
        LENDING.set(self.was);
        self.lender.open_scopes.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A borrowed core, returned on drop (also when the work on it panics).
struct Loan<'a>(&'a Lender);

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        self.0.update(|c| c.lent -= 1);
    }
}

/// Below this much work (multiply-adds, about 60 µs on one core) a call is not shared:
/// handing parts of it to a polling helper and joining costs about 10 µs (measured on the
/// 2-core machine of docs/performance.md), so smaller calls would gain little or lose.
pub(super) const MIN_SPLIT_WORK: usize = 4 << 20;

/// The parts a shared call is cut into: enough that the two threads finish close together
/// and that a worker needing the helper's core waits for a quarter of a call at most, few
/// enough that each part's fixed cost (packing, buffers) stays small.
const PARTS: usize = 4;

/// Who to ask for a spare core for a call of `amount` multiply-adds, if anybody.
fn lender_for(amount: usize) -> Option<&'static Lender> {
    LENDING.get().filter(|_| amount >= MIN_SPLIT_WORK)
}

/// Runs `work` over `0..len` in parts (cut at multiples of `align`) shared with a spare core,
/// when this thread is lending, `amount` (multiply-adds) is worth it and a core is spare;
/// otherwise as one call here. `work` must give the same result for the whole range as for
/// its parts in any order.
pub(super) fn in_parts(
    len: usize,
    align: usize,
    amount: usize,
    work: impl Fn(Range<usize>) + Sync,
) {
    let align = align.max(1);
    let chunk = len.div_ceil(PARTS).div_ceil(align).max(1) * align;
    let parts = len.div_ceil(chunk);
    match lender_for(amount).filter(|_| parts > 1) {
        Some(lender) => lender.share(parts, &|p| work(p * chunk..((p + 1) * chunk).min(len))),
        None => work(0..len),
    }
}

/// [`in_parts`] over the rows of `out` (`row_len` values each), cut at multiples of `align`
/// rows: `work` gets a range of rows and those rows of `out`.
pub(super) fn rows_in_parts<T: Send>(
    out: &mut [T],
    row_len: usize,
    align: usize,
    amount: usize,
    work: impl Fn(Range<usize>, &mut [T]) + Sync,
) {
    let rows = out.len().checked_div(row_len).unwrap_or(0);
    let align = align.max(1);
    let chunk = rows.div_ceil(PARTS).div_ceil(align).max(1) * align;
    match lender_for(amount).filter(|_| rows > chunk) {
        Some(lender) => {
            let parts: Vec<Mutex<Option<&mut [T]>>> = out
                .chunks_mut(chunk * row_len)
                .map(|part| Mutex::new(Some(part)))
                .collect();
            lender.share(parts.len(), &|p| {
                let part = parts[p].lock().take();
                let part = part.expect("each part is taken once");
                work(p * chunk..(p * chunk + chunk).min(rows), part);
            });
        }
        None => work(0..rows, out),
    }
}

/// An output's base pointer, shared by the parts of a call run [`in_parts`], which write
/// disjoint columns of the same rows (so none can hold a `&mut` to its own). It borrows the
/// output for as long as it lives.
#[derive(Clone, Copy)]
pub(super) struct SharedOut<'a> {
    ptr: *mut f32,
    _out: PhantomData<&'a mut [f32]>,
}

// SAFETY: sharing it hands other threads only copies of the pointer; each access through
// one is an `unsafe` block of its own, sound because the parts of an `in_parts` call write
// disjoint columns and the call returns only when all are done, inside the `'a` borrow.
unsafe impl Sync for SharedOut<'_> {}

impl<'a> SharedOut<'a> {
    pub(super) fn new(out: &'a mut [std::mem::MaybeUninit<f32>]) -> Self {
        Self {
            ptr: out.as_mut_ptr().cast(),
            _out: PhantomData,
        }
    }

    /// A method, so that closures capture the whole (`Sync`) value rather than its field.
    pub(super) fn get(self) -> *mut f32 {
        self.ptr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lends_only_cores_nobody_computes_on() {
        let mut cores = Cores {
            total: 2,
            computing: 1,
            lent: 0,
        };
        assert!(cores.try_lend());
        assert_eq!(cores.lent, 1);
        // Both cores are now in use: one computing, one lent.
        assert!(!cores.try_lend());
        cores.lent = 0;
        cores.computing = 2;
        assert!(!cores.try_lend());
        let mut single = Cores {
            total: 1,
            computing: 1,
            lent: 0,
        };
        assert!(!single.try_lend());
    }

    /// Runs `parts` parts of `pause` each through `lender.share`; returns how often each
    /// part ran and the thread each ran on (the first run's).
    fn shared(
        lender: &'static Lender,
        parts: usize,
        pause: std::time::Duration,
        on_part: impl Fn(usize) + Sync,
    ) -> (Vec<usize>, Vec<std::thread::ThreadId>) {
        let runs: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
        let threads = Mutex::new(vec![None; parts]);
        lender.share(parts, &|p| {
            runs[p].fetch_add(1, Ordering::SeqCst);
            threads.lock()[p].get_or_insert(std::thread::current().id());
            on_part(p);
            std::thread::sleep(pause);
        });
        let runs = runs.iter().map(|r| r.load(Ordering::SeqCst)).collect();
        let threads = threads.into_inner().into_iter().flatten().collect();
        (runs, threads)
    }

    fn distinct(threads: &[std::thread::ThreadId]) -> usize {
        threads
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len()
    }

    #[test]
    fn a_spare_core_shares_the_parts_and_comes_back() {
        let lender: &'static Lender = Box::leak(Box::new(Lender::new(2)));
        let pause = std::time::Duration::from_millis(5);
        lender.update(|c| c.computing = 1);
        let (runs, threads) = shared(lender, 8, pause, |_| {});
        assert_eq!(runs, [1; 8]);
        assert_eq!(distinct(&threads), 2);
        assert_eq!(lender.update(|c| c.lent), 0);

        // No spare core: all of it on the caller's thread.
        lender.update(|c| c.computing = 2);
        let (runs, threads) = shared(lender, 8, std::time::Duration::ZERO, |_| {});
        assert_eq!(runs, [1; 8]);
        assert_eq!(distinct(&threads), 1);

        // One core: no helper threads at all.
        let single: &'static Lender = Box::leak(Box::new(Lender::new(1)));
        assert!(single.helpers.is_none());
        assert_eq!(distinct(&shared(single, 4, pause, |_| {}).1), 1);
    }

    #[test]
    fn the_helper_takes_no_more_parts_once_a_worker_needs_its_core() {
        let lender: &'static Lender = Box::leak(Box::new(Lender::new(2)));
        lender.update(|c| c.computing = 1);
        let caller = std::thread::current().id();
        let pause = std::time::Duration::from_millis(5);
        // The helper's first part is when a second worker starts computing.
        let (runs, threads) = shared(lender, 12, pause, |_| {
            if std::thread::current().id() != caller {
                lender.update(|c| c.computing = 2);
            }
        });
        assert_eq!(runs, [1; 12]);
        let on_helper = threads.iter().filter(|&&t| t != caller).count();
        assert_eq!(on_helper, 1, "{threads:?}");
        assert_eq!(lender.update(|c| c.lent), 0);
    }

    #[test]
    fn a_panic_on_the_lent_core_returns_it() {
        let lender: &'static Lender = Box::leak(Box::new(Lender::new(2)));
        lender.update(|c| c.computing = 1);
        let caller = std::thread::current().id();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lender.share(8, &|_| {
                std::thread::sleep(std::time::Duration::from_millis(5));
                assert_eq!(std::thread::current().id(), caller, "the lent part failed");
            });
        }));
        assert!(result.is_err());
        assert_eq!(lender.update(|c| c.lent), 0);
    }

    /// The ranges `in_parts` handed out as (start, end), sorted.
    fn ranges(len: usize, align: usize, amount: usize) -> Vec<(usize, usize)> {
        let seen = Mutex::new(Vec::new());
        in_parts(len, align, amount, |range| {
            seen.lock().push((range.start, range.end));
        });
        let mut seen = seen.into_inner();
        seen.sort();
        seen
    }

    #[test]
    fn parts_only_inside_a_scope_with_enough_work_at_the_alignment() {
        let work = MIN_SPLIT_WORK;
        assert_eq!(ranges(527, 16, work), [(0, 527)]);
        let _lending = lending_always();
        let quarters = [(0, 144), (144, 288), (288, 432), (432, 527)];
        assert_eq!(ranges(527, 16, work), quarters);
        assert_eq!(ranges(527, 16, work - 1), [(0, 527)]);
        // Too short to cut at the alignment.
        assert_eq!(ranges(16, 16, work), [(0, 16)]);
        assert_eq!(ranges(17, 16, work), [(0, 16), (16, 17)]);
        assert_eq!(ranges(0, 16, work), [(0, 0)]);
    }

    #[test]
    fn rows_are_handed_out_with_their_slices() {
        let _lending = lending_always();
        for rows in [1, 2, 7, 9] {
            let mut out = vec![0usize; rows * 3];
            rows_in_parts(&mut out, 3, 2, MIN_SPLIT_WORK, |range, out| {
                assert_eq!(out.len(), range.len() * 3);
                for (row, values) in range.zip(out.chunks_exact_mut(3)) {
                    values.fill(row + 1);
                }
            });
            let expected: Vec<usize> = (0..rows).flat_map(|r| [r + 1; 3]).collect();
            assert_eq!(out, expected);
        }
    }

    #[test]
    fn a_thread_counts_once_however_many_tokens_it_holds() {
        let threads_computing = || lender().update(|c| c.computing);
        let outer = computing();
        let inner = computing();
        assert_eq!(HELD.get(), 2);
        // Other tests' threads may come and go meanwhile, but this one counts while it
        // holds any token.
        assert!(threads_computing() >= 1);
        drop(inner);
        assert_eq!(HELD.get(), 1);
        assert!(threads_computing() >= 1);
        drop(outer);
        assert_eq!(HELD.get(), 0);
    }

    #[test]
    fn scopes_nest() {
        assert!(LENDING.get().is_none());
        let outer = lending();
        {
            let _inner = lending_always();
            assert!(!std::ptr::eq(LENDING.get().unwrap(), lender()));
        }
        assert!(std::ptr::eq(LENDING.get().unwrap(), lender()));
        drop(outer);
        assert!(LENDING.get().is_none());
    }
}
