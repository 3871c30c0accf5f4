//! The tool search's unit tests: ranking among hundreds of tools, parameter names, the exact answer, access rules, the index rebuilt on change, progressive discovery; and the ignored measurement of its latency and memory.
use super::*;
use crate::catalog::ListKind;
use crate::testing;
use sluice_upstream::UpstreamLists;
use std::sync::Arc;

/// Five servers of sixty tools each (six verbs over ten nouns), plus a weather server.
const SERVERS: &[(&str, &[&str])] = &[
    (
        "github",
        &[
            "issue",
            "pull request",
            "branch",
            "commit",
            "repository",
            "release",
            "label",
            "milestone",
            "gist",
            "workflow",
        ],
    ),
    (
        "jira",
        &[
            "ticket",
            "sprint",
            "board",
            "epic",
            "comment",
            "attachment",
            "worklog",
            "version",
            "component",
            "filter",
        ],
    ),
    (
        "slack",
        &[
            "message",
            "channel",
            "reaction",
            "reminder",
            "user group",
            "bookmark",
            "pin",
            "emoji",
            "huddle",
            "canvas",
        ],
    ),
    (
        "drive",
        &[
            "file",
            "folder",
            "permission",
            "revision",
            "shortcut",
            "shared drive",
            "comment thread",
            "label field",
            "export",
            "upload",
        ],
    ),
    (
        "crm",
        &[
            "contact", "deal", "company", "lead", "pipeline", "note", "task", "meeting", "quote",
            "invoice",
        ],
    ),
];
const VERBS: &[&str] = &["get", "list", "create", "update", "delete", "search"];

