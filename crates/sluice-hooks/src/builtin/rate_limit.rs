//! The `rate-limit` builtin: token buckets, one global, one per principal and one per tool, in
//! the request phase. A request takes one token from every bucket that applies to it, or from
//! none: when one of them is empty it is refused with -32029 `Rate limit exceeded` and
//! `data.retryAfterMs`, the time until that bucket holds a token again.
//!
//! Buckets refill continuously (`rate` tokens per `per`) up to `burst`; a bucket never used is
//! full. Without `redis` they live in this process (shared by the hooks with the same
//! `key_prefix`, and kept across a reload of the chain); with `redis://…` they live in Redis, and
//! every replica pointing at it shares them: one Lua script per decision reads, refills and takes
//! from every bucket at once, on the Redis server's clock.

use super::ToolPattern;
use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::HookEvent;
use parking_lot::Mutex;
use serde_json::json;
use sluice_config::builtin::{LimitOptions, RateLimitOptions};
use sluice_config::OptionError;
use sluice_core::{codes, Kind, RpcError};
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The key prefix when the options name none.
pub const DEFAULT_KEY_PREFIX: &str = "sluice:rl:";

/// The per-principal key of a request without a principal (an unauthenticated listener): every
/// such request shares this one bucket.
pub const ANONYMOUS: &str = "anonymous";

/// The unit of a rate.
pub use sluice_config::builtin::Per;

/// One limit: `rate` tokens per `per`, at most `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    rate: f64,
    per: Per,
    burst: u64,
}

impl Limit {
    /// A limit; `burst` `None` means `rate` rounded up (at least 1).
    pub fn new(rate: f64, per: Per, burst: Option<u64>) -> Limit {
        let burst = burst.unwrap_or_else(|| (rate.ceil() as u64).max(1));
        Limit { rate, per, burst }
    }

    /// From its options at `at` (`options.global`, …).
    fn from_options(o: &LimitOptions, at: &str) -> Result<Limit, OptionError> {
        let rate = match o.rate {
            None => return Err(OptionError::new(format!("{at}.rate"), "is required")),
            Some(r) if r > 0.0 && r.is_finite() => r,
            Some(_) => {
                return Err(OptionError::new(
                    format!("{at}.rate"),
                    "must be a positive number",
                ))
            }
        };
        let Some(per) = o.per else {
            return Err(OptionError::new(
                format!("{at}.per"),
                "is required (second, minute or hour)",
            ));
        };
        if o.burst == Some(0) {
            return Err(OptionError::new(
                format!("{at}.burst"),
                "must be a positive integer",
            ));
        }
        Ok(Limit::new(rate, per, o.burst))
    }

    /// Milliseconds for one token to come back.
    fn ms_per_token(&self) -> f64 {
        self.per.millis() / self.rate
    }

    /// `5 requests per second, bursts of up to 10`.
    fn describe(&self) -> String {
        let noun = if self.rate == 1.0 {
            "request"
        } else {
            "requests"
        };
        format!(
            "{} {noun} per {}, bursts of up to {}",
            self.rate,
            self.per.name(),
            self.burst
        )
    }
}

/// Which limit a bucket enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One bucket for every request.
    Global,
    /// One bucket per principal.
    PerPrincipal,
    /// One bucket per tool.
    PerTool,
}

impl Scope {
    /// The name in `error.data.limit`.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::PerPrincipal => "per_principal",
            Scope::PerTool => "per_tool",
        }
    }
}

/// A bucket a request needs a token from.
#[derive(Debug, Clone)]
struct Want {
    scope: Scope,
    /// Who or what (`anonymous`, the principal id, the tool name; empty for global).
    subject: String,
    /// The key, without the prefix (`global`, `principal:<id>`, `tool:<name>`).
    key: String,
    limit: Limit,
}

/// What taking tokens came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A token was taken from every bucket.
    Taken,
    /// Nothing was taken: bucket `index` is empty and holds a token again in `retry_after_ms`.
    Exhausted { index: usize, retry_after_ms: u64 },
}

