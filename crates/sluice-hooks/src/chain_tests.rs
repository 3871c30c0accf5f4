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
        sandbox: None,
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
        upstream_sub: None,
        catalog: None,
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
        upstream_sub: None,
        catalog: None,
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

/// Claude Code's handler settings and the mcp_tool kind, through the chain.
mod claude_settings {
    use super::*;
    use crate::mcp_tool::{ToolCallError, ToolRunner};
    use futures_util::future::BoxFuture;
    use serde_json::json;
    use sluice_config::OnFailure;
    use std::path::PathBuf;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-cc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn hook(id: &str, event: HookEventKind, command: &str, claude: ClaudeSettings) -> HookSpec {
        HookSpec {
            event,
            methods: event.default_methods(),
            kind: HookKindSpec::Command {
                command: command.into(),
                args: None,
                script: None,
            },
            claude,
            timeout: Duration::from_secs(5),
            ..builtin(id, "explain", Value::Null, &[])
        }
    }

    fn call_ctx<'a>(session: &'a str, upstream: &'a str, tool: &'a str, name: &'a str) -> Ctx<'a> {
        Ctx {
            session_id: session,
            upstream: Some(upstream),
            upstream_tool: Some(tool),
            upstream_sub: None,
            catalog: None,
            ..ctx("tools/call", Some(name))
        }
    }

