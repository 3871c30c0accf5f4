//! A connection's events, handed to the gateway in order: replies resolve here (the hot path),
//! list_changed re-lists (the control connection's lists, or a session's own), everything else
//! is a [`SlotEvent`] the gateway handles before the connection's next event.

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

/// Hand a connection's events to the gateway until it closes: replies resolve here, behind
/// every earlier event the gateway is still handling.
pub(crate) async fn pump(
    slot: Arc<Slot>,
    conn: Connection,
    owner: Option<Arc<str>>,
    mut rx: mpsc::UnboundedReceiver<Event>,
) {
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Message(incoming) => {
                let method = incoming.msg.method().unwrap_or("");
                if let Some(said) = list_changed(method) {
                    // Re-listing calls this same connection, whose replies this pump resolves:
                    // do it beside, not here. A session's own connection re-lists for it.
                    match &owner {
                        None => {
                            tokio::spawn(slot.clone().refresh_lists(said));
                        }
                        Some(id) => {
                            tokio::spawn(slot.clone().refresh_session_lists(
                                id.clone(),
                                conn.clone(),
                                said,
                            ));
                        }
                    }
                } else if method == "notifications/subscriptions/acknowledged" {
                    // A 2026-07-28 upstream accepted one of Sluice's own listen streams.
                    tracing::debug!(upstream = %slot.spec.id, "listen stream acknowledged: {}", incoming.msg.to_json());
                } else {
                    hand_over(&slot, |done| SlotEvent::Message {
                        slot: slot.clone(),
                        conn: conn.clone(),
                        owner: owner.clone(),
                        incoming,
                        done,
                    })
                    .await;
                }
            }
            // The hot path: a reply resolves here, with nothing handed over.
            Event::Reply(msg) => conn.resolve(msg),
            Event::Stream {
                related,
                paused,
                retry,
            } => {
                hand_over(&slot, |done| SlotEvent::Stream {
                    conn: conn.clone(),
                    related,
                    paused,
                    retry,
                    done,
                })
                .await
            }
            Event::Closed(_) => break,
        }
        conn.event_done();
    }
}

/// Hand one event to the gateway and wait until it is handled (the `Done` it carries dropped).
async fn hand_over(slot: &Slot, build: impl FnOnce(Done) -> SlotEvent) {
    let (tx, handled) = oneshot::channel();
    if slot.env_events().send(build(Done(Some(tx)))).is_ok() {
        let _ = handled.await;
    }
}