/// One bucket in memory: its tokens at `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
    /// When it is full again (and may be forgotten: a missing bucket is full).
    full_at: Instant,
}

/// The tokens in a bucket at `now` (`None`: never used, full).
fn level(bucket: Option<&Bucket>, limit: &Limit, now: Instant) -> f64 {
    let burst = limit.burst as f64;
    match bucket {
        None => burst,
        Some(b) => {
            let elapsed_ms = now.saturating_duration_since(b.at).as_secs_f64() * 1000.0;
            (b.tokens + elapsed_ms / limit.ms_per_token()).min(burst)
        }
    }
}

/// Milliseconds until a bucket at `level` holds one token (0 when it does).
fn wait_ms(level: f64, limit: &Limit) -> u64 {
    if level >= 1.0 {
        0
    } else {
        ((1.0 - level) * limit.ms_per_token()).ceil().max(1.0) as u64
    }
}

/// Buckets in this process.
#[derive(Debug)]
struct Memory {
    buckets: Mutex<MemoryState>,
}

#[derive(Debug)]
struct MemoryState {
    buckets: HashMap<String, Bucket>,
    /// Forget full buckets when the map grows past this.
    prune_at: usize,
}

const PRUNE_MIN: usize = 4096;

impl Memory {
    fn new() -> Memory {
        Memory {
            buckets: Mutex::new(MemoryState {
                buckets: HashMap::new(),
                prune_at: PRUNE_MIN,
            }),
        }
    }

    /// Take one token from every bucket of `wants`, or from none.
    fn take(&self, wants: &[Want], now: Instant) -> Outcome {
        let mut state = self.buckets.lock();
        let levels: Vec<f64> = wants
            .iter()
            .map(|w| level(state.buckets.get(&w.key), &w.limit, now))
            .collect();
        let worst = levels
            .iter()
            .zip(wants)
            .enumerate()
            .map(|(i, (l, w))| (i, wait_ms(*l, &w.limit)))
            .filter(|(_, wait)| *wait > 0)
            .max_by_key(|(_, wait)| *wait);
        if let Some((index, retry_after_ms)) = worst {
            return Outcome::Exhausted {
                index,
                retry_after_ms,
            };
        }
        for (w, l) in wants.iter().zip(levels) {
            let tokens = l - 1.0;
            let refill_ms = (w.limit.burst as f64 - tokens) * w.limit.ms_per_token();
            let full_at = now + Duration::from_secs_f64(refill_ms.max(0.0) / 1000.0);
            state.buckets.insert(
                w.key.clone(),
                Bucket {
                    tokens,
                    at: now,
                    full_at,
                },
            );
        }
        if state.buckets.len() > state.prune_at {
            state.buckets.retain(|_, b| b.full_at > now);
            state.prune_at = (state.buckets.len() * 2).max(PRUNE_MIN);
        }
        Outcome::Taken
    }
}

/// The memory stores of this process by key prefix: a chain rebuilt by a reload finds the
/// buckets of the chain it replaces (alive until the swap).
static MEMORY_STORES: Mutex<Vec<(String, Weak<Memory>)>> = parking_lot::const_mutex(Vec::new());

fn shared_memory(prefix: &str) -> Arc<Memory> {
    let mut stores = MEMORY_STORES.lock();
    stores.retain(|(_, w)| w.strong_count() > 0);
    if let Some(m) = stores
        .iter()
        .find(|(p, _)| p == prefix)
        .and_then(|(_, w)| w.upgrade())
    {
        return m;
    }
    let m = Arc::new(Memory::new());
    stores.push((prefix.to_string(), Arc::downgrade(&m)));
    m
}

