//! Guardrail builtins through the real binary: the response controls (`mask`, `pii`,
//! `size-cap`) as the client and a user response hook see them, with their counts in the audit
//! line; the request-side builtins `deny`, `rewrite` (the Zato-style example's region), `validate` (every
//! violation listed) and `describe` (a hidden parameter filled in by a rewrite); and `check`
//! naming the file and field of bad builtin options.

use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};
use std::process::Command;

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

/// A home with stdio fixture upstreams (every tool listed as `<id>_<tool>`) and these hooks.
fn home_with(label: &str, upstreams: &[&str], hooks: Value) -> Home {
    let home = Home::new(label);
    let ups: Vec<Value> = upstreams
        .iter()
        .map(|id| json!({"id": id, "command": fixture(), "args": ["--stdio"], "expose_all": true}))
        .collect();
    home.expose(&json!({ "upstreams": ups }));
    home.write(
        "hooks/hooks.manifest.json",
        &serde_json::to_string_pretty(&json!({"version": 1, "hooks": hooks})).unwrap(),
    );
    home
}

fn builtin(id: &str, name: &str, options: Value) -> Value {
    json!({"id": id, "type": "builtin", "builtin": name, "options": options, "enabled": true})
}

async fn client(home: &Home) -> (sluice_e2e::Proc, Client) {
    let (gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    (gw, c)
}

/// A PostToolUse hook that writes what it was shown (`tool_response`) to `seen.json` in the
/// home folder and lets the reply pass.
const RECORD_PY: &str = r#"
import json, os, sys
event = json.load(sys.stdin)
with open(os.path.join(event["cwd"], "seen.json"), "w") as f:
    json.dump(event["tool_response"], f)
"#;

#[tokio::test]
async fn mask_and_pii_shape_the_result_before_the_response_hook_sees_it() {
    // The controls come first in the manifest, the recording hook last: were they ordinary
    // response hooks, the recorder (tail) would run before them. Controls run first anyway.
    let home = home_with(
        "guard-mask-pii",
        &["fx"],
        json!([
            builtin("mask", "mask", json!({"keys": ["password"], "paths": ["/account/number"]})),
            builtin("pii", "pii", json!({"allow_tools": ["fx_add"]})),
            {"id": "post-tool-use/record", "event": "PostToolUse", "type": "command",
             "command": "python3 \"${HOOKS_DIR}/scripts/record.py\"", "timeout": 10, "enabled": true}
        ]),
    );
    home.write("hooks/scripts/record.py", RECORD_PY);
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    let (_gw, c) = client(&home).await;
    let args = json!({
        "user": "ann",
        "password": "hunter2",
        "account": {"number": "12-345", "bank": "ACME"},
        "email": "ann.lee@example.com",
        "card": "4111 1111 1111 1111",
        "not_a_card": "4111 1111 1111 1112",
        "iban": "DE89 3704 0044 0532 0130 00",
        "not_an_iban": "DE89 3704 0044 0532 0130 01",
        "note": "call +44 20 7946 0958 from 10.1.2.3"
    });
    let r = c.call_tool("fx_echo", args).await;
    let expected = json!({
        "user": "ann",
        "password": "***",
        "account": {"number": "***", "bank": "ACME"},
        "email": "[EMAIL]",
        "card": "[CARD]",
        "not_a_card": "4111 1111 1111 1112",
        "iban": "[IBAN]",
        "not_an_iban": "DE89 3704 0044 0532 0130 01",
        "note": "call [PHONE] from [IP]"
    });
    // What the agent gets: structured content, and the JSON text re-serialised.
    assert_eq!(
        r["result"],
        json!({"content": [{"type": "text", "text": expected.to_string()}], "structuredContent": expected})
    );
    // What the response hook was shown: the same.
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("seen.json")).unwrap())
            .unwrap();
    assert_eq!(seen, r["result"]);
    // An allowed tool is left alone by pii (its numbers are not cards anyway).
    let r = c.call_tool("fx_add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 3}));
    // The audit line counts what each control changed (structured content and text each).
    let lines = home.audit_lines(2).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["tool"], json!("fx_echo"));
    assert_eq!(
        lines[0]["controls"],
        json!({"mask": 4, "pii": {"CARD": 2, "EMAIL": 2, "IBAN": 2, "IP": 2, "PHONE": 2}})
    );
    let decisions: Vec<(&str, &str)> = lines[0]["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["id"].as_str().unwrap(), h["decision"].as_str().unwrap()))
        .collect();
    assert_eq!(
        decisions,
        [
            ("mask", "modify"),
            ("pii", "modify"),
            ("post-tool-use/record", "pass")
        ]
    );
    assert_eq!(lines[1]["controls"], json!({}));
}

