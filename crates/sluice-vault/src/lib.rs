//! The vault: the encrypted store where Sluice keeps its OAuth grants and client registrations
//! toward its upstream MCP servers.
//!
//! [`Vault`] is one cheap-to-clone handle over a store of rows (a table name, a key, a value) and
//! named locks; a [`Keyring`] seals every value before it reaches the store, so the store only
//! ever holds sealed blobs; a [`VaultLock`] is a held lock; [`VaultError`] says what failed
//! (never with a stored value in it). [`keygen`] makes a key and [`key_from_base64`] reads one.
//!
//! Three backends:
//! - **an SQLite file** ([`Vault::open_file`]), the default of a single host. SQLite because
//!   several processes open the same file safely: `sluice serve` and the CLI's
//!   `sluice upstream login` use it at the same time. The file is in WAL mode (readers never
//!   wait for the writer), each connection waits up to 5 s for another's write lock, and every
//!   change is an ACID transaction, so a single-use [`Vault::take`] or a lock holds across
//!   processes. The file (and its folder, if missing) is created with mode 0600.
//! - **Redis** ([`Vault::open_redis`]), for a cluster: every replica shares the grants.
//! - **memory** ([`Vault::memory`]), for tests and for when nothing is configured.
//!
//! Sealing: XChaCha20-Poly1305 with a random nonce per value; the associated data is the table
//! and key, so a blob copied to another row does not open; every blob names its key by a key id,
//! so that keys rotate: the first key of the ring seals, every key opens.

mod keyring;
mod lock;
mod memory;
mod redis;
mod sqlite;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use keyring::{key_from_base64, keygen, KeyError, Keyring};
pub use lock::VaultLock;

/// A lock holder's random token.
type Token = [u8; 16];

/// What went wrong in the vault. No message holds a stored value.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// The vault file or SQLite failed.
    #[error("vault file: {what}: {source}")]
    Io {
        /// What the vault was doing, and on which file.
        what: String,
        /// The underlying error (the file system's or SQLite's).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Redis failed.
    #[error("vault: {what}: {source}")]
    Redis {
        /// What the vault was doing, and on which server.
        what: String,
        /// Redis's error.
        source: ::redis::RedisError,
    },
    /// A stored value opens with none of the vault's keys.
    #[error(
        "the vault's value {table}/{key} does not open: the vault key does not match the one it \
         was sealed with (was that key rotated out?)"
    )]
    Sealed {
        /// The row's table.
        table: String,
        /// The row's key.
        key: String,
    },
    /// [`Vault::lock`] waited its time and the lock was still held.
    #[error("the vault lock {name} is still held by another holder")]
    Busy {
        /// The lock's name.
        name: String,
    },
}

/// The vault: sealed rows in a file, Redis or memory. Cheap to clone (the clones share one
/// store).
///
/// Table names are the program's own constants: letters, digits, `_`, `-` and `.`; every
/// method given another panics. Keys are any text.
#[derive(Clone)]
pub struct Vault {
    inner: Arc<Inner>,
}

struct Inner {
    keys: Keyring,
    store: Store,
}

enum Store {
    File(sqlite::FileStore),
    Redis(redis::RedisStore),
    Memory(memory::MemoryStore),
}

/// `each!(vault, s => call)`: `call` on the vault's backend `s`.
macro_rules! each {
    ($vault:expr, $s:ident => $call:expr) => {
        match &$vault.inner.store {
            Store::File($s) => $call,
            Store::Redis($s) => $call,
            Store::Memory($s) => $call,
        }
    };
}
pub(crate) use each;

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Vault").field(&self.describe()).finish()
    }
}

/// Table names are the program's own: letters, digits, `_`, `-` and `.` (no `:`, which ends a
/// table in a Redis key, nor NUL, which ends it in the associated data).
fn check_table(table: &str) {
    let ok = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
    assert!(
        !table.is_empty() && table.chars().all(ok),
        "a vault table name is letters, digits, `_`, `-` and `.`: {table:?}"
    );
}

impl Vault {
    fn with(keys: Keyring, store: Store) -> Vault {
        Vault {
            inner: Arc::new(Inner { keys, store }),
        }
    }

    /// The vault in the SQLite file at `path` (created with mode 0600, and its folder, if
    /// missing).
    pub fn open_file(path: &Path, keys: Keyring) -> Result<Vault, VaultError> {
        Ok(Vault::with(
            keys,
            Store::File(sqlite::FileStore::open(path)?),
        ))
    }

