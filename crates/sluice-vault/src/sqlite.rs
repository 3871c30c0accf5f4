//! The file backend: one SQLite file (WAL, 5 s busy timeout, mode 0600) that several processes
//! open at once; every call runs on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::{Token, VaultError};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS vault (
    tbl TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, expires_at INTEGER,
    PRIMARY KEY (tbl, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vault_expiry ON vault (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS locks (name TEXT PRIMARY KEY, holder BLOB NOT NULL, expires_at INTEGER NOT NULL);
";

/// Milliseconds since the epoch: expiry is wall-clock time, shared by every process.
fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    since.as_millis() as i64
}

fn deadline(ttl: Duration) -> i64 {
    now_ms().saturating_add(ttl.as_millis().min(i64::MAX as u128) as i64)
}

/// An open vault file.
pub(crate) struct FileStore {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
}

fn io(what: String, e: impl std::error::Error + Send + Sync + 'static) -> VaultError {
    VaultError::Io {
        what,
        source: Box::new(e),
    }
}

impl FileStore {
    pub(crate) fn open(path: &Path) -> Result<FileStore, VaultError> {
        let shown = path.display();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| io(format!("creating {shown}"), e))?;
        }
        // Created here, before SQLite sees it, so that it is never readable by others (SQLite
        // gives its -wal and -shm files the same mode).
        let mut create = std::fs::OpenOptions::new();
        create.write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut create, 0o600);
        create
            .open(path)
            .map_err(|e| io(format!("creating {shown}"), e))?;
        let failed = |e| io(format!("opening {shown}"), e);
        let conn = Connection::open(path).map_err(failed)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(failed)?;
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .map_err(failed)?;
        conn.execute_batch(SCHEMA).map_err(failed)?;
        Ok(FileStore {
            path: path.to_path_buf(),
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Run `f` on the connection, on the blocking pool.
    async fn run<T: Send + 'static>(
        &self,
        what: &str,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, VaultError> {
        let conn = self.conn.clone();
        let what = format!("{what} in {}", self.path.display());
        let done = tokio::task::spawn_blocking(move || {
            f(&mut conn.lock().unwrap_or_else(|e| e.into_inner()))
        });
        match done.await {
            Ok(r) => r.map_err(|e| io(what, e)),
            Err(e) => Err(io(what, e)),
        }
    }

    pub(crate) async fn get(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
        let (t, k) = (table.to_string(), key.to_string());
        self.run("reading", move |c| {
            let sql = "SELECT value FROM vault WHERE tbl = ?1 AND key = ?2 \
                       AND (expires_at IS NULL OR expires_at > ?3)";
            c.query_row(sql, params![t, k, now_ms()], |r| r.get(0))
                .optional()
        })
        .await
    }

    pub(crate) async fn put(
        &self,
        table: &str,
        key: &str,
        blob: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<(), VaultError> {
        let (t, k) = (table.to_string(), key.to_string());
        self.run("writing", move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if ttl.is_some() {
                tx.execute("DELETE FROM vault WHERE expires_at <= ?1", [now_ms()])?;
            }
            tx.execute(
                "INSERT OR REPLACE INTO vault (tbl, key, value, expires_at) VALUES (?1, ?2, ?3, ?4)",
                params![t, k, blob, ttl.map(deadline)],
            )?;
            tx.commit()
        })
        .await
    }

    pub(crate) async fn take(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
        let (t, k) = (table.to_string(), key.to_string());
        self.run("taking", move |c| {
            // One statement under SQLite's write lock: only one connection gets the row.
            let sql = "DELETE FROM vault WHERE tbl = ?1 AND key = ?2 RETURNING value, expires_at";
            let row = c.query_row(sql, params![t, k], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Option<i64>>(1)?))
            });
            let row = row.optional()?;
            Ok(row.and_then(|(v, exp)| exp.is_none_or(|e| e > now_ms()).then_some(v)))
        })
        .await
    }

    pub(crate) async fn delete(&self, table: &str, key: &str) -> Result<bool, VaultError> {
        Ok(self.take(table, key).await?.is_some())
    }

    pub(crate) async fn keys(&self, table: &str) -> Result<Vec<String>, VaultError> {
        let t = table.to_string();
        self.run("listing", move |c| {
            let mut stmt = c.prepare(
                "SELECT key FROM vault WHERE tbl = ?1 AND (expires_at IS NULL OR expires_at > ?2) \
                 ORDER BY key",
            )?;
            let rows = stmt.query_map(params![t, now_ms()], |r| r.get(0))?;
            rows.collect()
        })
        .await
    }

    pub(crate) async fn try_lock(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<bool, VaultError> {
        let name = name.to_string();
        self.run("locking", move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = now_ms();
            let held: Option<i64> = tx
                .query_row(
                    "SELECT expires_at FROM locks WHERE name = ?1",
                    [&name],
                    |r| r.get(0),
                )
                .optional()?;
            if held.is_some_and(|e| e > now) {
                return Ok(false);
            }
            tx.execute(
                "INSERT OR REPLACE INTO locks (name, holder, expires_at) VALUES (?1, ?2, ?3)",
                params![name, token.to_vec(), deadline(ttl)],
            )?;
            tx.commit().map(|()| true)
        })
        .await
    }

    /// Release `name` if `token` still holds it (blocking: for a drop outside a runtime).
    pub(crate) fn unlock_blocking(&self, name: &str, token: Token) -> Result<(), VaultError> {
        let mut c = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        unlock(&mut c, name, token)
            .map_err(|e| io(format!("unlocking in {}", self.path.display()), e))
    }

    pub(crate) async fn unlock(&self, name: &str, token: Token) -> Result<(), VaultError> {
        let name = name.to_string();
        self.run("unlocking", move |c| unlock(c, &name, token))
            .await
    }
}

fn unlock(c: &mut Connection, name: &str, token: Token) -> rusqlite::Result<()> {
    let sql = "DELETE FROM locks WHERE name = ?1 AND holder = ?2";
    c.execute(sql, params![name, token.to_vec()]).map(drop)
}
