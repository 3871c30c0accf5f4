//! Skills (the Skills extension) through the gateway, with the real binary and the fixture's
//! `--skills` tree: each upstream's skills listed under its prefix with every digest, size and
//! frontmatter exactly as the upstream gives them; reads, `skills/get` and directory reads routed
//! back and answered with the client's URIs; a skill file that does not match its entry refused;
//! the capability only when an upstream has it; access rules and hooks applied to skills as to
//! any other method.

use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_fixture_http, start_sluice};

const EXT: &str = "io.modelcontextprotocol/skills";

fn fixture(args: &[&str], extra: Value) -> Value {
    let args = [["--stdio"].as_slice(), args].concat();
    let command = bin("sluice-fixture").to_string_lossy().into_owned();
    let mut up = json!({"transport": "stdio", "command": command, "args": args,
                        "expose_all": true});
    for (k, v) in extra.as_object().unwrap() {
        up[k] = v.clone();
    }
    up
}

fn gateway(
    label: &str,
    upstreams: Vec<Value>,
    files: &[(&str, Value)],
) -> (sluice_e2e::Proc, String, Home) {
    let home = Home::new(label);
    home.expose(
        &json!({"version": 1, "on_collision": "first", "upstreams": upstreams, "expose": []}),
    );
    for (path, v) in files {
        home.write(path, &v.to_string());
    }
    let (gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    (gw, url, home)
}

/// Every entry of `skills/list`, page by page.
async fn all_skills(c: &Client) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..50 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let r = c.request("skills/list", params).await;
        out.extend(
            r["result"]["skills"]
                .as_array()
                .expect("skills")
                .iter()
                .cloned(),
        );
        match r["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return out,
        }
    }
    panic!("skills/list never ended");
}

/// An upstream's JSON with every `skill://` URI in it shown under `prefix`.
fn under(prefix: &str, v: &Value) -> Value {
    let text = v
        .to_string()
        .replace("\"skill://", &format!("\"skill://{prefix}/"));
    serde_json::from_str(&text).unwrap()
}

/// `method` on the upstream's `uri` through the gateway (under `prefix`) answers what it answers
/// directly, with the client's URIs; returns the direct result.
async fn through_and_direct(
    gateway: &Client,
    direct: &Client,
    method: &str,
    prefix: &str,
    uri: &str,
) -> Value {
    let shown = uri.replacen("skill://", &format!("skill://{prefix}/"), 1);
    let through = gateway.request(method, json!({"uri": shown})).await;
    let direct = direct.request(method, json!({"uri": uri})).await;
    assert!(direct["result"].is_object(), "{method} {uri}: {direct}");
    assert_eq!(
        through["result"],
        under(prefix, &direct["result"]),
        "{method} {uri}"
    );
    direct["result"].clone()
}

