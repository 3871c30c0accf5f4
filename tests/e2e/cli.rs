//! The command-line contract: `sluice check` reports every error with file and field and exits
//! 1; a valid tree exits 0; `sluice serve` without `--home` serves the built-in demo tree.

use serde_json::json;
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};
use std::process::Command;

fn check(home: &Home) -> (i32, String) {
    let out = Command::new(bin("sluice"))
        .args(["check", "--home", &home.arg()])
        .env("SLUICE_E2E_TOKEN", "t0ken")
        .output()
        .expect("run sluice check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn check_accepts_a_valid_tree() {
    let home = Home::new("check-ok");
    home.expose(&json!({
        "version": 1,
        "upstreams": [
            {"id": "mock", "transport": "stdio", "command": "node", "args": ["mcp/servers/mock/server.js"], "env": {"TOKEN": "${env:SLUICE_E2E_TOKEN}"}, "enabled": true, "description": "demo"},
            {"id": "remote", "transport": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${env:SLUICE_E2E_TOKEN}"}}
        ],
        "expose": [{"upstream": "mock", "tool": "ping", "as": "mock_ping", "category": "demo", "enabled": true}]
    }));
    let (code, out) = check(&home);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.ends_with(": ok (2 upstreams, 1 curated tools)\n"),
        "{out}"
    );
}

#[test]
fn check_lists_every_error_with_file_and_field() {
    let home = Home::new("check-bad");
    home.expose(&json!({
        "upstreams": [
            {"id": "a", "command": "x"},
            {"id": "a", "command": ""},
            {"id": "b", "transport": "carrier-pigeon"},
            {"id": "c", "command": "node", "args": ["../outside.js"], "env": {"K": "${env:SLUICE_E2E_MISSING}"}},
            {"id": "d", "transport": "http", "url": "ftp://x", "headers": {"X": "${env:SLUICE_E2E_MISSING2}"}}
        ],
        "expose": [
            {"upstream": "zzz", "tool": "t"},
            {"upstream": "a", "tool": "t", "as": "bad name!"}
        ]
    }));
    home.write(
        "sluice.json",
        r#"{"listen": "nowhere", "page_size": 0, "colour": "red"}"#,
    );
    let (code, out) = check(&home);
    assert_eq!(code, 1, "{out}");
    let expose = home.path().join("mcp/expose.json").display().to_string();
    let settings = home.path().join("sluice.json").display().to_string();
    let expected = [
        format!("error: {settings}: colour: unknown setting"),
        format!("error: {settings}: listen: \"nowhere\" is not HOST:PORT with an IP address"),
        format!("error: {settings}: page_size: must be greater than 0"),
        format!("error: {expose}: upstreams[1].id: duplicate upstream id \"a\""),
        format!("error: {expose}: upstreams[1].command: must be a non-empty string"),
        format!("error: {expose}: upstreams[2].transport: unknown transport \"carrier-pigeon\" (stdio, http or sse)"),
        format!("error: {expose}: upstreams[3].args[0]: path \"../outside.js\" escapes the home folder"),
        format!("error: {expose}: upstreams[3].env.K: environment variable SLUICE_E2E_MISSING is not set"),
        format!("error: {expose}: upstreams[4].url: \"ftp://x\" is not an http:// or https:// URL"),
        format!("error: {expose}: upstreams[4].headers.X: environment variable SLUICE_E2E_MISSING2 is not set"),
        format!("error: {expose}: expose[0].upstream: no upstream has the id \"zzz\""),
        format!("error: {expose}: expose[1].as: \"bad name!\" is not a valid tool name"),
    ];
    for e in &expected {
        assert!(
            out.lines().any(|l| l.starts_with(e.as_str())),
            "missing {e:?} in:\n{out}"
        );
    }
    assert!(out.ends_with(&format!(
        "{} error(s)\n",
        out.lines().filter(|l| l.starts_with("error: ")).count()
    )));
}

#[test]
fn check_reports_malformed_json_with_line_and_column() {
    let home = Home::new("check-json");
    home.write(
        "mcp/expose.json",
        "{\n  \"upstreams\": [\n    {\"id\": \"a\",, }\n  ]\n}\n",
    );
    let (code, out) = check(&home);
    assert_eq!(code, 1);
    let expose = home.path().join("mcp/expose.json").display().to_string();
    assert!(
        out.starts_with(&format!(
            "error: {expose}: malformed JSON at line 3, column 16: key must be a string"
        )),
        "{out}"
    );
}

#[test]
fn check_fails_on_a_missing_home() {
    let out = Command::new(bin("sluice"))
        .args(["check", "--home", "/nonexistent/sluice-home"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "error: /nonexistent/sluice-home: the home folder does not exist\n1 error(s)\n"
    );
}

#[tokio::test]
async fn serve_without_home_runs_the_demo_tree() {
    let (_gw, url) = start_sluice(&[]);
    let mut c = Client::new(&url);
    let init = c.initialize(json!({})).await;
    assert_eq!(init["serverInfo"]["name"], json!("sluice"));
    assert_eq!(
        c.tool_names().await,
        ["demo_echo", "demo_add", "demo_word_count"]
    );
    // The explain hook is on: every tool asks for a reason, and a call without one is refused
    // with a message for the agent.
    let list = c.request("tools/list", json!({})).await;
    for t in list["result"]["tools"].as_array().unwrap() {
        assert_eq!(
            t["inputSchema"]["properties"]["reason"]["type"],
            json!("string")
        );
        assert_eq!(
            t["inputSchema"]["required"].as_array().unwrap().last(),
            Some(&json!("reason"))
        );
    }
    let r = c.call_tool("demo_add", json!({"a": 2, "b": 40})).await;
    assert_eq!(r["error"]["code"], json!(-32030));
    assert_eq!(r["error"]["message"], json!("Request rejected"));
    assert!(r["error"]["data"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("Missing required parameter 'reason'"));
    let r = c
        .call_tool(
            "demo_add",
            json!({"a": 2, "b": 40, "reason": "checking the sum"}),
        )
        .await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 42}));
}

