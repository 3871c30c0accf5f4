//! The chain's unit tests: selection, controls first, builtins' matchers, every option the
//! configuration accepts.
use super::*;
use sluice_config::{HookKindSpec, HookSpec};
use std::path::Path;

#[test]
fn globs() {
    assert!(glob_match("*", "tools/call"));
    assert!(glob_match("tools/*", "tools/call"));
    assert!(!glob_match("tools/*", "prompts/get"));
    assert!(glob_match(
        "notifications/*/list_changed",
        "notifications/tools/list_changed"
    ));
    assert!(glob_match("tools/call", "tools/call"));
    assert!(!glob_match("tools/call", "tools/list"));
}

fn builtin(id: &str, name: &str, options: Value, methods: &[&str]) -> HookSpec {
    HookSpec {
        id: id.into(),
        event: HookEventKind::Request,
        matcher: String::new(),
        methods: methods.iter().map(|m| m.to_string()).collect(),
        kind: HookKindSpec::Builtin {
            name: name.into(),
            options: crate::builtin::parsed(name, options),
        },
        timeout: Duration::from_secs(1),
        on_error: OnError::Refuse,
        enabled: true,
        description: String::new(),
        claude: Default::default(),
    }
}

fn ctx<'a>(method: &'a str, tool: Option<&'a str>) -> Ctx<'a> {
    Ctx {
        session_id: "s",
        method,
        tool_name: tool,
        upstream: None,
        era: "legacy",
        tool: None,
        principal: None,
        upstream_tool: None,
        tool_use_id: None,
        answers: None,
    }
}

