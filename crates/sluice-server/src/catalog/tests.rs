//! The catalog's unit tests: tool definitions by name, the names tools are listed under, pages and cursors, resource templates.
use super::*;

fn lists(tools: &[&str]) -> UpstreamLists {
    UpstreamLists {
        tools: tools
            .iter()
            .map(|t| json!({"name": t, "x-keep": 1}))
            .collect(),
        ..Default::default()
    }
}

/// A definition is found by name through the index, as a scan from the start finds it.
#[test]
fn tool_definitions_are_found_by_name() {
    let mut a = UpstreamSpec::stdio("a", "x", vec![]);
    a.expose_all = true;
    let names: Vec<String> = (0..300).map(|i| format!("t{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let la = lists(&names);
    let (c, _) = Catalog::build(1, &[(&a, Some(&la))], &[], Vec::new(), false);
    for t in c.tools() {
        let name = t["name"].as_str().unwrap();
        let scanned = c.tools().iter().find(|t| t["name"].as_str() == Some(name));
        assert_eq!(c.tool_definition(name), scanned);
        assert!(std::ptr::eq(c.tool_definition(name).unwrap(), t));
    }
    assert_eq!(
        c.tool_definition("a_t299"),
        Some(&json!({"name": "a_t299", "x-keep": 1}))
    );
    assert_eq!(c.tool_definition("t1"), None);
    assert_eq!(c.tool_definition(""), None);
}

#[test]
fn names_are_prefixed_curated_or_transparent() {
    let mut a = UpstreamSpec::stdio("a", "x", vec![]);
    a.expose_all = true;
    let b = UpstreamSpec::stdio("b", "x", vec![]);
    let expose = vec![ExposeEntry {
        upstream: "b".into(),
        tool: "ping".into(),
        name: "my_ping".into(),
        category: String::new(),
        enabled: true,
    }];
    let la = lists(&["echo", "add"]);
    let lb = lists(&["ping", "other"]);
    let (c, w) = Catalog::build(
        1,
        &[(&a, Some(&la)), (&b, Some(&lb))],
        &expose,
        Vec::new(),
        false,
    );
    assert!(w.is_empty());
    let names: Vec<_> = c
        .tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a_echo", "a_add", "my_ping"]);
    assert_eq!(
        c.tool("my_ping"),
        Some(&Route::Upstream {
            slot: 1,
            name: "ping".into()
        })
    );
    assert_eq!(c.tools()[0]["x-keep"], json!(1));
}

#[test]
fn pages_and_bad_cursors() {
    let mut a = UpstreamSpec::stdio("a", "x", vec![]);
    a.transparent = true;
    let la = lists(&["t0", "t1", "t2"]);
    let (c, _) = Catalog::build(7, &[(&a, Some(&la))], &[], Vec::new(), false);
    let p1 = c.page(ListKind::Tools, None, 2).unwrap();
    assert_eq!(p1["tools"].as_array().unwrap().len(), 2);
    let cur = p1["nextCursor"].as_str().unwrap();
    let p2 = c.page(ListKind::Tools, Some(cur), 2).unwrap();
    assert_eq!(p2["tools"][0]["name"], json!("t2"));
    assert!(p2.get("nextCursor").is_none());
    assert_eq!(
        c.page(ListKind::Tools, Some("bogus"), 2).unwrap_err().code,
        -32602
    );
    assert_eq!(
        c.page(ListKind::Tools, Some("sluice-7-99"), 2)
            .unwrap_err()
            .code,
        -32602
    );
}

#[test]
fn templates_route_uris() {
    let lits = literals("test://template/{id}/data");
    assert!(template_matches(&lits, "test://template/42/data"));
    assert!(!template_matches(&lits, "test://other/42/data"));
    assert!(template_matches(&literals("file:///{path}"), "file:///a/b"));
}
