//! Which serving thread the current code runs on: each of the MCP listener's single-threaded
//! runtimes marks its thread with a number of its own (1, 2, …), so what is kept per thread
//! (an upstream's idle connections) is found again by the thread that made it. Threads not
//! marked (the main runtime's) share number 0.
//!
//! [`PerThread`] keeps one value per serving thread, each on cache lines of its own: what
//! every call writes (a table of calls in flight, a pool's idle connections) is written by
//! one thread only, and no write of one thread takes a line from under another's.

use std::cell::Cell;

thread_local! {
    static CURRENT: Cell<u32> = const { Cell::new(0) };
}

/// Mark this thread as serving thread `n` (from 1).
pub fn mark(n: u32) {
    CURRENT.with(|c| c.set(n));
}

/// The serving thread this code runs on (0: not one).
pub fn current() -> u32 {
    CURRENT.with(Cell::get)
}

/// How many slots a [`PerThread`] has: serving thread `n` uses slot `n % SLOTS` (threads past
/// that share one, and the main runtime's threads share slot 0).
pub const SLOTS: usize = 16;

/// One `T` per serving thread.
pub struct PerThread<T>(Box<[Padded<T>]>);

/// A value alone on its cache lines (128 bytes: two lines, as the CPU fetches them in pairs).
#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

impl<T: Default> Default for PerThread<T> {
    fn default() -> PerThread<T> {
        PerThread((0..SLOTS).map(|_| Padded::default()).collect())
    }
}

impl<T> PerThread<T> {
    /// The slot of the thread this code runs on.
    pub fn mine(&self) -> &T {
        self.of(current())
    }

    /// The slot of serving thread `n`.
    pub fn of(&self, n: u32) -> &T {
        &self.0[n as usize % SLOTS].0
    }

    /// Every slot, this thread's first.
    pub fn mine_first(&self) -> impl Iterator<Item = &T> {
        let mine = current() as usize % SLOTS;
        self.0[mine..].iter().chain(&self.0[..mine]).map(|p| &p.0)
    }
}

#[cfg(test)]
mod tests {
    use super::PerThread;

    #[test]
    fn each_thread_writes_its_own_slot_and_sees_its_own_first() {
        let slots: std::sync::Arc<PerThread<std::sync::Mutex<Vec<u32>>>> = Default::default();
        std::thread::scope(|s| {
            for n in [1, 2] {
                let slots = &slots;
                s.spawn(move || {
                    super::mark(n);
                    slots.mine().lock().expect("slot").push(n);
                    let first = slots.mine_first().next().expect("a slot");
                    assert_eq!(*first.lock().expect("slot"), vec![n]);
                });
            }
        });
        let all: Vec<Vec<u32>> = slots
            .mine_first()
            .map(|m| m.lock().expect("slot").clone())
            .collect();
        assert_eq!(all.len(), super::SLOTS);
        assert_eq!(all[1..3], [vec![1], vec![2]]);
        assert!(all
            .iter()
            .enumerate()
            .all(|(i, v)| v.is_empty() || i == 1 || i == 2));
    }

    #[test]
    fn a_slot_is_alone_on_its_lines() {
        let slots: PerThread<u8> = Default::default();
        let a = slots.mine_first().next().expect("a slot") as *const u8 as usize;
        let b = slots.mine_first().nth(1).expect("a slot") as *const u8 as usize;
        assert_eq!(b - a, 128);
    }

    #[test]
    fn a_mark_holds_on_its_thread_only() {
        super::mark(3);
        assert_eq!(super::current(), 3);
        let other = std::thread::spawn(super::current).join().expect("thread");
        assert_eq!(other, 0);
    }
}
