//! Upstream sessions shared by the replicas of a cluster: what one is ([`UpstreamSession`]:
//! the upstream's `Mcp-Session-Id`, the negotiated version, its `initialize` result), the
//! store a slot asks before it opens one ([`SharedSessions`], given by the gateway), and
//! ending one from any replica ([`end_shared`]).

use crate::error::UpstreamError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_config::UpstreamSpec;
use std::future::Future;
use std::pin::Pin;

/// An upstream session one replica opened, that every replica serving the same client session
/// uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamSession {
    /// The upstream's `Mcp-Session-Id`.
    pub id: String,
    /// The protocol version negotiated at `initialize`.
    #[serde(rename = "v")]
    pub protocol_version: String,
    /// The upstream's `initialize` result.
    pub init: Value,
}

/// What a slot is told before it opens a client session's upstream session.
#[derive(Debug, Clone, PartialEq)]
/// Each carries the first request id this replica's connection mints: the replicas speaking
/// in one upstream session use ranges of their own, so their ids (and progress tokens, and
/// cancellations) never collide upstream.
pub enum Claimed {
    /// Open it here (the initialize handshake), then [`SharedSessions::record`] it.
    Mine {
        /// The first request id after the handshake.
        first_id: u64,
    },
    /// Another replica opened it: use this one.
    Theirs {
        /// The upstream session.
        session: UpstreamSession,
        /// The first request id.
        first_id: u64,
    },
}

/// A boxed future (the trait is used as an object).
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a [`SharedSessions`] store could not give or keep an upstream session: the store's own
/// error (its text is shown to the client as the reason the upstream is unavailable; it
/// becomes [`UpstreamError::Shared`]).
pub type SharedError = Box<dyn std::error::Error + Send + Sync>;

/// Where the replicas of a cluster keep the upstream sessions of their client sessions, one
/// per (client session, upstream). Errors are shown to the client as the reason the upstream
/// is unavailable.
pub trait SharedSessions: Send + Sync {
    /// The upstream session of (`session`, `upstream`), or the right to open it (race-free:
    /// one replica gets [`Claimed::Mine`], the others wait for its record). `dead`: the id of
    /// an upstream session this replica found ended (HTTP 404); a record still holding it is
    /// replaced.
    fn claim<'a>(
        &'a self,
        session: &'a str,
        upstream: &'a str,
        dead: Option<&'a str>,
    ) -> BoxFut<'a, Result<Claimed, SharedError>>;

    /// Record the upstream session opened after [`Claimed::Mine`].
    fn record<'a>(
        &'a self,
        session: &'a str,
        upstream: &'a str,
        opened: &'a UpstreamSession,
    ) -> BoxFut<'a, Result<(), SharedError>>;

    /// Give up a [`Claimed::Mine`] that opened nothing (the upstream failed, or it has no
    /// sessions): another replica may try.
    fn release<'a>(&'a self, session: &'a str, upstream: &'a str) -> BoxFut<'a, ()>;
}

/// End an upstream session from any replica (a DELETE with its id), whether or not this
/// replica has a connection over it. Bounded (2 s).
pub async fn end_shared(
    spec: &UpstreamSpec,
    session: &UpstreamSession,
) -> Result<(), UpstreamError> {
    let w = crate::http::HttpWire::new(spec, None, None)?;
    w.adopt(&session.id, &session.protocol_version)?;
    w.shutdown().await;
    Ok(())
}

/// Open the connection of client session `session` to `slot`'s upstream over the upstream
/// session the replicas share: adopt the one another replica recorded, or open it here (the
/// handshake, once cluster-wide) and record it. `dead`: this replica's last upstream session
/// id, found ended.
pub(crate) async fn open(
    slot: &crate::Slot,
    session: &str,
    dead: Option<&str>,
    opts: crate::OpenOptions,
    tx: tokio::sync::mpsc::UnboundedSender<crate::Event>,
) -> Result<crate::Connection, UpstreamError> {
    let Some(store) = slot.env.shared.clone() else {
        return Err(UpstreamError::Shared("no shared store".into()));
    };
    let upstream = slot.spec.id.as_str();
    let claimed = store
        .claim(session, upstream, dead)
        .await
        .map_err(UpstreamError::Shared)?;
    match claimed {
        Claimed::Theirs {
            session: s,
            first_id,
        } => {
            tracing::debug!(upstream, session = %s.id, "using the upstream session another replica opened");
            let conn = crate::Connection::adopt(&slot.spec, opts, tx, &s)?;
            conn.ids_from(first_id);
            Ok(conn)
        }
        Claimed::Mine { first_id } => match crate::Connection::open(&slot.spec, opts, tx).await {
            Ok(conn) => {
                conn.ids_from(first_id);
                match conn.upstream_session() {
                    Some(s) => {
                        if let Err(e) = store.record(session, upstream, &s).await {
                            tracing::warn!(upstream, "the upstream session is not shared: {e}");
                        }
                    }
                    None => store.release(session, upstream).await,
                }
                Ok(conn)
            }
            Err(e) => {
                store.release(session, upstream).await;
                Err(e)
            }
        },
    }
}

/// Close a session's connection: with `shared`, without ending its upstream session (the
/// replica that ends the client session in the store ends it, once, with [`end_shared`]).
/// `why` answers the calls still waiting on it.
pub(crate) async fn close(conn: &crate::Connection, shared: bool, why: &str) {
    if shared {
        conn.detach(why).await;
    } else {
        conn.shutdown_because(why).await;
    }
}
