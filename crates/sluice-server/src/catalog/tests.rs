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

/// An `as` that takes a name another upstream lists: with `on_collision` `first` the first
/// upstream keeps it (a warning); with `error` neither lists it, a call is refused naming both,
/// and the same goes for a prompt name and a resource URI.
#[test]
fn a_collision_is_decided_by_on_collision() {
    let mut a = UpstreamSpec::stdio("a", "x", vec![]);
    a.expose_all = true;
    let b = UpstreamSpec::stdio("b", "x", vec![]);
    let expose = vec![ExposeEntry {
        upstream: "b".into(),
        tool: "ping".into(),
        name: "a_echo".into(),
        category: String::new(),
        enabled: true,
    }];
    let mut la = lists(&["echo", "add"]);
    la.resources = vec![json!({"uri": "file:///same"})];
    let mut lb = lists(&["ping"]);
    lb.resources = vec![json!({"uri": "file:///same"}), json!({"uri": "file:///b"})];
    let ups = [(&a, Some(&la)), (&b, Some(&lb))];
    let names = |c: &Catalog| -> Vec<String> {
        c.tools()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };

    let (c, w) =
        Catalog::build_deciding(1, &ups, &expose, &[], Vec::new(), false, OnCollision::First);
    assert_eq!(names(&c), ["a_echo", "a_add"]);
    assert_eq!(
        c.tool("a_echo"),
        Some(&Route::Upstream {
            slot: 0,
            name: "echo".into()
        })
    );
    assert_eq!(
        w,
        [
            "tool name \"a_echo\" of upstream \"b\" is already taken; this one is not listed",
            "resource \"file:///same\" is offered by two upstreams",
        ]
    );

    let (c, w) =
        Catalog::build_deciding(1, &ups, &expose, &[], Vec::new(), false, OnCollision::Error);
    assert_eq!(names(&c), ["a_add"]);
    assert_eq!(c.tool("a_echo"), None);
    assert_eq!(
        c.collided_tool("a_echo"),
        Some(&["a".to_string(), "b".to_string()][..])
    );
    assert_eq!(
        w,
        [
            "tool name \"a_echo\" is produced by upstreams a and b; with on_collision \"error\" it is listed for none of them (rename one with `as`)",
            "resource \"file:///same\" is produced by upstreams a and b; with on_collision \"error\" it is listed for none of them (rename one with `as`)",
        ]
    );
    let uris: Vec<&str> = c
        .resources
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["file:///b"]);
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

fn skill_lists(directory_read: bool) -> UpstreamLists {
    let md = "skill://git-workflow/SKILL.md";
    let entry = json!({"uri": md, "frontmatter": {"name": "git-workflow", "description": "d"},
        "resources": [{"uri": md, "digest": format!("sha256:{}", "a".repeat(64)), "size": 3}]});
    UpstreamLists {
        resources: vec![
            json!({"uri": md, "name": "git-workflow"}),
            json!({"uri": "doc://x"}),
        ],
        templates: vec![json!({"uriTemplate": "skill://git-workflow/{file}", "name": "f"})],
        skills: vec![entry],
        skill_settings: Some(json!({"directoryRead": directory_read})),
        ..Default::default()
    }
}

/// Two upstreams serving the same skill: each under its prefix (its id, or `skill_prefix`), so
/// their URIs never collide, even with `on_collision: error`; other URIs stay as they are.
#[test]
fn skills_are_shown_under_their_upstreams_prefixes_and_route_back() {
    let a = UpstreamSpec::stdio("a", "x", vec![]);
    let mut b = UpstreamSpec::stdio("b", "x", vec![]);
    b.skill_prefix = Some("team.b".into());
    let plain = UpstreamSpec::stdio("p", "x", vec![]);
    let (la, lb) = (skill_lists(true), skill_lists(false));
    let lp = UpstreamLists {
        resources: vec![json!({"uri": "skill://git-workflow/SKILL.md"})],
        ..Default::default()
    };
    let ups = [(&a, Some(&la)), (&b, Some(&lb)), (&plain, Some(&lp))];
    let (c, w) = Catalog::build_deciding(1, &ups, &[], &[], Vec::new(), false, OnCollision::Error);
    // Only doc://x collides: the skill URIs are under two prefixes.
    assert_eq!(
        w,
        ["resource \"doc://x\" is produced by upstreams a and b; with on_collision \"error\" it is listed for none of them (rename one with `as`)"]
    );
    let page = c.page(ListKind::Skills, None, 10).unwrap();
    let uris: Vec<&str> = page["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "skill://a/git-workflow/SKILL.md",
            "skill://team.b/git-workflow/SKILL.md"
        ]
    );
    assert_eq!(
        page["skills"][1]["resources"][0],
        json!({"uri": "skill://team.b/git-workflow/SKILL.md", "digest": format!("sha256:{}", "a".repeat(64)), "size": 3})
    );
    let resources = c.page(ListKind::Resources, None, 10).unwrap();
    let uris: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    // The upstream without the extension keeps its URI (an ordinary resource); doc://x is
    // offered by two upstreams and so listed for neither.
    assert_eq!(
        uris,
        [
            "skill://a/git-workflow/SKILL.md",
            "skill://team.b/git-workflow/SKILL.md",
            "skill://git-workflow/SKILL.md"
        ]
    );
    let templates = c.page(ListKind::Templates, None, 10).unwrap();
    assert_eq!(
        templates["resourceTemplates"][1]["uriTemplate"],
        "skill://team.b/git-workflow/{file}"
    );
    assert_eq!(c.resource("skill://team.b/git-workflow/FORMS.md"), Some(1));
    let r = c
        .skills
        .route("skill://team.b/git-workflow/SKILL.md")
        .unwrap();
    assert_eq!(
        (r.slot, r.uri.as_ref()),
        (1, "skill://git-workflow/SKILL.md")
    );
    assert!(c.skills.route("skill://p/git-workflow/SKILL.md").is_none());
    assert!(c.skills.directory_read(0) && !c.skills.directory_read(1));
    assert_eq!(
        c.skills
            .entry_of("skill://a/git-workflow/SKILL.md")
            .map(|e| e.uri.as_str()),
        Some("skill://git-workflow/SKILL.md")
    );
}
