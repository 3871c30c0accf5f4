//! The admin API's views of the traffic: the recent exchanges, the live stream of them
//! (server-sent events) and the audit log search. Each exchange is shown as its audit line's
//! JSON ([`sluice_telemetry::Exchange`] serialized).

use super::Admin;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use percent_encoding::percent_decode_str;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

type S = State<Arc<Admin>>;

/// The traffic routes (`/api/traffic`, `/api/traffic/recent`, `/api/logs`).
pub(crate) fn routes() -> Router<Arc<Admin>> {
    Router::new()
        .route("/api/traffic", get(traffic_stream))
        .route("/api/traffic/recent", get(traffic_recent))
        .route("/api/logs", get(logs))
}

async fn traffic_recent(State(admin): S) -> Response {
    let events: Vec<Value> = admin
        .metrics
        .recent()
        .iter()
        .map(|e| e.to_value())
        .collect();
    Json(json!({"events": events})).into_response()
}

/// Live traffic as server-sent events: one `data:` line per exchange, a comment every 15 s.
async fn traffic_stream(State(admin): S) -> Response {
    let rx = admin.st.rt.traffic().subscribe();
    let st = admin.st.clone();
    let stream = futures_util::stream::unfold((rx, st), |(mut rx, st)| async move {
        use tokio::sync::broadcast::error::RecvError;
        let next = tokio::select! {
            r = rx.recv() => r,
            _ = tokio::time::sleep(Duration::from_secs(15)) => {
                return Some((Ok::<Bytes, std::convert::Infallible>(Bytes::from_static(b": keepalive\n\n")), (rx, st)));
            }
            _ = st.rt.shutdown().cancelled() => return None,
        };
        let chunk = match next {
            Ok(ev) => format!("data: {}\n\n", ev.to_line()),
            Err(RecvError::Lagged(n)) => format!("event: lagged\ndata: {n}\n\n"),
            Err(RecvError::Closed) => return None,
        };
        Some((Ok(Bytes::from(chunk)), (rx, st)))
    });
    let prime = futures_util::stream::once(async {
        Ok::<Bytes, std::convert::Infallible>(Bytes::from_static(b": connected\n\n"))
    });
    use futures_util::StreamExt;
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(prime.chain(stream)))
        .expect("a response")
}

fn query(raw: Option<String>) -> Map<String, Value> {
    let mut m = Map::new();
    for pair in raw.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        m.insert(decode(k), json!(decode(v)));
    }
    m
}

/// Percent-decoding (and `+` as space) of a query component.
fn decode(s: &str) -> String {
    percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// Search the audit log: `?tool=&session=&outcome=&since=&until=&q=&limit=` (times as
/// RFC 3339 prefixes, compared as text; `q` is a substring of the line). Newest first.
async fn logs(State(admin): S, RawQuery(raw): RawQuery) -> Response {
    let q = query(raw);
    let get = |k: &str| {
        q.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let limit = get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(200)
        .min(5000);
    let config = admin.st.snapshot().config.clone();
    let path = config.logs.path.clone();
    let text = match tokio::fs::read_to_string(&path).await {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            let error = format!("{}: {e}", path.display());
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({ "error": error })),
            )
                .into_response();
        }
    };
    let (tool, session, outcome, since, until, needle) = (
        get("tool"),
        get("session"),
        get("outcome"),
        get("since"),
        get("until"),
        get("q"),
    );
    let mut out = Vec::new();
    let mut scanned = 0usize;
    for line in text.lines().rev() {
        scanned += 1;
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let field = |k: &str| v[k].as_str().unwrap_or("").to_string();
        if tool
            .as_ref()
            .is_some_and(|t| !field("tool").contains(t.as_str()))
            || session
                .as_ref()
                .is_some_and(|s| !field("session").starts_with(s.as_str()))
            || outcome.as_ref().is_some_and(|o| field("outcome") != *o)
            || since
                .as_ref()
                .is_some_and(|s| field("time").as_str() < s.as_str())
            || until
                .as_ref()
                .is_some_and(|u| field("time").as_str() > u.as_str())
            || needle.as_ref().is_some_and(|n| !line.contains(n.as_str()))
        {
            continue;
        }
        out.push(v);
        if out.len() >= limit {
            break;
        }
    }
    Json(json!({
        "enabled": config.logs.enabled, "path": path, "events": out, "scanned": scanned,
        "editable": admin.opts.editable,
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn decodes_query_components() {
        assert_eq!(super::decode("a%20b+c%2Fd"), "a b c/d");
        assert_eq!(super::decode("100%"), "100%");
        assert_eq!(super::decode("%zz"), "%zz");
        assert_eq!(super::decode("a%2Bb+%e2%82%ac"), "a+b €");
    }
}
