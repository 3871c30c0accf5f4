//! The `tool-scan` corpus (`tests/corpus/tool-scan/`): the published tool-poisoning examples
//! (positives, each naming its source) and the definitions of real npm and PyPI servers as they
//! listed them (negatives, each naming its package and version), scanned with the default
//! options and with the strict ones of the docs. Exact figures: which kinds each positive is
//! found for (the ones not found are listed and explained in their files), which real items
//! have findings, and that no real item is hidden. Prints the detection and false-positive
//! rates (`cargo test -p sluice-hooks --lib corpus -- --nocapture`). And the scanner's cost per
//! list and per call, an ignored measurement (bench/results/tool-scan.md).

use super::tests::{cx, scanner};
use super::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// The docs' example: instructions and shadowing hidden, exfiltration hints flagged.
fn strict() -> ToolScan {
    scanner(
        json!({"actions": {"instruction": "hide", "shadowing": "hide", "exfiltration": "flag"}}),
    )
}

fn corpus(part: &str) -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/corpus/tool-scan")
        .join(part);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (name, v)
        })
        .collect()
}

/// The four lists of a negative, as `(list key, id key)`.
const LISTS: &[(&str, &str)] = &[
    ("tools", "name"),
    ("prompts", "name"),
    ("resources", "uri"),
    ("resourceTemplates", "uriTemplate"),
];

/// Each real server's items: `(server, list, id, item)`.
fn real_items() -> Vec<(String, &'static str, String, Value)> {
    let mut out = Vec::new();
    for (server, v) in corpus("negatives") {
        for (list, id) in LISTS {
            for item in v[*list].as_array().unwrap() {
                let key = item[*id].as_str().unwrap().to_string();
                out.push((server.clone(), *list, key, item.clone()));
            }
        }
    }
    out
}