#[tokio::test]
async fn size_cap_truncates_a_multi_block_result_and_refuses() {
    // `raw` is the same fixture without a cap, to compare with.
    let home = home_with(
        "guard-size-cap",
        &["fx", "raw"],
        json!([
            builtin("cap", "size-cap", json!({"per_tool": {"fx_*": 20}})),
            builtin(
                "cap-refuse",
                "size-cap",
                json!({"mode": "refuse", "per_tool": {"raw_echo": 10}})
            )
        ]),
    );
    let (_gw, c) = client(&home).await;
    let raw = c
        .call_tool("raw_test_multiple_content_types", json!({}))
        .await;
    let blocks = raw["result"]["content"].as_array().unwrap().clone();
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0]["text"], json!("Multiple content types test:"));
    let dropped: usize = blocks[1..]
        .iter()
        .map(|b| serde_json::to_string(b).unwrap().len())
        .sum();
    // 20 bytes of the first text block survive, with a visible marker; the image and the
    // resource are past the cap and dropped, with a notice.
    let r = c
        .call_tool("fx_test_multiple_content_types", json!({}))
        .await;
    assert_eq!(
        r["result"]["content"],
        json!([
            {"type": "text", "text": "Multiple content typ…[truncated by Sluice: 8 bytes removed]"},
            {"type": "text", "text": format!("[truncated by Sluice: 2 more content blocks ({dropped} bytes) removed]")}
        ])
    );
    // Under the cap: untouched.
    let r = c.call_tool("fx_echo", json!({"t": "x"})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"t": "x"}));
    // Refuse mode: -32031 with the reason for the agent. 24 bytes of text + 24 of structured
    // content.
    let r = c
        .call_tool("raw_echo", json!({"text": "0123456789abc"}))
        .await;
    assert_eq!(
        r["error"],
        json!({"code": -32031, "message": "Response rejected", "data": {"reason":
            "Response too large: the result of tool \"raw_echo\" is 48 bytes, over the 10-byte cap of this gateway. Ask for less (a narrower query, a page, a range) and try again."}})
    );
}

#[tokio::test]
async fn deny_refuses_tools_and_argument_patterns_with_a_reason_for_the_agent() {
    let home = home_with(
        "guard-deny",
        &["fx"],
        json!([builtin(
            "deny",
            "deny",
            json!({
                "tools": ["fx_crash", "fx_trigger_.*"],
                "arguments": [
                    {"tool": "fx_echo", "path": "command", "pattern": "rm\\s+-rf"},
                    {"pattern": "(?i)drop\\s+table", "reason": "Schema changes are not allowed."}
                ]
            })
        )]),
    );
    let (_gw, c) = client(&home).await;
    let r = c.call_tool("fx_crash", json!({})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32030, "message": "Request rejected", "data": {"reason": "Tool \"fx_crash\" is not allowed through this gateway."}})
    );
    let r = c.call_tool("fx_trigger_list_changed", json!({})).await;
    assert_eq!(r["error"]["code"], json!(-32030));
    let r = c
        .call_tool("fx_echo", json!({"command": "rm  -rf /"}))
        .await;
    assert_eq!(
        r["error"]["data"]["reason"],
        json!(
            r#"Argument "command" of tool "fx_echo" is not allowed: it matches the denied pattern "rm\s+-rf"."#
        )
    );
    let r = c
        .call_tool("fx_echo", json!({"q": ["ok", {"sql": "DROP TABLE users"}]}))
        .await;
    assert_eq!(
        r["error"]["data"]["reason"],
        json!("Schema changes are not allowed.")
    );
    // Elsewhere the pattern is fine, and other tools pass.
    let r = c.call_tool("fx_echo", json!({"note": "rm -rf"})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"note": "rm -rf"}));
    let r = c.call_tool("fx_add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 3}));
}

#[tokio::test]
async fn rewrite_forces_the_example_region_and_describe_hides_what_rewrite_fills() {
    let home = Home::new("guard-rewrite");
    home.expose(&json!({
        "upstreams": [{"id": "crm", "command": fixture(), "args": ["--stdio"]}],
        "expose": [
            {"upstream": "crm", "tool": "echo", "as": "crm.order.status"},
            {"upstream": "crm", "tool": "add", "as": "crm.add"}
        ]
    }));
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"hooks": [
            builtin("describe", "describe", json!({"tools": {
                "crm.add": {
                    "title": "Add ten",
                    "description": "Adds ten to a.",
                    "properties": {"a": {"description": "The number to add ten to", "minimum": 0}},
                    "hide": ["b"]
                }
            }})),
            builtin("rewrite", "rewrite", json!({"rules": [
                {"tool": "crm\\.order\\.status", "set": {"region": "eu-central"}},
                {"tool": "crm\\.add", "set": {"b": 10}}
            ]}))
        ]})
        .to_string(),
    );
    let (_gw, c) = client(&home).await;
    let r = c
        .call_tool(
            "crm.order.status",
            json!({"order": "A-1", "region": "us-east"}),
        )
        .await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"order": "A-1", "region": "eu-central"})
    );
    let tools = c.request("tools/list", json!({})).await["result"]["tools"].clone();
    let add = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "crm.add")
        .unwrap()
        .clone();
    assert_eq!(
        add,
        json!({"name": "crm.add", "description": "Adds ten to a.", "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number", "description": "The number to add ten to", "minimum": 0}},
            "required": ["a"]
        }, "outputSchema": add["outputSchema"].clone(), "title": "Add ten"})
    );
    // The hidden parameter is filled in by the rewrite.
    let r = c.call_tool("crm.add", json!({"a": 5})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 15}));
}

