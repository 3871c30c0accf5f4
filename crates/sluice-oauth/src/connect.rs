//! A user connecting their own account to a `per_user` upstream: the single-use link a URL-mode
//! elicitation carries (a ticket bound to one principal and one upstream, ten minutes, with the
//! CSRF token its confirmation page posts back), and the outcome of the sign-in it starts,
//! recorded in the vault under the elicitation's id (so any replica sees it) and announced to
//! the calls of this process that wait for it.

use crate::error::AuthError;
use oauth2::CsrfToken;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sluice_vault::Vault;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tokio::sync::Notify;

/// The vault table of connect tickets (key: the ticket's id).
pub const TICKETS: &str = "oauth.connect";
/// The vault table of connect outcomes (key: the elicitation's id).
pub const CONNECTED: &str = "oauth.connected";
/// How long a connect link, and an outcome, is kept.
pub const TICKET_TTL: Duration = Duration::from_secs(600);
/// The path of a connect link under the public URL: `/oauth/connect/<id>`.
pub const CONNECT_PATH: &str = "/oauth/connect";
/// How often [`wait_connected`] reads the vault for an outcome another process recorded.
pub const POLL: Duration = Duration::from_millis(250);

/// A connect link: its id (a secret: whoever holds the link can confirm it) and its path.
#[derive(Clone, PartialEq, Eq)]
pub struct Ticket {
    /// 32 random bytes, base64url.
    pub id: String,
    /// `/oauth/connect/<id>`.
    pub url_path: String,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ticket([hidden])")
    }
}

impl Ticket {
    /// The link under `public_url` (no trailing slash).
    pub fn url(&self, public_url: &str) -> String {
        format!("{}{}", public_url.trim_end_matches('/'), self.url_path)
    }
}

/// What a ticket is for, as kept in the vault.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Pass {
    /// The principal who connects (the link is theirs alone).
    pub principal: String,
    /// The upstream they connect to.
    pub upstream: String,
    /// The URL elicitation the link answers.
    pub elicitation_id: String,
    /// The CSRF token the confirmation form posts back (and its cookie holds).
    pub csrf: String,
}

impl std::fmt::Debug for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pass")
            .field("principal", &self.principal)
            .field("upstream", &self.upstream)
            .field("elicitation_id", &self.elicitation_id)
            .finish_non_exhaustive()
    }
}

/// 32 random bytes, base64url (the `oauth2` crate's CSPRNG-backed token).
fn random() -> String {
    CsrfToken::new_random_len(32).secret().clone()
}

/// Issue a connect link for `principal` to `upstream`, answering `elicitation_id`: single use,
/// for [`TICKET_TTL`].
pub async fn issue(
    vault: &Vault,
    principal: &str,
    upstream: &str,
    elicitation_id: &str,
) -> Result<Ticket, AuthError> {
    let id = random();
    let pass = Pass {
        principal: principal.to_string(),
        upstream: upstream.to_string(),
        elicitation_id: elicitation_id.to_string(),
        csrf: random(),
    };
    let bytes = serde_json::to_vec(&pass).unwrap_or_default();
    vault.put_expiring(TICKETS, &id, &bytes, TICKET_TTL).await?;
    Ok(Ticket {
        url_path: format!("{CONNECT_PATH}/{id}"),
        id,
    })
}

fn read(bytes: Option<Vec<u8>>) -> Result<Option<Pass>, AuthError> {
    bytes
        .map(|b| {
            serde_json::from_slice(&b)
                .map_err(|_| AuthError::Vault("a connect ticket does not read".into()))
        })
        .transpose()
}

/// The ticket `id` without using it (the confirmation page): None when unknown, used or expired.
pub async fn peek(vault: &Vault, id: &str) -> Result<Option<Pass>, AuthError> {
    read(vault.get(TICKETS, id).await?)
}

/// Use the ticket `id` (once, across processes and replicas): None when unknown, used or
/// expired.
pub async fn take(vault: &Vault, id: &str) -> Result<Option<Pass>, AuthError> {
    read(vault.take(TICKETS, id).await?)
}

