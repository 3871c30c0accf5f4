//! `sluice client`, the MCP client in the binary: the README's own quick-start lines run against
//! `sluice serve` (read from README.md at test time, so the test fails when the README drifts),
//! a stdio server, `--output json`, JSON-RPC errors (exit 1), `--token` against a gateway with
//! authentication on (exit 2 and a hint without it), both eras, `key=value` parsing, and the
//! Skills extension (`skills`, `skill`: what is printed is the entry's bytes, and a tampered or
//! unlisted file is refused) against the fixture's skill tree.

use serde_json::{json, Value};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice, workspace_root};
use std::process::{Command, Output};

/// Run `sluice client ARGS…`.
fn client(args: &[&str]) -> Output {
    Command::new(bin("sluice"))
        .arg("client")
        .args(args)
        .env_remove("SLUICE_TOKEN")
        .output()
        .expect("run sluice client")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The demo tree on a free port, without the admin listener.
fn demo() -> (sluice_e2e::Proc, String) {
    start_sluice(&["--no-admin"])
}

/// The README's client lines: the lines of its quick-start block after "Then point" that
/// start with `cargo run -p sluice -- client`.
fn readme_client_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let start = readme
        .find("Then point")
        .expect("README.md has the \"Then point … at it\" paragraph");
    let block = readme[start..]
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a ```sh block follows it");
    block
        .lines()
        .filter(|l| l.starts_with("cargo run -p sluice -- client"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readme_client_lines_work_against_sluice_serve() {
    let (_gw, url) = demo();
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp");
    let lines = readme_client_lines();
    let expected: [&[&str]; 2] = [
        &[
            "demo_echo        Return the given text unchanged.",
            "demo_add         Add two numbers.",
            "demo_word_count  Count the words in a text.",
        ],
        &["42", "{", "  \"sum\": 42", "}"],
    ];
    assert_eq!(
        lines.len(),
        expected.len(),
        "the README's client lines changed: {lines:#?}"
    );
    let exe = bin("sluice").to_string_lossy().into_owned();
    for (line, want) in lines.iter().zip(expected) {
        assert!(
            line.contains("http://127.0.0.1:8750/mcp"),
            "{line:?} does not use the default listener"
        );
        let run = line
            .replacen("cargo run -p sluice --", &format!("'{exe}'"), 1)
            .replace("127.0.0.1:8750", &format!("127.0.0.1:{port}"));
        let out = Command::new("sh").arg("-c").arg(&run).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{run}: {}", stderr(&out));
        assert_eq!(stdout(&out).lines().collect::<Vec<_>>(), want, "{run}");
    }
}

#[test]
fn calls_a_stdio_server_lists_its_prompts_and_resources_and_prints_json() {
    let fixture = bin("sluice-fixture").to_string_lossy().into_owned();
    let stdio = |args: &[&str]| {
        let mut all = vec!["--stdio"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", &fixture, "--stdio"]);
        client(&all)
    };
    let out = stdio(&["tools"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines().any(|l| l.starts_with("test_simple_text ")
            && l.ends_with("  Tests simple text content response")),
        "{text}"
    );
    let out = stdio(&["call", "test_simple_text"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "This is a simple text response for testing.\n"
    );
    // --output json: the raw result, one document.
    let out = stdio(&["call", "test_simple_text", "--output", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    assert_eq!(
        v["content"],
        json!([{"type": "text", "text": "This is a simple text response for testing."}])
    );
    let out = stdio(&["prompt", "test_prompt_with_arguments", "arg1=1", "arg2=two"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "A prompt with required arguments\n\n[user] Prompt with arguments: arg1='1', arg2='two'\n"
    );
    let out = stdio(&["read", "test://static-text"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "This is the content of the static text resource.\n"
    );
    let out = stdio(&["templates"]);
    assert_eq!(
        stdout(&out),
        "test://template/{id}/data  template: A resource template with parameter substitution\n"
    );
    let out = stdio(&["resources", "--output", "json"]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["resources"][0]["uri"], json!("test://static-text"));
    // A tool result with isError: true exits 1, its text on stderr.
    let out = stdio(&["call", "test_error_handling"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("reported an error (isError: true)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_json_rpc_error_exits_1_with_its_code_and_a_bad_target_exits_2() {
    let (_gw, url) = demo();
    let out = client(&[&url, "call", "no_such_tool", "reason=testing"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("error -32602: Unknown tool"),
        "{}",
        stderr(&out)
    );
    // The same error as JSON on stdout with --output json.
    let out = client(&[&url, "call", "no_such_tool", "reason=x", "--output", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["error"]["code"], json!(-32602));
    // The explain hook refuses a call without a reason: the gateway's -32030 with its data.
    let out = client(&[&url, "call", "demo_add", "a=1", "b=2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("error -32030: Request rejected\ndata: {\"reason\":\"Missing required parameter 'reason'"), "{}", stderr(&out));
    // Nothing listening, a bad action, no URL: exit 2.
    let port = sluice_e2e::free_port();
    let out = client(&[&format!("http://127.0.0.1:{port}/mcp"), "tools"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(&format!(
            "sluice client: cannot connect to http://127.0.0.1:{port}/mcp: POST failed"
        )),
        "{}",
        stderr(&out)
    );
    let out = client(&[&url, "fly"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown action \"fly\""));
    let out = client(&["tools"]);
    assert_eq!(out.status.code(), Some(2));
    let out = client(&[&url, "call", "demo_add", "novalue"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("\"novalue\" is not KEY=VALUE"));
}

#[test]
fn key_value_arguments_are_json_when_they_parse_else_strings() {
    let (_gw, url) = demo();
    // Numbers: the sum is computed (strings would be refused by the demo's add).
    let out = client(&[&url, "call", "demo_add", "a=2.5", "b=1", "reason=r"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().next(), Some("3.5"));
    // A quoted number stays a string: the demo's add says so (isError, exit 1).
    let out = client(&[&url, "call", "demo_add", "a=\"2\"", "b=1", "reason=r"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("a must be a number\n"),
        "{}",
        stderr(&out)
    );
    // Text that is not JSON is a string; --json gives the whole object, pairs add to it.
    let out = client(&[
        &url,
        "call",
        "demo_word_count",
        "--json",
        r#"{"text": "one two three"}"#,
        "reason=counting",
        "--output",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["structuredContent"], json!({"words": 3}));
    let out = client(&[&url, "call", "demo_echo", "text=hello world", "reason=r"]);
    assert_eq!(
        stdout(&out),
        "hello world\n{\n  \"text\": \"hello world\"\n}\n"
    );
}

#[test]
fn both_eras_against_sluice_serve() {
    let (_gw, url) = demo();
    let out = client(&["--era", "modern", &url, "info"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("server: sluice "), "{text}");
    assert!(text.contains("\nprotocol: 2026-07-28 (modern)\n"), "{text}");
    let out = client(&["--era", "legacy", &url, "info"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("\nprotocol: 2025-11-25 (legacy)\n"),
        "{}",
        stdout(&out)
    );
    for era in ["modern", "legacy"] {
        let out = client(&[
            "--era",
            era,
            &url,
            "call",
            "demo_echo",
            "text=hi",
            "reason=r",
        ]);
        assert_eq!(out.status.code(), Some(0), "{era}: {}", stderr(&out));
        assert_eq!(stdout(&out).lines().next(), Some("hi"), "{era}");
        let out = client(&["--era", era, &url, "tools", "--output", "json"]);
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["tools"].as_array().map(Vec::len), Some(3), "{era}");
    }
    // The modern result carries the 2026-07-28 fields; --output json shows them.
    let out = client(&[
        "--era",
        "modern",
        &url,
        "call",
        "demo_echo",
        "text=hi",
        "reason=r",
        "--output",
        "json",
    ]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["resultType"], json!("complete"));
}

#[test]
fn token_against_a_gateway_with_authentication_on() {
    let home = Home::new("client-auth");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let hash = {
        let out = Command::new(bin("sluice"))
            .args(["auth", "hash", "client-secret"])
            .output()
            .unwrap();
        stdout(&out).trim().to_string()
    };
    home.write(
        "auth/auth.config.json",
        &json!({"enabled": true, "tokens": [{"name": "cli", "sha256": hash}]}).to_string(),
    );
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let out = client(&[&url, "tools"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!(
            "sluice client: cannot connect to {url}: protocol error: HTTP 401"
        )),
        "{err}"
    );
    assert!(
        err.contains("the server wants a token: pass --token TOKEN (or set SLUICE_TOKEN)"),
        "{err}"
    );
    let out = client(&[
        "--token",
        "client-secret",
        &url,
        "call",
        "fx_test_simple_text",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "This is a simple text response for testing.\n"
    );
    // SLUICE_TOKEN does the same.
    let out = Command::new(bin("sluice"))
        .args(["client", &url, "tools"])
        .env("SLUICE_TOKEN", "client-secret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("fx_test_simple_text "));
}

/// `sha256:` and the lowercase hex digest of `bytes`, as a skill entry gives it.
fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    let sum = sha2::Sha256::digest(bytes);
    let hex: String = sum.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[test]
fn skills_are_listed_loaded_and_verified_against_the_fixtures_skill_tree_in_both_eras() {
    let fixture = bin("sluice-fixture").to_string_lossy().into_owned();
    for era in ["handshake", "stateless"] {
        let run = |args: &[&str], fixture_args: &[&str]| {
            let mut all = vec!["--era", era, "--stdio"];
            all.extend_from_slice(args);
            all.extend_from_slice(&["--", &fixture, "--stdio"]);
            all.extend_from_slice(fixture_args);
            client(&all)
        };
        let skills = |args: &[&str]| run(args, &["--skills"]);
        let out = skills(&["skills"]);
        assert_eq!(out.status.code(), Some(0), "{era}: {}", stderr(&out));
        assert_eq!(
            stdout(&out),
            "pdf-processing  Extract, fill, and assemble PDF documents (skill://pdf-processing/SKILL.md, 4 files)\n\
             git-workflow    Follow this team's Git conventions for branching and commits (skill://git-workflow/SKILL.md, 1 file)\n\
             refunds         Process customer refund requests per company policy (skill://acme/billing/refunds/SKILL.md, 2 files)\n",
            "{era}"
        );
        let out = skills(&["skills", "--output", "json"]);
        let listed: Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
        let pdf = &listed["skills"][0];
        assert_eq!(pdf["frontmatter"]["metadata"]["version"], json!("2.1.0"));
        let file = |uri: &str| {
            pdf["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["uri"] == json!(uri))
                .unwrap_or_else(|| panic!("{uri} is listed"))
                .clone()
        };

        // Loading prints SKILL.md exactly as `read` does, and those bytes are the entry's.
        let out = skills(&["skill", "pdf-processing"]);
        assert_eq!(out.status.code(), Some(0), "{era}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{era}");
        let read = skills(&["read", "skill://pdf-processing/SKILL.md"]);
        assert_eq!(stdout(&out), stdout(&read), "{era}");
        assert!(
            stdout(&out).starts_with("---\nname: pdf-processing\n"),
            "{era}"
        );
        let entry = file("skill://pdf-processing/SKILL.md");
        assert_eq!(entry["digest"], json!(sha256(&out.stdout)), "{era}");
        assert_eq!(entry["size"], json!(out.stdout.len()), "{era}");

        // FILE: a listed file with non-ASCII bytes (its size counts bytes), by path and by URI.
        let eu = "skill://pdf-processing/templates/regional/eu-invoice.md";
        let out = skills(&[
            "skill",
            "pdf-processing",
            "templates/regional/eu-invoice.md",
        ]);
        assert_eq!(out.status.code(), Some(0), "{era}: {}", stderr(&out));
        assert_eq!(stdout(&out), stdout(&skills(&["read", eu])), "{era}");
        assert!(stdout(&out).contains('€'), "{era}");
        assert_eq!(file(eu)["digest"], json!(sha256(&out.stdout)), "{era}");
        let out = skills(&["skill", "pdf-processing", eu, "--output", "json"]);
        let v: Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
        assert_eq!(v["uri"], json!(eu), "{era}");
        assert_eq!(v["verified"], json!(true), "{era}");
        assert_eq!(v["skill"], *pdf, "{era}");
        assert_eq!(v["read"]["contents"][0]["uri"], json!(eu), "{era}");

        // By URI (skills/get), a skill under a prefix.
        let out = skills(&[
            "skill",
            "skill://acme/billing/refunds/SKILL.md",
            "examples/email.md",
        ]);
        assert_eq!(out.status.code(), Some(0), "{era}: {}", stderr(&out));
        assert_eq!(
            stdout(&out),
            stdout(&skills(&[
                "read",
                "skill://acme/billing/refunds/examples/email.md"
            ])),
            "{era}"
        );

        // Refusals: exit 1, one line, nothing printed.
        let refused = |out: &Output, line: &str| {
            assert_eq!(out.status.code(), Some(1), "{era}: {}", stderr(out));
            assert_eq!(stdout(out), "", "{era}");
            assert_eq!(stderr(out), format!("sluice client: {line}\n"), "{era}");
        };
        refused(
            &skills(&["skill", "pdf-processing", "references/OTHER.md"]),
            "skill pdf-processing: references/OTHER.md is not listed in its entry's resources: not read",
        );
        refused(
            &skills(&["skill", "no-such-skill"]),
            "no skill named no-such-skill in skills/list (3 listed); a skill the list leaves out is loaded by its URI (…/SKILL.md)",
        );
        let want = (
            entry["size"].as_u64().unwrap(),
            entry["digest"].as_str().unwrap(),
        );
        let tampered = |mode: &str| {
            run(
                &["skill", "pdf-processing", "references/FORMS.md"],
                &["--skills", "--skills-tamper", mode],
            )
        };
        refused(
            &tampered("size"),
            &format!(
                "skill pdf-processing: SKILL.md is {} bytes, its entry says {}: not used",
                want.0 + 1,
                want.0
            ),
        );
        let out = tampered("digest");
        let line = stderr(&out);
        assert!(
            line.starts_with("sluice client: skill pdf-processing: SKILL.md has digest sha256:")
                && line.ends_with(&format!(", its entry says {}: not used\n", want.1)),
            "{era}: {line}"
        );
        assert_eq!(
            (out.status.code(), stdout(&out).as_str()),
            (Some(1), ""),
            "{era}"
        );
        let out = tampered("frontmatter");
        let line = stderr(&out);
        assert!(
            line.starts_with("sluice client: skill pdf-processing: SKILL.md's frontmatter differs from its entry: description is \"Extract, fill, and assemble PDF documents\" in SKILL.md, ")
                && line.ends_with(" in the entry: not used\n"),
            "{era}: {line}"
        );
        assert_eq!(
            (out.status.code(), stdout(&out).as_str()),
            (Some(1), ""),
            "{era}"
        );

        // A server without the extension: no skills/list is sent.
        let out = run(&["skills"], &[]);
        assert_eq!(out.status.code(), Some(1), "{era}: {}", stdout(&out));
        assert_eq!(
            stderr(&out),
            "sluice client: the server does not declare the Skills extension (capabilities.extensions[\"io.modelcontextprotocol/skills\"]): it serves no skills/list or skills/get\n",
            "{era}"
        );
    }
}