#[tokio::test]
async fn the_skills_of_two_upstreams_are_served_under_their_prefixes_exactly() {
    let (_fx, fx_url) = start_fixture_http(&["--skills"]);
    let mut direct = Client::new(&fx_url);
    direct.initialize(json!({})).await;
    let listed = all_skills(&direct).await;
    assert_eq!(listed.len(), 3);

    let (_gw, url, _home) = gateway(
        "skills-two",
        vec![
            json!({"id": "docs", "transport": "http", "url": fx_url, "expose_all": true}),
            fixture(
                &["--skills", "--page-size", "2"],
                json!({"id": "more", "skill_prefix": "team.b"}),
            ),
            fixture(&[], json!({"id": "plain"})),
        ],
        &[],
    );
    let mut c = Client::new(&url);
    let init = c.initialize(json!({})).await;
    assert_eq!(
        init["capabilities"]["extensions"],
        json!({EXT: {"directoryRead": true}})
    );

    // Each upstream's entries under its prefix, in upstream order, every digest, size and
    // frontmatter as the upstream gave them.
    let expected: Vec<Value> = listed
        .iter()
        .map(|e| under("docs", e))
        .chain(listed.iter().map(|e| under("team.b", e)))
        .collect();
    assert_eq!(all_skills(&c).await, expected);

    // A read, a skills/get and a directory read go back to their upstream and come back with
    // the client's URIs; the content is byte for byte the upstream's.
    let read = through_and_direct(
        &c,
        &direct,
        "resources/read",
        "team.b",
        "skill://pdf-processing/templates/regional/eu-invoice.md",
    )
    .await;
    assert!(read["contents"][0]["text"].as_str().unwrap().contains('€'));
    through_and_direct(
        &c,
        &direct,
        "skills/get",
        "docs",
        "skill://acme/billing/refunds/SKILL.md",
    )
    .await;
    through_and_direct(
        &c,
        &direct,
        "resources/directory/read",
        "team.b",
        "skill://pdf-processing/templates",
    )
    .await;

    // The SKILL.md resources are listed under the prefixes too.
    let resources = c.request("resources/list", json!({})).await;
    let uris: Vec<&str> = resources["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .filter(|u| u.starts_with("skill://"))
        .collect();
    assert!(
        uris.contains(&"skill://docs/pdf-processing/SKILL.md"),
        "{uris:?}"
    );
    assert!(
        uris.contains(&"skill://team.b/git-workflow/SKILL.md"),
        "{uris:?}"
    );
    assert!(
        !uris.iter().any(|u| u.starts_with("skill://pdf-processing")),
        "{uris:?}"
    );

    // What no upstream serves is -32602, as the extension says.
    let none = c
        .request("skills/get", json!({"uri": "skill://nobody/x/SKILL.md"}))
        .await;
    assert_eq!(
        none["error"],
        json!({"code": -32602, "message": "No skill is served at skill://nobody/x/SKILL.md"})
    );
    for method in ["skills/get", "resources/directory/read"] {
        let r = c.request(method, json!({})).await;
        assert_eq!(
            r["error"],
            json!({"code": -32602, "message": format!("{method} needs params.uri")})
        );
    }
    let not_dir = c
        .request(
            "resources/directory/read",
            json!({"uri": "skill://plain/x"}),
        )
        .await;
    assert_eq!(
        not_dir["error"],
        json!({"code": -32602, "message": "skill://plain/x is not a directory resource"})
    );
}

#[tokio::test]
async fn without_an_upstream_that_has_skills_the_gateway_declares_none() {
    let (_gw, url, _home) = gateway(
        "skills-none",
        vec![fixture(&[], json!({"id": "plain"}))],
        &[],
    );
    let mut c = Client::new(&url);
    let init = c.initialize(json!({})).await;
    assert_eq!(init["capabilities"].get("extensions"), None, "{init}");
    let r = c.request("skills/list", json!({})).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
}

#[tokio::test]
async fn a_skill_file_that_does_not_match_its_entry_is_refused_and_never_passed_on() {
    let (_gw, url, _home) = gateway(
        "skills-tampered",
        vec![
            fixture(
                &["--skills", "--skills-tamper", "size"],
                json!({"id": "docs"}),
            ),
            fixture(
                &["--skills", "--skills-tamper", "frontmatter"],
                json!({"id": "fm"}),
            ),
        ],
        &[],
    );
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let skills = all_skills(&c).await;
    let md = "skill://docs/pdf-processing/SKILL.md";
    let size = skills
        .iter()
        .find(|s| s["uri"] == md)
        .and_then(|s| s["resources"][0]["size"].as_u64())
        .unwrap();
    let r = c.request("resources/read", json!({"uri": md})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32031,
               "message": format!("{md} does not match its skill's entry ({md} is {} bytes, its entry says {size}): not passed on", size + 1),
               "data": {"uri": md, "skill": md}})
    );
    assert!(r.get("result").is_none());
    // The skill's other files match their entries: served.
    let forms = c
        .request(
            "resources/read",
            json!({"uri": "skill://docs/pdf-processing/references/FORMS.md"}),
        )
        .await;
    assert!(
        forms["result"]["contents"][0]["text"].is_string(),
        "{forms}"
    );

    let md = "skill://fm/pdf-processing/SKILL.md";
    let r = c.request("resources/read", json!({"uri": md})).await;
    assert_eq!(
        r["error"]["message"],
        format!("{md} does not match its skill's entry ({md}'s frontmatter differs from its entry's in description): not passed on")
    );
}

