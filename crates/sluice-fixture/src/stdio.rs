//! The stdio transport: one JSON-RPC message per line on stdin/stdout, logs on stderr; returns
//! when stdin closes. Both eras share the one peer: a request carrying the modern `_meta`
//! envelope (or `server/discover`) is served as 2026-07-28, anything else as the handshake era.

use std::io::Write;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::handlers;
use crate::protocol::{self, Incoming, RpcError, MODERN_VERSION};
use crate::session::{Era, EraMode, Fixture, ModernReq, Out, Session};

/// Write one message as a line on stdout (errors, e.g. a closed pipe, are ignored).
fn write_message(msg: &Value) {
    let mut line = msg.to_string();
    line.push('\n');
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
}

/// The era request `method` with `params` is served in, or the error to answer it with.
pub(crate) fn classify(fixture: &Fixture, method: &str, params: &Value) -> Result<Era, RpcError> {
    let era = fixture.config.era;
    let modern = match era {
        EraMode::Legacy => false,
        EraMode::Modern => true,
        EraMode::Both => method == "server/discover" || protocol::has_modern_envelope(params),
    };
    if !modern {
        return Ok(Era::Legacy);
    }
    if era == EraMode::Modern && method == "initialize" && !protocol::has_modern_envelope(params) {
        // A modern-only server names the versions it speaks to a legacy client.
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(RpcError::unsupported_version(requested, &[MODERN_VERSION]));
    }
    let meta = protocol::parse_modern_meta(params)?;
    protocol::check_modern_version(&meta.version, &fixture.supported_versions())?;
    if !fixture.serves_modern(method) {
        return Err(RpcError::method_not_found(method));
    }
    Ok(Era::Modern(Box::new(ModernReq::new(meta, method, params))))
}

/// Serve one client on stdin/stdout until stdin closes.
pub(crate) async fn run(fixture: Arc<Fixture>) -> std::io::Result<()> {
    let session = Session::new(
        fixture.clone(),
        None,
        Box::new(|msg| {
            write_message(&msg);
            None
        }),
    );
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if stdin.read_until(b'\n', &mut buf).await? == 0 {
            eprintln!("sluice-fixture: stdin closed, exiting");
            return Ok(());
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match protocol::parse(&buf) {
            Err(error) => write_message(&error),
            Ok(Incoming::Request { id, method, params }) => {
                let era = match classify(&fixture, &method, &params) {
                    Ok(era) => era,
                    Err(e) => {
                        write_message(&protocol::error_response(&id, &e));
                        continue;
                    }
                };
                let mut rx = handlers::spawn_request(&session, id, method, params, era);
                tokio::spawn(async move {
                    while let Some(out) = rx.recv().await {
                        match out {
                            Out::Message(msg) => write_message(&msg),
                            Out::CloseStream => {}
                            Out::Final(msg) => {
                                if let Some(msg) = msg {
                                    write_message(&msg);
                                }
                                break;
                            }
                        }
                    }
                });
            }
            Ok(Incoming::Notification { method, params }) => {
                session.handle_notification(&method, &params)
            }
            Ok(Incoming::Response { id, outcome }) => session.handle_response(&id, outcome),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::tests::fixture;
    use serde_json::json;

    fn envelope() -> Value {
        json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }})
    }

    #[test]
    fn classifies_requests_by_era() {
        let both = fixture(EraMode::Both);
        assert!(matches!(
            classify(&both, "tools/list", &json!({})),
            Ok(Era::Legacy)
        ));
        assert!(matches!(
            classify(&both, "initialize", &json!({})),
            Ok(Era::Legacy)
        ));
        assert!(matches!(
            classify(&both, "tools/list", &envelope()),
            Ok(Era::Modern(_))
        ));
        assert_eq!(
            classify(&both, "ping", &envelope()).unwrap_err().code,
            -32601
        );
        assert_eq!(
            classify(&both, "server/discover", &json!({}))
                .unwrap_err()
                .code,
            -32602
        );
        let legacy = fixture(EraMode::Legacy);
        assert!(matches!(
            classify(&legacy, "server/discover", &envelope()),
            Ok(Era::Legacy)
        ));
        let modern = fixture(EraMode::Modern);
        let init = json!({"protocolVersion": "2025-11-25"});
        let e = classify(&modern, "initialize", &init).unwrap_err();
        assert_eq!(e.code, protocol::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(
            classify(&modern, "tools/list", &json!({}))
                .unwrap_err()
                .code,
            -32602
        );
    }
}