/// The token bucket over every key of one decision, run by Redis at once (no other client's
/// command runs in between), on the Redis server's clock (`TIME`), so replicas cannot race and
/// their clocks need not agree. KEYS: the buckets; ARGV: for each, milliseconds per token and
/// burst. Returns `{1, 0, 0}` (taken) or `{0, index (1-based), retry after ms}` (nothing taken).
const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local levels = {}
local worst, worst_i = 0, 0
for i, key in ipairs(KEYS) do
  local ms = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local state = redis.call('HMGET', key, 'tokens', 'at')
  local tokens, at = tonumber(state[1]), tonumber(state[2])
  local level = burst
  if tokens and at then
    level = math.min(burst, tokens + math.max(0, now - at) / ms)
  end
  levels[i] = level
  if level < 1 then
    local wait = math.max(1, math.ceil((1 - level) * ms))
    if wait > worst then
      worst, worst_i = wait, i
    end
  end
end
if worst_i > 0 then
  return {0, worst_i, worst}
end
for i, key in ipairs(KEYS) do
  local ms = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  redis.call('HSET', key, 'tokens', string.format('%.17g', levels[i] - 1), 'at', string.format('%.17g', now))
  redis.call('PEXPIRE', key, string.format('%d', math.ceil(burst * ms) + 1000))
end
return {1, 0, 0}
";

/// Buckets in Redis.
struct Redis {
    /// The client, or why the URL is not one (every decision then fails: `on_error` decides,
    /// rather than the hook being left out of the chain).
    client: Result<redis::Client, String>,
    /// The URL without credentials (for errors).
    shown: String,
    conn: tokio::sync::OnceCell<redis::aio::ConnectionManager>,
    script: redis::Script,
    timeout: Duration,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis").field("url", &self.shown).finish()
    }
}

/// `redis://user:secret@host/0` → `redis://***@host/0`.
fn without_credentials(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}

impl Redis {
    async fn take(&self, prefix: &str, wants: &[Want]) -> Result<Outcome, HookFailure> {
        let fail = |e: &dyn std::fmt::Display| HookFailure(format!("redis {}: {e}", self.shown));
        let run = async {
            let client = self.client.as_ref().map_err(|e| HookFailure(e.clone()))?;
            let conn = self
                .conn
                .get_or_try_init(|| {
                    let config = redis::aio::ConnectionManagerConfig::new()
                        .set_connection_timeout(Some(self.timeout))
                        .set_response_timeout(Some(self.timeout))
                        .set_number_of_retries(1)
                        .set_min_delay(Duration::from_millis(50));
                    redis::aio::ConnectionManager::new_with_config(client.clone(), config)
                })
                .await
                .map_err(|e| fail(&e))?;
            let mut conn = conn.clone();
            let mut call = self.script.prepare_invoke();
            for w in wants {
                call.key(format!("{prefix}{}", w.key))
                    .arg(w.limit.ms_per_token())
                    .arg(w.limit.burst);
            }
            let r: Vec<i64> = call.invoke_async(&mut conn).await.map_err(|e| fail(&e))?;
            match r.as_slice() {
                [1, ..] => Ok(Outcome::Taken),
                [0, index, wait] if *index >= 1 && (*index as usize) <= wants.len() => {
                    Ok(Outcome::Exhausted {
                        index: *index as usize - 1,
                        retry_after_ms: (*wait).max(1) as u64,
                    })
                }
                other => Err(fail(&format!("unexpected answer {other:?}"))),
            }
        };
        match tokio::time::timeout(self.timeout, run).await {
            Ok(r) => r,
            Err(_) => Err(fail(&format!(
                "no answer within {:.1} s",
                self.timeout.as_secs_f64()
            ))),
        }
    }
}

#[derive(Debug)]
enum Store {
    Memory(Arc<Memory>),
    Redis(Box<Redis>),
}

/// The rate-limit builtin.
#[derive(Debug)]
pub struct RateLimit {
    global: Option<Limit>,
    per_principal: Option<Limit>,
    /// Tool-name patterns in file order (the first match wins).
    per_tool: Vec<(ToolPattern, Limit)>,
    key_prefix: String,
    store: Store,
}

