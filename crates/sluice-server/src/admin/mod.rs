//! The admin listener: a loopback HTTP server, separate from the MCP one, with the web page
//! (`/`), the JSON management API (`/api/…`), Prometheus metrics (`/metrics`) and health
//! (`/healthz`, `/readyz`).
//!
//! ```text
//! /               the page (static, embedded)      no token
//! /healthz        the process is up                no token
//! /readyz         config loaded, upstreams and the   no token (503 names what is not ready)
//!                 cluster store up
//! /metrics        Prometheus text                  Authorization: Bearer <token>
//! /api/…          management and live data          Authorization: Bearer <token>
//! ```
//!
//! Every edit goes through `sluice_config::manage` (the same functions as the CLI: validated on
//! a staged copy, written atomically) and is then applied through the one apply path (`control::apply_tree`).
//! An OAuth upstream's sign-in starts here (`POST /api/upstreams/connect` answers the
//! authorization URL the page opens) and finishes on the MCP listener's `/oauth/callback`
//! (`upstream_oauth.rs`), the redirect URI the authorization server knows. Users' own
//! connections to per-user upstreams are listed and ended in `connections.rs`.

pub(crate) mod api;
pub(crate) mod assets;
mod connections;
pub(crate) mod metrics;
mod pins;
mod reply;
pub(crate) mod traffic;
mod upstreams;

use crate::state::State as GatewayState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::json;
use sluice_upstream::Status;
use std::sync::Arc;

pub use sluice_telemetry::Metrics;

/// How the admin listener runs.
#[derive(Debug, Clone)]
pub struct AdminOptions {
    /// The token every API and metrics request must carry (`Authorization: Bearer …`).
    pub token: String,
    /// Can the tree be edited (the gateway serves a `--home` tree)? Without one, management
    /// requests answer 409.
    pub editable: bool,
}

/// The admin listener's shared state.
pub struct Admin {
    /// The gateway watched and steered.
    pub(crate) st: Arc<GatewayState>,
    /// Counters fed by the traffic events.
    pub(crate) metrics: Arc<Metrics>,
    /// The options.
    pub(crate) opts: AdminOptions,
}

impl Admin {
    /// Count the gateway's exchanges from now on (each in the thread that served it); the
    /// MCP duration histograms are recorded from now on too (`/metrics` shows them). A second
    /// admin listener of the same gateway shares the first one's counters.
    pub(crate) fn start(st: Arc<GatewayState>, opts: AdminOptions) -> Arc<Admin> {
        sluice_telemetry::mcp_metrics::global().set_recording(true);
        let metrics = st.rt.counted().get_or_init(Arc::default).clone();
        Arc::new(Admin { st, metrics, opts })
    }
}

/// A fresh random admin token (256 bits, hex).
pub fn generate_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Compare without leaking where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `/api/…` and `/metrics` need the token; the page's static files and health do not.
async fn require_token(State(admin): State<Arc<Admin>>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if !(path.starts_with("/api/") || path == "/metrics") {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(t) if same(t.as_bytes(), admin.opts.token.as_bytes()) => next.run(req).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"sluice-admin\""),
            )],
            axum::Json(json!({"error": "the admin token is missing or wrong (Authorization: Bearer <token>)"})),
        )
            .into_response(),
    }
}

/// The admin router.
pub(crate) fn router(admin: Arc<Admin>) -> Router {
    Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::script))
        .route("/app.css", get(assets::style))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .merge(api::routes())
        .merge(pins::routes())
        .merge(connections::routes())
        .merge(traffic::routes())
        .layer(axum::middleware::from_fn_with_state(
            admin.clone(),
            require_token,
        ))
        .with_state(admin)
}

/// Serve the admin listener until `shutdown` resolves.
pub async fn serve(
    admin: Arc<Admin>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(admin))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn healthz() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

async fn readyz(State(admin): State<Arc<Admin>>) -> Response {
    let mut not_ready = Vec::new();
    let mut waiting = Vec::new();
    for slot in admin.st.snapshot().slots.iter().filter(|s| s.spec.enabled) {
        // An upstream waiting for a person to sign in does not make the gateway unready: it
        // serves everything else, and must stay reachable for the sign-in's callback.
        if let Some(sluice_oauth::Status::NeedsLogin(why)) = slot.identity().map(|i| i.status()) {
            if !slot.is_up() {
                waiting.push(json!({"upstream": slot.spec.id, "reason": why}));
                continue;
            }
        }
        let (status, reason) = match slot.status() {
            Status::Up => continue,
            Status::Down(r) => ("down", Some(r)),
            Status::Starting => ("starting", None),
            Status::Disabled => continue,
        };
        not_ready.push(json!({"upstream": slot.spec.id, "status": status, "reason": reason}));
    }
    if let Some((redis, reason)) = admin.st.rt.scale().store_down() {
        not_ready
            .push(json!({"cluster": "redis", "redis": redis, "status": "down", "reason": reason}));
    }
    let ready = not_ready.is_empty() && !crate::control::is_shutting_down(&admin.st);
    let body = json!({
        "ready": ready,
        "config": "loaded",
        "last_reload_error": admin.st.rt.reloads().last_error.lock().clone(),
        "not_ready": not_ready,
        "needs_login": waiting,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

async fn metrics_text(State(admin): State<Arc<Admin>>) -> Response {
    let text = admin.metrics.render(&metrics::gauges(&admin.st));
    Response::builder()
        .header(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )
        .body(Body::from(text))
        .expect("a response")
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_are_long_and_compared_exactly() {
        let t = super::generate_token();
        assert_eq!(t.len(), 64);
        assert_ne!(t, super::generate_token());
        assert!(super::same(t.as_bytes(), t.clone().as_bytes()));
        assert!(!super::same(t.as_bytes(), &t.as_bytes()[1..]));
        assert!(!super::same(b"abc", b"abd"));
    }
}
