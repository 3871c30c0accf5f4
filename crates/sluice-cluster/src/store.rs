//! The Redis store every replica shares: a session's live state (a hash with expiry: created,
//! log level, subscriptions, which replica holds its GET stream), its GET stream's events
//! (bounded, with the same expiry, numbered by Redis so any replica can resume them), and the
//! store's health for `/readyz`.
//!
//! Keys, under the prefix `sluice:c:`: `s:<handle>` (the hash), `s:<handle>:ev` (events, a
//! sorted set by sequence number), `s:<handle>:n` (the last sequence number). Channels: `ev`
//! (`<handle> <seq>`: an event was added), `end` (`<handle>`: the session ended), `lists`
//! (`<replica> <upstream>`: an upstream said its lists changed), `state` (`<handle>\n<field>`
//! and, when set, `\n<value>`: a field of a session's state changed), `cancel` (a client cancelled a
//! request that may run elsewhere), `r:<replica>`
//! (a message for one replica). Every call is bounded by the store's timeout.

use parking_lot::Mutex;
use redis::aio::ConnectionManager;
use std::collections::HashMap;
use std::time::Duration;

/// The prefix of every key and channel.
pub const PREFIX: &str = "sluice:c:";

/// A Redis call that failed or did not answer in time; its text names the address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreError {}

/// Adds an event and announces it, at once: the next sequence number, the event under it, the
/// oldest beyond `cap` dropped, the expiry renewed. KEYS: events, counter, and a key that makes
/// the event once-only for a second (empty: always added); ARGV: payload, cap, ttl ms, channel,
/// handle. Returns the sequence number, or 0 when an equal once-only event was just added.
const PUSH: &str = r"
if KEYS[3] ~= '' then
  if not redis.call('SET', KEYS[3], '1', 'NX', 'PX', 1000) then
    return 0
  end
end
local n = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[1], n, ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[2]) + 1))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[5] .. ' ' .. n)
return n
";

