//! Sluice's fuzz targets: one function per target, taking the fuzzer's bytes. The AFL++
//! harnesses in `src/bin/` call them in a persistent loop; `tests/corpus.rs` runs the seed
//! corpus and every kept crash through the same functions as normal tests.
//!
//! A target fails by panicking: the code under test panicked, or a check here found an answer
//! that breaks what the gateway relies on (a message that does not survive its own
//! serialisation, a line reader that kept more than its bound).

use serde_json::{json, Value};
use sluice_core::Message;
use sluice_hooks::{Decision, HookEvent, Phase};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A target: it takes the fuzzer's bytes and panics on a failure.
pub type Target = fn(&[u8]);

/// The targets, by the name `scripts/fuzz` and the corpus folders use.
pub const TARGETS: &[(&str, Target)] = &[
    ("message", message),
    ("hook_command", hook_command),
    ("hook_process", hook_process),
    ("hook_http", hook_http),
    ("config", config),
];

/// `Message::parse`: never panics; a message it accepts serialises to JSON that parses back
/// to the same message. `Message::parse_reply` (a reply kept as its text) accepts and refuses
/// the same bytes, reads as the same message, and after its id is replaced still writes JSON
/// that parses back to it.
pub fn message(data: &[u8]) {
    let lazy = Message::parse_reply(data);
    match Message::parse(data) {
        Ok(m) => {
            check_message(&m);
            let mut lazy = lazy.unwrap_or_else(|e| panic!("parse_reply refused: {:?}", e.error));
            assert_eq!((lazy.kind(), lazy.id()), (m.kind(), m.id()));
            assert_eq!(lazy, m, "parse_reply reads another message");
            check_message(&lazy);
            if lazy.id().is_some() {
                lazy.set_id(serde_json::json!("fuzz-id"));
                check_message(&lazy);
            }
        }
        Err(e) => {
            // The error reply must itself be sendable.
            let reply = e.to_response();
            assert!(reply.get("error").is_some(), "{reply}");
            assert!(lazy.is_err(), "parse_reply accepted what parse refused");
        }
    }
}

/// A command hook's stdout (exit 0), read on one of the [`events`] chosen by the first byte.
pub fn hook_command(data: &[u8]) {
    let Some((ev, rest)) = pick_event(data) else {
        return;
    };
    if let Ok(d) = sluice_hooks::fuzzing::command_stdout(ev, rest) {
        check_decision(&d);
    }
}

/// A process hook's stdout stream: the first byte picks the event, the second the read buffer
/// size (1–64 bytes, so lines straddle reads) and the bound on a line (0–255 bytes, or the
/// real 16 MiB when 255), the rest is the stream.
pub fn hook_process(data: &[u8]) {
    let Some((ev, rest)) = pick_event(data) else {
        return;
    };
    let Some((&sizes, stream)) = rest.split_first() else {
        return;
    };
    let chunk = 1 + usize::from(sizes & 0x3f);
    let max_line = match sizes >> 6 {
        0 => 16,
        1 => 256,
        2 => 4096,
        _ => 16 * 1024 * 1024,
    };
    for d in sluice_hooks::fuzzing::process_stdout(ev, stream, chunk, max_line)
        .into_iter()
        .flatten()
    {
        check_decision(&d);
    }
}

/// An http hook service's answer: the first byte picks the event, the next two the status
/// (big-endian, taken modulo 600), the rest is the body.
pub fn hook_http(data: &[u8]) {
    let Some((ev, rest)) = pick_event(data) else {
        return;
    };
    let [hi, lo, body @ ..] = rest else {
        return;
    };
    let status = u16::from_be_bytes([*hi, *lo]) % 600;
    if let Some(Ok(d)) = sluice_hooks::fuzzing::http_reply(ev, status, body) {
        check_decision(&d);
    }
}

/// The files of a configuration tree, in the order the `config` target's input gives them.
pub const CONFIG_FILES: &[&str] = &[
    "sluice.json",
    "mcp/expose.json",
    "hooks/hooks.manifest.json",
    "hooks/hooks.state.json",
    "logs/log.config.json",
    "tools/tools.register.json",
    "tools/tools.state.json",
    "auth/auth.config.json",
];

