//! `--skills` over stdio in both eras (the conformance suite drives it over HTTP from the e2e
//! tests): the capability, `skills/list` pages, `skills/get`, `resources/directory/read`, skill
//! files through `resources/read` and `resources/list`, the `-32602` errors, the caching hints of
//! 2026-07-28, `--skills-tamper`, and nothing of it without `--skills`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

const FIXTURE: &str = env!("CARGO_BIN_EXE_sluice-fixture");
const SKILLS: &str = "io.modelcontextprotocol/skills";

/// A fixture over stdio answering one request at a time; killed on drop.
struct Stdio1 {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    /// `Some(_meta)` for 2026-07-28 requests, `None` after `initialize` (2025-11-25).
    envelope: Option<Value>,
    /// The capabilities `initialize` answered (2025-11-25).
    initialized: Value,
}

impl Drop for Stdio1 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Stdio1 {
    fn start(args: &[&str], modern: bool) -> Self {
        let mut child = Command::new(FIXTURE)
            .arg("--stdio")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the fixture");
        let mut fx = Stdio1 {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next_id: 0,
            envelope: None,
            initialized: Value::Null,
        };
        if modern {
            fx.envelope = Some(json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }));
        } else {
            fx.initialized = fx
                .call(
                    "initialize",
                    json!({"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "skills-test", "version": "1"}}),
                )
                .unwrap()["capabilities"]
                .clone();
            writeln!(
                fx.stdin,
                r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
            )
            .unwrap();
        }
        fx
    }

    /// Send `method` and return its result or its error object.
    fn call(&mut self, method: &str, mut params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        if let Some(envelope) = &self.envelope {
            params["_meta"] = envelope.clone();
        }
        let msg = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        writeln!(self.stdin, "{msg}").unwrap();
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "fixture exited"
            );
            let reply: Value = serde_json::from_str(&line).unwrap();
            if reply["id"] != json!(self.next_id) {
                continue; // a notification
            }
            return match reply.get("error") {
                Some(e) => Err(e.clone()),
                None => Ok(reply["result"].clone()),
            };
        }
    }

    fn capabilities(&mut self) -> Value {
        if self.envelope.is_some() {
            self.call("server/discover", json!({})).unwrap()["capabilities"].clone()
        } else {
            self.initialized.clone()
        }
    }

    /// Every page of a paginated method; also returns the number of pages.
    fn all(&mut self, method: &str, key: &str, mut params: Value) -> (Vec<Value>, usize) {
        let (mut items, mut pages) = (Vec::new(), 0);
        loop {
            let page = self.call(method, params.clone()).unwrap();
            pages += 1;
            items.extend(page[key].as_array().unwrap().iter().cloned());
            match page.get("nextCursor") {
                Some(c) => params["cursor"] = c.clone(),
                None => return (items, pages),
            }
        }
    }
}

fn uris(items: &[Value]) -> Vec<&str> {
    items.iter().map(|i| i["uri"].as_str().unwrap()).collect()
}

