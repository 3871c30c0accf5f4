//! The stdio transport: one JSON-RPC message per line on stdin/stdout, logs on stderr; returns
//! when stdin closes.

use std::io::Write;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::protocol::{self, Incoming};
use crate::session::{Fixture, Out, Session};

/// Write one message as a line on stdout (errors, e.g. a closed pipe, are ignored).
fn write_message(msg: &Value) {
    let mut line = msg.to_string();
    line.push('\n');
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
}

/// Serve one client on stdin/stdout until stdin closes.
pub async fn run(fixture: Arc<Fixture>) -> std::io::Result<()> {
    let session = Session::new(
        fixture,
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
                let mut rx = session.spawn_request(id, method, params);
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
