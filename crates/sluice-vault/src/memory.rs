//! The memory backend: sealed blobs in a map, for tests and for when no store is configured
//! (nothing outlives the process; locks are shared only by this process's handles).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::{Token, VaultError};

type Result<T> = std::result::Result<T, VaultError>;

#[derive(Default)]
struct State {
    rows: HashMap<(String, String), (Vec<u8>, Option<Instant>)>,
    locks: HashMap<String, (Token, Instant)>,
}

/// Rows and locks in memory.
#[derive(Default)]
pub(crate) struct MemoryStore(Mutex<State>);

fn live(deadline: Option<Instant>) -> bool {
    deadline.is_none_or(|d| d > Instant::now())
}

impl MemoryStore {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) async fn get(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>> {
        let s = self.state();
        let row = s.rows.get(&(table.into(), key.into()));
        Ok(row.filter(|(_, d)| live(*d)).map(|(blob, _)| blob.clone()))
    }

    pub(crate) async fn put(
        &self,
        t: &str,
        k: &str,
        blob: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<()> {
        let mut s = self.state();
        s.rows.retain(|_, (_, d)| live(*d));
        let deadline = ttl.map(|t| Instant::now() + t);
        s.rows.insert((t.into(), k.into()), (blob, deadline));
        Ok(())
    }

    pub(crate) async fn take(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>> {
        let row = self.state().rows.remove(&(table.into(), key.into()));
        Ok(row.filter(|(_, d)| live(*d)).map(|(blob, _)| blob))
    }

    pub(crate) async fn delete(&self, table: &str, key: &str) -> Result<bool> {
        Ok(self.take(table, key).await?.is_some())
    }

    pub(crate) async fn keys(&self, table: &str) -> Result<Vec<String>> {
        let s = self.state();
        let rows = s
            .rows
            .iter()
            .filter(|((t, _), (_, d))| t == table && live(*d));
        Ok(rows.map(|((_, k), _)| k.clone()).collect())
    }

    pub(crate) async fn try_lock(&self, name: &str, token: Token, ttl: Duration) -> Result<bool> {
        let mut s = self.state();
        if s.locks.get(name).is_some_and(|(_, d)| live(Some(*d))) {
            return Ok(false);
        }
        s.locks.insert(name.into(), (token, Instant::now() + ttl));
        Ok(true)
    }

    pub(crate) async fn unlock(&self, name: &str, token: Token) -> Result<()> {
        self.unlock_now(name, token);
        Ok(())
    }

    pub(crate) fn unlock_now(&self, name: &str, token: Token) {
        let mut s = self.state();
        if s.locks.get(name).is_some_and(|(t, _)| *t == token) {
            s.locks.remove(name);
        }
    }
}