#[test]
fn skills_in_both_eras_over_stdio() {
    for modern in [false, true] {
        let era = if modern { "2026-07-28" } else { "2025-11-25" };
        let mut fx = Stdio1::start(
            &["--skills", "--page-size", "2", "--ttl-ms", "5000"],
            modern,
        );
        let caps = fx.capabilities();
        assert_eq!(
            caps["extensions"][SKILLS],
            json!({"directoryRead": true}),
            "{era}"
        );
        assert!(caps["resources"].is_object(), "{era}");

        let (skills, pages) = fx.all("skills/list", "skills", json!({}));
        assert_eq!(pages, 2, "{era}: three skills in pages of two");
        assert_eq!(
            uris(&skills),
            [
                "skill://pdf-processing/SKILL.md",
                "skill://git-workflow/SKILL.md",
                "skill://acme/billing/refunds/SKILL.md"
            ],
            "{era}"
        );
        let first = fx.call("skills/list", json!({})).unwrap();
        let got = fx
            .call(
                "skills/get",
                json!({"uri": "skill://acme/billing/refunds/SKILL.md"}),
            )
            .unwrap();
        assert_eq!(got["skill"], skills[2], "{era}");
        assert!(got.get("nextCursor").is_none());
        for result in [&first, &got] {
            if modern {
                assert_eq!(result["resultType"], "complete");
                assert_eq!(result["ttlMs"], 5000);
                assert_eq!(result["cacheScope"], "public");
            } else {
                assert!(result.get("ttlMs").is_none() && result.get("resultType").is_none());
            }
        }

        // Each listed file reads back with the listed size.
        for skill in &skills {
            for file in skill["resources"].as_array().unwrap() {
                let read = fx
                    .call("resources/read", json!({"uri": file["uri"]}))
                    .unwrap();
                let text = read["contents"][0]["text"].as_str().unwrap();
                assert_eq!(json!(text.len()), file["size"], "{era} {}", file["uri"]);
                assert_eq!(read["contents"][0]["mimeType"], "text/markdown");
            }
        }
        let (resources, _) = fx.all("resources/list", "resources", json!({}));
        let pdf = resources
            .iter()
            .find(|r| r["uri"] == "skill://pdf-processing/SKILL.md")
            .expect("SKILL.md in resources/list");
        assert_eq!(pdf["name"], "pdf-processing");
        assert_eq!(
            pdf["description"],
            "Extract, fill, and assemble PDF documents"
        );

        let (children, pages) = fx.all(
            "resources/directory/read",
            "resources",
            json!({"uri": "skill://pdf-processing"}),
        );
        assert_eq!(pages, 2, "{era}: three children in pages of two");
        assert_eq!(
            uris(&children),
            [
                "skill://pdf-processing/SKILL.md",
                "skill://pdf-processing/references",
                "skill://pdf-processing/templates"
            ]
        );
        assert_eq!(children[2]["mimeType"], "inode/directory");
        let (regional, _) = fx.all(
            "resources/directory/read",
            "resources",
            json!({"uri": "skill://pdf-processing/templates/regional"}),
        );
        assert_eq!(
            uris(&regional),
            ["skill://pdf-processing/templates/regional/eu-invoice.md"]
        );

        for (method, uri, says) in [
            (
                "skills/get",
                "skill://nope/SKILL.md",
                "No skill is served at",
            ),
            (
                "resources/directory/read",
                "skill://pdf-processing/SKILL.md",
                "is not a directory resource",
            ),
            (
                "resources/directory/read",
                "skill://nope",
                "No directory resource",
            ),
            (
                "resources/read",
                "skill://pdf-processing/nope.md",
                "No skill file",
            ),
        ] {
            let e = fx.call(method, json!({"uri": uri})).unwrap_err();
            assert_eq!(e["code"], -32602, "{era} {method} {uri}");
            assert!(e["message"].as_str().unwrap().contains(says), "{e}");
        }
    }
}

#[test]
fn tampered_skill_md_differs_from_its_entry() {
    let mut fx = Stdio1::start(&["--skills", "--skills-tamper", "size"], true);
    let entry = fx
        .call(
            "skills/get",
            json!({"uri": "skill://pdf-processing/SKILL.md"}),
        )
        .unwrap()["skill"]
        .clone();
    let read = fx
        .call(
            "resources/read",
            json!({"uri": "skill://pdf-processing/SKILL.md"}),
        )
        .unwrap();
    let served = read["contents"][0]["text"].as_str().unwrap().len();
    assert_eq!(json!(served - 1), entry["resources"][0]["size"]);
}

#[test]
fn without_skills_nothing_changes() {
    for modern in [false, true] {
        let mut fx = Stdio1::start(&[], modern);
        let caps = fx.capabilities();
        assert!(caps.get("extensions").is_none(), "{caps}");
        for method in ["skills/list", "skills/get", "resources/directory/read"] {
            let e = fx
                .call(method, json!({"uri": "skill://pdf-processing/SKILL.md"}))
                .unwrap_err();
            assert_eq!(e["code"], -32601, "{method} (modern: {modern})");
        }
        let (resources, _) = fx.all("resources/list", "resources", json!({}));
        assert!(resources
            .iter()
            .all(|r| !r["uri"].as_str().unwrap().starts_with("skill://")));
    }
    let out = Command::new(FIXTURE)
        .args(["--stdio", "--skills-tamper", "digest"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--skills-tamper needs --skills"));
}