/// `Config::load` over a tree whose files are the input cut at NUL bytes, in the order of
/// [`CONFIG_FILES`] (a file with no part is absent). Never panics; every error names a file.
pub fn config(data: &[u8]) {
    let home = config_home();
    let mut parts = data.split(|b| *b == 0);
    for name in CONFIG_FILES {
        let path = home.join(name);
        match parts.next() {
            Some(bytes) => std::fs::write(&path, bytes).expect("write a config file"),
            None => match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => panic!("remove {}: {e}", path.display()),
            },
        }
    }
    let env = |name: &str| (name == "COLLECTOR_KEY").then(|| "k".to_string());
    if let Err(errors) = sluice_config::Config::load(home, &env) {
        assert!(!errors.0.is_empty(), "a failed load with no error");
        for e in &errors.0 {
            assert!(!e.file.is_empty(), "an error that names no file: {e}");
        }
    }
}

/// Remove this process's scratch home folder of the `config` target, if it made one.
pub fn remove_scratch() {
    let _ = std::fs::remove_dir_all(config_home());
}

/// This process's scratch home folder for the `config` target (its subfolders made once), in
/// `$SLUICE_FUZZ_SCRATCH`, else `/dev/shm` (each run writes the tree's files), else the temp
/// folder.
fn config_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let base = match std::env::var_os("SLUICE_FUZZ_SCRATCH") {
            Some(dir) => PathBuf::from(dir),
            None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
            None => std::env::temp_dir(),
        };
        let home = base.join(format!("sluice-fuzz-config-{}", std::process::id()));
        for dir in ["mcp", "hooks", "logs", "tools", "auth"] {
            std::fs::create_dir_all(home.join(dir)).expect("make the scratch home");
        }
        home
    })
}

/// The events a hook reader is tried on: a tools/call request and its reply, an error reply,
/// a request with array params, and a notification.
pub fn events() -> &'static [HookEvent] {
    static EVENTS: OnceLock<Vec<HookEvent>> = OnceLock::new();
    EVENTS.get_or_init(|| {
        let call = json!({"jsonrpc":"2.0","id":"r1","method":"tools/call",
            "params":{"name":"fs_write","arguments":{"path":"/tmp/x"},"_meta":{"k":1}}});
        let reply =
            json!({"jsonrpc":"2.0","id":"r1","result":{"content":[{"type":"text","text":"ok"}]}});
        let error = json!({"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"down"}});
        let array = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":["a",1]});
        let note =
            json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}});
        vec![
            event(Phase::Request, "PreToolUse", call.clone(), None),
            event(Phase::Response, "PostToolUse", reply, Some(call.clone())),
            event(Phase::Response, "PostToolUse", error, Some(call)),
            event(Phase::Request, "PreToolUse", array, None),
            event(Phase::Request, "Request", note, None),
        ]
    })
}

fn event(phase: Phase, name: &'static str, message: Value, request: Option<Value>) -> HookEvent {
    let message = Message::from_value(message).expect("a valid event message");
    HookEvent {
        phase,
        event_name: name,
        method: "tools/call".into(),
        session_id: "s1".into(),
        tool_name: Some("fs_write".into()),
        upstream: Some("up".into()),
        request: request.map(|r| Message::from_value(r).expect("a valid request")),
        message,
        era: "legacy",
        cwd: PathBuf::from("/"),
        principal: None,
        upstream_sub: None,
        claude: Default::default(),
    }
}

/// The event the first byte names, and the rest of the input.
fn pick_event(data: &[u8]) -> Option<(&'static HookEvent, &[u8])> {
    let (&first, rest) = data.split_first()?;
    let evs = events();
    Some((&evs[usize::from(first) % evs.len()], rest))
}

/// A decision's message (if any) survives serialisation.
fn check_decision(d: &Decision) {
    if let Decision::Modify(m) | Decision::Answer(m) = d {
        check_message(m);
    }
}

/// A message serialises to JSON that parses back to the same message.
fn check_message(m: &Message) {
    let text = m.to_json();
    let back = Message::parse(text.as_bytes())
        .unwrap_or_else(|e| panic!("{text} does not parse back: {:?}", e.error));
    assert_eq!(&back, m, "{text} parses back to another message");
}