/// `"… ms"` under a second, seconds to a tenth under a minute, else minutes (all rounded up).
fn retry_text(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        let tenths = ms.div_ceil(100);
        format!("{}.{} s", tenths / 10, tenths % 10)
    } else {
        format!("{} min", ms.div_ceil(60_000))
    }
}

impl RateLimit {
    /// Build from the hook's `options`: `global`, `per_principal` (limits), `per_tool`
    /// (`{"<tool pattern>": limit}`), `redis` (`redis://…`), `key_prefix`. `timeout` bounds
    /// every Redis call (the hook's timeout).
    pub fn from_options(
        options: &RateLimitOptions,
        timeout: Duration,
    ) -> Result<RateLimit, OptionError> {
        let limit = |o: &Option<LimitOptions>, at: &str| {
            o.as_ref().map(|l| Limit::from_options(l, at)).transpose()
        };
        let global = limit(&options.global, "options.global")?;
        let per_principal = limit(&options.per_principal, "options.per_principal")?;
        let mut per_tool = Vec::new();
        for (pattern, l) in options.per_tool.iter().flatten() {
            let at = format!("options.per_tool.{pattern}");
            let p =
                ToolPattern::glob_or_regex(pattern).map_err(|e| OptionError::new(at.clone(), e))?;
            per_tool.push((p, Limit::from_options(l, &at)?));
        }
        if global.is_none() && per_principal.is_none() && per_tool.is_empty() {
            return Err(OptionError::new(
                "options",
                "rate-limit needs `global`, `per_principal` or `per_tool`",
            ));
        }
        let key_prefix = match options.key_prefix.as_deref() {
            None => DEFAULT_KEY_PREFIX.to_string(),
            Some("") => return Err(OptionError::new("options.key_prefix", "must not be empty")),
            Some(p) => p.to_string(),
        };
        let store = match &options.redis {
            None => Store::Memory(shared_memory(&key_prefix)),
            Some(url) => {
                if !url.starts_with("redis://") {
                    return Err(OptionError::new(
                        "options.redis",
                        format!("{url:?} is not a redis:// URL"),
                    ));
                }
                let client = redis::Client::open(url.as_str()).map_err(|e| {
                    format!(
                        "options.redis: {:?} is not a valid Redis URL: {e}",
                        without_credentials(url)
                    )
                });
                Store::Redis(Box::new(Redis {
                    client,
                    shown: without_credentials(url),
                    conn: tokio::sync::OnceCell::new(),
                    script: redis::Script::new(SCRIPT),
                    timeout,
                }))
            }
        };
        Ok(RateLimit {
            global,
            per_principal,
            per_tool,
            key_prefix,
            store,
        })
    }

    /// The buckets this request needs a token from.
    fn wants(&self, ev: &HookEvent) -> Vec<Want> {
        let mut wants = Vec::new();
        if let Some(limit) = self.global {
            wants.push(Want {
                scope: Scope::Global,
                subject: String::new(),
                key: "global".into(),
                limit,
            });
        }
        if let Some(limit) = self.per_principal {
            let who = ev.principal.as_ref().map_or(ANONYMOUS, |p| p.id.as_str());
            wants.push(Want {
                scope: Scope::PerPrincipal,
                subject: who.to_string(),
                key: format!("principal:{who}"),
                limit,
            });
        }
        if let Some(tool) = ev.tool_name.as_deref() {
            if let Some((_, limit)) = self.per_tool.iter().find(|(p, _)| p.is_match(tool)) {
                wants.push(Want {
                    scope: Scope::PerTool,
                    subject: tool.to_string(),
                    key: format!("tool:{tool}"),
                    limit: *limit,
                });
            }
        }
        wants
    }