/// Do two secrets match (compared in time that does not depend on where they differ)?
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// How a connect ended, as recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub enum Outcome {
    /// The grant is stored under the principal's key.
    Connected {
        /// The upstream.
        upstream: String,
        /// The principal.
        principal: String,
    },
    /// The person declined at the authorization server (`access_denied`).
    Declined(String),
    /// The sign-in failed (the reason, never a token or code).
    Failed(String),
}

/// A connect that finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected {
    /// The upstream.
    pub upstream: String,
    /// The principal whose grant is now stored.
    pub principal: String,
}

/// Why a connect did not connect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The person declined the consent.
    #[error("the connection was declined: {0}")]
    Declined(String),
    /// The sign-in failed.
    #[error("connecting failed: {0}")]
    Failed(String),
    /// Nothing happened in time (the link expires after ten minutes).
    #[error("the connection was not completed in time (the link expires after 10 minutes)")]
    Expired,
    /// The vault failed.
    #[error("vault: {0}")]
    Vault(String),
}

impl From<AuthError> for ConnectError {
    fn from(e: AuthError) -> ConnectError {
        ConnectError::Vault(e.to_string())
    }
}

/// The waiters of this process, by elicitation id.
static WAITERS: LazyLock<Mutex<HashMap<String, Arc<Notify>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn waiter(elicitation_id: &str) -> Arc<Notify> {
    WAITERS
        .lock()
        .entry(elicitation_id.to_string())
        .or_default()
        .clone()
}

/// Record how the connect answering `elicitation_id` ended (for [`TICKET_TTL`], where every
/// replica reads it) and wake this process's waiters.
pub async fn record(
    vault: &Vault,
    elicitation_id: &str,
    outcome: &Outcome,
) -> Result<(), AuthError> {
    let bytes = serde_json::to_vec(outcome).unwrap_or_default();
    vault
        .put_expiring(CONNECTED, elicitation_id, &bytes, TICKET_TTL)
        .await?;
    let notify = WAITERS.lock().get(elicitation_id).cloned();
    if let Some(n) = notify {
        n.notify_waiters();
    }
    Ok(())
}

/// The recorded outcome of `elicitation_id`, if any.
pub async fn outcome(vault: &Vault, elicitation_id: &str) -> Result<Option<Outcome>, AuthError> {
    Ok(vault
        .get(CONNECTED, elicitation_id)
        .await?
        .and_then(|b| serde_json::from_slice(&b).ok()))
}

/// Wait, at most `timeout`, for the connect answering `elicitation_id` to end: at once when
/// this process's callback records it, within [`POLL`] when another process's does.
pub async fn wait_connected(
    vault: &Vault,
    elicitation_id: &str,
    timeout: Duration,
) -> Result<Connected, ConnectError> {
    let notify = waiter(elicitation_id);
    let _forget = Forget(elicitation_id);
    let until = tokio::time::Instant::now() + timeout;
    loop {
        // Registered before the vault is read, so a record between the two is not missed.
        let woken = notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        match outcome(vault, elicitation_id).await? {
            Some(Outcome::Connected {
                upstream,
                principal,
            }) => {
                return Ok(Connected {
                    upstream,
                    principal,
                })
            }
            Some(Outcome::Declined(why)) => return Err(ConnectError::Declined(why)),
            Some(Outcome::Failed(why)) => return Err(ConnectError::Failed(why)),
            None => {}
        }
        let now = tokio::time::Instant::now();
        if now >= until {
            return Err(ConnectError::Expired);
        }
        let _ = tokio::time::timeout((until - now).min(POLL), woken).await;
    }
}