    /// The vault in the Redis at `url`, connected at its first use (no I/O here: a gateway
    /// builds it before its runtime serves).
    pub fn redis(url: &str, keys: Keyring) -> Result<Vault, VaultError> {
        Ok(Vault::with(
            keys,
            Store::Redis(redis::RedisStore::lazy(url)?),
        ))
    }

    /// The vault in the Redis at `url` (`redis://[user:password@]host:port/db`), connected.
    pub async fn open_redis(url: &str, keys: Keyring) -> Result<Vault, VaultError> {
        Ok(Vault::with(
            keys,
            Store::Redis(redis::RedisStore::open(url).await?),
        ))
    }

    /// A vault in memory: gone with the process.
    pub fn memory(keys: Keyring) -> Vault {
        Vault::with(keys, Store::Memory(memory::MemoryStore::default()))
    }

    /// Where the vault is, for logs: `file <path>`, `redis <host>:<port>/<db>` (no password) or
    /// `memory`.
    pub fn describe(&self) -> String {
        match &self.inner.store {
            Store::File(s) => format!("file {}", s.path().display()),
            Store::Redis(s) => s.shown().to_string(),
            Store::Memory(_) => "memory".into(),
        }
    }

    fn open(
        &self,
        table: &str,
        key: &str,
        blob: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>, VaultError> {
        let Some(blob) = blob else {
            return Ok(None);
        };
        let sealed = || VaultError::Sealed {
            table: table.into(),
            key: key.into(),
        };
        self.inner
            .keys
            .open(table, key, &blob)
            .map(Some)
            .ok_or_else(sealed)
    }

    /// The value at `table`/`key`, if there is one (and it has not expired).
    pub async fn get(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
        check_table(table);
        let blob = each!(self, s => s.get(table, key).await)?;
        self.open(table, key, blob)
    }

    async fn store(
        &self,
        table: &str,
        key: &str,
        value: &[u8],
        ttl: Option<Duration>,
    ) -> Result<(), VaultError> {
        check_table(table);
        let blob = self.inner.keys.seal(table, key, value);
        each!(self, s => s.put(table, key, blob, ttl).await)
    }

    /// Store `value` at `table`/`key` (replacing any value there), sealed with the first key.
    pub async fn put(&self, table: &str, key: &str, value: &[u8]) -> Result<(), VaultError> {
        self.store(table, key, value, None).await
    }

    /// Store `value` at `table`/`key` for `ttl` only: after it the row is gone ([`Vault::get`]
    /// and [`Vault::take`] find nothing). For pending sign-in flows (10 minutes).
    pub async fn put_expiring(
        &self,
        table: &str,
        key: &str,
        value: &[u8],
        ttl: Duration,
    ) -> Result<(), VaultError> {
        self.store(table, key, value, Some(ttl)).await
    }

    /// Read and delete `table`/`key` in one step: of many callers (tasks, processes, replicas)
    /// only one gets the value (single use). A value that does not open is deleted all the same.
    pub async fn take(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
        check_table(table);
        let blob = each!(self, s => s.take(table, key).await)?;
        self.open(table, key, blob)
    }

    /// Delete `table`/`key`: whether there was a value.
    pub async fn delete(&self, table: &str, key: &str) -> Result<bool, VaultError> {
        check_table(table);
        each!(self, s => s.delete(table, key).await)
    }

    /// The keys of `table`, sorted.
    pub async fn keys(&self, table: &str) -> Result<Vec<String>, VaultError> {
        check_table(table);
        let mut keys = each!(self, s => s.keys(table).await)?;
        keys.sort();
        Ok(keys)
    }

    /// Seal every row of `table` (a table without expiring rows) that an older key sealed
    /// again with the first key, so the older keys can be dropped from the keyring. How many
    /// rows were sealed again; a row no key opens is an error.
    pub async fn reseal(&self, table: &str) -> Result<usize, VaultError> {
        let mut n = 0;
        for key in self.keys(table).await? {
            let Some(blob) = each!(self, s => s.get(table, &key).await)? else {
                continue;
            };
            if self.inner.keys.is_current(&blob) {
                continue;
            }
            if let Some(value) = self.open(table, &key, Some(blob))? {
                self.put(table, &key, &value).await?;
                n += 1;
            }
        }
        Ok(n)
    }
}
