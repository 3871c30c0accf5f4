//! A loopback listener for one OAuth callback: `sluice client` and `sluice upstream login`
//! wait on it for the authorization server to send the person back, hand the query on, and
//! answer the browser with a short page (never a token or code).

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use futures_util::future::BoxFuture;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// What the page says after a callback: given the query, the heading and the text.
pub(crate) type Answer = Arc<dyn Fn(String) -> BoxFuture<'static, (bool, String)> + Send + Sync>;

/// Serve `path` on `listener` until the first callback that `answer` accepts (it returns true)
/// or the end of the task; each callback's query goes to `answer`, whose text the page shows.
pub(crate) fn serve(listener: TcpListener, path: &str, answer: Answer) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel::<String>(4);
    let app = Router::new()
        .route(path, get(handle))
        .with_state((answer, tx.clone()));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { tx.closed().await })
            .await;
    });
    rx
}

async fn handle(
    State((answer, tx)): State<(Answer, mpsc::Sender<String>)>,
    uri: Uri,
) -> impl IntoResponse {
    let query = uri.query().unwrap_or("").to_string();
    let (done, text) = answer(query.clone()).await;
    if done {
        let _ = tx.send(query).await;
    }
    let esc = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let title = if done { "Signed in" } else { "Sign-in failed" };
    (
        if done {
            StatusCode::OK
        } else {
            StatusCode::BAD_REQUEST
        },
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        format!(
            "<!doctype html><meta charset=utf-8><title>{title}</title><body style=\"font-family:sans-serif;margin:3em\"><h1>{title}</h1><p>{esc}</p></body>"
        ),
    )
}

/// Open `url` for the person: with `open_with` (a shell command; the URL is its last
/// argument), else the desktop's opener unless `no_browser`. Failing to open is not an error:
/// the URL is printed anyway.
pub(crate) fn open(url: &str, open_with: Option<&str>, no_browser: bool) {
    let mut cmd = match (open_with, no_browser) {
        (Some(c), _) => {
            let mut cmd = std::process::Command::new("sh");
            cmd.arg("-c").arg(format!("{c} \"$1\"")).arg("sh").arg(url);
            cmd
        }
        (None, true) => return,
        (None, false) => {
            let opener = if cfg!(target_os = "macos") {
                "open"
            } else {
                "xdg-open"
            };
            let mut cmd = std::process::Command::new(opener);
            cmd.arg(url);
            cmd
        }
    };
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Ok(mut child) = cmd.spawn() {
        std::thread::spawn(move || child.wait());
    }
}