/// Drops this process's waiter entry when the last waiter for it leaves.
struct Forget<'a>(&'a str);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        let mut w = WAITERS.lock();
        if w.get(self.0).is_some_and(|n| Arc::strong_count(n) <= 2) {
            w.remove(self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_vault::Keyring;

    fn vault() -> Vault {
        Vault::memory(Keyring::new(vec![[3u8; 32]]).unwrap())
    }

    #[tokio::test]
    async fn a_ticket_is_bound_random_and_single_use() {
        let v = vault();
        let t = issue(&v, "alice", "crm", "el-1").await.unwrap();
        assert_eq!(t.url_path, format!("/oauth/connect/{}", t.id));
        assert_eq!(
            t.url("https://gw.example.com/"),
            format!("https://gw.example.com/oauth/connect/{}", t.id)
        );
        // 32 bytes, base64url without padding.
        assert_eq!(t.id.len(), 43);
        assert!(t
            .id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        let other = issue(&v, "alice", "crm", "el-1").await.unwrap();
        assert_ne!(t.id, other.id);
        let pass = peek(&v, &t.id).await.unwrap().unwrap();
        assert_eq!(
            (pass.principal.as_str(), pass.upstream.as_str()),
            ("alice", "crm")
        );
        assert_eq!(pass.elicitation_id, "el-1");
        assert_eq!(pass.csrf.len(), 43);
        assert_ne!(pass.csrf, t.id);
        // Peeking does not use it; taking does, once.
        assert!(peek(&v, &t.id).await.unwrap().is_some());
        assert_eq!(take(&v, &t.id).await.unwrap(), Some(pass.clone()));
        assert_eq!(take(&v, &t.id).await.unwrap(), None);
        assert_eq!(peek(&v, &t.id).await.unwrap(), None);
        assert_eq!(peek(&v, "no-such-ticket").await.unwrap(), None);
        // Nothing secret in Debug.
        let shown = format!("{t:?} {pass:?}");
        assert!(
            !shown.contains(&t.id) && !shown.contains(&pass.csrf),
            "{shown}"
        );
        assert!(same_secret(&pass.csrf, &pass.csrf.clone()));
        assert!(!same_secret(&pass.csrf, &other.id));
        assert!(!same_secret("abc", "ab"));
    }

    #[tokio::test]
    async fn a_waiter_wakes_at_once_in_process() {
        let v = vault();
        let waiting = tokio::spawn({
            let v = v.clone();
            async move { wait_connected(&v, "el-2", Duration::from_secs(30)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = std::time::Instant::now();
        let done = Outcome::Connected {
            upstream: "crm".into(),
            principal: "alice".into(),
        };
        record(&v, "el-2", &done).await.unwrap();
        let got = waiting.await.unwrap().unwrap();
        assert!(started.elapsed() < POLL, "{:?}", started.elapsed());
        assert_eq!(got.principal, "alice");
        // Recorded before anyone waits: found at once.
        let again = wait_connected(&v, "el-2", Duration::from_secs(1)).await;
        assert_eq!(again.unwrap().upstream, "crm");
        assert!(WAITERS.lock().get("el-2").is_none());
    }

    #[tokio::test]
    async fn declined_failed_and_expired() {
        let v = vault();
        record(&v, "el-3", &Outcome::Declined("access_denied".into()))
            .await
            .unwrap();
        assert_eq!(
            wait_connected(&v, "el-3", Duration::from_secs(1)).await,
            Err(ConnectError::Declined("access_denied".into()))
        );
        record(
            &v,
            "el-4",
            &Outcome::Failed("the token endpoint refused".into()),
        )
        .await
        .unwrap();
        assert!(matches!(
            wait_connected(&v, "el-4", Duration::from_secs(1)).await,
            Err(ConnectError::Failed(_))
        ));
        assert_eq!(
            wait_connected(&v, "el-5", Duration::from_millis(300)).await,
            Err(ConnectError::Expired)
        );
    }

    /// Another process (here: another vault handle on the same SQLite file, whose records wake
    /// nobody in this one) is seen by polling.
    #[tokio::test]
    async fn another_process_is_seen_by_polling() {
        let dir = std::env::temp_dir().join(format!("sluice-connect-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let keys = || Keyring::new(vec![[4u8; 32]]).unwrap();
        let here = Vault::open_file(&dir.join("vault.db"), keys()).unwrap();
        let there = Vault::open_file(&dir.join("vault.db"), keys()).unwrap();
        let waiting =
            tokio::spawn(
                async move { wait_connected(&here, "el-6", Duration::from_secs(10)).await },
            );
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Written straight into the table: no in-process wake-up.
        let done = Outcome::Connected {
            upstream: "crm".into(),
            principal: "bob".into(),
        };
        there
            .put_expiring(
                CONNECTED,
                "el-6",
                &serde_json::to_vec(&done).unwrap(),
                TICKET_TTL,
            )
            .await
            .unwrap();
        let started = std::time::Instant::now();
        let got = waiting.await.unwrap().unwrap();
        assert!(started.elapsed() < POLL * 3, "{:?}", started.elapsed());
        assert_eq!(got.principal, "bob");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
