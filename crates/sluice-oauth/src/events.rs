//! What happens to users' connections, told to whoever keeps the audit log: a connect, a
//! declined or failed one, a revoke and a refresh failure of a per-user grant, each with the
//! principal, the upstream and the time, never a token. A process-wide broadcast: the gateway
//! subscribes once and writes each event as an audit line; nothing is kept when no one listens.

use std::sync::LazyLock;
use tokio::sync::broadcast;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionEventKind {
    /// A user connected their account (the grant is stored).
    Connected,
    /// A user declined the consent.
    Declined,
    /// A user's sign-in failed.
    Failed,
    /// A user's grant was revoked (forgotten, and revoked at the authorization server when it
    /// has a revocation endpoint).
    Revoked,
    /// Refreshing a user's grant was refused or failed.
    RefreshFailed,
}

impl ConnectionEventKind {
    /// Its name in an audit line (`oauth.connect`, …).
    pub fn name(self) -> &'static str {
        match self {
            ConnectionEventKind::Connected => "oauth.connect",
            ConnectionEventKind::Declined => "oauth.connect_declined",
            ConnectionEventKind::Failed => "oauth.connect_failed",
            ConnectionEventKind::Revoked => "oauth.revoke",
            ConnectionEventKind::RefreshFailed => "oauth.refresh_failed",
        }
    }
}

/// One event (no token, code or secret in it: `detail` is an error's text, which never holds
/// one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionEvent {
    /// What happened.
    pub kind: ConnectionEventKind,
    /// Whose connection.
    pub principal: String,
    /// To which upstream.
    pub upstream: String,
    /// When (seconds since the epoch).
    pub at: u64,
    /// Why, for the failures.
    pub detail: Option<String>,
}

static EVENTS: LazyLock<broadcast::Sender<ConnectionEvent>> =
    LazyLock::new(|| broadcast::channel(256).0);

/// Listen to this process's connection events (a slow listener loses the oldest past 256).
pub fn subscribe() -> broadcast::Receiver<ConnectionEvent> {
    EVENTS.subscribe()
}

/// Tell the listeners about an event of the user grant `grant_key` (`user:<upstream>:<principal>`;
/// any other grant is not a user's, and is not told).
pub fn emit(grant_key: &str, kind: ConnectionEventKind, detail: Option<String>) {
    let Some((upstream, principal)) = grant_key
        .strip_prefix("user:")
        .and_then(|k| k.split_once(':'))
    else {
        return;
    };
    let event = ConnectionEvent {
        kind,
        principal: principal.to_string(),
        upstream: upstream.to_string(),
        at: crate::token::now(),
        detail,
    };
    tracing::info!(event = kind.name(), %upstream, %principal, "user connection");
    let _ = EVENTS.send(event);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn user_grants_are_told_and_others_are_not() {
        let mut rx = subscribe();
        emit("upstream:crm", ConnectionEventKind::Revoked, None);
        emit("user:crm:jwt:alice", ConnectionEventKind::Connected, None);
        let e = rx.recv().await.unwrap();
        assert_eq!(e.kind, ConnectionEventKind::Connected);
        assert_eq!(
            (e.upstream.as_str(), e.principal.as_str()),
            ("crm", "jwt:alice")
        );
        assert!(e.at > 0);
        assert_eq!(e.kind.name(), "oauth.connect");
    }
}
