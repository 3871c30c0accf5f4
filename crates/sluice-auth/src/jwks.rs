//! The signing keys of the authorization server: a JWKS fetched from a URL or read from a file,
//! cached, and fetched again when it is stale or a token names a key it does not hold.

use jsonwebtoken::jwk::{Jwk, JwkSet, PublicKeyUse};
use parking_lot::RwLock;
use sluice_config::JwksSource;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// A token naming an unknown `kid` refetches the set at most this often.
const REFETCH_GAP: Duration = Duration::from_secs(10);

/// A cached key set.
#[derive(Debug)]
pub struct KeySet {
    source: JwksSource,
    ttl: Duration,
    client: reqwest::Client,
    cached: RwLock<Option<Cached>>,
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Debug, Clone)]
struct Cached {
    set: Arc<JwkSet>,
    at: Instant,
    mtime: Option<SystemTime>,
}

impl KeySet {
    /// A key set read from `source`, trusted for `ttl`.
    pub fn new(source: JwksSource, ttl: Duration) -> KeySet {
        KeySet {
            source,
            ttl,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
            cached: RwLock::new(None),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The keys that may have signed a token with this `kid` (every key when the token names
    /// none). Refetches once when the set is stale or does not know `kid`.
    pub(crate) async fn candidates(&self, kid: Option<&str>) -> Result<Vec<Jwk>, String> {
        let set = self.current(false).await?;
        let found = select(&set, kid);
        if !found.is_empty() || kid.is_none() {
            return Ok(found);
        }
        let fresh_enough = self
            .cached
            .read()
            .as_ref()
            .is_some_and(|c| c.at.elapsed() < REFETCH_GAP);
        if fresh_enough {
            return Ok(found);
        }
        let set = self.current(true).await?;
        Ok(select(&set, kid))
    }

    async fn current(&self, force: bool) -> Result<Arc<JwkSet>, String> {
        if !force {
            if let Some(c) = self.cached.read().as_ref() {
                if c.at.elapsed() < self.ttl && !self.file_changed(c) {
                    return Ok(c.set.clone());
                }
            }
        }
        let _one_at_a_time = self.fetching.lock().await;
        // Another request may have refreshed the set while this one waited.
        if let Some(c) = self.cached.read().as_ref() {
            let just_now = c.at.elapsed() < Duration::from_millis(500);
            if just_now || (!force && c.at.elapsed() < self.ttl && !self.file_changed(c)) {
                return Ok(c.set.clone());
            }
        }
        match self.load().await {
            Ok((set, mtime)) => {
                let set = Arc::new(set);
                *self.cached.write() = Some(Cached {
                    set: set.clone(),
                    at: Instant::now(),
                    mtime,
                });
                Ok(set)
            }
            Err(e) => {
                // A stale set is better than none while the server is unreachable.
                if let Some(c) = self.cached.read().as_ref() {
                    tracing::warn!("cannot refresh the JWKS ({e}); using the cached keys");
                    return Ok(c.set.clone());
                }
                Err(e)
            }
        }
    }

    fn file_changed(&self, c: &Cached) -> bool {
        match &self.source {
            JwksSource::File(p) => std::fs::metadata(p).and_then(|m| m.modified()).ok() != c.mtime,
            JwksSource::Url(_) => false,
        }
    }

    async fn load(&self) -> Result<(JwkSet, Option<SystemTime>), String> {
        match &self.source {
            JwksSource::File(path) => {
                let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
                let text = tokio::fs::read_to_string(path)
                    .await
                    .map_err(|e| format!("cannot read the JWKS file {}: {e}", path.display()))?;
                let set = serde_json::from_str(&text).map_err(|e| {
                    format!("the JWKS file {} is not a key set: {e}", path.display())
                })?;
                Ok((set, mtime))
            }
            JwksSource::Url(url) => {
                let resp = self
                    .client
                    .get(url)
                    .header("accept", "application/json")
                    .send()
                    .await
                    .map_err(|e| format!("cannot fetch the JWKS from {url}: {e}"))?;
                if !resp.status().is_success() {
                    return Err(format!(
                        "cannot fetch the JWKS from {url}: HTTP {}",
                        resp.status()
                    ));
                }
                let bytes = resp
                    .bytes()
                    .await
                    .map_err(|e| format!("cannot fetch the JWKS from {url}: {e}"))?;
                let set = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("the JWKS at {url} is not a key set: {e}"))?;
                Ok((set, None))
            }
        }
    }
}

fn select(set: &JwkSet, kid: Option<&str>) -> Vec<Jwk> {
    set.keys
        .iter()
        .filter(|k| kid.is_none() || k.common.key_id.as_deref() == kid)
        .filter(|k| !matches!(k.common.public_key_use, Some(PublicKeyUse::Encryption)))
        .cloned()
        .collect()
}
