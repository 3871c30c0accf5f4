//! Which serving thread the current code runs on: each of the MCP listener's single-threaded
//! runtimes marks its thread with a number of its own (1, 2, …), so what is kept per thread
//! (an upstream's idle connections) is found again by the thread that made it. Threads not
//! marked (the main runtime's) share number 0.

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

#[cfg(test)]
mod tests {
    #[test]
    fn a_mark_holds_on_its_thread_only() {
        super::mark(3);
        assert_eq!(super::current(), 3);
        let other = std::thread::spawn(super::current).join().expect("thread");
        assert_eq!(other, 0);
    }
}
