//! Upstream sessions the replicas share: a client session's Streamable HTTP upstream session
//! is opened by one replica (its `initialize` done once) and recorded in the session's state in
//! the store (`up:<upstream>`: the upstream's `Mcp-Session-Id`, version and `initialize`
//! result); every other replica serving the client session uses it. The replica that ends the
//! client session in the store ends each of them, once.

use crate::cluster::Cluster;
use crate::state::State;
use sluice_cluster::{StoreError, UpstreamClaim};
use sluice_upstream::shared::BoxFut;
use sluice_upstream::{Claimed, SharedError, SharedSessions, UpstreamSession};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a replica's claim to open an upstream session holds before another may take over
/// (the opener hangs in the handshake; one killed during it is taken over sooner, see
/// [`PROBE`]).
const LEASE: Duration = Duration::from_secs(20);

/// How often a replica waiting for another's record looks again.
const POLL: Duration = Duration::from_millis(25);

/// How often a replica waiting for another's record asks whether that replica is still there
/// (one that is gone, killed while opening it, is taken over without waiting for its lease).
const PROBE: Duration = Duration::from_millis(250);

/// The store field of an upstream's session.
fn field(upstream: &str) -> String {
    format!("up:{upstream}")
}

struct Share(Arc<Cluster>);

/// Why a client session's upstream session could not be found or recorded (its text is the
/// reason the client is told the upstream is unavailable).
#[derive(Debug, thiserror::Error)]
enum ShareError {
    /// The client session id was not sealed by this cluster's keys.
    #[error("the session id is not sealed by this cluster")]
    NotSealed,
    /// The client session ended meanwhile.
    #[error("the session ended")]
    SessionEnded,
    /// The store did not answer.
    #[error("its session is shared through the cluster store: {0}")]
    Store(#[source] StoreError),
    /// The store did not answer while recording.
    #[error("{0}")]
    Record(#[source] StoreError),
    /// What another replica recorded does not parse.
    #[error("the shared upstream session is unreadable: {0}")]
    Unreadable(#[source] serde_json::Error),
    /// The record could not be written.
    #[error("{0}")]
    Unwritable(#[source] serde_json::Error),
    /// Another replica claimed the upstream session and has not recorded it in time.
    #[error("another replica is still opening its upstream session")]
    StillOpening,
    /// This replica's claim lapsed before it recorded the upstream session.
    #[error("the claim to open it ran out (or the session ended)")]
    ClaimLapsed,
}

/// The [`SharedSessions`] of this replica's cluster, for its slots.
pub(crate) fn shared(cluster: Arc<Cluster>) -> Arc<dyn SharedSessions> {
    Arc::new(Share(cluster))
}

impl Share {
    fn handle(&self, session: &str) -> Result<String, ShareError> {
        self.0
            .open(session)
            .map(|s| s.handle)
            .ok_or(ShareError::NotSealed)
    }

    /// The first request id of a new connection over the session's upstream session: a range
    /// of 2^32 ids per connection, numbered in the store (under 2^53, safe for any JSON peer).
    async fn first_id(&self, handle: &str, upstream: &str) -> Result<u64, ShareError> {
        let n = self
            .0
            .store
            .count(handle, &format!("upn:{upstream}"))
            .await
            .map_err(ShareError::Store)?;
        if n == 0 {
            return Err(ShareError::SessionEnded);
        }
        Ok((n % (1 << 20)) << 32)
    }

    async fn claim_inner(
        &self,
        session: &str,
        upstream: &str,
        dead: Option<&str>,
    ) -> Result<Claimed, ShareError> {
        let handle = self.handle(session)?;
        let started = Instant::now();
        // The claimant found gone (killed while opening it): its claim is taken over at once
        // instead of after its lease.
        let mut gone: Option<String> = None;
        let mut checked = None::<Instant>;
        loop {
            let got = self
                .0
                .store
                .claim_upstream(
                    &handle,
                    &field(upstream),
                    &self.0.replica,
                    LEASE,
                    dead,
                    gone.as_deref(),
                )
                .await
                .map_err(ShareError::Store)?;
            match got {
                UpstreamClaim::Gone => return Err(ShareError::SessionEnded),
                UpstreamClaim::Mine => {
                    let first_id = self.first_id(&handle, upstream).await?;
                    return Ok(Claimed::Mine { first_id });
                }
                UpstreamClaim::Held(json) => {
                    let session = serde_json::from_str(&json).map_err(ShareError::Unreadable)?;
                    let first_id = self.first_id(&handle, upstream).await?;
                    return Ok(Claimed::Theirs { session, first_id });
                }
                UpstreamClaim::Pending(_) if started.elapsed() > LEASE + POLL * 40 => {
                    return Err(ShareError::StillOpening)
                }
                UpstreamClaim::Pending(owner) => {
                    // Is the claimant still there? Asked at most every PROBE.
                    if checked.is_none_or(|t| t.elapsed() >= PROBE) {
                        checked = Some(Instant::now());
                        if owner != *self.0.replica
                            && matches!(self.0.store.listening(&owner).await, Ok(false))
                        {
                            tracing::info!(session, upstream, replica = %owner, "the replica opening the shared upstream session is gone: taken over");
                            gone = Some(owner);
                            continue;
                        }
                    }
                    tokio::time::sleep(POLL).await
                }
            }
        }
    }

    async fn record_inner(
        &self,
        session: &str,
        upstream: &str,
        opened: &UpstreamSession,
    ) -> Result<(), ShareError> {
        let handle = self.handle(session)?;
        let json = serde_json::to_string(opened).map_err(ShareError::Unwritable)?;
        let kept = self
            .0
            .store
            .record_upstream(&handle, &field(upstream), &self.0.replica, &json)
            .await
            .map_err(ShareError::Record)?;
        if kept {
            tracing::info!(session = %session, upstream, upstream_session = %opened.id, "upstream session opened and shared");
            Ok(())
        } else {
            Err(ShareError::ClaimLapsed)
        }
    }
}

impl SharedSessions for Share {
    fn claim<'a>(
        &'a self,
        session: &'a str,
        upstream: &'a str,
        dead: Option<&'a str>,
    ) -> BoxFut<'a, Result<Claimed, SharedError>> {
        Box::pin(async move { Ok(self.claim_inner(session, upstream, dead).await?) })
    }

    fn record<'a>(
        &'a self,
        session: &'a str,
        upstream: &'a str,
        opened: &'a UpstreamSession,
    ) -> BoxFut<'a, Result<(), SharedError>> {
        Box::pin(async move { Ok(self.record_inner(session, upstream, opened).await?) })
    }