    /// The refusal for an empty bucket.
    fn refusal(want: &Want, retry_after_ms: u64) -> Refusal {
        let whose = match want.scope {
            Scope::Global => "through this gateway".to_string(),
            Scope::PerPrincipal => format!("for caller {:?}", want.subject),
            Scope::PerTool => format!("for tool {:?}", want.subject),
        };
        let reason = format!(
            "Rate limit exceeded {whose} ({}). Retry in {}.",
            want.limit.describe(),
            retry_text(retry_after_ms)
        );
        let error = RpcError::new(codes::RATE_LIMITED, "Rate limit exceeded").with_data(json!({
            "reason": reason,
            "limit": want.scope.name(),
            "retryAfterMs": retry_after_ms,
        }));
        Refusal {
            reason,
            for_agent: true,
            error: Some(Box::new(error)),
        }
    }

    /// Decide on a request: pass with a token taken from every bucket that applies, or refuse
    /// (-32029) taking none. Notifications and the client's replies pass uncounted. A Redis that
    /// cannot be reached is a failure (`on_error` decides).
    pub async fn decide(&self, ev: &HookEvent) -> Result<Decision, HookFailure> {
        if ev.message.kind() != Kind::Request {
            return Ok(Decision::Pass);
        }
        let wants = self.wants(ev);
        if wants.is_empty() {
            return Ok(Decision::Pass);
        }
        let outcome = match &self.store {
            Store::Memory(m) => m.take(&wants, Instant::now()),
            Store::Redis(r) => r.take(&self.key_prefix, &wants).await?,
        };
        Ok(match outcome {
            Outcome::Taken => Decision::Pass,
            Outcome::Exhausted {
                index,
                retry_after_ms,
            } => Decision::Refuse(Self::refusal(&wants[index], retry_after_ms)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::deny::tests::call;
    use serde_json::json;
    use serde_json::{Map, Value};
    use sluice_core::Principal;

    fn want(scope: Scope, key: &str, limit: Limit) -> Want {
        Want {
            scope,
            subject: key.into(),
            key: key.into(),
            limit,
        }
    }

    fn secs(n: f64) -> Duration {
        Duration::from_secs_f64(n)
    }

    #[test]
    fn burst_then_refill_with_retry_after() {
        let m = Memory::new();
        let t0 = Instant::now();
        let w = [want(
            Scope::PerTool,
            "tool:t",
            Limit::new(1.0, Per::Minute, Some(2)),
        )];
        assert_eq!(m.take(&w, t0), Outcome::Taken);
        assert_eq!(m.take(&w, t0), Outcome::Taken);
        // Empty: one token comes back a minute after the last take.
        assert_eq!(
            m.take(&w, t0),
            Outcome::Exhausted {
                index: 0,
                retry_after_ms: 60_000
            }
        );
        assert_eq!(
            m.take(&w, t0 + secs(30.0)),
            Outcome::Exhausted {
                index: 0,
                retry_after_ms: 30_000
            }
        );
        // A refusal takes nothing: the refill goes on from the last take.
        assert_eq!(m.take(&w, t0 + secs(60.0)), Outcome::Taken);
        assert_eq!(
            m.take(&w, t0 + secs(60.0)),
            Outcome::Exhausted {
                index: 0,
                retry_after_ms: 60_000
            }
        );
    }

    #[test]
    fn refill_stops_at_the_burst() {
        let m = Memory::new();
        let t0 = Instant::now();
        let w = [want(
            Scope::Global,
            "global",
            Limit::new(10.0, Per::Second, Some(3)),
        )];
        assert_eq!(m.take(&w, t0), Outcome::Taken);
        // An hour later the bucket holds 3, not 36 000.
        let t1 = t0 + secs(3600.0);
        for _ in 0..3 {
            assert_eq!(m.take(&w, t1), Outcome::Taken);
        }
        assert_eq!(
            m.take(&w, t1),
            Outcome::Exhausted {
                index: 0,
                retry_after_ms: 100
            }
        );
        // Partial refill: 0.25 s is 2.5 tokens.
        let t2 = t1 + secs(0.25);
        assert_eq!(m.take(&w, t2), Outcome::Taken);
        assert_eq!(m.take(&w, t2), Outcome::Taken);
        assert_eq!(
            m.take(&w, t2),
            Outcome::Exhausted {
                index: 0,
                retry_after_ms: 50
            }
        );
    }

    #[test]
    fn burst_defaults_to_the_rate_rounded_up() {
        assert_eq!(Limit::new(0.5, Per::Second, None).burst, 1);
        assert_eq!(Limit::new(2.5, Per::Minute, None).burst, 3);
        assert_eq!(Limit::new(10.0, Per::Hour, None).burst, 10);
        assert_eq!(Limit::new(10.0, Per::Hour, Some(1)).burst, 1);
    }

    #[test]
    fn all_buckets_or_none_and_the_longest_wait_is_reported() {
        let m = Memory::new();
        let t0 = Instant::now();
        let global = want(
            Scope::Global,
            "global",
            Limit::new(1.0, Per::Second, Some(5)),
        );
        let tool = want(
            Scope::PerTool,
            "tool:t",
            Limit::new(1.0, Per::Hour, Some(1)),
        );
        let both = [global.clone(), tool];
        assert_eq!(m.take(&both, t0), Outcome::Taken);
        // The tool bucket is empty: refused, and the global bucket keeps its 4 tokens.
        assert_eq!(
            m.take(&both, t0),
            Outcome::Exhausted {
                index: 1,
                retry_after_ms: 3_600_000
            }
        );
        let g = [global];
        for _ in 0..4 {
            assert_eq!(m.take(&g, t0), Outcome::Taken);
        }
        // Both empty: the longer wait wins.
        assert_eq!(
            m.take(&both, t0),
            Outcome::Exhausted {
                index: 1,
                retry_after_ms: 3_600_000
            }
        );
        assert_eq!(
            m.take(&g, t0),
            Outcome::Exhausted {
                index: 0,
                retry_after_ms: 1_000
            }
        );
    }

    #[test]
    fn full_buckets_are_forgotten_when_the_map_grows() {
        let m = Memory::new();
        let t0 = Instant::now();
        let limit = Limit::new(1.0, Per::Second, Some(1));
        for i in 0..=PRUNE_MIN {
            let w = [want(Scope::PerTool, &format!("tool:{i}"), limit)];
            assert_eq!(m.take(&w, t0), Outcome::Taken);
        }
        // Nothing was full at t0; a second later every one is.
        assert_eq!(m.buckets.lock().buckets.len(), PRUNE_MIN + 1);
        let w = [want(Scope::PerTool, "tool:x", limit)];
        m.buckets.lock().prune_at = 0;
        assert_eq!(m.take(&w, t0 + secs(1.5)), Outcome::Taken);
        assert_eq!(m.buckets.lock().buckets.len(), 1);
    }

    fn limiter(options: Value) -> RateLimit {
        let sluice_config::BuiltinOptions::RateLimit(o) =
            crate::builtin::parsed("rate-limit", options)
        else {
            unreachable!("rate-limit options")
        };
        RateLimit::from_options(&o, Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn per_tool_patterns_first_match_in_file_order() {
        let r = limiter(json!({"key_prefix": "test:order:", "per_tool": {
            "fx_slow": {"rate": 1, "per": "minute", "burst": 1},
            "fx_*": {"rate": 5, "per": "second"},
            "crm\\..*": {"rate": 2, "per": "hour", "burst": 7},
            "*": {"rate": 100, "per": "second", "burst": 1}
        }}));
        let limit_of = |tool: &str| {
            r.wants(&call(tool, json!({})))
                .iter()
                .find(|w| w.scope == Scope::PerTool)
                .map(|w| (w.key.clone(), w.limit.burst, w.limit.per))
        };
        assert_eq!(
            limit_of("fx_slow"),
            Some(("tool:fx_slow".into(), 1, Per::Minute))
        );
        assert_eq!(
            limit_of("fx_echo"),
            Some(("tool:fx_echo".into(), 5, Per::Second))
        );
        assert_eq!(
            limit_of("crm.order"),
            Some(("tool:crm.order".into(), 7, Per::Hour))
        );
        assert_eq!(
            limit_of("other"),
            Some(("tool:other".into(), 1, Per::Second))
        );
        // Without a tool (another method) no per-tool bucket applies.
        let mut ev = call("x", json!({}));
        ev.tool_name = None;
        assert!(r.wants(&ev).is_empty());
    }

    #[test]
    fn principals_have_their_own_buckets_and_anonymous_share_one() {
        let r = limiter(
            json!({"key_prefix": "test:principal:", "per_principal": {"rate": 1, "per": "hour"}}),
        );
        let who = |id: Option<&str>| {
            let mut ev = call("t", json!({}));
            ev.principal = id.map(|id| {
                Arc::new(Principal {
                    id: id.into(),
                    kind: "token",
                    scopes: Vec::new(),
                    claims: Map::new(),
                })
            });
            r.wants(&ev)[0].key.clone()
        };
        assert_eq!(who(None), "principal:anonymous");
        assert_eq!(who(Some("alice")), "principal:alice");
    }

    #[tokio::test]
    async fn over_the_limit_is_a_rate_limited_error_for_the_agent() {
        let r = limiter(json!({
            "key_prefix": "test:refusal:",
            "global": {"rate": 100, "per": "second", "burst": 100},
            "per_tool": {"fx_*": {"rate": 1, "per": "minute", "burst": 2}}
        }));
        let ev = call("fx_echo", json!({}));
        assert_eq!(r.decide(&ev).await, Ok(Decision::Pass));
        assert_eq!(r.decide(&ev).await, Ok(Decision::Pass));
        let Ok(Decision::Refuse(refusal)) = r.decide(&ev).await else {
            panic!("expected a refusal")
        };
        assert!(refusal.for_agent);
        let err = refusal.error.as_deref().unwrap();
        assert_eq!(
            (err.code, err.message.as_str()),
            (-32029, "Rate limit exceeded")
        );
        let data = err.data.clone().unwrap();
        assert_eq!(data["limit"], json!("per_tool"));
        let wait = data["retryAfterMs"].as_u64().unwrap();
        assert!(wait > 59_000 && wait <= 60_000, "{wait}");
        assert_eq!(data["reason"], json!(refusal.reason));
        assert!(
            refusal.reason.starts_with(
                "Rate limit exceeded for tool \"fx_echo\" (1 request per minute, bursts of up to 2). Retry in "
            ),
            "{}",
            refusal.reason
        );
        // Another tool has its own bucket.
        assert_eq!(
            r.decide(&call("fx_add", json!({}))).await,
            Ok(Decision::Pass)
        );
        // Notifications (and the client's replies) are not requests: never counted.
        let mut note = call("fx_echo", json!({}));
        note.message = sluice_core::Message::notification("notifications/cancelled", None);
        assert_eq!(r.decide(&note).await, Ok(Decision::Pass));
    }

    #[test]
    fn reasons_name_the_limit() {
        let g = want(Scope::Global, "global", Limit::new(2.5, Per::Second, None));
        assert_eq!(
            RateLimit::refusal(&g, 250).reason,
            "Rate limit exceeded through this gateway (2.5 requests per second, bursts of up to 3). Retry in 250 ms."
        );
        let mut p = want(
            Scope::PerPrincipal,
            "principal:anonymous",
            Limit::new(10.0, Per::Minute, None),
        );
        p.subject = ANONYMOUS.into();
        assert_eq!(
            RateLimit::refusal(&p, 6001).reason,
            "Rate limit exceeded for caller \"anonymous\" (10 requests per minute, bursts of up to 10). Retry in 6.1 s."
        );
        assert_eq!(retry_text(1000), "1.0 s");
        assert_eq!(retry_text(999), "999 ms");
        assert_eq!(retry_text(59_999), "60.0 s");
        assert_eq!(retry_text(60_000), "1 min");
        assert_eq!(retry_text(3_599_001), "60 min");
    }

    #[test]
    fn memory_buckets_are_shared_by_prefix_while_alive() {
        let options = json!({"key_prefix": "test:shared:", "global": {"rate": 1, "per": "hour"}});
        let a = limiter(options.clone());
        let b = limiter(options);
        let other =
            limiter(json!({"key_prefix": "test:other:", "global": {"rate": 1, "per": "hour"}}));
        let (Store::Memory(ma), Store::Memory(mb), Store::Memory(mo)) =
            (&a.store, &b.store, &other.store)
        else {
            panic!("memory stores")
        };
        assert!(Arc::ptr_eq(ma, mb));
        assert!(!Arc::ptr_eq(ma, mo));
    }

    #[test]
    fn options_are_checked() {
        // The one problem the configuration finds.
        let err = |v: Value| match sluice_config::BuiltinOptions::parse("rate-limit", &v) {
            Some(Err(e)) if e.len() == 1 => e[0].to_string(),
            other => panic!("{v}: {other:?}"),
        };
        assert_eq!(
            err(json!({})),
            "options: rate-limit needs `global`, `per_principal` or `per_tool`"
        );
        assert_eq!(
            err(json!({"global": {"rate": 0, "per": "second"}})),
            "options.global.rate: must be a positive number"
        );
        assert_eq!(
            err(json!({"global": {"rate": 1}})),
            "options.global.per: is required (second, minute or hour)"
        );
        assert_eq!(
            err(json!({"per_principal": {"rate": 1, "per": "day"}})),
            "options.per_principal.per: unknown unit \"day\" (second, minute or hour)"
        );
        assert_eq!(
            err(json!({"global": {"rate": 1, "per": "second", "burst": 1.5}})),
            "options.global.burst: must be a positive integer"
        );
        assert_eq!(
            err(json!({"per_tool": {"a(": {"rate": 1, "per": "second"}}})),
            "options.per_tool.a(: \"a(\" is not a valid regex: unclosed group"
        );
        assert_eq!(
            err(json!({"global": {"rate": 1, "per": "second"}, "redis": "http://x"})),
            "options.redis: \"http://x\" is not a redis:// URL"
        );
        assert_eq!(
            err(json!({"global": {"rate": 1, "per": "second", "every": 2}})),
            "options.global.every: unknown option (known: rate, per, burst)"
        );
        assert_eq!(
            err(json!({"global": {"rate": 1, "per": "second"}, "key_prefix": ""})),
            "options.key_prefix: must not be empty"
        );
        // And what the builtin refuses when it is built from options no one checked.
        let unchecked = RateLimitOptions {
            global: Some(LimitOptions {
                rate: Some(1.0),
                per: None,
                burst: None,
            }),
            ..RateLimitOptions::default()
        };
        assert_eq!(
            RateLimit::from_options(&unchecked, Duration::from_secs(1))
                .unwrap_err()
                .to_string(),
            "options.global.per: is required (second, minute or hour)"
        );
        assert_eq!(
            without_credentials("redis://u:secret@h:1/0"),
            "redis://***@h:1/0"
        );
    }

    /// No Redis listening: the hook fails (the chain's `on_error` decides), quickly.
    #[tokio::test]
    async fn an_unreachable_redis_is_a_failure() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = limiter(json!({
            "global": {"rate": 1, "per": "second"},
            "redis": format!("redis://127.0.0.1:{port}/0")
        }));
        let started = Instant::now();
        let e = r.decide(&call("t", json!({}))).await.unwrap_err();
        assert!(
            e.0.starts_with(&format!("redis redis://127.0.0.1:{port}/0: ")),
            "{e}"
        );
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}
