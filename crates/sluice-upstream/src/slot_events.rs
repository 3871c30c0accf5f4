//! What a slot's connection events mean: a list_changed re-lists (the control connection's
//! lists, or the owning session's own), an acknowledgement is logged, everything else becomes a
//! [`SlotEvent`] the gateway handles before the connection's next event (see [`crate::pump`]).

use crate::pump::pump;
use crate::slot::{Done, Slot, SlotEvent};
use crate::{Connection, Event};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// The list_changed notifications an upstream may send, as the static names clients get.
fn list_changed(method: &str) -> Option<&'static str> {
    match method {
        "notifications/tools/list_changed" => Some("notifications/tools/list_changed"),
        "notifications/prompts/list_changed" => Some("notifications/prompts/list_changed"),
        "notifications/resources/list_changed" => Some("notifications/resources/list_changed"),
        _ => None,
    }
}

impl Slot {
    /// Pump `conn`'s events (see [`pump`]): list_changed re-lists (the control connection's
    /// lists, or the owning session's own), everything else is a [`SlotEvent`] the gateway
    /// handles before the connection's next event.
    pub(crate) fn pump(
        self: &Arc<Self>,
        conn: Connection,
        owner: Option<Arc<str>>,
        rx: mpsc::UnboundedReceiver<Event>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let slot = self.clone();
        let on = conn.clone();
        pump(conn, rx, move |ev| slot.on_event(&on, &owner, ev))
    }

    /// One event of `conn` (not a reply): what to wait for before its next one.
    fn on_event(
        self: &Arc<Self>,
        conn: &Connection,
        owner: &Option<Arc<str>>,
        ev: Event,
    ) -> Option<oneshot::Receiver<()>> {
        let (tx, handled) = oneshot::channel();
        let done = Done(Some(tx));
        let ev = match ev {
            Event::Message(incoming) => {
                let method = incoming.msg.method().unwrap_or("");
                if let Some(said) = list_changed(method) {
                    // Re-listing calls this same connection, whose replies the pump resolves:
                    // do it beside, not in line. A session's own connection re-lists for it.
                    match owner {
                        None => {
                            tokio::spawn(self.clone().refresh_lists(said));
                        }
                        Some(id) => {
                            tokio::spawn(self.clone().refresh_session_lists(
                                id.clone(),
                                conn.clone(),
                                said,
                            ));
                        }
                    }
                    return None;
                }
                if method == "notifications/subscriptions/acknowledged" {
                    // A 2026-07-28 upstream accepted one of Sluice's own listen streams.
                    tracing::debug!(upstream = %self.spec.id, "listen stream acknowledged: {}", incoming.msg.to_json());
                    return None;
                }
                SlotEvent::Message {
                    slot: self.clone(),
                    conn: conn.clone(),
                    owner: owner.clone(),
                    incoming,
                    done,
                }
            }
            Event::Stream {
                related,
                paused,
                retry,
            } => SlotEvent::Stream {
                conn: conn.clone(),
                related,
                paused,
                retry,
                done,
            },
            Event::Reply(_) | Event::Closed(_) => return None,
        };
        self.env_events().send(ev).ok().map(|_| handled)
    }
}