/// All the real servers behind one gateway: every tool of every server is in the catalog.
fn real_catalog(items: &[(String, &'static str, String, Value)]) -> ToolNames {
    ToolNames::new(
        items
            .iter()
            .filter(|(_, list, _, _)| *list == "tools")
            .map(|(s, _, name, _)| (s.as_str(), name.as_str(), name.as_str())),
    )
}

/// A positive's catalog: its own tool, and the other server's tools the publication attacks.
fn positive_catalog(v: &Value) -> ToolNames {
    let own = v["tool"]["name"].as_str().unwrap();
    let mut tools = vec![("poisoned", own, own)];
    if let Some(c) = v.get("catalog") {
        let up = c["upstream"].as_str().unwrap();
        for t in c["tools"].as_array().unwrap() {
            let t = t.as_str().unwrap();
            tools.push((up, t, t));
        }
    }
    ToolNames::new(tools)
}

fn kinds_of(found: &[Finding]) -> Vec<&'static str> {
    let mut k: Vec<&'static str> = found.iter().map(|f| f.kind.name()).collect();
    k.sort();
    k.dedup();
    k
}

/// Would the strict scanner hide this item (drop it from its list)?
fn hidden_by(s: &ToolScan, found: &[Finding]) -> bool {
    found.iter().any(|f| s.removes(f.kind))
}

#[test]
fn corpus_positives_are_found_and_no_real_item_is_hidden() {
    let default = scanner(json!({}));
    let strict = strict();

    // Positives: each published example, found for exactly the kinds its file expects.
    let positives = corpus("positives");
    let mut detected = 0;
    let mut strict_hidden = 0;
    let mut missed = Vec::new();
    for (name, v) in &positives {
        assert!(
            v["source"]["publication"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{name}: names no source"
        );
        let names = positive_catalog(v);
        let found = default.scan(&v["tool"], Some("poisoned"), Some(&names));
        let expect: Vec<&str> = v["expect"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(kinds_of(&found), expect, "{name}: {found:#?}");
        if found.is_empty() {
            assert!(v["note"].as_str().is_some(), "{name}: a miss must say why");
            missed.push(name.as_str());
        } else {
            detected += 1;
        }
        if hidden_by(
            &strict,
            &strict.scan(&v["tool"], Some("poisoned"), Some(&names)),
        ) {
            strict_hidden += 1;
        }
    }
    assert_eq!(positives.len(), 24);
    assert_eq!(detected, 21);
    assert_eq!(
        missed,
        [
            "acuvity-greet-rug-pull",
            "embracethered-motd-pirate",
            "mcp-shield-fetch-weather"
        ]
    );
    assert_eq!(strict_hidden, 15);

    // Negatives: every item of 31 real servers, all behind one gateway.
    let items = real_items();
    let servers: std::collections::BTreeSet<&str> =
        items.iter().map(|(s, _, _, _)| s.as_str()).collect();
    assert_eq!(servers.len(), 31);
    assert_eq!(servers.iter().filter(|s| s.starts_with("npm-")).count(), 21);
    assert_eq!(items.len(), 429);
    let names = real_catalog(&items);
    let mut flagged: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    let mut hidden = Vec::new();
    for (server, list, id, item) in &items {
        let found = default.scan(item, Some(server), Some(&names));
        if !found.is_empty() {
            flagged.insert(format!("{server} {list} {id}"), kinds_of(&found));
        }
        let found = strict.scan(item, Some(server), Some(&names));
        if hidden_by(&strict, &found) {
            hidden.push(format!("{server} {list} {id}"));
        }
    }
    // Links to documentation (flagged: their hosts are not in `allow_hosts`) and a search tool's
    // example of a configuration file name.
    let expected: BTreeMap<String, Vec<&'static str>> = [
        "npm-notionhq-notion-mcp-server tools API-patch-page",
        "npm-notionhq-notion-mcp-server tools API-post-page",
        "npm-notionhq-notion-mcp-server tools API-post-search",
        "npm-notionhq-notion-mcp-server tools API-retrieve-a-page-property",
        "npm-wonderwhy-er-desktop-commander tools start_search",
        "pypi-arxiv-mcp-server tools citation_graph",
    ]
    .into_iter()
    .map(|k| (k.to_string(), vec!["exfiltration"]))
    .collect();
    assert_eq!(flagged, expected);
    assert_eq!(hidden, Vec::<String>::new());

    let pct = |a: usize, b: usize| 100.0 * a as f64 / b as f64;
    println!(
        "tool-scan corpus: detection {detected}/{} ({:.1}%) with the defaults, {strict_hidden}/{} hidden with the strict actions; false positives {}/{} real items ({:.1}%) from {} servers, {} hidden",
        positives.len(),
        pct(detected, positives.len()),
        positives.len(),
        flagged.len(),
        items.len(),
        pct(flagged.len(), items.len()),
        servers.len(),
        hidden.len()
    );
}

/// Every finding in the corpus, for curating it: `cargo test -p sluice-hooks --lib
/// corpus_report -- --ignored --nocapture`.
#[test]
#[ignore = "a report, not a check"]
fn corpus_report() {
    let default = scanner(json!({}));
    for (name, v) in corpus("positives") {
        let names = positive_catalog(&v);
        let found = default.scan(&v["tool"], Some("poisoned"), Some(&names));
        println!("+ {name}: {:?}", kinds_of(&found));
        for f in &found {
            println!("    {} {} {:?}", f.kind.name(), f.at, f.text);
        }
    }
    let items = real_items();
    let names = real_catalog(&items);
    for (server, list, id, item) in &items {
        for f in default.scan(item, Some(server), Some(&names)) {
            println!(
                "- {server} {list} {id}: {} {} {:?}",
                f.kind.name(),
                f.at,
                f.text
            );
        }
    }
}

/// The catalog of the measurement: which upstream offers each tool, and the tool names.
#[derive(Debug)]
struct Catalog {
    owners: std::collections::HashMap<String, String>,
    names: ToolNames,
}

impl CatalogNames for Catalog {
    fn owner(&self, _list: &str, key: &str) -> Option<&str> {
        self.owners.get(key).map(String::as_str)
    }
    fn tool_names(&self) -> &ToolNames {
        &self.names
    }
}

/// `n` tools made of the corpus's real tools (cycled, each copy a name of its own, its server
/// its upstream), and their catalog.
fn page_of(n: usize) -> (Value, Catalog) {
    let real: Vec<(String, Value)> = real_items()
        .into_iter()
        .filter(|(_, list, _, _)| *list == "tools")
        .map(|(s, _, _, item)| (s, item))
        .collect();
    let mut tools = Vec::with_capacity(n);
    let mut owners = std::collections::HashMap::new();
    for i in 0..n {
        let (server, item) = &real[i % real.len()];
        let mut item = item.clone();
        let name = format!("{}_{i}", item["name"].as_str().unwrap());
        item["name"] = json!(name);
        owners.insert(name, server.clone());
        tools.push(item);
    }
    let names = ToolNames::new(tools.iter().map(|t| {
        (
            owners[t["name"].as_str().unwrap()].as_str(),
            t["name"].as_str().unwrap(),
            t["name"].as_str().unwrap(),
        )
    }));
    (json!({"tools": tools}), Catalog { owners, names })
}

fn percentiles(mut micros: Vec<f64>) -> (f64, f64) {
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// The scanner's cost: a whole `tools/list` page of 100 and 1,000 real tool definitions scanned
/// (the default actions, and the strict ones), the catalog's names built, and what a
/// `tools/call` pays when an action is `hide` (its tool's definition scanned before it goes
/// on). Not a test (it asserts nothing about time); run it in release:
/// `cargo test --release -p sluice-hooks --lib measure_tool_scan -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: run in release, see bench/results/tool-scan.md"]
fn measure_tool_scan() {
    for n in [100, 1000] {
        let (page, catalog) = page_of(n);
        let bytes = serde_json::to_vec(&page).unwrap().len();
        let rounds = if n == 100 { 2000 } else { 200 };
        let mut build = Vec::new();
        for _ in 0..rounds.min(200) {
            let t = Instant::now();
            let names = ToolNames::new(
                catalog
                    .owners
                    .iter()
                    .map(|(k, v)| (v.as_str(), k.as_str(), k.as_str())),
            );
            build.push(t.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(names);
        }
        let (b50, b99) = percentiles(build);
        println!(
            "{n} tools ({} KiB): catalog names built p50 {b50:.0} µs, p99 {b99:.0} µs",
            bytes / 1024
        );
        for (label, s) in [("default", scanner(json!({}))), ("strict", strict())] {
            let mut ctx = cx("tools/list");
            ctx.catalog = Some(&catalog);
            let mut times = Vec::with_capacity(rounds);
            let mut changed = false;
            for _ in 0..rounds {
                let mut p = page.clone();
                let mut log = Log::default();
                let t = Instant::now();
                changed |= s
                    .apply_list("tools", &mut p, &ctx, Some(&catalog.names), &mut log)
                    .unwrap();
                times.push(t.elapsed().as_secs_f64() * 1e6);
                std::hint::black_box(&p);
            }
            let (p50, p99) = percentiles(times);
            println!(
                "  list scanned ({label}): p50 {p50:.0} µs, p99 {p99:.0} µs (changed: {changed})"
            );
        }
    }
    // A call with `hide` configured: each real tool's definition, scanned as the call's check.
    let (page, catalog) = page_of(429);
    let s = strict();
    let mut times = Vec::new();
    for _ in 0..50 {
        for t in page["tools"].as_array().unwrap() {
            let name = t["name"].as_str().unwrap();
            let mut ctx = cx("tools/call");
            ctx.tool_name = Some(name);
            ctx.upstream = catalog.owners.get(name).map(String::as_str);
            ctx.tool = Some(t);
            ctx.catalog = Some(&catalog);
            let start = Instant::now();
            let d = s.decide_call(&ctx);
            times.push(start.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(d);
        }
    }
    let (p50, p99) = percentiles(times);
    println!("tools/call with hide: the definition's check p50 {p50:.1} µs, p99 {p99:.1} µs (429 real tools)");
}
