//! Name collisions are decisions: `"on_collision": "first"` lets the first upstream in file
//! order keep a name two upstreams produce, `"error"` lists it for neither and refuses a call to
//! it naming both; `sluice check` reports the collisions the tree alone shows.

use crate::sandbox::sluice_out;
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

/// `fx` lists every tool as `fx_<tool>`; `web`'s `whoami` is curated as `fx_whoami`, the name
/// `fx` lists its own `whoami` under.
fn tree(home: &Home, on_collision: &str) {
    home.expose(&json!({"version": 1, "on_collision": on_collision,
        "upstreams": [
            {"id": "fx", "command": fixture(), "args": ["--stdio", "--name", "fx"], "expose_all": true},
            {"id": "web", "command": fixture(), "args": ["--stdio", "--name", "web"]}
        ],
        "expose": [{"upstream": "web", "tool": "whoami", "as": "fx_whoami"}]
    }));
}

async fn client(url: &str) -> Client {
    let mut c = Client::new(url);
    c.initialize(json!({})).await;
    // Both upstreams up: fx's tools are listed.
    for _ in 0..100 {
        if c.tool_names().await.iter().any(|n| n == "fx_echo") {
            return c;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("fx never came up");
}

fn whoami(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn collision_first_keeps_the_first_upstreams_tool() {
    let home = Home::new("collision-first");
    tree(&home, "first");
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = client(&url).await;
    let names = c.tool_names().await;
    assert_eq!(names.iter().filter(|n| *n == "fx_whoami").count(), 1);
    let r = c.call_tool("fx_whoami", json!({})).await;
    assert!(whoami(&r).starts_with("fx pid="), "{r}");
}

#[tokio::test]
async fn collision_error_lists_the_name_for_neither_and_refuses_a_call_naming_both() {
    let home = Home::new("collision-error");
    tree(&home, "error");
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = client(&url).await;
    // web must be up too before its whoami collides: wait until fx_whoami leaves the list.
    let mut names = c.tool_names().await;
    for _ in 0..100 {
        if !names.iter().any(|n| n == "fx_whoami") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        names = c.tool_names().await;
    }
    assert!(!names.iter().any(|n| n == "fx_whoami"), "{names:?}");
    assert!(names.iter().any(|n| n == "fx_echo"), "{names:?}");
    let r = c.call_tool("fx_whoami", json!({})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32602,
               "message": "Tool fx_whoami is offered by upstreams fx and web and on_collision is \"error\": neither serves it",
               "data": {"collision": ["fx", "web"]}}),
        "{r}"
    );
    // Everything else is served.
    let r = c.call_tool("fx_echo", json!({"text": "hi"})).await;
    assert!(r["result"].is_object(), "{r}");
}

#[test]
fn collision_check_reports_what_the_tree_shows() {
    let home = Home::new("collision-check");
    tree(&home, "error");
    let (code, text, _) = sluice_out(&["check", "--home", &home.arg()]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("collision: `as` \"fx_whoami\" of web/whoami is the name upstream fx lists its tool \"whoami\" under, if it has one\n"),
        "{text}"
    );
}

/// `sluice check --lists` starts the upstreams, reads their lists and reports the names two of
/// them really produce: an error (exit 1) with `"on_collision": "error"`, a warning with
/// `"first"`.
#[test]
fn collision_check_with_lists_reports_what_the_upstreams_produce() {
    let home = Home::new("collision-lists");
    let run = |home: &Home| {
        let (code, text, _) = sluice_out(&["check", "--lists", "--home", &home.arg()]);
        (code, text)
    };
    tree(&home, "error");
    let (code, text) = run(&home);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("upstream fx: listed ("), "{text}");
    assert!(
        text.contains("error: collision: tool name \"fx_whoami\" is produced by upstreams fx and web; listed for none of them (on_collision: error)\n"),
        "{text}"
    );
    tree(&home, "first");
    let (code, text) = run(&home);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("warning: collision: tool name \"fx_whoami\" is produced by upstreams fx and web; the first keeps it (on_collision: first)\n"),
        "{text}"
    );
}
