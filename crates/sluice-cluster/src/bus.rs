//! The bus between replicas: one Redis pub/sub connection per replica, subscribed to the
//! channels every replica hears (new GET-stream events, ended sessions, changes of a session's
//! state, upstreams' list changes, revoked user connections) and to its own (messages
//! for it alone). The connection is made again whenever it drops; each new subscription is
//! announced with [`BusMsg::Resync`], so the replica catches up on what it may have missed.

use crate::store::{Store, PREFIX};
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// What a replica hears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusMsg {
    /// An event was added to the GET stream of the session with this handle.
    Event {
        /// The session's handle.
        handle: String,
        /// The event's sequence number.
        seq: u64,
    },
    /// The session with this handle ended (DELETE on some replica).
    Ended(String),
    /// A field of the state of the session with this handle was set (`value`) or removed
    /// (None) on some replica: its log level, a subscription, what its GET stream delivered.
    State {
        /// The session's handle.
        handle: String,
        /// The field (`level`, `sub:<uri>`, `gd`).
        field: String,
        /// Its new value; None: removed.
        value: Option<String>,
    },
    /// Replica `from` heard `upstream` say its lists changed (for every client, or on the
    /// upstream session of one client session).
    Lists {
        /// The replica that heard it.
        from: String,
        /// The upstream's id.
        upstream: String,
        /// The client session whose own upstream session said it.
        session: Option<String>,
    },
    /// Replica `from` revoked `principal`'s connection to the per-user upstream `upstream`.
    Revoked {
        /// The replica that revoked it.
        from: String,
        /// The upstream's id.
        upstream: String,
        /// The principal (`kind:id`).
        principal: String,
    },
    /// A client cancelled a request, on some replica (JSON naming the session and request).
    Cancelled(String),
    /// A message for this replica alone.
    Direct(String),
    /// Subscribed (again): events may have been missed while the bus was away.
    Resync,
}

/// The bus of one replica.
pub struct Bus;

fn parse(channel: &str, payload: String, direct: &str) -> Option<BusMsg> {
    if channel == direct {
        return Some(BusMsg::Direct(payload));
    }
    match channel.strip_prefix(PREFIX)? {
        "ev" => {
            let (h, n) = payload.split_once(' ')?;
            Some(BusMsg::Event {
                handle: h.to_string(),
                seq: n.parse().ok()?,
            })
        }
        "end" => Some(BusMsg::Ended(payload)),
        "state" => {
            let mut parts = payload.splitn(3, '\n');
            Some(BusMsg::State {
                handle: parts.next()?.to_string(),
                field: parts.next()?.to_string(),
                value: parts.next().map(str::to_string),
            })
        }
        "cancel" => Some(BusMsg::Cancelled(payload)),
        "revoke" => {
            let mut words = payload.splitn(3, ' ');
            Some(BusMsg::Revoked {
                from: words.next()?.to_string(),
                upstream: words.next()?.to_string(),
                principal: words.next()?.to_string(),
            })
        }
        "lists" => {
            let mut words = payload.split(' ');
            Some(BusMsg::Lists {
                from: words.next()?.to_string(),
                upstream: words.next()?.to_string(),
                session: words.next().map(str::to_string),
            })
        }
        _ => None,
    }
}

impl Bus {
    /// Start the bus of replica `replica`: what it hears arrives on the returned receiver. The
    /// bus ends when the receiver is dropped.
    pub fn start(store: Arc<Store>, replica: &str) -> mpsc::UnboundedReceiver<BusMsg> {
        let (tx, rx) = mpsc::unbounded_channel();
        let direct = format!("{PREFIX}r:{replica}");
        tokio::spawn(async move {
            let channels = [
                format!("{PREFIX}ev"),
                format!("{PREFIX}end"),
                format!("{PREFIX}state"),
                format!("{PREFIX}lists"),
                format!("{PREFIX}cancel"),
                format!("{PREFIX}revoke"),
                direct.clone(),
            ];
            loop {
                if tx.is_closed() {
                    return;
                }
                let connect = async {
                    let mut ps = store.client().get_async_pubsub().await?;
                    ps.subscribe(&channels[..]).await?;
                    Ok::<_, redis::RedisError>(ps)
                };
                match tokio::time::timeout(store.timeout(), connect).await {
                    Ok(Ok(ps)) => {
                        if tx.send(BusMsg::Resync).is_err() {
                            return;
                        }
                        let mut messages = ps.into_on_message();
                        while let Some(m) = messages.next().await {
                            let Ok(payload) = m.get_payload::<String>() else {
                                continue;
                            };
                            if let Some(msg) = parse(m.get_channel_name(), payload, &direct) {
                                if tx.send(msg).is_err() {
                                    return;
                                }
                            }
                        }
                        tracing::warn!(redis = %store.shown(), "cluster bus disconnected; reconnecting");
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(redis = %store.shown(), "cluster bus: {e}");
                    }
                    Err(_) => {
                        tracing::debug!(redis = %store.shown(), "cluster bus: no answer");
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_parse_into_messages() {
        let d = "sluice:c:r:abc";
        assert_eq!(
            parse("sluice:c:ev", "h1 42".into(), d),
            Some(BusMsg::Event {
                handle: "h1".into(),
                seq: 42
            })
        );
        assert_eq!(
            parse("sluice:c:end", "h1".into(), d),
            Some(BusMsg::Ended("h1".into()))
        );
        assert_eq!(
            parse("sluice:c:state", "h1\nsub:file:///a b\n1".into(), d),
            Some(BusMsg::State {
                handle: "h1".into(),
                field: "sub:file:///a b".into(),
                value: Some("1".into())
            })
        );
        assert_eq!(
            parse("sluice:c:state", "h1\nsub:x".into(), d),
            Some(BusMsg::State {
                handle: "h1".into(),
                field: "sub:x".into(),
                value: None
            })
        );
        assert_eq!(parse("sluice:c:state", "h1".into(), d), None);
        assert_eq!(parse(d, "{}".into(), d), Some(BusMsg::Direct("{}".into())));
        // A principal is everything after the upstream, spaces and all.
        assert_eq!(
            parse("sluice:c:revoke", "r1 crm jwt:Ann Lee".into(), d),
            Some(BusMsg::Revoked {
                from: "r1".into(),
                upstream: "crm".into(),
                principal: "jwt:Ann Lee".into()
            })
        );
        assert_eq!(parse("sluice:c:revoke", "r1 crm".into(), d), None);
        assert_eq!(
            parse("sluice:c:lists", "r1 fx".into(), d),
            Some(BusMsg::Lists {
                from: "r1".into(),
                upstream: "fx".into(),
                session: None
            })
        );
        assert_eq!(
            parse("sluice:c:lists", "r1 fx s1abc".into(), d),
            Some(BusMsg::Lists {
                from: "r1".into(),
                upstream: "fx".into(),
                session: Some("s1abc".into())
            })
        );
        assert_eq!(
            parse("sluice:c:cancel", "{}".into(), d),
            Some(BusMsg::Cancelled("{}".into()))
        );
        assert_eq!(parse("sluice:c:ev", "h1 x".into(), d), None);
        assert_eq!(parse("other", "x".into(), d), None);
    }
}