#[tokio::test]
async fn validate_lists_every_violation_with_minus_32602() {
    // The explain hook first strips the `reason`, then validate checks what goes upstream.
    let home = home_with(
        "guard-validate",
        &["fx"],
        json!([
            builtin("explain", "explain", Value::Null),
            builtin("validate", "validate", Value::Null)
        ]),
    );
    let (_gw, c) = client(&home).await;
    let r = c
        .call_tool(
            "fx_json_schema_2020_12_tool",
            json!({"reason": "testing", "name": 5, "address": {"street": 1, "city": "Oslo"}, "extra": true}),
        )
        .await;
    assert_eq!(
        r["error"],
        json!({
            "code": -32602,
            "message": "Invalid arguments for tool \"fx_json_schema_2020_12_tool\": /name: 5 is not of type \"string\"; /address/street: 1 is not of type \"string\"; Additional properties are not allowed ('extra' was unexpected)",
            "data": {"tool": "fx_json_schema_2020_12_tool", "violations": [
                {"path": "/name", "keyword": "type", "message": "5 is not of type \"string\""},
                {"path": "/address/street", "keyword": "type", "message": "1 is not of type \"string\""},
                {"path": "", "keyword": "additionalProperties", "message": "Additional properties are not allowed ('extra' was unexpected)"}
            ]}
        })
    );
    let r = c
        .call_tool("fx_add", json!({"reason": "testing", "a": "1"}))
        .await;
    assert_eq!(
        r["error"]["data"]["violations"],
        json!([
            {"path": "", "keyword": "required", "message": "\"b\" is a required property"},
            {"path": "/a", "keyword": "type", "message": "\"1\" is not of type \"number\""}
        ])
    );
    // Valid arguments go on; an unknown tool is still the router's -32602.
    let r = c
        .call_tool(
            "fx_json_schema_2020_12_tool",
            json!({"reason": "testing", "name": "Ann", "address": {"city": "Oslo"}}),
        )
        .await;
    assert_eq!(
        r["result"]["content"][0]["text"],
        json!("JSON Schema 2020-12 tool called with: {\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\"}}")
    );
    let r = c.call_tool("fx_nope", json!({"reason": "testing"})).await;
    assert_eq!(r["error"]["code"], json!(-32602));
    assert!(r["error"]
        .get("data")
        .is_none_or(|d| d.get("violations").is_none()));
}

#[test]
fn check_names_the_file_and_field_of_bad_builtin_options() {
    let home = Home::new("guard-check");
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"hooks": [
            builtin("deny", "deny", json!({"tools": ["(["]})),
            builtin("cap", "size-cap", json!({"max_bytes": -1, "mode": "snip"})),
            builtin("pii", "pii", json!({"kinds": ["SHOE_SIZE"]})),
            builtin("rw", "rewrite", json!({"rules": [{"tool": "x"}]}))
        ]})
        .to_string(),
    );
    let out = Command::new(bin("sluice"))
        .args(["check", "--home", &home.arg()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{text}");
    let m = home
        .path()
        .join("hooks/hooks.manifest.json")
        .display()
        .to_string();
    for e in [
        format!("error: {m}: hooks[0].options.tools[0]: \"([\" is not a valid regex: unclosed character class"),
        format!("error: {m}: hooks[1].options.max_bytes: must be a positive integer"),
        format!("error: {m}: hooks[1].options.mode: unknown mode \"snip\" (truncate or refuse)"),
        format!("error: {m}: hooks[2].options.kinds[0]: unknown kind \"SHOE_SIZE\" (known: EMAIL, PHONE, CARD, IBAN, SSN, IP, JWT, PRIVATE_KEY, SECRET)"),
        format!("error: {m}: hooks[3].options.rules[0]: needs `set`, `default` or `remove`"),
    ] {
        assert!(
            text.lines().any(|l| l == e),
            "missing {e:?} in:\n{text}"
        );
    }
}
