//! The Redis backend, for a cluster: every replica shares the grants. A row is the key
//! `sluice:vault:<table>:<key>` holding the sealed blob (expiry: Redis's own); a lock is
//! `sluice:vault:#lock:<name>` (no table name holds `#`), taken with SET NX PX and released
//! by a compare-and-delete Lua script.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::{Token, VaultError};

const PREFIX: &str = "sluice:vault:";
const TIMEOUT: Duration = Duration::from_secs(5);
const UNLOCK: &str = r"if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0";

/// A connection to the shared Redis.
pub(crate) struct RedisStore {
    client: redis::Client,
    /// Connected on first use ([`RedisStore::lazy`]) or at open.
    conn: tokio::sync::OnceCell<ConnectionManager>,
    shown: String,
}

fn row(table: &str, key: &str) -> String {
    format!("{PREFIX}{table}:{key}")
}

fn lock(name: &str) -> String {
    format!("{PREFIX}#lock:{name}")
}

fn millis(ttl: Duration) -> u64 {
    ttl.as_millis().clamp(1, u64::MAX as u128) as u64
}

fn hex(token: Token) -> String {
    token.iter().map(|b| format!("{b:02x}")).collect()
}

/// `redis host:port/db`: the address without credentials.
pub(crate) fn shown(info: &redis::ConnectionInfo) -> String {
    format!("redis {}/{}", info.addr(), info.redis_settings().db())
}

impl RedisStore {
    pub(crate) async fn open(url: &str) -> Result<RedisStore, VaultError> {
        let store = RedisStore::lazy(url)?;
        store.conn().await?;
        Ok(store)
    }

    /// The store at `url`, connected when first used (no I/O here).
    pub(crate) fn lazy(url: &str) -> Result<RedisStore, VaultError> {
        let client = redis::Client::open(url).map_err(|source| VaultError::Redis {
            what: "reading the URL".into(),
            source,
        })?;
        let shown = shown(client.get_connection_info());
        Ok(RedisStore {
            client,
            conn: tokio::sync::OnceCell::new(),
            shown,
        })
    }

    async fn conn(&self) -> Result<&ConnectionManager, VaultError> {
        self.conn
            .get_or_try_init(|| async {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(TIMEOUT))
                    .set_response_timeout(Some(TIMEOUT))
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(50));
                ConnectionManager::new_with_config(self.client.clone(), config)
                    .await
                    .map_err(|source| VaultError::Redis {
                        what: format!("connecting to {}", self.shown),
                        source,
                    })
            })
            .await
    }

    /// `redis host:port/db`, without credentials.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        what: &str,
        cmd: &redis::Cmd,
    ) -> Result<T, VaultError> {
        cmd.query_async(&mut self.conn().await?.clone())
            .await
            .map_err(|source| VaultError::Redis {
                what: format!("{what} on {}", self.shown),
                source,
            })
    }

    pub(crate) async fn get(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
        self.query("reading", redis::cmd("GET").arg(row(table, key)))
            .await
    }

    pub(crate) async fn put(
        &self,
        table: &str,
        key: &str,
        blob: Vec<u8>,
        ttl: Option<Duration>,
    ) -> Result<(), VaultError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(row(table, key)).arg(blob);
        if let Some(ttl) = ttl {
            cmd.arg("PX").arg(millis(ttl));
        }
        self.query("writing", &cmd).await
    }

    pub(crate) async fn take(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, VaultError> {
        self.query("taking", redis::cmd("GETDEL").arg(row(table, key)))
            .await
    }

    pub(crate) async fn delete(&self, table: &str, key: &str) -> Result<bool, VaultError> {
        let n: u64 = self
            .query("deleting", redis::cmd("DEL").arg(row(table, key)))
            .await?;
        Ok(n > 0)
    }

    pub(crate) async fn keys(&self, table: &str) -> Result<Vec<String>, VaultError> {
        // Table names hold no glob characters (checked by the vault).
        let start = row(table, "");
        let mut cursor = 0u64;
        let mut keys = Vec::new();
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor).arg("MATCH").arg(format!("{start}*"));
            let (next, found): (u64, Vec<String>) =
                self.query("listing", cmd.arg("COUNT").arg(500)).await?;
            keys.extend(
                found
                    .iter()
                    .filter_map(|k| k.strip_prefix(&start).map(str::to_string)),
            );
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    pub(crate) async fn try_lock(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<bool, VaultError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(lock(name))
            .arg(hex(token))
            .arg("NX")
            .arg("PX")
            .arg(millis(ttl));
        let set: Option<String> = self.query("locking", &cmd).await?;
        Ok(set.is_some())
    }

    pub(crate) async fn unlock(&self, name: &str, token: Token) -> Result<(), VaultError> {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(UNLOCK).arg(1).arg(lock(name)).arg(hex(token));
        self.query::<i64>("unlocking", &cmd).await.map(drop)
    }
}