fn lists_of(nouns: &[&str]) -> UpstreamLists {
    let mut tools = Vec::new();
    for noun in nouns {
        for verb in VERBS {
            let name = format!("{verb}_{}", noun.replace(' ', "_"));
            let what = match *verb {
                "list" | "search" => format!("{noun}s"),
                _ => format!("a {noun}"),
            };
            tools.push(json!({
                "name": name,
                "description": format!("{} {what}.\nMore words that only the full description has.", capitalised(verb)),
                "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}, "fields": {"type": "object"}}}
            }));
        }
    }
    UpstreamLists {
        tools,
        ..Default::default()
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn weather() -> UpstreamLists {
    UpstreamLists {
        tools: vec![
            json!({"name": "forecast", "title": "Weather forecast", "description": "Tomorrow's weather for a city.",
                   "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}),
            json!({"name": "observations", "description": "What the station measured.",
                   "inputSchema": {"type": "object", "properties": {"latitude": {"type": "number", "description": "north of the equator"}, "longitude": {"type": "number"}}}}),
        ],
        ..Default::default()
    }
}

/// A gateway over the 300 tools and the weather server, with these extra files.
fn gateway(files: &[(&str, Value)]) -> std::sync::Arc<crate::state::State> {
    let mut ids: Vec<&str> = SERVERS.iter().map(|(id, _)| *id).collect();
    ids.push("weather");
    let mut all = vec![testing::expose(&ids)];
    all.extend(files.iter().cloned());
    let mut lists: Vec<(&str, UpstreamLists, Value)> = SERVERS
        .iter()
        .map(|(id, nouns)| (*id, lists_of(nouns), json!({"tools": {}})))
        .collect();
    lists.push(("weather", weather(), json!({"tools": {}})));
    testing::state(&all, &lists)
}

fn on() -> (&'static str, Value) {
    ("sluice.json", json!({"tool_search": true}))
}

fn search_as(
    st: &crate::state::State,
    principal: Option<&Principal>,
    args: Value,
) -> Result<Value, RpcError> {
    let snap = st.snapshot();
    let msg = Message::request(
        json!(1),
        "tools/call",
        Some(json!({"name": "sluice_search_tools", "arguments": args})),
    );
    answer(&snap.catalog, &snap.policy, principal, &msg)
}

fn names(result: &Value) -> Vec<String> {
    names_in(&result["structuredContent"]["tools"])
}

fn names_in(tools: &Value) -> Vec<String> {
    let tools = tools.as_array().expect("tools");
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// The names `tools/list` shows.
fn listed(st: &crate::state::State) -> Vec<String> {
    let page = st
        .snapshot()
        .catalog
        .page(ListKind::Tools, None, 1000)
        .unwrap();
    names_in(&page["tools"])
}

fn first(st: &crate::state::State, query: &str) -> String {
    let r = search_as(st, None, json!({"query": query})).unwrap();
    names(&r).into_iter().next().unwrap_or_default()
}

#[test]
fn the_right_tool_comes_first_among_three_hundred() {
    let st = gateway(&[on()]);
    assert_eq!(st.snapshot().catalog.derived(Index::build).len(), 302);
    for (query, expected) in [
        ("weather forecast for a city", "weather_forecast"),
        ("create a jira ticket", "jira_create_ticket"),
        ("delete a slack channel", "slack_delete_channel"),
        // camelCase and snake_case split alike; plural and -ing stem to the same word.
        ("listPullRequests", "github_list_pull_request"),
        ("updating deals", "crm_update_deal"),
        ("search shared drives", "drive_search_shared_drive"),
        ("Get the MILESTONE", "github_get_milestone"),
    ] {
        assert_eq!(first(&st, query), expected, "{query}");
    }
    // Nothing matches: an empty list, and a text that says so.
    let r = search_as(&st, None, json!({"query": "zeppelin"})).unwrap();
    assert_eq!(
        r,
        json!({"content": [{"type": "text", "text": "No tool matches \"zeppelin\"."}],
               "structuredContent": {"query": "zeppelin", "tools": []}})
    );
}

#[test]
fn parameter_names_count_and_their_descriptions_do_not() {
    let st = gateway(&[on()]);
    assert_eq!(first(&st, "latitude"), "weather_observations");
    assert_eq!(first(&st, "days"), "weather_forecast");
    let r = search_as(&st, None, json!({"query": "equator"})).unwrap();
    assert_eq!(names(&r), Vec::<String>::new());
}

#[test]
fn the_answer_is_names_servers_one_line_descriptions_and_schemas_on_request() {
    let st = gateway(&[on()]);
    let r = search_as(&st, None, json!({"query": "weather forecast", "limit": 1})).unwrap();
    assert_eq!(
        r,
        json!({
            "content": [{"type": "text", "text": "weather_forecast — Tomorrow's weather for a city."}],
            "structuredContent": {"query": "weather forecast", "tools": [
                {"name": "weather_forecast", "server": "weather", "description": "Tomorrow's weather for a city.", "title": "Weather forecast"}
            ]}
        })
    );
    let r = search_as(
        &st,
        None,
        json!({"query": "create ticket", "limit": 1, "schemas": true}),
    )
    .unwrap();
    let schema = json!({"type": "object", "properties": {"id": {"type": "string"}, "fields": {"type": "object"}}});
    assert_eq!(
        r,
        json!({
            "content": [{"type": "text", "text": format!("jira_create_ticket — Create a ticket.\n  input schema: {schema}")}],
            "structuredContent": {"query": "create ticket", "tools": [
                {"name": "jira_create_ticket", "server": "jira", "description": "Create a ticket.", "inputSchema": schema}
            ]}
        })
    );
    // Ten by default, fifty at most.
    assert_eq!(
        names(&search_as(&st, None, json!({"query": "list"})).unwrap()).len(),
        10
    );
    let r = search_as(&st, None, json!({"query": "list", "limit": 500})).unwrap();
    assert_eq!(names(&r).len(), 50);
    for (args, message) in [
        (
            json!({}),
            "query must be a non-empty string: what the tool should do, in a few words",
        ),
        (
            json!({"query": "  "}),
            "query must be a non-empty string: what the tool should do, in a few words",
        ),
        (
            json!({"query": 3}),
            "query must be a non-empty string: what the tool should do, in a few words",
        ),
        (
            json!({"query": "x", "limit": 0}),
            "limit must be an integer from 1 to 50",
        ),
        (
            json!({"query": "x", "limit": 2.5}),
            "limit must be an integer from 1 to 50",
        ),
        (
            json!({"query": "x", "schemas": "yes"}),
            "schemas must be true or false",
        ),
    ] {
        let e = search_as(&st, None, args.clone()).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32602, message), "{args}");
    }
}

#[test]
fn access_rules_hide_tools_from_the_search() {
    let rules = json!({"enabled": false, "rules": [
        {"effect": "deny", "tools": ["crm_*"]},
        {"effect": "allow", "tools": ["jira_*"], "principals": ["alice"]}
    ]});
    let st = gateway(&[on(), ("auth/auth.config.json", rules)]);
    let r = search_as(
        &st,
        None,
        json!({"query": "contact deal company lead", "limit": 50}),
    )
    .unwrap();
    assert_eq!(names(&r), Vec::<String>::new());
    // Jira is alice's only: nobody else finds it, she finds it first.
    let r = search_as(
        &st,
        None,
        json!({"query": "create a jira ticket", "limit": 50}),
    )
    .unwrap();
    assert!(names(&r).iter().all(|n| !n.starts_with("jira_")), "{r}");
    assert!(!names(&r).is_empty());
    let alice = Principal {
        id: "alice".into(),
        kind: "token",
        scopes: vec![],
        claims: Default::default(),
    };
    let r = search_as(&st, Some(&alice), json!({"query": "create a jira ticket"})).unwrap();
    assert_eq!(names(&r)[0], "jira_create_ticket");
    let r = search_as(&st, Some(&alice), json!({"query": "contact", "limit": 50})).unwrap();
    assert_eq!(names(&r), Vec::<String>::new());
}

#[test]
fn the_gateways_own_tools_are_never_found_and_the_description_counts_the_rest() {
    let st = gateway(&[(
        "sluice.json",
        json!({"tool_search": true, "funnel": true, "management_tools": true}),
    )]);
    let r = search_as(
        &st,
        None,
        json!({"query": "sluice search run list tools instructions hook upstream add", "limit": 50}),
    )
    .unwrap();
    assert!(names(&r).iter().all(|n| !n.starts_with("sluice_")), "{r}");
    let snap = st.snapshot();
    let def = snap.catalog.tool_definition("sluice_search_tools").unwrap();
    assert_eq!(
        def["description"],
        "Search the 302 tools this gateway reaches, from 6 servers (github, jira, slack, drive, crm, weather), by what they do: give a few words (a task, a noun, a parameter name) and get the best matching tools, best first, with their one-line descriptions (and their input schemas with schemas: true). Then call one by name with sluice_run_tool."
    );
    // tools/list shows the same definition, and every tool (discovery "all").
    let page = snap.catalog.page(ListKind::Tools, None, 1000).unwrap();
    let listed = page["tools"].as_array().unwrap();
    assert!(listed.contains(def));
    assert_eq!(listed.len(), 302 + 8 + 3 + 1);
}

#[test]
fn off_by_default_and_rebuilt_with_the_catalog() {
    let st = gateway(&[]);
    assert!(st.snapshot().catalog.tool("sluice_search_tools").is_none());
    let st = gateway(&[on()]);
    let snap = st.snapshot();
    let a = snap.catalog.derived(Index::build);
    assert!(Arc::ptr_eq(&a, &snap.catalog.derived(Index::build)));
    // A list changes: a new catalog, a new index, a new description.
    let slot = snap.slots.iter().find(|s| s.spec.id == "weather").unwrap();
    {
        let mut s = slot.state.lock();
        s.lists = Some(UpstreamLists {
            tools: weather().tools[..1].to_vec(),
            ..Default::default()
        });
    }
    crate::control::rebuild_catalog(&st, None);
    let next = st.snapshot();
    let b = next.catalog.derived(Index::build);
    assert!(!Arc::ptr_eq(&a, &b));
    assert_eq!((a.len(), b.len()), (302, 301));
    let def = next.catalog.tool_definition("sluice_search_tools").unwrap();
    assert!(def["description"]
        .as_str()
        .unwrap()
        .starts_with("Search the 301 tools"));
    assert_eq!(first(&st, "latitude"), "");
}

#[test]
fn progressive_discovery_lists_the_search_and_run_tools_and_runs_any_tool() {
    let st = gateway(&[("sluice.json", json!({"discovery": "search"}))]);
    let snap = st.snapshot();
    assert_eq!(listed(&st), ["sluice_run_tool", "sluice_search_tools"]);
    assert_eq!(first(&st, "weather forecast"), "weather_forecast");
    // Every tool still routes, and the run tool runs it under its own name.
    assert!(snap.catalog.tool("weather_forecast").is_some());
    let run = Message::request(
        json!(7),
        "tools/call",
        Some(
            json!({"name": "sluice_run_tool", "arguments": {"name": "weather_forecast", "args": {"city": "Oslo"}}}),
        ),
    );
    let crate::features::funnel::Answer::Run(inner) = crate::features::funnel::answer(
        &snap.catalog,
        &snap.policy,
        None,
        crate::gateway_tools::GatewayTool::RunTool,
        &run,
    ) else {
        panic!("the run tool runs the tool");
    };
    assert_eq!(
        serde_json::from_str::<Value>(&inner.to_json()).unwrap(),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "weather_forecast", "arguments": {"city": "Oslo"}}})
    );
    // With the funnel on too, its list and instructions tools stay unlisted.
    let st = gateway(&[(
        "sluice.json",
        json!({"discovery": "search", "funnel": true}),
    )]);
    assert_eq!(listed(&st), ["sluice_run_tool", "sluice_search_tools"]);
}

