//! The downstream stdio transport: one client on stdin/stdout, one JSON message per line.
//! Nothing but protocol is written to stdout; the gateway stops when stdin closes.

use crate::channel::{Out, Outcome};
use crate::control;
use crate::modern::rounds::Rounds;
use crate::proxy;
use crate::session::{Init, Outbound, Session};
use crate::state::State;
use futures_util::StreamExt;
use serde_json::{json, Value};
use sluice_core::{version, Kind, Message, RpcError};
use sluice_upstream::framing::{Line, LineCodec};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Serve one client over the given reader and writer until the reader ends, on `endpoint`
/// (`mcp/endpoints.json`'s; `None`: what `/mcp` serves).
pub(crate) async fn serve<R, W>(
    st: Arc<State>,
    rounds: Arc<Rounds>,
    endpoint: Option<Arc<str>>,
    input: R,
    output: W,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Out>();
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(out) = out_rx.recv().await {
            // Stream signals mean nothing on stdio.
            let Out::Msg(msg) = out else { continue };
            let mut line = msg.to_json();
            line.push('\n');
            if output.write_all(line.as_bytes()).await.is_err() {
                break;
            }
            if out_rx.is_empty() && output.flush().await.is_err() {
                break;
            }
        }
        let _ = output.flush().await;
    });

    let mut session: Option<Arc<Session>> = None;
    // Modern-era requests (no initialize; `_meta` on each) are served beside, until a legacy
    // client initialises.
    let modern = super::stdio_modern::Stdio::on(endpoint.clone());
    let limit = st.snapshot().settings().max_body_bytes as usize;
    // Bounded lines: one over the limit is answered as soon as it passes the limit, and the rest
    // of it is discarded unread; one that is not UTF-8 fails to parse (-32700) like any bad JSON.
    let mut lines = sluice_upstream::framing::read_lines(input, LineCodec::new(limit));
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let line = match lines.next().await {
            Some(Ok(Line::Full(l))) => l,
            Some(Ok(Line::TooLong(_))) => {
                let err =
                    RpcError::invalid_request(format!("the message is larger than {limit} bytes"));
                send_out(&out_tx, Message::error(Value::Null, &err));
                continue;
            }
            None => break,
            Some(Err(e)) => {
                tracing::warn!("reading stdin failed: {e}");
                break;
            }
        };
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let msg = match proxy::parse_client(&st.snapshot(), line) {
            Ok(m) => m,
            Err(e) => {
                send_out(
                    &out_tx,
                    Message::error(e.id.clone().unwrap_or(Value::Null), &e.error),
                );
                continue;
            }
        };
        if session.is_none() && modern.wants(&msg) {
            modern.handle(&st, &rounds, msg, &out_tx);
            continue;
        }
        let Some(s) = session.clone() else {
            match (msg.kind(), msg.method()) {
                (Kind::Request, Some("initialize")) => {
                    let params = msg.params().cloned().unwrap_or(Value::Null);
                    let version =
                        version::negotiate(params.get("protocolVersion").and_then(Value::as_str));
                    let s = Arc::new(Session::new(
                        "stdio".into(),
                        Init::of_initialize(&params, version).on_endpoint(endpoint.as_deref()),
                        Outbound::Stdio(out_tx.clone()),
                    ));
                    // The process that started Sluice: the local user, trusted by the OS.
                    s.set_principal(Some(Arc::new(sluice_core::Principal::stdio())));
                    match proxy::initialize(&st, &s, msg, version).await {
                        Ok(reply) => {
                            send_out(&out_tx, reply);
                            st.rt.sessions().add(s.clone());
                            session = Some(s);
                        }
                        // Refused by a hook: still not initialised.
                        Err(reply) => send_out(&out_tx, reply),
                    }
                }
                (Kind::Request, Some("ping")) => {
                    send_out(
                        &out_tx,
                        Message::response(msg.id().cloned().unwrap_or(Value::Null), json!({})),
                    );
                }
                (Kind::Request, _) => {
                    let err = RpcError::invalid_request(
                        "the session is not initialised: send initialize first",
                    );
                    send_out(
                        &out_tx,
                        Message::error(msg.id().cloned().unwrap_or(Value::Null), &err),
                    );
                }
                _ => tracing::debug!("message before initialize ignored"),
            }
            continue;
        };
        s.touch();
        match msg.kind() {
            Kind::Notification | Kind::Response | Kind::Error => {
                proxy::client_message(&st, &s, msg).await
            }
            Kind::Request => {
                let st = st.clone();
                let out = out_tx.clone();
                tasks.spawn(async move {
                    let snap = st.snapshot_for(&s);
                    match proxy::client_request(&st, &snap, &s, msg, &out).await {
                        Outcome::Reply(r) => {
                            let _ = out.send(Out::Msg(r));
                        }
                        Outcome::Cancelled(_) => {}
                    }
                });
            }
        }
        while tasks.try_join_next().is_some() {}
    }
    tracing::info!("stdin closed; shutting down");
    tasks.abort_all();
    drop(session);
    drop(out_tx);
    control::shutdown(&st).await;
    // Every sender is gone once the session is dropped; the writer flushes and ends.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
}

fn send_out(tx: &mpsc::UnboundedSender<Out>, msg: Message) {
    let _ = tx.send(Out::Msg(msg));
}