#[tokio::test]
async fn access_rules_and_hooks_apply_to_skills_as_to_any_other_method() {
    let hook = "grep -q git-workflow && { echo 'git workflow is for people' >&2; exit 2; }; exit 0";
    let (_gw, url, _home) = gateway(
        "skills-rules",
        vec![fixture(&["--skills"], json!({"id": "docs"}))],
        &[
            (
                "auth/auth.config.json",
                json!({"enabled": false, "rules": [{"effect": "deny", "resources": ["skill://docs/acme/*"]}]}),
            ),
            (
                "hooks/hooks.manifest.json",
                json!({"version": 1, "hooks": [{"id": "no-git", "event": "Request", "type": "command",
                        "methods": ["skills/get"], "command": hook, "enabled": true}]}),
            ),
        ],
    );
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let uris: Vec<String> = all_skills(&c)
        .await
        .iter()
        .map(|s| s["uri"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        uris,
        [
            "skill://docs/pdf-processing/SKILL.md",
            "skill://docs/git-workflow/SKILL.md"
        ]
    );
    // What the rules deny is answered as what does not exist.
    let refunds = "skill://docs/acme/billing/refunds/SKILL.md";
    let r = c.request("skills/get", json!({"uri": refunds})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32602, "message": format!("No skill is served at {refunds}")})
    );
    let r = c.request("resources/read", json!({"uri": refunds})).await;
    assert_eq!(
        r["error"]["message"],
        format!("Resource not found: {refunds}")
    );
    // The hook sees the client's URI and refuses what it refuses.
    let r = c
        .request(
            "skills/get",
            json!({"uri": "skill://docs/git-workflow/SKILL.md"}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32030, "{r}");
    assert_eq!(
        r["error"]["data"]["reason"], "git workflow is for people",
        "{r}"
    );
    let r = c
        .request(
            "skills/get",
            json!({"uri": "skill://docs/pdf-processing/SKILL.md"}),
        )
        .await;
    assert_eq!(
        r["result"]["skill"]["uri"], "skill://docs/pdf-processing/SKILL.md",
        "{r}"
    );
}