/// The search's cost over 1,000 and 5,000 tools from 50 upstreams: index build time and
/// query latency (p50 / p99 of `answer`, a whole call less the transport). Not a test (it
/// asserts nothing about time); run it in release:
/// `cargo test --release -p sluice-server --lib measure_search -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: run in release, see bench/results/tool-search.md"]
fn measure_search() {
    const NOUNS: &[&str] = &[
        "issue",
        "ticket",
        "file",
        "folder",
        "message",
        "channel",
        "contact",
        "deal",
        "invoice",
        "order",
        "customer",
        "product",
        "user",
        "group",
        "role",
        "project",
        "task",
        "event",
        "calendar",
        "meeting",
        "note",
        "page",
        "database",
        "table",
        "record",
        "report",
        "dashboard",
        "alert",
        "incident",
        "deployment",
        "build",
        "pipeline",
        "branch",
        "commit",
        "release",
        "secret",
        "key",
        "bucket",
        "object",
        "queue",
        "topic",
        "subscription",
        "webhook",
        "comment",
        "attachment",
        "label",
        "milestone",
        "sprint",
        "board",
        "card",
    ];
    const VERBS: &[&str] = &[
        "get", "list", "create", "update", "delete", "search", "archive", "export", "share", "move",
    ];
    const PARAMS: &[&str] = &[
        "id", "name", "query", "limit", "cursor", "owner", "status", "priority", "since", "until",
        "path", "body", "title", "assignee", "tags",
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    println!("| tools | index build | index memory (RSS) | query p50 | query p99 | queries |");
    println!("|---|---|---|---|---|---|");
    for total in [1_000usize, 5_000] {
        let per = total / 50;
        let mut upstreams = Vec::new();
        for u in 0..50 {
            let mut tools = Vec::new();
            for t in 0..per {
                let (verb, noun) = (
                    VERBS[t % VERBS.len()],
                    NOUNS[(t / VERBS.len() + u) % NOUNS.len()],
                );
                let extra = NOUNS[next(NOUNS.len())];
                let mut props = serde_json::Map::new();
                for _ in 0..(2 + next(3)) {
                    props.insert(PARAMS[next(PARAMS.len())].into(), json!({"type": "string"}));
                }
                tools.push(json!({
                    "name": format!("{verb}_{noun}_{t}"),
                    "description": format!("{} a {noun} of service {u}, with its {extra}.\nDetails.", capitalised(verb)),
                    "inputSchema": {"type": "object", "properties": props}
                }));
            }
            upstreams.push((
                format!("svc{u}"),
                UpstreamLists {
                    tools,
                    ..Default::default()
                },
            ));
        }
        let ids: Vec<&str> = upstreams.iter().map(|(id, _)| id.as_str()).collect();
        let lists: Vec<(&str, UpstreamLists, Value)> = upstreams
            .iter()
            .map(|(id, l)| (id.as_str(), l.clone(), json!({"tools": {}})))
            .collect();
        let st = testing::state(&[testing::expose(&ids), on()], &lists);
        let snap = st.snapshot();
        let rss = || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            let line = status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .unwrap_or("");
            let kb = line.split_whitespace().nth(1).and_then(|k| k.parse().ok());
            kb.unwrap_or(0u64)
        };
        let started = std::time::Instant::now();
        let index = Index::build(&snap.catalog);
        let build = started.elapsed();
        // Memory: eight more indexes held at once, the RSS they add shared out (one alone
        // would mostly fill pages the state's building freed).
        let before = rss();
        let held: Vec<Index> = (0..8).map(|_| Index::build(&snap.catalog)).collect();
        let grown = rss().saturating_sub(before) / held.len() as u64;
        assert_eq!(index.len(), total);
        let _ = snap.catalog.derived(Index::build);
        let queries: Vec<String> = (0..200)
            .map(|i| match i % 3 {
                0 => format!("{} {}", VERBS[next(VERBS.len())], NOUNS[next(NOUNS.len())]),
                1 => format!(
                    "{} {} service {}",
                    NOUNS[next(NOUNS.len())],
                    PARAMS[next(PARAMS.len())],
                    next(50)
                ),
                _ => format!(
                    "how do I {} the {} of a {}",
                    VERBS[next(VERBS.len())],
                    NOUNS[next(NOUNS.len())],
                    NOUNS[next(NOUNS.len())]
                ),
            })
            .collect();
        let msgs: Vec<Message> = queries
            .iter()
            .map(|q| {
                Message::request(
                    json!(1),
                    "tools/call",
                    Some(json!({"name": "sluice_search_tools", "arguments": {"query": q}})),
                )
            })
            .collect();
        let mut times = Vec::new();
        for round in 0..6 {
            for m in &msgs {
                let t = std::time::Instant::now();
                let r = answer(&snap.catalog, &snap.policy, None, m).unwrap();
                let spent = t.elapsed();
                std::hint::black_box(r);
                if round > 0 {
                    times.push(spent);
                }
            }
        }
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
        println!(
            "| {total} | {:.1} ms | {:.1} MB | {:.0} µs | {:.0} µs | {} |",
            build.as_secs_f64() * 1e3,
            grown as f64 / 1024.0,
            at(0.50),
            at(0.99),
            times.len()
        );
    }
}
