//! The GET stream of the Streamable HTTP face (2025-11-25): attach a session's single GET stream
//! (a second one at the same time is 409), resume a stream from `Last-Event-ID`, and in a cluster
//! feed it from the store or have the replica that ran a POST stream replay it. The rest of the
//! face (POST, DELETE, opening sessions) is in `http.rs`, finding them in `http_session.rs`.

use super::http_session::{find_session, store_unavailable};
use super::rules::{self, accepts_all};
use crate::http_parts::{header_str, json_error, sse_headers, KEEPALIVE};
use crate::session::Session;
use crate::state::State;
use crate::stream::StreamBuf;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sluice_core::{Principal, RpcError};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(super) async fn get(
    st: &Arc<State>,
    headers: HeaderMap,
    principal: Option<Arc<Principal>>,
    endpoint: Option<&str>,
) -> Response {
    if !accepts_all(&headers, ["text/event-stream"]) {
        return json_error(
            StatusCode::NOT_ACCEPTABLE,
            RpcError::invalid_request("Accept must list text/event-stream"),
            None,
        );
    }
    if let Err(r) = rules::check_version(&headers) {
        return r;
    }
    let session = match find_session(st, &headers, principal, endpoint).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let Some(http) = session.http() else {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    };
    // In a cluster the GET stream's events are in the store, whichever replica added them.
    if let Err(e) = st.rt.scale().feed(&session).await {
        return store_unavailable(&e.0);
    }
    // Resumption: replay the stream the event id names, after that event.
    if let Some(last) = header_str(&headers, sluice_core::headers::LAST_EVENT_ID) {
        let Some((stream, seq)) = StreamBuf::parse_event_id(last) else {
            return json_error(
                StatusCode::BAD_REQUEST,
                RpcError::invalid_request(format!("malformed Last-Event-ID {last:?}")),
                None,
            );
        };
        let local = http.stream(stream);
        // In a cluster a POST stream lives on the replica that ran the request: it replays it.
        if local.is_none() {
            if let Some(r) = st.rt.scale().replay_elsewhere(&session, stream, last).await {
                return r;
            }
        }
        let Some(buf) = local else {
            return json_error(
                StatusCode::NOT_FOUND,
                RpcError::invalid_request(format!(
                    "no stream to resume for Last-Event-ID {last:?}"
                )),
                None,
            );
        };
        if stream == 0 {
            return attach_get(st, &session, buf, seq, true);
        }
        return sse_headers(
            Body::from_stream(buf.reader(seq, false, KEEPALIVE, None)).into_response(),
        );
    }
    let after = http.get_delivered.load(Ordering::SeqCst);
    attach_get(st, &session, http.get.clone(), after, false)
}

/// Attach the (single) GET stream; a second one at the same time is 409. It ends when the
/// listener starts draining (clients reconnect elsewhere).
fn attach_get(
    st: &State,
    session: &Arc<Session>,
    buf: Arc<StreamBuf>,
    after: u64,
    takeover: bool,
) -> Response {
    static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let gen = GENERATION.fetch_add(1, Ordering::Relaxed);
    let Some(http) = session.http() else {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    };
    let mut refused = false;
    http.get_owner().send_if_modified(|owner| {
        if *owner != 0 && !takeover {
            refused = true;
            return false;
        }
        *owner = gen;
        true
    });
    if refused {
        return json_error(
            StatusCode::CONFLICT,
            RpcError::invalid_request("a GET stream is already open for this session"),
            None,
        );
    }
    /// Releases the GET slot when this stream ends (unless another took it over).
    struct Detach(Arc<Session>, u64);
    impl Drop for Detach {
        fn drop(&mut self) {
            let gen = self.1;
            let Some(http) = self.0.http() else { return };
            let released = http.get_owner().send_if_modified(|owner| {
                if *owner == gen {
                    *owner = 0;
                    true
                } else {
                    false
                }
            });
            // In a cluster, a new GET stream on another replica starts after what this one
            // delivered.
            if let (true, Some(sh)) = (released, &self.0.shared) {
                let delivered = http.get_delivered.load(Ordering::SeqCst).to_string();
                let (store, handle) = (sh.store.clone(), sh.handle.clone());
                tokio::spawn(async move {
                    let _ = store.set(&handle, "gd", &delivered).await;
                });
            }
        }
    }
    let guard = Detach(session.clone(), gen);
    let mut owner = http.get_owner().subscribe();
    let draining = st.rt.draining().clone();
    let replaced = async move {
        tokio::select! {
            _ = owner.wait_for(|o| *o != gen) => {}
            () = draining.cancelled() => {}
        }
    };
    use futures_util::StreamExt;
    let progress = Some(http.get_delivered.clone());
    let stream = buf
        .reader(after, false, KEEPALIVE, progress)
        .take_until(replaced)
        .map(move |item| {
            let _keep = &guard;
            item
        });
    sse_headers(Body::from_stream(stream).into_response())
}
