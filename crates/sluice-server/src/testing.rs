//! Test support: a gateway state built in memory from a small tree in a temporary folder, with
//! upstream lists set by hand (no process is started), and a session to drive it.

use crate::control;
use crate::session::{Init, Outbound, Session};
use crate::state::State;
use serde_json::{json, Value};
use sluice_upstream::{Status, UpstreamLists};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A tree in a fresh temporary folder: `files` are (relative path, JSON) pairs.
pub(crate) fn tree(files: &[(&str, Value)]) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let home = std::env::temp_dir().join(format!(
        "sluice-unit-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&home);
    for (path, v) in files {
        let p = home.join(path);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&p, serde_json::to_string_pretty(v).expect("json")).expect("write");
    }
    std::fs::create_dir_all(&home).expect("mkdir");
    home
}

/// The state of a gateway over `files`, its upstreams' lists set to `lists` (by id; an upstream
/// left out stays down) and the catalog built. Nothing is started.
pub(crate) fn state(files: &[(&str, Value)], lists: &[(&str, UpstreamLists, Value)]) -> Arc<State> {
    let home = tree(files);
    let env = |_: &str| None;
    let (config, _) = sluice_config::Config::load(&home, &env).expect("a valid tree");
    let (st, _inbound) = control::build(config);
    for slot in st.snapshot().slots.iter() {
        if let Some((_, l, caps)) = lists.iter().find(|(id, _, _)| *id == slot.spec.id) {
            let mut s = slot.state.lock();
            s.status = Some(Status::Up);
            s.lists = Some(l.clone());
            s.init = Some(json!({"capabilities": caps, "serverInfo": {"name": slot.spec.id}}));
            slot.publish(&s);
        } else if slot.spec.enabled {
            let mut s = slot.state.lock();
            s.status = Some(Status::Down("it crashed".into()));
            slot.publish(&s);
        }
    }
    control::rebuild_catalog(&st, None);
    // Everything is read: the tree is not needed any more.
    let _ = std::fs::remove_dir_all(&home);
    st
}

/// Tools named `names`, each with an object schema.
pub(crate) fn tools(names: &[&str]) -> UpstreamLists {
    UpstreamLists {
        tools: names
            .iter()
            .map(|n| json!({"name": n, "description": format!("{n} does it"), "inputSchema": {"type": "object"}}))
            .collect(),
        ..Default::default()
    }
}

/// An `expose.json` with these stdio upstreams (never started), every tool exposed.
pub(crate) fn expose(ids: &[&str]) -> (&'static str, Value) {
    let ups: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "command": "/nonexistent/never-started", "expose_all": true}))
        .collect();
    ("mcp/expose.json", json!({"version": 1, "upstreams": ups}))
}

/// A legacy session on stdio, and the receiving end of its output.
pub(crate) fn session() -> (
    Arc<Session>,
    tokio::sync::mpsc::UnboundedReceiver<crate::channel::Out>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let init = Init::new("2025-11-25", json!({}), json!({"name": "unit"}));
    (
        Arc::new(Session::new("unit".into(), init, Outbound::Stdio(tx))),
        rx,
    )
}

/// A connection to an HTTP upstream at a closed port, made without a handshake (nothing is
/// sent unless a test sends something).
pub(crate) fn connection() -> sluice_upstream::Connection {
    let spec = sluice_config::UpstreamSpec::http(
        "unit",
        "http://127.0.0.1:9/mcp",
        sluice_config::Transport::Http,
    );
    let opts = sluice_upstream::OpenOptions {
        client_info: json!({"name": "unit"}),
        capabilities: json!({}),
        protocol_version: "2025-11-25".into(),
        connect_timeout: std::time::Duration::from_secs(1),
        label: "unit".into(),
        stderr: Default::default(),
        identity: None,
        bearer: None,
    };
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let session = sluice_upstream::UpstreamSession {
        id: "unit-upstream".into(),
        protocol_version: "2025-11-25".into(),
        init: json!({}),
    };
    sluice_upstream::Connection::adopt(&spec, opts, events, &session).expect("a connection")
}
