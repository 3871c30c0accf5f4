//! The tool search's relevance on a labelled set of queries written against real servers' tools
//! (`bench/relevance/tool-search-queries.json`, over the tool lists of 31 npm and PyPI servers in
//! `tests/corpus/tool-scan/negatives`): a test that keeps the set true to the corpus, and the
//! ignored measurement of recall@5 and MRR (`bench/results/tool-search-relevance.md`).

use super::answer;
use crate::testing;
use serde_json::{json, Value};
use sluice_core::Message;
use sluice_upstream::UpstreamLists;
use std::path::PathBuf;

/// The repository's root.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The labelled set.
fn set() -> Value {
    let path = repo().join("bench/relevance/tool-search-queries.json");
    let text = std::fs::read_to_string(&path).expect("the relevance set");
    serde_json::from_str(&text).expect("JSON")
}

/// A gateway whose upstreams list the corpus servers' real tools, under the set's ids.
fn gateway(set: &Value) -> std::sync::Arc<crate::state::State> {
    let servers = set["servers"].as_object().expect("servers");
    let ids: Vec<&str> = servers.keys().map(String::as_str).collect();
    let lists: Vec<(&str, UpstreamLists, Value)> = servers
        .iter()
        .map(|(id, file)| {
            let path = repo()
                .join("tests/corpus/tool-scan/negatives")
                .join(file.as_str().expect("a file name"));
            let text = std::fs::read_to_string(&path).expect("a corpus file");
            let listed: Value = serde_json::from_str(&text).expect("JSON");
            let tools = listed["tools"].as_array().expect("tools").clone();
            let lists = UpstreamLists {
                tools,
                ..Default::default()
            };
            (id.as_str(), lists, json!({"tools": {}}))
        })
        .collect();
    let files = [
        testing::expose(&ids),
        ("sluice.json", json!({"tool_search": true})),
    ];
    testing::state(&files, &lists)
}

/// The search's ranking for `query` (its 50 best).
fn ranking(st: &crate::state::State, query: &str) -> Vec<String> {
    let snap = st.snapshot();
    let msg = Message::request(
        json!(1),
        "tools/call",
        Some(json!({"name": "sluice_search_tools", "arguments": {"query": query, "limit": 50}})),
    );
    let r = answer(&snap.catalog, &snap.policy, None, &msg).expect("an answer");
    r["structuredContent"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("a name").to_string())
        .collect()
}

fn queries(set: &Value) -> Vec<(&str, Vec<&str>)> {
    set["queries"]
        .as_array()
        .expect("queries")
        .iter()
        .map(|q| {
            let relevant = q["relevant"].as_array().expect("relevant");
            let relevant = relevant
                .iter()
                .map(|r| r.as_str().expect("a name"))
                .collect();
            (q["query"].as_str().expect("a query"), relevant)
        })
        .collect()
}

/// The set has at least 100 queries, and every tool it names is one the gateway lists from the
/// corpus (a corpus collected again that renames a tool fails here, not in the measurement).
#[test]
fn the_relevance_set_names_real_tools() {
    let set = set();
    let st = gateway(&set);
    let listed: Vec<String> = st
        .snapshot()
        .catalog
        .tools()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    assert!(listed.len() > 350, "{} tools", listed.len());
    let queries = queries(&set);
    assert!(queries.len() >= 100, "{} queries", queries.len());
    for (query, relevant) in &queries {
        assert!(!relevant.is_empty(), "{query}: no relevant tool");
        for r in relevant {
            assert!(listed.iter().any(|l| l == r), "{query}: {r} is not listed");
        }
    }
}

/// recall@5 (the share of a query's relevant tools among the first five, averaged over the
/// queries), success@5 (a relevant tool among the first five), MRR (the reciprocal of the first
/// relevant tool's rank among the first 50, 0 when none is), and each query that found nothing
/// relevant in its first five. Run with
/// `cargo test --release -p sluice-server --lib measure_relevance -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: prints figures, asserts none"]
fn measure_relevance() {
    let set = set();
    let st = gateway(&set);
    let queries = queries(&set);
    let (mut recall, mut success, mut mrr, mut first) = (0.0, 0.0, 0.0, 0.0);
    let mut misses = Vec::new();
    for (query, relevant) in &queries {
        let ranked = ranking(&st, query);
        let top5 = &ranked[..ranked.len().min(5)];
        let hits = relevant
            .iter()
            .filter(|r| top5.iter().any(|t| t == *r))
            .count();
        recall += hits as f64 / relevant.len() as f64;
        if hits > 0 {
            success += 1.0;
        } else {
            misses.push(format!("{query:?}: wanted {relevant:?}, got {top5:?}"));
        }
        if let Some(rank) = ranked.iter().position(|t| relevant.contains(&t.as_str())) {
            mrr += 1.0 / (rank + 1) as f64;
            if rank == 0 {
                first += 1.0;
            }
        }
    }
    let n = queries.len() as f64;
    let tools = st.snapshot().catalog.tools().len();
    println!(
        "{} queries over {tools} tools of {} servers",
        queries.len(),
        set["servers"].as_object().map_or(0, |s| s.len())
    );
    println!("| recall@5 | success@5 | first hit at 1 | MRR (top 50) |");
    println!("|--:|--:|--:|--:|");
    println!(
        "| {:.3} | {:.3} | {:.3} | {:.3} |",
        recall / n,
        success / n,
        first / n,
        mrr / n
    );
    println!(
        "\nQueries with no relevant tool in the first five ({}):",
        misses.len()
    );
    for m in &misses {
        println!("- {m}");
    }
}