    fn release<'a>(&'a self, session: &'a str, upstream: &'a str) -> BoxFut<'a, ()> {
        Box::pin(async move {
            if let Ok(handle) = self.handle(session) {
                if let Err(e) = self
                    .0
                    .store
                    .release_upstream(&handle, &field(upstream), &self.0.replica)
                    .await
                {
                    tracing::warn!(upstream, "releasing an upstream session claim failed: {e}");
                }
            }
        })
    }
}

/// This replica ended a client session in the store (its state is `fields`): end each upstream
/// session recorded there (a DELETE to the upstream, once cluster-wide).
pub(crate) async fn end_upstreams(st: &State, fields: &HashMap<String, String>) {
    let snap = st.snapshot();
    for (f, v) in fields {
        let Some(upstream) = f.strip_prefix("up:") else {
            continue;
        };
        let Ok(s) = serde_json::from_str::<UpstreamSession>(v) else {
            continue;
        };
        let Some(slot) = snap.slot(upstream) else {
            continue;
        };
        match sluice_upstream::end_shared(&slot.spec, &s).await {
            Ok(()) => {
                tracing::info!(upstream, upstream_session = %s.id, "shared upstream session ended")
            }
            Err(e) => tracing::warn!(upstream, "ending the shared upstream session failed: {e}"),
        }
    }
}