/// What the configuration accepts, the chain builds.
#[test]
fn every_option_the_configuration_accepts_builds() {
    use serde_json::json;
    let home = std::env::temp_dir().join(format!("sluice-hooks-accepts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(home.join("hooks")).unwrap();
    let b = |id: &str, name: &str, options: Value| json!({"id": id, "type": "builtin", "builtin": name, "options": options, "enabled": true});
    let hooks = json!([
        b("explain", "explain", json!({})),
        b(
            "deny",
            "deny",
            json!({"tools": ["a", "b.*"], "arguments": [{"pattern": "x"}, {"path": "/a/b", "pattern": "^y$", "tool": "t", "reason": "r"}], "reason": "no"})
        ),
        b(
            "deny-args",
            "deny",
            json!({"tools": [], "arguments": [{"path": "a.*.b", "pattern": "z"}]})
        ),
        b(
            "rewrite",
            "rewrite",
            json!({"rules": [{"tool": "t", "set": {"a": 1, "/b/c": [1]}, "default": {"d": null}, "remove": ["e", "f.*"]}, {"remove": ["x"]}]})
        ),
        b("validate", "validate", Value::Null),
        b(
            "describe",
            "describe",
            json!({"tools": {"t": {"title": "T", "description": "D", "properties": {"p": {"type": "string"}}, "hide": ["h"]}, "u": {}}})
        ),
        b("describe-empty", "describe", json!({"tools": {}})),
        b(
            "mask",
            "mask",
            json!({"paths": ["/a", "b.c", "d.*"], "keys": [], "replacement": "[x]"})
        ),
        b("mask-keys", "mask", json!({"keys": ["k"]})),
        b(
            "pii",
            "pii",
            json!({"kinds": ["email", "Card", "PRIVATE_KEY"], "allow_tools": ["t.*"]})
        ),
        b("pii-all", "pii", Value::Null),
        b(
            "cap",
            "size-cap",
            json!({"max_bytes": 1, "mode": "truncate", "per_tool": {"a*": 2, "b\\..*": 3}})
        ),
        b(
            "cap-tools",
            "size-cap",
            json!({"per_tool": {"x": 5}, "mode": "refuse"})
        ),
        b(
            "rate",
            "rate-limit",
            json!({"global": {"rate": 1.5, "per": "second", "burst": 3}, "per_principal": {"rate": 1, "per": "hour"}, "per_tool": {"*": {"rate": 2, "per": "minute"}, "a\\..*": {"rate": 1, "per": "second"}}, "key_prefix": "test:accepts:"})
        ),
        b(
            "rate-redis",
            "rate-limit",
            json!({"per_tool": {"x": {"rate": 1, "per": "second"}}, "redis": "redis://u:p@[::1]:6379/2"})
        )
    ]);
    std::fs::write(
        home.join("hooks/hooks.manifest.json"),
        json!({"hooks": hooks}).to_string(),
    )
    .unwrap();
    let loaded = sluice_config::Config::load(&home, &|_| None);
    let _ = std::fs::remove_dir_all(&home);
    let (config, _) = loaded.unwrap_or_else(|e| panic!("{e}"));
    let (chain, warnings) = Chain::build(&config.hooks.hooks, Path::new("/"));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!((chain.hooks().len(), chain.controls().len()), (9, 6));
    assert!(chain.wants_tool_definitions());
}

#[tokio::test]
async fn controls_run_first_whatever_their_place_and_are_counted() {
    use serde_json::json;
    let specs = [
        builtin("deny", "deny", json!({"tools": ["blocked"]}), &["*"]),
        builtin("mask", "mask", json!({"keys": ["token"]}), &["tools/call"]),
        builtin(
            "pii",
            "pii",
            json!({"allow_tools": ["trusted"]}),
            &["tools/call"],
        ),
    ];
    let (chain, warnings) = Chain::build(&specs, Path::new("/"));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!((chain.hooks().len(), chain.controls().len()), (1, 2));
    let reply = || {
        Message::response(
            json!(7),
            json!({"content": [{"type": "text", "text": "{\"token\":\"t\",\"mail\":\"a@b.io\"}"}]}),
        )
    };
    // Depth 0 (refused at the head, say): the controls still run.
    let mut trace = Trace::default();
    let cx = ctx("tools/call", Some("fx_echo"));
    let out = chain
        .response(&cx, reply(), None, 0, &mut trace)
        .await
        .unwrap();
    assert_eq!(
        out.result().unwrap()["content"][0]["text"],
        json!("{\"token\":\"***\",\"mail\":\"[EMAIL]\"}")
    );
    assert_eq!(
        Value::Object(trace.controls.clone()),
        json!({"mask": 1, "pii": {"EMAIL": 1}})
    );
    let decisions: Vec<(&str, &str)> = trace.records.iter().map(|r| (&*r.id, r.decision)).collect();
    assert_eq!(decisions, [("mask", "modify"), ("pii", "modify")]);
    // An allowed tool skips pii; another method skips both.
    let mut trace = Trace::default();
    let cx = ctx("tools/call", Some("trusted"));
    let out = chain
        .response(&cx, reply(), None, 1, &mut trace)
        .await
        .unwrap();
    assert!(out.result().unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("a@b.io"));
    assert_eq!(Value::Object(trace.controls), json!({"mask": 1}));
    let mut trace = Trace::default();
    let cx = ctx("prompts/get", None);
    assert_eq!(
        chain
            .response(&cx, reply(), None, 1, &mut trace)
            .await
            .unwrap(),
        reply()
    );
    assert!(trace.records.is_empty());
    assert!(chain.selects(Phase::Response, &ctx("tools/call", None), 0));
    assert!(!chain.selects(Phase::Response, &ctx("tools/list", None), 0));
}

#[tokio::test]
async fn a_size_cap_refusal_stops_the_response_phase() {
    use serde_json::json;
    let specs = [builtin(
        "cap",
        "size-cap",
        json!({"max_bytes": 4, "mode": "refuse"}),
        &["tools/call"],
    )];
    let (chain, _) = Chain::build(&specs, Path::new("/"));
    let mut trace = Trace::default();
    let msg = Message::response(
        json!(1),
        json!({"content": [{"type": "text", "text": "hello"}]}),
    );
    let r = chain
        .response(
            &ctx("tools/call", Some("t")),
            msg,
            None,
            usize::MAX,
            &mut trace,
        )
        .await
        .unwrap_err();
    assert!(r.for_agent && r.reason.contains("5 bytes, over the 4-byte cap"));
    assert_eq!(trace.records[0].decision, "refuse");
    assert_eq!(
        Value::Object(trace.controls),
        json!({"size-cap": {"blocks": 0, "bytes": 0, "refused": 1}})
    );
}

#[tokio::test]
async fn request_builtins_select_tools_call_and_honour_the_matcher() {
    use serde_json::json;
    let mut deny = builtin(
        "deny",
        "deny",
        json!({"arguments": [{"pattern": "x"}]}),
        &["*"],
    );
    deny.matcher = "fx_.*".into();
    let specs = [
        deny,
        builtin(
            "rw",
            "rewrite",
            json!({"rules": [{"set": {"r": 1}}]}),
            &["*"],
        ),
        HookSpec {
            kind: HookKindSpec::Builtin {
                name: "rewrite".into(),
                options: sluice_config::BuiltinOptions::Rewrite(Default::default()),
            },
            ..builtin("bad", "explain", Value::Null, &["*"])
        },
    ];
    let (chain, warnings) = Chain::build(&specs, Path::new("/"));
    assert_eq!(
        warnings,
        ["hook \"bad\": builtin \"rewrite\": options.rules: is required (an array of rules); skipped"]
    );
    let call = |tool: &str| {
        Message::request(
            json!(1),
            "tools/call",
            Some(json!({"name": tool, "arguments": {"a": "x"}})),
        )
    };
    let mut trace = Trace::default();
    let (out, depth) = chain
        .request(&ctx("tools/call", Some("fx_a")), call("fx_a"), &mut trace)
        .await;
    assert!(matches!(out, RequestOutcome::Refuse(_)));
    assert_eq!(depth, 1);
    let (out, _) = chain
        .request(&ctx("tools/call", Some("other")), call("other"), &mut trace)
        .await;
    let RequestOutcome::Forward(m) = out else {
        panic!("{out:?}")
    };
    assert_eq!(m.params().unwrap()["arguments"], json!({"a": "x", "r": 1}));
    // Other methods are not theirs.
    let list = Message::request(json!(2), "tools/list", None);
    let (out, _) = chain
        .request(&ctx("tools/list", None), list.clone(), &mut trace)
        .await;
    assert!(matches!(out, RequestOutcome::Forward(m) if m == list));
}

/// The request phase shows each hook the event refitted from the last one's: a command hook
/// after the explain builtin sees the call the builtin changed, with its own name form and
/// Claude Code fields (a builtin is shown none).
#[tokio::test]
async fn each_hook_is_shown_its_own_event_along_the_chain() {
    use serde_json::json;
    let dir = std::env::temp_dir().join(format!("sluice-chain-events-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let command = |id: &str, form: ToolNameForm, mode: &str| HookSpec {
        event: HookEventKind::PreToolUse,
        kind: HookKindSpec::Command {
            command: format!("cat > {}/{id}.json", dir.display()),
            args: None,
            script: None,
        },
        claude: ClaudeSettings {
            tool_name: form,
            permission_mode: mode.into(),
            ..Default::default()
        },
        ..builtin(id, "explain", Value::Null, &["tools/call"])
    };
    let specs = [
        builtin("explain", "explain", Value::Null, &["*"]),
        command("first", ToolNameForm::Mcp, "plan"),
        command("second", ToolNameForm::Gateway, "default"),
        command("third", ToolNameForm::Mcp, "acceptEdits"),
    ];
    let (chain, warnings) = Chain::build(&specs, &dir);
    assert!(warnings.is_empty(), "{warnings:?}");
    let cx = Ctx {
        upstream: Some("up"),
        upstream_tool: Some("echo"),
        tool_use_id: Some("toolu_1"),
        ..ctx("tools/call", Some("up_echo"))
    };
    let msg = Message::from_value(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "up_echo", "arguments": {"text": "hi", "reason": "to test"}}}))
    .unwrap();
    let mut trace = Trace::default();
    let (outcome, depth) = chain.request(&cx, msg, &mut trace).await;
    assert_eq!(depth, 4);
    let RequestOutcome::Forward(m) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(m.params().unwrap()["arguments"], json!({"text": "hi"}));
    assert_eq!(m.id(), Some(&json!(3)));
    let decisions: Vec<_> = trace.records.iter().map(|r| r.decision).collect();
    assert_eq!(decisions, ["modify", "pass", "pass", "pass"]);
    let shown = |id: &str| -> Value {
        let text = std::fs::read_to_string(dir.join(format!("{id}.json"))).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    for (id, name, mode) in [
        ("first", "mcp__up__echo", "plan"),
        ("second", "up_echo", "default"),
        ("third", "mcp__up__echo", "acceptEdits"),
    ] {
        let p = shown(id);
        assert_eq!(p["hook_event_name"], json!("PreToolUse"), "{id}: {p}");
        assert_eq!(p["tool_name"], json!(name), "{id}: {p}");
        assert_eq!(p["permission_mode"], json!(mode), "{id}: {p}");
        assert_eq!(p["tool_use_id"], json!("toolu_1"), "{id}: {p}");
        assert_eq!(p["session_id"], json!("s"), "{id}: {p}");
        assert_eq!(p["tool_input"], json!({"text": "hi"}), "{id}: {p}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
