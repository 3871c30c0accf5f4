//! The `subscriptions/listen` streams of 2026-07-28 clients: which notifications each asked
//! for (list changes, updates of resource URIs), and sending them those.

use parking_lot::Mutex;
use serde_json::json;
use sluice_core::version::meta;
use sluice_core::Message;
use std::collections::HashSet;
use tokio::sync::mpsc;

/// One `subscriptions/listen` stream.
pub(crate) struct Listener {
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
    /// The catalog version the stream began on: changes up to it are nothing to announce
    /// (the gateway announces a change after it is in force, so one made just before the stream
    /// opened may still be on its way).
    pub since: u64,
    /// The stream.
    pub tx: mpsc::UnboundedSender<Message>,
    /// The endpoint of `mcp/endpoints.json` it was opened on (`None`: `/mcp`): it hears that
    /// endpoint's list changes only.
    pub endpoint: Option<std::sync::Arc<str>>,
}

/// Every open listen stream.
#[derive(Default)]
pub(crate) struct Listeners(Mutex<Vec<Listener>>);

impl Listeners {
    /// Register a stream.
    pub(crate) fn add(&self, l: Listener) {
        self.0.lock().push(l);
    }

    /// End every listen stream (the listener is draining: clients reconnect elsewhere).
    pub(crate) fn close_all(&self) {
        self.0.lock().clear();
    }

    /// End the listen streams opened on endpoints a reload removed (`gone`): their senders are
    /// dropped, so each stream ends, as the endpoint's sessions do.
    pub(crate) fn close_endpoints(&self, gone: &[String]) {
        self.0.lock().retain(|l| {
            !l.endpoint
                .as_deref()
                .is_some_and(|e| gone.iter().any(|g| g == e))
        });
    }

    /// Send a list_changed notification, of the change that made catalog `version` in the
    /// lists of `endpoint` (`None`: `/mcp`), to the listen streams opened there that asked for
    /// it and began on an older catalog.
    pub(crate) fn announce(&self, method: &str, version: u64, endpoint: Option<&str>) {
        let mut listeners = self.0.lock();
        listeners.retain(|l| !l.tx.is_closed());
        let here = |l: &&Listener| l.since < version && l.endpoint.as_deref() == endpoint;
        for l in listeners.iter().filter(here) {
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
    pub(crate) fn resource_updated(&self, uri: &str) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(since: u64) -> (Listener, mpsc::UnboundedReceiver<Message>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let l = Listener {
            id: json!(7),
            tools: true,
            prompts: false,
            resources: false,
            uris: HashSet::new(),
            since,
            tx,
            endpoint: None,
        };
        (l, rx)
    }

    #[test]
    fn closing_an_endpoint_ends_its_streams_only() {
        let all = Listeners::default();
        let (root, mut root_rx) = listener(1);
        let (mut support, mut support_rx) = listener(1);
        support.endpoint = Some("support".into());
        let (mut coding, mut coding_rx) = listener(1);
        coding.endpoint = Some("coding".into());
        all.add(root);
        all.add(support);
        all.add(coding);
        all.close_endpoints(&["support".to_string()]);
        assert!(matches!(
            support_rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        for rx in [&mut root_rx, &mut coding_rx] {
            assert!(matches!(
                rx.try_recv(),
                Err(mpsc::error::TryRecvError::Empty)
            ));
        }
        all.announce("notifications/tools/list_changed", 2, Some("coding"));
        assert!(coding_rx.try_recv().is_ok());
    }

    #[test]
    fn a_change_reaches_only_streams_that_began_before_it() {
        let all = Listeners::default();
        let (old, mut old_rx) = listener(3);
        let (new, mut new_rx) = listener(5);
        all.add(old);
        all.add(new);
        all.announce("notifications/tools/list_changed", 5, None);
        let got = old_rx
            .try_recv()
            .expect("the older stream hears of version 5");
        assert_eq!(got.method(), Some("notifications/tools/list_changed"));
        let got: serde_json::Value = serde_json::from_str(&got.to_json()).unwrap();
        assert_eq!(got["params"], json!({"_meta": {meta::SUBSCRIPTION_ID: 7}}));
        assert!(new_rx.try_recv().is_err(), "the stream began on version 5");
        // Lists the streams did not ask for are not sent.
        all.announce("notifications/prompts/list_changed", 6, None);
        assert!(old_rx.try_recv().is_err());
        assert!(new_rx.try_recv().is_err());
        // An endpoint's changes are not theirs.
        all.announce("notifications/tools/list_changed", 6, Some("support"));
        assert!(old_rx.try_recv().is_err());
        all.announce("notifications/tools/list_changed", 6, None);
        assert!(old_rx.try_recv().is_ok());
        assert!(new_rx.try_recv().is_ok());
    }
}