    fn call(args: Value) -> Message {
        Message::from_value(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "x", "arguments": args}}))
        .unwrap()
    }

    async fn run(chain: &Chain, cx: &Ctx<'_>, args: Value) -> (RequestOutcome, Trace) {
        let mut trace = Trace::default();
        let (out, _) = chain.request(cx, call(args), &mut trace).await;
        (out, trace)
    }

    fn lines(p: &std::path::Path) -> usize {
        std::fs::read_to_string(p)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn once_runs_a_hook_once_per_session() {
        let d = dir("once");
        let log = d.join("ran.log");
        let once = ClaudeSettings {
            once: true,
            ..Default::default()
        };
        let cmd = format!("echo ran >> {}", log.display());
        let (chain, w) = Chain::build(
            &[hook("pre/once", HookEventKind::PreToolUse, &cmd, once)],
            &d,
        );
        assert!(w.is_empty(), "{w:?}");
        let a = call_ctx("a", "up", "echo", "up_echo");
        for _ in 0..3 {
            let (out, _) = run(&chain, &a, json!({})).await;
            assert!(matches!(out, RequestOutcome::Forward(_)), "{out:?}");
        }
        assert_eq!(lines(&log), 1);
        let b = call_ctx("b", "up", "echo", "up_echo");
        run(&chain, &b, json!({})).await;
        run(&chain, &b, json!({})).await;
        assert_eq!(lines(&log), 2, "once more for another session");
        // A session that ended is forgotten.
        chain.drop_transcript("a");
        run(&chain, &a, json!({})).await;
        assert_eq!(lines(&log), 3);
    }

    #[tokio::test]
    async fn async_hooks_run_in_the_background_and_never_decide() {
        let d = dir("async");
        let done = d.join("done");
        let background = ClaudeSettings {
            run_async: true,
            ..Default::default()
        };
        // It would block (exit 2), and it takes a second.
        let cmd = format!("sleep 1; cat > {}; echo no >&2; exit 2", done.display());
        let (chain, w) = Chain::build(
            &[hook(
                "pre/async",
                HookEventKind::PreToolUse,
                &cmd,
                background,
            )],
            &d,
        );
        assert!(w.is_empty(), "{w:?}");
        let started = Instant::now();
        let (out, trace) = run(
            &chain,
            &call_ctx("s", "up", "echo", "up_echo"),
            json!({"a": 1}),
        )
        .await;
        assert!(
            started.elapsed() < Duration::from_millis(800),
            "{:?}",
            started.elapsed()
        );
        assert!(matches!(out, RequestOutcome::Forward(_)), "{out:?}");
        assert_eq!(trace.records[0].decision, "async");
        assert!(!done.exists());
        for _ in 0..50 {
            if done.exists() && lines(&done) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let shown: Value = serde_json::from_str(&std::fs::read_to_string(&done).unwrap()).unwrap();
        assert_eq!(shown["tool_input"], json!({"a": 1}));
        assert_eq!(shown["hook_event_name"], "PreToolUse");
    }

    #[tokio::test]
    async fn defer_refuses_what_no_one_can_resume_and_deny_still_wins() {
        let d = dir("defer");
        let say = |decision: &str, reason: &str| {
            format!("echo '{{\"hookSpecificOutput\": {{\"permissionDecision\": \"{decision}\", \"permissionDecisionReason\": \"{reason}\"}}}}'")
        };
        let pre =
            |id: &str, cmd: String| hook(id, HookEventKind::PreToolUse, &cmd, Default::default());
        let cx = call_ctx("s", "up", "echo", "up_echo");
        // ask, then defer: defer wins (deny > defer > ask > allow).
        let (chain, _) = Chain::build(
            &[
                pre("pre/ask", say("ask", "sure?")),
                pre("pre/defer", say("defer", "CI decides")),
            ],
            &d,
        );
        let (out, trace) = run(&chain, &cx, json!({})).await;
        let RequestOutcome::Refuse(r) = out else {
            panic!("{out:?}")
        };
        let reason = "hook pre/defer deferred the call: CI decides (a deferred call waits for its caller to decide and resume it; behind the gateway no one can, so it is not run)";
        assert_eq!(r.reason, reason);
        assert!(r.for_agent);
        assert_eq!(
            r.to_error(Phase::Request, json!(1)).to_value(),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32030, "message": "Request rejected", "data": {"reason": reason, "deferred": true}}})
        );
        let decisions: Vec<_> = trace.records.iter().map(|r| r.decision).collect();
        assert_eq!(decisions, ["ask", "defer"]);
        // defer, then deny: deny wins.
        let (chain, _) = Chain::build(
            &[
                pre("pre/defer", say("defer", "later")),
                pre("pre/deny", say("deny", "never")),
            ],
            &d,
        );
        let (out, _) = run(&chain, &cx, json!({})).await;
        let RequestOutcome::Refuse(r) = out else {
            panic!("{out:?}")
        };
        assert_eq!((r.reason.as_str(), r.error.is_none()), ("never", true));
    }

    #[tokio::test]
    async fn on_failure_block_refuses_when_a_hook_cannot_decide() {
        let d = dir("onfailure");
        let block = ClaudeSettings {
            on_failure: OnFailure::Block,
            ..Default::default()
        };
        let pre =
            |id: &str, cmd: &str, c: ClaudeSettings| hook(id, HookEventKind::PreToolUse, cmd, c);
        let cx = call_ctx("s", "up", "echo", "up_echo");
        // Exit 1: a non-blocking error by default, a refusal naming the hook with block.
        let (chain, _) = Chain::build(
            &[pre(
                "pre/crash",
                "echo boom >&2; exit 1",
                Default::default(),
            )],
            &d,
        );
        assert!(matches!(
            run(&chain, &cx, json!({})).await.0,
            RequestOutcome::Forward(_)
        ));
        let (chain, _) = Chain::build(
            &[pre("pre/crash", "echo boom >&2; exit 1", block.clone())],
            &d,
        );
        let (out, trace) = run(&chain, &cx, json!({})).await;
        let RequestOutcome::Refuse(r) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            r,
            Refusal::for_agent(
                "hook pre/crash failed (on_failure: block): exited with code 1: boom"
            )
        );
        assert_eq!(trace.records[0].decision, "error");
        // A timeout refuses even when on_error says pass.
        let mut slow = pre("pre/slow", "sleep 5", block.clone());
        slow.timeout = Duration::from_millis(300);
        slow.on_error = OnError::Pass;
        let (chain, _) = Chain::build(&[slow.clone()], &d);
        let RequestOutcome::Refuse(r) = run(&chain, &cx, json!({})).await.0 else {
            panic!()
        };
        assert_eq!(
            r.reason,
            "hook pre/slow failed (on_failure: block): timed out after 300ms"
        );
        slow.claude.on_failure = OnFailure::Continue;
        let (chain, _) = Chain::build(&[slow], &d);
        assert!(matches!(
            run(&chain, &cx, json!({})).await.0,
            RequestOutcome::Forward(_)
        ));
        // A program that cannot start.
        let mut missing = pre("pre/missing", "/nonexistent/guard", block);
        missing.kind = HookKindSpec::Command {
            command: "/nonexistent/guard".into(),
            args: Some(vec![]),
            script: None,
        };
        let (chain, _) = Chain::build(&[missing], &d);
        let RequestOutcome::Refuse(r) = run(&chain, &cx, json!({})).await.0 else {
            panic!()
        };
        assert!(
            r.reason.starts_with(
                "hook pre/missing failed (on_failure: block): cannot start the hook command"
            ),
            "{}",
            r.reason
        );
    }

    #[tokio::test]
    async fn if_rules_select_calls_by_tool_and_arguments() {
        let d = dir("if");
        let log = d.join("ran.log");
        let cmd = format!("echo ran >> {}", log.display());
        let with_if = |id: &str, rule: &str, form: ToolNameForm| {
            hook(
                id,
                HookEventKind::PreToolUse,
                &cmd,
                ClaudeSettings {
                    if_rule: Some(rule.into()),
                    tool_name: form,
                    ..Default::default()
                },
            )
        };
        let (chain, w) = Chain::build(
            &[
                with_if("pre/crm", "mcp__crm__*", ToolNameForm::Mcp),
                with_if("pre/git", "Bash(git *)", ToolNameForm::Gateway),
            ],
            &d,
        );
        assert!(w.is_empty(), "{w:?}");
        let crm = call_ctx("s", "crm", "find", "crm_find");
        run(&chain, &crm, json!({})).await;
        assert_eq!(lines(&log), 1, "mcp__crm__* runs for crm's tools");
        run(&chain, &call_ctx("s", "fs", "read", "fs_read"), json!({})).await;
        assert_eq!(lines(&log), 1, "and not for others");
        let bash = call_ctx("s", "shell", "echo", "Bash");
        run(&chain, &bash, json!({"command": "ls -la"})).await;
        assert_eq!(lines(&log), 1);
        run(&chain, &bash, json!({"command": "git push --force"})).await;
        assert_eq!(lines(&log), 2);
        // On a non-tool event, or a rule that is not one: never runs, with a warning.
        let mut start = with_if("start/x", "Bash", ToolNameForm::Gateway);
        start.event = HookEventKind::SessionStart;
        let (chain, w) = Chain::build(
            &[
                start,
                with_if("pre/bad", "Edit|Write", ToolNameForm::Gateway),
                with_if("pre/srv", "mcp__crm", ToolNameForm::Mcp),
            ],
            &d,
        );
        assert_eq!(chain.hooks().len(), 1, "{w:?}");
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[2].contains("names a server, not a tool"), "{w:?}");
    }

    /// A runner that answers from a table and records what it was asked.
    struct Runner(std::sync::Mutex<Vec<(String, String, Value)>>);

    impl ToolRunner for Runner {
        fn call<'a>(
            &'a self,
            server: &'a str,
            tool: &'a str,
            args: Value,
        ) -> BoxFuture<'a, Result<Value, ToolCallError>> {
            self.0
                .lock()
                .unwrap()
                .push((server.into(), tool.into(), args.clone()));
            Box::pin(async move {
                match (server, tool) {
                    ("policy", "check") if args["path"] == "/etc/passwd" => {
                        Ok(json!({"content": [{"type": "text",
                        "text": "{\"hookSpecificOutput\": {\"permissionDecision\": \"deny\", \"permissionDecisionReason\": \"not there\"}}"}]}))
                    }
                    ("policy", "check") => Ok(json!({"content": [{"type": "text", "text": "ok"}]})),
                    ("policy", "broken") => Ok(
                        json!({"content": [{"type": "text", "text": "database down"}], "isError": true}),
                    ),
                    ("policy", "redact") => Ok(
                        json!({"content": [], "structuredContent": {"hookSpecificOutput":
                        {"hookEventName": "PostToolUse", "updatedToolOutput": "[redacted]"}}}),
                    ),
                    _ => Err(ToolCallError::UnknownServer(server.into())),
                }
            })
        }
    }

    #[tokio::test]
    async fn mcp_tool_hooks_call_an_upstream_tool_and_read_its_answer() {
        let d = dir("mcptool");
        let tool = |id: &str, event: HookEventKind, t: &str, claude: ClaudeSettings| HookSpec {
            kind: HookKindSpec::McpTool {
                server: "policy".into(),
                tool: t.into(),
                input: json!({"path": "${tool_input.file_path}", "who": "session ${session_id}"}),
            },
            ..hook(id, event, "", claude)
        };
        let specs = [
            tool(
                "pre/check",
                HookEventKind::PreToolUse,
                "check",
                Default::default(),
            ),
            tool(
                "post/redact",
                HookEventKind::PostToolUse,
                "redact",
                Default::default(),
            ),
        ];
        let (chain, w) = Chain::build(&specs, &d);
        assert!(w.is_empty(), "{w:?}");
        // Without a runner it cannot run: a failure (on_error: refuse).
        let cx = call_ctx("s-1", "fs", "read", "fs_read");
        let RequestOutcome::Refuse(r) = run(&chain, &cx, json!({"file_path": "/a"})).await.0 else {
            panic!()
        };
        assert_eq!(r.reason, "hook pre/check failed: mcp_tool policy/check: no upstream to call (mcp_tool hooks run inside `sluice serve`)");
        let runner = Arc::new(Runner(Default::default()));
        let chain = chain.with_tool_runner(runner.clone());
        let RequestOutcome::Refuse(r) = run(&chain, &cx, json!({"file_path": "/etc/passwd"}))
            .await
            .0
        else {
            panic!()
        };
        assert_eq!(r, Refusal::for_agent("not there"));
        assert_eq!(
            runner.0.lock().unwrap()[0],
            (
                "policy".into(),
                "check".into(),
                json!({"path": "/etc/passwd", "who": "session s-1"})
            )
        );
        let (out, _) = run(&chain, &cx, json!({"file_path": "/home/a"})).await;
        assert!(
            matches!(out, RequestOutcome::Forward(_)),
            "advisory text passes: {out:?}"
        );
        // After the call: its structured answer replaces the result.
        let reply = Message::from_value(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "secret"}]}})).unwrap();
        let mut trace = Trace::default();
        let out = chain
            .response(&cx, reply, Some(&call(json!({}))), 2, &mut trace)
            .await
            .unwrap();
        assert_eq!(
            out.to_value()["result"],
            json!({"content": [{"type": "text", "text": "[redacted]"}]})
        );
        // A tool error: a non-blocking error, or with on_failure block a refusal.
        let block = ClaudeSettings {
            on_failure: OnFailure::Block,
            ..Default::default()
        };
        for (claude, refused) in [(ClaudeSettings::default(), false), (block, true)] {
            let (chain, _) = Chain::build(
                &[tool(
                    "pre/broken",
                    HookEventKind::PreToolUse,
                    "broken",
                    claude,
                )],
                &d,
            );
            let chain = chain.with_tool_runner(runner.clone());
            match run(&chain, &cx, json!({})).await.0 {
                RequestOutcome::Refuse(r) => {
                    assert!(refused);
                    assert_eq!(r.reason, "hook pre/broken failed (on_failure: block): mcp_tool policy/broken: the tool answered an error: database down");
                }
                out => assert!(
                    !refused && matches!(out, RequestOutcome::Forward(_)),
                    "{out:?}"
                ),
            }
        }
    }
}
