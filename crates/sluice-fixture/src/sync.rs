//! Locking shared by every module: a mutex lock that ignores poisoning, so a panicking
//! handler cannot wedge the fixture.

use std::sync::{Mutex, MutexGuard};

/// Lock a mutex, ignoring poisoning (a panicking handler must not wedge the fixture).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
