//! The `subscriptions/listen` streams of 2026-07-28 clients: which notifications each asked
//! for (list changes, updates of resource URIs), and sending them those.

use parking_lot::Mutex;
use serde_json::json;
use sluice_core::version::meta;
use sluice_core::Message;
use std::collections::HashSet;
use tokio::sync::mpsc;

/// One `subscriptions/listen` stream.
pub struct Listener {
    /// The listen request's id (each notification names it in `_meta`).
    pub id: serde_json::Value,
    /// Wants tools/list_changed.
    pub tools: bool,
    /// Wants prompts/list_changed.
    pub prompts: bool,
    /// Wants resources/list_changed.
    pub resources: bool,
    /// Resource URIs whose updates this stream asked for.
    pub uris: HashSet<String>,
    /// The stream.
    pub tx: mpsc::UnboundedSender<Message>,
}

/// Every open listen stream.
#[derive(Default)]
pub struct Listeners(Mutex<Vec<Listener>>);

impl Listeners {
    /// Register a stream.
    pub fn add(&self, l: Listener) {
        self.0.lock().push(l);
    }

    /// End every listen stream (the listener is draining: clients reconnect elsewhere).
    pub fn close_all(&self) {
        self.0.lock().clear();
    }

    /// Send a list_changed notification to the listen streams that asked for it.
    pub fn announce(&self, method: &str) {
        let mut listeners = self.0.lock();
        listeners.retain(|l| !l.tx.is_closed());
        for l in listeners.iter() {
            let wanted = match method {
                "notifications/tools/list_changed" => l.tools,
                "notifications/prompts/list_changed" => l.prompts,
                "notifications/resources/list_changed" => l.resources,
                _ => false,
            };
            if wanted {
                let _ = l.tx.send(Message::notification(
                    method,
                    Some(json!({"_meta": {meta::SUBSCRIPTION_ID: l.id}})),
                ));
            }
        }
    }

    /// Send `notifications/resources/updated` for `uri` to the listen streams that asked for it.
    pub fn resource_updated(&self, uri: &str) {
        let mut listeners = self.0.lock();
        listeners.retain(|l| !l.tx.is_closed());
        for l in listeners.iter().filter(|l| l.uris.contains(uri)) {
            let _ = l.tx.send(Message::notification(
                "notifications/resources/updated",
                Some(json!({"uri": uri, "_meta": {meta::SUBSCRIPTION_ID: l.id}})),
            ));
        }
    }
}