#[test]
fn serve_refuses_a_non_loopback_listener() {
    let out = Command::new(bin("sluice"))
        .args(["serve", "--listen", "0.0.0.0:18999"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "refusing to listen on 0.0.0.0:18999 without authentication: configure auth/auth.config.json (tokens or OAuth) or listen on a loopback address"
    ));
}

#[test]
fn an_auth_config_that_cannot_authenticate_is_refused_not_served_unprotected() {
    let home = Home::new("auth-on");
    home.write(
        "auth/auth.config.json",
        r#"{"enabled": true, "issuer": "https://as.example", "tokens": [{"name": "x", "sha256": "00"}]}"#,
    );
    let (code, out) = check(&home);
    assert_eq!(code, 1, "{out}");
    let f = home
        .path()
        .join("auth/auth.config.json")
        .display()
        .to_string();
    assert_eq!(
        out,
        format!(
            "error: {f}: issuer: needs jwks_url or jwks_file to check signatures\n\
             error: {f}: tokens[0].sha256: must be the 64 hex digits of the token's SHA-256 (sluice auth hash TOKEN)\n\
             2 error(s)\n"
        )
    );
    let off = Home::new("auth-off");
    off.write("auth/auth.config.json", r#"{"enabled": false}"#);
    assert_eq!(check(&off).0, 0);
}

fn schema(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin("sluice"))
        .arg("schema")
        .args(args)
        .output()
        .expect("run sluice schema");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `sluice schema KIND` prints each file's schema (by kind or file name); a tree whose files
/// carry `"$schema"` lines pointing at them, as the docs show for editors, checks clean.
#[test]
fn schema_prints_each_files_schema_and_a_tree_may_point_at_them() {
    let (code, list, _) = schema(&["--list"]);
    assert_eq!(code, 0);
    let kinds: Vec<(&str, &str)> = list
        .lines()
        .map(|l| l.split_once(' ').map(|(k, f)| (k, f.trim())).unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            ("expose", "mcp/expose.json"),
            ("endpoints", "mcp/endpoints.json"),
            ("hooks", "hooks/hooks.manifest.json"),
            ("tools", "tools/tools.register.json"),
            ("settings", "sluice.json"),
            ("auth", "auth/auth.config.json"),
        ]
    );
    let home = Home::new("schema");
    for (kind, file) in &kinds {
        let (code, text, err) = schema(&[kind]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&text).expect("pretty JSON");
        assert_eq!(v["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert!(v["$id"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{kind}.json")));
        assert!(v["title"].as_str().unwrap().contains(file));
        assert_eq!(schema(&[file]).1, text, "by file name");
        home.write(&format!("schemas/{kind}.json"), &text);
    }
    home.write("sluice.json", r#"{"$schema": "./schemas/settings.json", "page_size": 10}"#)
        .write(
            "hooks/hooks.manifest.json",
            r#"{"$schema": "../schemas/hooks.json", "hooks": [{"id": "explain", "type": "builtin", "builtin": "explain", "enabled": true}]}"#,
        )
        .write(
            "tools/tools.register.json",
            r#"{"$schema": "../schemas/tools.json", "tools": [{"id": "where", "name": "Where", "invoke": {"type": "shell", "command": "pwd"}}]}"#,
        )
        .write(
            "auth/auth.config.json",
            r#"{"$schema": "../schemas/auth.json", "enabled": false}"#,
        );
    home.expose(&json!({"$schema": "../schemas/expose.json", "upstreams": [{"id": "u", "command": "true"}]}));
    let (code, out) = check(&home);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = schema(&["logs"]);
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "unknown file kind \"logs\" (known: expose, endpoints, hooks, tools, settings, auth"
        ),
        "{err}"
    );
}