fn sha256(text: &str) -> String {
    use sha2::Digest;
    let sum = sha2::Sha256::digest(text.as_bytes());
    format!(
        "sha256:{}",
        sum.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// The digest `skills/list` gives now for the gateway's `skill://docs/git-workflow/SKILL.md`.
async fn listed_digest(c: &Client) -> String {
    let skills = all_skills(c).await;
    let entry = skills
        .iter()
        .find(|s| s["uri"] == "skill://docs/git-workflow/SKILL.md")
        .expect("git-workflow listed");
    entry["resources"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A skill that changes: a read whose content no longer matches the entry the gateway listed is
/// checked once more against the skill's entry now (`skills/get`) and passed on when it matches
/// that; when the upstream says its resources changed, the gateway lists the new entry.
#[tokio::test]
async fn a_changed_skill_is_checked_against_its_entry_now_and_listed_anew_when_announced() {
    // The fixture speaks both eras: `auto` finds 2026-07-28 (the change comes on the gateway's
    // listen stream), `handshake` keeps to the initialize handshake (on the connection itself).
    for era in ["auto", "handshake"] {
        changed_skill(era).await;
    }
}

async fn changed_skill(era: &str) {
    let (_gw, url, _home) = gateway(
        &format!("skills-changed-{era}"),
        vec![fixture(&["--skills"], json!({"id": "docs", "era": era}))],
        &[],
    );
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let md = "skill://docs/git-workflow/SKILL.md";
    let first = read(&c, md).await.expect("read");
    assert_eq!(listed_digest(&c).await, sha256(&first));

    // Changed without a word: the gateway's entry is stale, the read is checked against the
    // entry the upstream gives now and passed on.
    let r = c.call_tool("docs_skills_edit", json!({})).await;
    assert_eq!(r["result"]["content"][0]["text"], "edition 1", "{r}");
    let second = read(&c, md)
        .await
        .expect("checked against the entry now and passed on");
    assert!(second.ends_with("\nEdition 1.\n"), "{second}");
    assert_eq!(
        listed_digest(&c).await,
        sha256(&first),
        "not announced: the listing is as it was"
    );

    // Announced: the gateway reads its lists again and lists the new entry.
    let r = c
        .call_tool("docs_skills_edit", json!({"notify": true}))
        .await;
    assert_eq!(r["result"]["content"][0]["text"], "edition 2", "{r}");
    let third = read(&c, md).await.expect("read");
    assert!(third.ends_with("\nEdition 2.\n"), "{third}");
    let want = sha256(&third);
    let (c, want) = (&c, &want);
    sluice_e2e::eventually("the new entry listed", || async move {
        listed_digest(c).await == *want
    })
    .await;
}

/// The text of a read of `uri`, or `None` when it was refused.
async fn read(c: &Client, uri: &str) -> Option<String> {
    let r = c.request("resources/read", json!({"uri": uri})).await;
    r["result"]["contents"][0]["text"]
        .as_str()
        .map(str::to_string)
}

/// `skills[]` of `mcp/expose.json`, the `expose` entries' rename for skills: a skill served
/// under a path the tree chooses (its old path under the prefix is gone), another not served at
/// all; their files checked as before, under their new URIs.
#[tokio::test]
async fn a_skill_is_served_under_the_path_the_tree_gives_it_or_not_at_all() {
    let home = Home::new("skills-renamed");
    home.expose(
        &json!({"version": 1, "upstreams": [fixture(&["--skills"], json!({"id": "docs"}))],
        "expose": [],
        "skills": [
            {"upstream": "docs", "skill": "acme/billing/refunds", "as": "finance/refunds"},
            {"upstream": "docs", "skill": "git-workflow", "enabled": false}
        ]}),
    );
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let uris: Vec<String> = all_skills(&c)
        .await
        .iter()
        .map(|s| s["uri"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        uris,
        [
            "skill://docs/pdf-processing/SKILL.md",
            "skill://finance/refunds/SKILL.md"
        ]
    );
    let got = c
        .request(
            "skills/get",
            json!({"uri": "skill://finance/refunds/SKILL.md"}),
        )
        .await;
    assert_eq!(
        got["result"]["skill"]["resources"][1]["uri"], "skill://finance/refunds/examples/email.md",
        "{got}"
    );
    let email = read(&c, "skill://finance/refunds/examples/email.md").await;
    assert!(email.is_some_and(|t| t.starts_with("Subject: Your refund")));
    for gone in [
        "skill://docs/acme/billing/refunds/SKILL.md",
        "skill://docs/git-workflow/SKILL.md",
    ] {
        let r = c.request("skills/get", json!({"uri": gone})).await;
        assert_eq!(
            r["error"],
            json!({"code": -32602, "message": format!("No skill is served at {gone}")}),
            "{gone}"
        );
    }
    let resources = c.request("resources/list", json!({})).await;
    let listed: Vec<&str> = resources["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .filter(|u| u.starts_with("skill://"))
        .collect();
    assert_eq!(
        listed,
        [
            "skill://docs/pdf-processing/SKILL.md",
            "skill://finance/refunds/SKILL.md"
        ]
    );
}
