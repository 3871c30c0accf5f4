//! Which serving thread the current code runs on: each of the MCP listener's single-threaded
//! runtimes marks its thread with a number of its own (1, 2, …), so what is kept per thread
//! (an upstream's idle connections) is found again by the thread that made it. Threads not
//! marked (the main runtime's) share number 0.
//!
//! [`PerThread`] keeps one value per serving thread, each on cache lines of its own: what
//! every call writes (a table of calls in flight, a pool's idle connections) is written by
//! one thread only, and no write of one thread takes a line from under another's.
//! [`Sharded`] splits a table by key the same way: what a call writes of its own key's entry
//! (a lock) is seldom on the line another key's call writes.

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
/// In an `Arc`, its reference counts share those lines, and no other allocation does.
#[repr(align(128))]
#[derive(Default)]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

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

/// How many shards a [`Sharded`] has.
pub const SHARDS: usize = 32;

/// A table split in [`SHARDS`] parts by the hash of a key, each on cache lines of its own.
pub struct Sharded<T>(Box<[Padded<T>]>);

impl<T: Default> Default for Sharded<T> {
    fn default() -> Sharded<T> {
        Sharded((0..SHARDS).map(|_| Padded::default()).collect())
    }
}

impl<T> Sharded<T> {
    /// The shard of `key`.
    pub fn of(&self, key: &str) -> &T {
        use std::hash::BuildHasher;
        static SEED: foldhash::fast::FixedState = foldhash::fast::FixedState::with_seed(0x5eed);
        &self.0[SEED.hash_one(key) as usize % SHARDS].0
    }

    /// Every shard.
    pub fn all(&self) -> impl Iterator<Item = &T> {
        self.0.iter().map(|p| &p.0)
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
    fn a_key_has_one_shard_and_keys_spread() {
        let shards: super::Sharded<std::sync::Mutex<Vec<String>>> = Default::default();
        for n in 0..256 {
            let key = format!("session-{n}");
            shards.of(&key).lock().expect("shard").push(key);
        }
        for n in 0..256 {
            let key = format!("session-{n}");
            assert!(shards.of(&key).lock().expect("shard").contains(&key));
        }
        let sizes: Vec<usize> = shards
            .all()
            .map(|s| s.lock().expect("shard").len())
            .collect();
        assert_eq!(sizes.len(), super::SHARDS);
        assert_eq!(sizes.iter().sum::<usize>(), 256);
        assert!(
            sizes.iter().all(|n| *n > 0),
            "every shard holds some of 256 keys: {sizes:?}"
        );
    }

    #[test]
    fn a_mark_holds_on_its_thread_only() {
        super::mark(3);
        assert_eq!(super::current(), 3);
        let other = std::thread::spawn(super::current).join().expect("thread");
        assert_eq!(other, 0);
    }
}