/// Claims a session's upstream session field (see [`Store::claim_upstream`]). KEYS: the
/// session's hash; ARGV: field, replica, now (ms), lease end (ms), dead id (may be empty), a
/// replica known gone (may be empty). Returns false (the session is gone), `+mine`, or the
/// field's value (a record, or another replica's `pending:<replica>:<until>`).
const CLAIM_UPSTREAM: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local v = redis.call('HGET', KEYS[1], ARGV[1])
local take = not v
if v and string.sub(v, 1, 8) == 'pending:' then
  local till = tonumber(string.match(v, ':(%d+)$')) or 0
  local gone = 'pending:' .. ARGV[6] .. ':'
  take = till < tonumber(ARGV[3]) or (ARGV[6] ~= '' and string.sub(v, 1, #gone) == gone)
elseif v and ARGV[5] ~= '' then
  local ok, rec = pcall(cjson.decode, v)
  take = ok and type(rec) == 'table' and rec.id == ARGV[5]
end
if take then
  redis.call('HSET', KEYS[1], ARGV[1], 'pending:' .. ARGV[2] .. ':' .. ARGV[4])
  return '+mine'
end
return v
";

/// Sets (ARGV[4] given) or removes a field of a live session's state and announces it. KEYS:
/// the session's hash; ARGV: channel, payload, field, value. HSET on an expired key would bring
/// it back without an expiry: nothing happens when the session is gone (0).
const CHANGE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[4] then
  redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
else
  redis.call('HDEL', KEYS[1], ARGV[3])
end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
";

/// What [`Store::claim_upstream`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamClaim {
    /// The session ended.
    Gone,
    /// Open it, then record it.
    Mine,
    /// Another replica (this one) is opening it.
    Pending(String),
    /// The record (JSON).
    Held(String),
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// The shared store.
pub struct Store {
    client: redis::Client,
    shown: String,
    conn: tokio::sync::OnceCell<ConnectionManager>,
    timeout: Duration,
    push: redis::Script,
    change: redis::Script,
    /// Why the store is not usable now (None: it answered the last check).
    down: Mutex<Option<String>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("redis", &self.shown).finish()
    }
}

fn key(handle: &str) -> String {
    format!("{PREFIX}s:{handle}")
}

impl Store {
    /// A store at `url` (`redis://…`, checked by the configuration loader); `shown` is the URL
    /// without credentials. Nothing is connected yet.
    pub fn new(url: &str, shown: &str, timeout: Duration) -> Result<Store, StoreError> {
        let client =
            redis::Client::open(url).map_err(|e| StoreError(format!("redis {shown}: {e}")))?;
        Ok(Store {
            client,
            shown: shown.to_string(),
            conn: tokio::sync::OnceCell::new(),
            timeout,
            push: redis::Script::new(PUSH),
            change: redis::Script::new(CHANGE),
            down: Mutex::new(Some(format!("redis {shown}: not checked yet"))),
        })
    }

    /// The address, without credentials.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The Redis client (for the bus's own connection).
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// The timeout of every call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Why the store is not usable now (None: its last check answered).
    pub fn down(&self) -> Option<String> {
        self.down.lock().clone()
    }

    fn fail(&self, e: &dyn std::fmt::Display) -> StoreError {
        StoreError(format!("redis {}: {e}", self.shown))
    }

    /// Run `f` on the shared connection, bounded by the timeout.
    async fn with<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let run = async {
            let conn = self
                .conn
                .get_or_try_init(|| {
                    let config = redis::aio::ConnectionManagerConfig::new()
                        .set_connection_timeout(Some(self.timeout))
                        .set_response_timeout(Some(self.timeout))
                        .set_number_of_retries(1)
                        .set_min_delay(Duration::from_millis(50));
                    ConnectionManager::new_with_config(self.client.clone(), config)
                })
                .await
                .map_err(|e| self.fail(&e))?;
            f(conn.clone()).await.map_err(|e| self.fail(&e))
        };
        match tokio::time::timeout(self.timeout, run).await {
            Ok(r) => r,
            Err(_) => Err(self.fail(&format!(
                "no answer within {:.1} s",
                self.timeout.as_secs_f64()
            ))),
        }
    }

    /// Check that Redis answers; records the outcome for [`Store::down`] and logs a change.
    pub async fn check(&self) -> Result<(), StoreError> {
        let r = self
            .with(|mut c| async move { redis::cmd("PING").query_async::<String>(&mut c).await })
            .await
            .map(|_| ());
        let mut down = self.down.lock();
        match &r {
            Ok(()) => {
                if down.take().is_some() {
                    tracing::info!(redis = %self.shown, "cluster store answers");
                }
            }
            Err(e) => {
                if down.as_deref() != Some(e.0.as_str()) {
                    tracing::error!(redis = %self.shown, "cluster store unavailable: {e}");
                }
                *down = Some(e.0.clone());
            }
        }
        r
    }

    /// Check Redis every `every` until `stop` resolves.
    pub async fn watch(&self, every: Duration, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            let _ = self.check().await;
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = &mut stop => return,
            }
        }
    }

    /// Record a new session, living `ttl` unless touched.
    pub async fn create(&self, handle: &str, ttl: Duration) -> Result<(), StoreError> {
        let k = key(handle);
        let ms = ttl.as_millis() as u64;
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        self.with(|mut c| async move {
            redis::pipe()
                .atomic()
                .hset(&k, "at", at)
                .ignore()
                .pexpire(&k, ms as i64)
                .ignore()
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    /// Renew a session's expiry and read its state; None when it ended or expired.
    pub async fn touch(
        &self,
        handle: &str,
        ttl: Duration,
    ) -> Result<Option<HashMap<String, String>>, StoreError> {
        let k = key(handle);
        let ms = ttl.as_millis() as i64;
        let (alive, _, _, fields): (i64, i64, i64, HashMap<String, String>) = self
            .with(|mut c| async move {
                redis::pipe()
                    .pexpire(&k, ms)
                    .pexpire(format!("{k}:ev"), ms)
                    .pexpire(format!("{k}:n"), ms)
                    .hgetall(&k)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok((alive == 1).then_some(fields))
    }

    /// Renew a session's expiry (its state and its events) without reading it: false when it
    /// ended or expired. What a replica holding the session sends every few seconds of use.
    pub async fn renew(&self, handle: &str, ttl: Duration) -> Result<bool, StoreError> {
        let k = key(handle);
        let ms = ttl.as_millis() as i64;
        let (alive, _, _): (i64, i64, i64) = self
            .with(|mut c| async move {
                redis::pipe()
                    .pexpire(&k, ms)
                    .pexpire(format!("{k}:ev"), ms)
                    .pexpire(format!("{k}:n"), ms)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(alive == 1)
    }

    /// A session's state without renewing it; None when it ended or expired.
    pub async fn state(&self, handle: &str) -> Result<Option<HashMap<String, String>>, StoreError> {
        let k = key(handle);
        let fields: HashMap<String, String> = self
            .with(|mut c| async move { redis::cmd("HGETALL").arg(&k).query_async(&mut c).await })
            .await?;
        // A live session's state always has its creation time.
        Ok((!fields.is_empty()).then_some(fields))
    }

    /// Set a field of a live session's state (nothing when it ended), and tell every replica
    /// (channel `state`), in one script: replicas holding the session learn the change from
    /// the bus instead of reading the state on every request.
    pub async fn set(&self, handle: &str, field: &str, value: &str) -> Result<(), StoreError> {
        self.change(handle, field, Some(value)).await
    }

    /// Remove a field of a session's state, and tell every replica (as [`Store::set`]).
    pub async fn unset(&self, handle: &str, field: &str) -> Result<(), StoreError> {
        self.change(handle, field, None).await
    }

    async fn change(
        &self,
        handle: &str,
        field: &str,
        value: Option<&str>,
    ) -> Result<(), StoreError> {
        let k = key(handle);
        let payload = match value {
            Some(v) => format!("{handle}\n{field}\n{v}"),
            None => format!("{handle}\n{field}"),
        };
        let (field, value) = (field.to_string(), value.map(str::to_string));
        let script = &self.change;
        self.with(|mut c| async move {
            let mut call = script.key(&k);
            call.arg(format!("{PREFIX}state")).arg(payload).arg(field);
            if let Some(v) = value {
                call.arg(v);
            }
            call.invoke_async::<i64>(&mut c).await.map(|_| ())
        })
        .await
    }

    /// Claim `field` of a live session's state for `value` unless it is claimed already; the
    /// value that holds it (None: the session is gone).
    pub async fn claim(
        &self,
        handle: &str,
        field: &str,
        value: &str,
    ) -> Result<Option<String>, StoreError> {
        let k = key(handle);
        let (field, value) = (field.to_string(), value.to_string());
        self.with(|mut c| async move {
            redis::Script::new(
                "if redis.call('EXISTS', KEYS[1]) == 0 then return false end \
                 redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) \
                 return redis.call('HGET', KEYS[1], ARGV[1])",
            )
            .key(&k)
            .arg(field)
            .arg(value)
            .invoke_async::<Option<String>>(&mut c)
            .await
        })
        .await
    }

    /// Clear `field` only while it still holds `value` (a replica releasing what it holds).
    pub async fn unset_if(&self, handle: &str, field: &str, value: &str) -> Result<(), StoreError> {
        let k = key(handle);
        let (field, value) = (field.to_string(), value.to_string());
        self.with(|mut c| async move {
            redis::Script::new(
                "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end return 0",
            )
            .key(&k)
            .arg(field)
            .arg(value)
            .invoke_async::<i64>(&mut c)
            .await
            .map(|_| ())
        })
        .await
    }

    /// End a session everywhere: its state and events go, and every replica hears of it.
    /// Returns its state when it was still live (the one replica that ended it gets it: it
    /// ends the session's upstream sessions), None when it had ended already.
    pub async fn end(&self, handle: &str) -> Result<Option<HashMap<String, String>>, StoreError> {
        let k = key(handle);
        let h = handle.to_string();
        self.with(|mut c| async move {
            redis::Script::new(
                "local f = redis.call('HGETALL', KEYS[1]) \
                 local n = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3]) \
                 redis.call('PUBLISH', ARGV[1], ARGV[2]) \
                 if n == 0 then return false end return f",
            )
            .key(&k)
            .key(format!("{k}:ev"))
            .key(format!("{k}:n"))
            .arg(format!("{PREFIX}end"))
            .arg(h)
            .invoke_async::<Option<HashMap<String, String>>>(&mut c)
            .await
        })
        .await
    }

    /// The upstream session of a session's `field` (`up:<upstream>`), or the right to open it:
    /// race-free in one script. A field that is empty, holds a claim whose lease ran out or that
    /// the replica `gone` holds, or a record whose id is `dead` is claimed for `replica` (lease
    /// `lease`).
    pub async fn claim_upstream(
        &self,
        handle: &str,
        field: &str,
        replica: &str,
        lease: Duration,
        dead: Option<&str>,
        gone: Option<&str>,
    ) -> Result<UpstreamClaim, StoreError> {
        let k = key(handle);
        let (field, replica, dead, gone) = (
            field.to_string(),
            replica.to_string(),
            dead.unwrap_or("").to_string(),
            gone.unwrap_or("").to_string(),
        );
        let now = now_ms();
        let until = now + lease.as_millis() as u64;
        let got: Option<String> = self
            .with(|mut c| async move {
                redis::Script::new(CLAIM_UPSTREAM)
                    .key(&k)
                    .arg(field)
                    .arg(replica)
                    .arg(now)
                    .arg(until)
                    .arg(dead)
                    .arg(gone)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        Ok(match got.as_deref() {
            None => UpstreamClaim::Gone,
            Some("+mine") => UpstreamClaim::Mine,
            Some(v) if v.starts_with("pending:") => UpstreamClaim::Pending(
                v["pending:".len()..]
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            ),
            Some(v) => UpstreamClaim::Held(v.to_string()),
        })
    }

    /// Record the upstream session `json` in `field`, while `replica`'s claim holds it.
    pub async fn record_upstream(
        &self,
        handle: &str,
        field: &str,
        replica: &str,
        json: &str,
    ) -> Result<bool, StoreError> {
        let k = key(handle);
        let (field, mine, json) = (
            field.to_string(),
            format!("pending:{replica}:"),
            json.to_string(),
        );
        self.with(|mut c| async move {
            redis::Script::new(
                "local v = redis.call('HGET', KEYS[1], ARGV[1]) \
                 if v and string.sub(v, 1, #ARGV[2]) == ARGV[2] then \
                   redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) return 1 end return 0",
            )
            .key(&k)
            .arg(field)
            .arg(mine)
            .arg(json)
            .invoke_async::<i64>(&mut c)
            .await
            .map(|n| n == 1)
        })
        .await
    }

    /// Add one to the counter `field` of a live session's state; the new value (0: the
    /// session is gone).
    pub async fn count(&self, handle: &str, field: &str) -> Result<u64, StoreError> {
        let k = key(handle);
        let field = field.to_string();
        self.with(|mut c| async move {
            // HINCRBY on an expired key would bring it back without an expiry.
            redis::Script::new(
                "if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end \
                 return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)",
            )
            .key(&k)
            .arg(field)
            .invoke_async::<u64>(&mut c)
            .await
        })
        .await
    }

    /// Drop `replica`'s claim of `field` (it opened nothing).
    pub async fn release_upstream(
        &self,
        handle: &str,
        field: &str,
        replica: &str,
    ) -> Result<(), StoreError> {
        let k = key(handle);
        let (field, mine) = (field.to_string(), format!("pending:{replica}:"));
        self.with(|mut c| async move {
            redis::Script::new(
                "local v = redis.call('HGET', KEYS[1], ARGV[1]) \
                 if v and string.sub(v, 1, #ARGV[2]) == ARGV[2] then \
                   redis.call('HDEL', KEYS[1], ARGV[1]) end return 0",
            )
            .key(&k)
            .arg(field)
            .arg(mine)
            .invoke_async::<i64>(&mut c)
            .await
            .map(|_| ())
        })
        .await
    }

    /// Add an event to a session's GET stream (at most `cap` kept) and announce it; its
    /// sequence number. With `once`, an event of that name added to the session in the last
    /// second (by any replica) makes this one a no-op (0): every replica announces an
    /// upstream's list change to the sessions it serves, the client hears it once.
    pub async fn push_event(
        &self,
        handle: &str,
        json: &str,
        once: Option<&str>,
        cap: u64,
        ttl: Duration,
    ) -> Result<u64, StoreError> {
        let k = key(handle);
        let once = once.map(|o| format!("{k}:once:{o}")).unwrap_or_default();
        let json = json.to_string();
        let h = handle.to_string();
        let ms = ttl.as_millis() as u64;
        let script = &self.push;
        self.with(|mut c| async move {
            script
                .key(format!("{k}:ev"))
                .key(format!("{k}:n"))
                .key(once)
                .arg(json)
                .arg(cap.max(1))
                .arg(ms)
                .arg(format!("{PREFIX}ev"))
                .arg(h)
                .invoke_async(&mut c)
                .await
        })
        .await
    }

    /// The events of a session's GET stream after sequence number `after`, oldest first.
    pub async fn events_after(
        &self,
        handle: &str,
        after: u64,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        let k = format!("{}:ev", key(handle));
        let pairs: Vec<(String, u64)> = self
            .with(|mut c| async move {
                redis::cmd("ZRANGEBYSCORE")
                    .arg(&k)
                    .arg(format!("({after}"))
                    .arg("+inf")
                    .arg("WITHSCORES")
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(pairs.into_iter().map(|(m, s)| (s, m)).collect())
    }

    /// Tell every replica that `principal`'s connection to the per-user upstream `upstream` was
    /// revoked on `replica`: each forgets the grant it holds in memory and closes that
    /// principal's connection.
    pub async fn user_revoked(
        &self,
        replica: &str,
        upstream: &str,
        principal: &str,
    ) -> Result<(), StoreError> {
        let payload = format!("{replica} {upstream} {principal}");
        self.with(|mut c| async move {
            redis::cmd("PUBLISH")
                .arg(format!("{PREFIX}revoke"))
                .arg(payload)
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    /// Tell every replica that `upstream` said its lists changed (heard by `replica`), on its
    /// control connection, or on the upstream session of the client session `session`.
    pub async fn lists_changed(
        &self,
        replica: &str,
        upstream: &str,
        session: Option<&str>,
    ) -> Result<(), StoreError> {
        let payload = match session {
            Some(s) => format!("{replica} {upstream} {s}"),
            None => format!("{replica} {upstream}"),
        };
        self.with(|mut c| async move {
            redis::cmd("PUBLISH")
                .arg(format!("{PREFIX}lists"))
                .arg(payload)
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    /// Tell every replica that a client cancelled a request (`payload` names the session and
    /// the request); the one running it stops it.
    pub async fn cancelled(&self, payload: &str) -> Result<(), StoreError> {
        let payload = payload.to_string();
        self.with(|mut c| async move {
            redis::cmd("PUBLISH")
                .arg(format!("{PREFIX}cancel"))
                .arg(payload)
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    /// Is `replica` listening on its bus now? (A replica killed with `kill -9` is not: Redis
    /// drops its subscription as its connection closes.)
    pub async fn listening(&self, replica: &str) -> Result<bool, StoreError> {
        let ch = format!("{PREFIX}r:{replica}");
        self.with(|mut c| async move {
            redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(ch)
                .query_async::<(String, u64)>(&mut c)
                .await
                .map(|(_, n)| n > 0)
        })
        .await
    }

    /// Send `payload` to one replica (it hears it if it is subscribed).
    pub async fn send_to(&self, replica: &str, payload: &str) -> Result<u64, StoreError> {
        let ch = format!("{PREFIX}r:{replica}");
        let payload = payload.to_string();
        self.with(|mut c| async move {
            redis::cmd("PUBLISH")
                .arg(ch)
                .arg(payload)
                .query_async(&mut c)
                .await
        })
        .await
    }
}
