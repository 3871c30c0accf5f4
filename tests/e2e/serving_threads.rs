//! The MCP listener's serving threads, seen from outside the real binary: `--threads N` runs N
//! threads named `sluice-serve-1` … `sluice-serve-N`, calls on many connections at once are all
//! answered, and `--pin` (with one thread per CPU the process may use) keeps each thread on a
//! CPU of its own, in order, where without it every thread may use them all.

use serde_json::json;
use sluice_e2e::mcp::Client;
use sluice_e2e::start_sluice;
use std::collections::BTreeMap;

/// The threads of process `pid` by name, each with the CPUs it may run on.
fn threads_of(pid: u32) -> BTreeMap<String, Vec<usize>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads") {
        let dir = entry.expect("a thread").path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        out.insert(name.trim().to_string(), allowed(&status));
    }
    out
}

/// The `Cpus_allowed_list` of a `/proc/…/status` text ("0-3,6"), expanded.
fn allowed(status: &str) -> Vec<usize> {
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .trim();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

/// The CPUs this test process may use (the gateway inherits them).
fn our_cpus() -> Vec<usize> {
    allowed(&std::fs::read_to_string("/proc/self/status").expect("our status"))
}

/// The serving threads' CPU lists, in thread order.
fn serving(pid: u32) -> Vec<Vec<usize>> {
    threads_of(pid)
        .into_iter()
        .filter(|(name, _)| name.starts_with("sluice-serve-"))
        .map(|(_, cpus)| cpus)
        .collect()
}

#[tokio::test]
async fn calls_on_many_connections_are_served_by_the_named_threads() {
    let (gw, url) = start_sluice(&["--no-admin", "--threads", "3"]);
    // Eight clients, each on a connection of its own, all open at once: they are spread over
    // the threads, and every call is answered with its own text.
    let mut clients = Vec::new();
    for _ in 0..8 {
        let mut c = Client::new(&url);
        c.initialize(json!({})).await;
        clients.push(c);
    }
    // (Read once a reply has come: the listener accepts before its threads are started.)
    let names: Vec<String> = threads_of(gw.pid())
        .into_keys()
        .filter(|n| n.starts_with("sluice-serve-"))
        .collect();
    assert_eq!(
        names,
        ["sluice-serve-1", "sluice-serve-2", "sluice-serve-3"]
    );
    let calls = clients.iter().enumerate().map(|(i, c)| async move {
        let text = format!("client {i}");
        let r = c
            .call_tool("demo_echo", json!({"text": text, "reason": "test"}))
            .await;
        (text, r)
    });
    for (text, r) in futures_util::future::join_all(calls).await {
        assert_eq!(
            r["result"]["structuredContent"],
            json!({"text": text}),
            "{r}"
        );
    }
    // Unpinned: every serving thread may use every CPU the process may.
    let cpus = our_cpus();
    assert_eq!(serving(gw.pid()), vec![cpus.clone(); 3]);
}

/// `sluice serve --no-admin --pin --threads N` (the demo tree), once it has answered a call.
async fn pinned_gateway(threads: usize) -> sluice_e2e::Proc {
    let n = threads.to_string();
    let (gw, url) = start_sluice(&["--no-admin", "--pin", "--threads", &n]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let r = c
        .call_tool("demo_echo", json!({"text": "pinned?", "reason": "test"}))
        .await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"text": "pinned?"}),
        "{r}"
    );
    gw
}

#[tokio::test]
async fn pinned_threads_each_keep_a_cpu_of_their_own() {
    let cpus = our_cpus();
    let gw = pinned_gateway(cpus.len()).await;
    let expected: Vec<Vec<usize>> = cpus.iter().map(|&cpu| vec![cpu]).collect();
    assert_eq!(serving(gw.pid()), expected);
    // The main runtime's threads are not pinned.
    assert_eq!(threads_of(gw.pid())["sluice"], cpus);
}

#[tokio::test]
async fn pin_with_fewer_threads_than_cpus_pins_nothing() {
    let cpus = our_cpus();
    if cpus.len() < 2 {
        // One CPU: one thread per CPU is the only count there is.
        return;
    }
    let gw = pinned_gateway(cpus.len() - 1).await;
    assert_eq!(serving(gw.pid()), vec![cpus.clone(); cpus.len() - 1]);
}
