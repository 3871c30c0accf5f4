//! The results as a markdown report (tables, targets) and as an SVG chart of the same numbers.

use crate::plan::FLOOR;
use crate::runner::Ctx;
use crate::runner::{CallRow, CallSummary, ResRow, Results, CONCURRENCY};
use std::fmt::Write;

fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let groups: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).unwrap_or(""))
        .collect();
    format!("{}{}", if n < 0 { "-" } else { "" }, groups.join(","))
}

fn mb(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The markdown report.
pub(crate) fn markdown(ctx: &Ctx, r: &Results) -> String {
    let mut md = String::new();
    let mode = if r.quick {
        "QUICK SMOKE RUN (numbers not meaningful)"
    } else {
        "full run"
    };
    let _ = writeln!(md, "# Sluice benchmark\n");
    let _ = writeln!(
        md,
        "{} · {} · sluice {} · {mode}: {} round(s) × {} s per run, interleaved (direct, configuration, direct, configuration, …). \
         Load average at start / end: {} / {}.\n",
        r.date, r.machine, r.sluice_rev, r.rounds, r.seconds, r.loadavg.0, r.loadavg.1
    );
    let _ = writeln!(
        md,
        "Each configuration is measured against a direct call to the same upstream in the same rounds; \
         ratios are the medians of the per-round ratios (configuration ÷ direct). \
         \"stdio upstream\" rows front a stdio child of the gateway and are compared against the direct **HTTP** echo. \
         Gateway CPU is the gateway process alone (each thread's time on a CPU from /proc/PID/task/*/schedstat), per call. Every Sluice row runs with --no-admin but the \"admin listener on\" one; \"[baseline]\" rows are another build in the same rounds. \
         One client session, one keep-alive connection per concurrent caller; the load generator runs on one thread on the same machine, {}.\n",
        if r.in_process_client {
            "inside the runner's own process, one thread living through every run (--in-process-client)"
        } else {
            "a `sluice-bench-load calls` process of its own for each run"
        }
    );

    if r.calls.iter().any(|x| {
        crate::plan::UPSTREAM_AUTH
            .iter()
            .any(|(name, _)| x.config.ends_with(name))
    }) {
        let _ = writeln!(
            md,
            "The \"static bearer header\", \"oauth (client credentials)\" and \"oauth per user (held grant)\" rows front \
             `sluice-bench-echo --oauth` (an OAuth-protected echo with its own authorization server, on a port of its own), \
             authenticate their client with the same static token, and are compared with the echo called directly with a \
             token; they differ only in how Sluice authenticates to it: a configured `Authorization` header holding a token \
             obtained before the run, Sluice's own client credentials grant, or the one user's own grant, connected before \
             the rounds.\n"
        );
    }
    let _ = writeln!(md, "## tools/call (echo)\n");
    let _ = writeln!(
        md,
        "| Upstream | Configuration | c | req/s direct → via | Throughput vs direct | p50 µs direct → via | Added p50 µs | p99 µs direct → via | p99 vs direct | Gateway CPU µs/call | Gateway peak RSS MB |"
    );
    let _ = writeln!(md, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let mut i = 0;
    while i < r.calls.len() {
        let row = &r.calls[i];
        // Rows not measured at any concurrency: one line.
        let same: Vec<&CallRow> = r.calls[i..]
            .iter()
            .take(CONCURRENCY.len())
            .filter(|x| x.upstream == row.upstream && x.config == row.config)
            .collect();
        if row.summary.is_none()
            && same.len() == CONCURRENCY.len()
            && same
                .iter()
                .all(|x| x.summary.is_none() && x.note == row.note)
        {
            let cs: Vec<String> = same.iter().map(|x| x.c.to_string()).collect();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | — | — | — | — | — | — | — |",
                row.upstream,
                cell(&row.config),
                cs.join(", "),
                cell(row.note.as_deref().unwrap_or("not measured"))
            );
            i += same.len();
            continue;
        }
        match &row.summary {
            Some(s) => {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} → {} | **{:.2}×** | {:.0} → {:.0} | **{:+.0}** | {:.0} → {:.0} | {:.2}× | {:.1} | {} |",
                    row.upstream,
                    cell(&row.config),
                    row.c,
                    thousands(s.direct_rps),
                    thousands(s.rps),
                    s.rps_ratio,
                    s.direct_p50,
                    s.p50,
                    s.added_p50,
                    s.direct_p99,
                    s.p99,
                    s.p99_ratio,
                    s.gw_cpu_us,
                    mb(s.gw_peak_rss_kb)
                );
            }
            None => {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | — | — | — | — | — | — | — |",
                    row.upstream,
                    cell(&row.config),
                    row.c,
                    cell(row.note.as_deref().unwrap_or("not measured"))
                );
            }
        }
        i += 1;
    }

    floor_table(&mut md, r);
    auth_table(&mut md, r);
    machine_table(&mut md, r);

    let _ = writeln!(md, "\n## Start-up, memory, tools/list with 1,000 tools\n");
    let _ = writeln!(
        md,
        "| Upstream | Configuration | Start-up ms: accepting / first tools/list | Idle RSS MB | KB per idle session ({} open) | KB per idle GET stream ({} open) | tools/list, 1,000 tools: p50 µs direct → via | vs direct | Gateway CPU µs per listing | Notes |",
        thousands(ctx.sessions as f64),
        thousands(ctx.streams as f64),
    );
    let _ = writeln!(md, "|---|---|--:|--:|--:|--:|--:|--:|--:|---|");
    for row in &r.resources {
        let _ = writeln!(md, "{}", res_line(row));
    }

    let _ = writeln!(md, "\n## Against the targets of issue 17\n");
    for line in targets17(r) {
        let _ = writeln!(md, "- {line}");
    }

    let _ = writeln!(md, "\n## Against the targets of issue 5\n");
    for line in targets(r) {
        let _ = writeln!(md, "- {line}");
    }
    let _ = writeln!(
        md,
        "\nHow to run it and what each number means: `bench/README.md`. Raw reports: `latest.json`. \
         Logs of every process: `{}`.",
        ctx.logs
            .strip_prefix(&ctx.root)
            .unwrap_or(&ctx.logs)
            .display()
    );
    if !r.failures.is_empty() {
        let _ = writeln!(md, "\n## Failures\n");
        for f in &r.failures {
            let _ = writeln!(md, "- {}", cell(f));
        }
    }
    md
}

/// Every measured row against the floor of its upstream and concurrency: what it adds to the
/// median and the CPU it uses per call, each as a multiple of the floor's.
fn floor_table(md: &mut String, r: &Results) {
    let floor = |up: &str, c: usize| {
        r.calls
            .iter()
            .find(|x| x.upstream == up && x.config == FLOOR && x.c == c)
            .and_then(|x| x.summary.as_ref())
    };
    let rows: Vec<(&CallRow, &CallSummary, &CallSummary)> = r
        .calls
        .iter()
        .filter(|x| x.config != FLOOR && !x.peer && x.via == "HTTP")
        .filter_map(|x| Some((x, x.summary.as_ref()?, floor(&x.upstream, x.c)?)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n## Against the floor\n");
    let _ = writeln!(
        md,
        "The floor is `{FLOOR}`: `bench/floor`, a hyper server and a hyper client with its own pool that parses each \
         message, gives a request its own id upstream, serialises, forwards and puts the client's id back. It runs in \
         the same interleaved rounds as every other row. 1.00× = as cheap as the floor; below 1 = cheaper.\n"
    );
    let _ = writeln!(
        md,
        "| Upstream | Configuration | c | Added p50 µs: via / floor | Added p50 × floor | Gateway CPU µs/call: via / floor | CPU × floor |"
    );
    let _ = writeln!(md, "|---|---|--:|--:|--:|--:|--:|");
    for (row, s, f) in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:+.0} / {:+.0} | **{}** | {:.1} / {:.1} | **{:.2}×** |",
            row.upstream,
            cell(&row.config),
            row.c,
            s.added_p50,
            f.added_p50,
            ratio(s.added_p50, f.added_p50),
            s.gw_cpu_us,
            f.gw_cpu_us,
            s.gw_cpu_us / f.gw_cpu_us,
        );
    }
}

/// The upstream-authentication rows side by side: each OAuth identity's gateway CPU per call
/// against the static header's, with the spread of the rounds (the rows run one after the other
/// in every round, so round i of one and of the other are neighbours in time); and the per-user
/// row's consent round trip.
fn auth_table(md: &mut String, r: &Results) {
    let Some(((a, _), others)) = crate::plan::UPSTREAM_AUTH.split_first() else {
        return;
    };
    for (b, _) in others {
        auth_pair(md, r, a, b);
    }
    if !r.consent_ms.is_empty() {
        let mut v = r.consent_ms.clone();
        v.sort_by(f64::total_cmp);
        let _ = writeln!(
            md,
            "\nThe per-user row's consent round trip (from the call answered with the link, through the confirmation page, \
             its form, the authorization server approving at once and the callback): {:.1} ms (median of {}; {:.1}–{:.1}).",
            sluice_bench_load::stats::median(&v),
            v.len(),
            v[0],
            v[v.len() - 1]
        );
    }
}

/// Row `b` against row `a` (both of [`crate::plan::UPSTREAM_AUTH`]).
fn auth_pair(md: &mut String, r: &Results, a: &str, b: &str) {
    let (row_a, row_b) = (format!("sluice, {a}"), format!("sluice, {b}"));
    let find = |cfg: &str, c: usize| {
        r.calls
            .iter()
            .find(|x| x.upstream == "Rust echo" && x.config == cfg && x.c == c)
            .filter(|x| x.summary.is_some())
    };
    let rows: Vec<(usize, &CallRow, &CallRow)> = CONCURRENCY
        .iter()
        .filter_map(|&c| Some((c, find(&row_a, c)?, find(&row_b, c)?)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let cpu = |row: &CallRow| -> Vec<f64> {
        row.pairs
            .iter()
            .map(|(_, g)| {
                g.procs
                    .iter()
                    .find(|p| p.label == "gateway")
                    .map_or(f64::NAN, |p| p.cpu_us_per_call)
            })
            .collect()
    };
    let span = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:.1}–{hi:.1}")
    };
    let _ = writeln!(md, "\n## Upstream authentication: {b} against {a}\n");
    let _ = writeln!(
        md,
        "Gateway CPU µs per call, Rust echo behind `sluice-bench-echo --oauth`: the median over the rounds and the \
         rounds' range for each row, and the difference round by round (the two rows run next to each other in every \
         round). A difference inside the rounds' own range is noise.\n"
    );
    let _ = writeln!(
        md,
        "| c | {a}: median (rounds) | {b}: median (rounds) | Difference: medians | Difference round by round: median (range) | p50 µs: {a} / {b} | p99 µs: {a} / {b} |"
    );
    let _ = writeln!(md, "|--:|--:|--:|--:|--:|--:|--:|");
    for (c, x, y) in rows {
        let (sx, sy) = (
            x.summary.as_ref().expect("measured"),
            y.summary.as_ref().expect("measured"),
        );
        let (cx, cy) = (cpu(x), cpu(y));
        let diffs: Vec<f64> = cx.iter().zip(&cy).map(|(p, q)| q - p).collect();
        let _ = writeln!(
            md,
            "| {c} | {:.1} ({}) | {:.1} ({}) | **{:+.1}** | {:+.1} ({}) | {:.0} / {:.0} | {:.0} / {:.0} |",
            sx.gw_cpu_us,
            span(&cx),
            sy.gw_cpu_us,
            span(&cy),
            sy.gw_cpu_us - sx.gw_cpu_us,
            sluice_bench_load::stats::median(&diffs),
            span(&diffs),
            sx.p50,
            sy.p50,
            sx.p99,
            sy.p99,
        );
    }
}

/// Where the machine's two cores went per call at c=16 in front of the Rust echo: at
/// saturation the latency follows the whole machine's time per call, not the gateway's alone.
fn machine_table(md: &mut String, r: &Results) {
    let rows: Vec<(&CallRow, &CallSummary)> = r
        .calls
        .iter()
        .filter(|x| x.upstream == "Rust echo" && x.c == 16 && !x.peer && x.via == "HTTP")
        .filter_map(|x| Some((x, x.summary.as_ref()?)))
        .filter(|(_, s)| s.client_cpu_us.is_some() && s.idle_us.is_some())
        .collect();
    if rows.is_empty() {
        return;
    }
    // The measuring machine's cores, as the report's header names them ("2 cores, …").
    let cores: f64 = r
        .machine
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64));
    let _ = writeln!(md, "\n## Where the machine's time goes, Rust echo, c=16\n");
    let _ = writeln!(
        md,
        "At c=16 every core is busy, so a call's latency follows the whole machine's time per call: \
         the gateway's CPU, the upstream's, the load generator's, and the time a core stood idle \
         while work waited elsewhere. Medians of the rounds, µs per call; their sum is about \
         {cores:.0} cores ÷ req/s.\n"
    );
    let _ = writeln!(
        md,
        "| Configuration | Gateway | Upstream | Load generator | Idle | Sum | {cores:.0} cores ÷ req/s | Added p50 µs |"
    );
    let _ = writeln!(md, "|---|--:|--:|--:|--:|--:|--:|--:|");
    for (row, s) in rows {
        let parts = [
            Some(s.gw_cpu_us),
            s.upstream_cpu_us,
            s.client_cpu_us,
            s.idle_us,
        ];
        let sum: f64 = parts.iter().flatten().sum();
        let show = |x: Option<f64>| x.map_or("—".to_string(), |x| format!("{x:.1}"));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {sum:.1} | {:.1} | {:+.0} |",
            cell(&row.config),
            show(parts[0]),
            show(parts[1]),
            show(parts[2]),
            show(parts[3]),
            cores * 1e6 / s.rps,
            s.added_p50,
        );
    }
}

/// `a ÷ b` as "N.NN×", or why it has no meaning (the floor added nothing measurable).
fn ratio(a: f64, b: f64) -> String {
    if b <= 0.5 {
        "— (the floor added ≤ 0.5 µs)".into()
    } else {
        format!("{:.2}×", a / b)
    }
}

fn res_line(row: &ResRow) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "—".into());
    let startup = match (row.accept_ms, row.ready_ms) {
        (Some(a), Some(b)) => format!("{a:.1} / {b:.1}"),
        _ => "—".into(),
    };
    let rss = row.idle_rss_kb.map(|k| match row.idle_rss_tree_kb {
        Some(t) if t > k + 512 => format!("{} ({} with children)", mb(k), mb(t)),
        _ => mb(k),
    });
    let list = match (row.list_direct_p50_us, row.list_p50_us) {
        (Some(d), Some(g)) => format!("{} → {}", thousands(d), thousands(g)),
        (None, Some(g)) => thousands(g),
        _ => "—".into(),
    };
    let pages = if row.list_pages > 1 {
        format!(" ({} pages)", row.list_pages)
    } else {
        String::new()
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {}{} | {} | {} | {} |",
        row.upstream,
        cell(&row.config),
        startup,
        opt(rss),
        opt(row.kb_per_session.map(|k| format!("{k:.2}"))),
        opt(row.kb_per_stream.map(|k| format!("{k:.2}"))),
        list,
        pages,
        opt(row.list_ratio.map(|x| format!("{x:.2}×"))),
        opt(row.list_gw_cpu_us.map(|x| format!("{x:.0}"))),
        cell(&row.notes.join("; "))
    )
}

fn verdict(value: f64, target: f64, lower_is_better: bool, unit: &str) -> String {
    let ok = if lower_is_better {
        value < target
    } else {
        value >= target
    };
    if ok {
        format!("**met** ({value:.2}{unit} against {target}{unit})")
    } else {
        let by = (value - target).abs();
        let pct = by / target * 100.0;
        format!("**missed** by {by:.2}{unit} ({pct:.0}% off the target {target}{unit}; measured {value:.2}{unit})")
    }
}

/// The call figures of one row (upstream, configuration, concurrency), when it was measured.
fn call_of(r: &Results, up: &str, cfg: &str, c: usize) -> Option<CallSummary> {
    r.calls
        .iter()
        .find(|x| x.upstream == up && x.config == cfg && x.c == c)
        .and_then(|x| x.summary.clone())
}

/// The resource figures of one row (upstream, configuration).
fn res_of(r: &Results, up: &str, cfg: &str) -> Option<ResRow> {
    r.resources
        .iter()
        .find(|x| x.upstream == up && x.config == cfg)
        .cloned()
}

/// The five figures of issue 5's closing note, against their targets.
fn targets(r: &Results) -> Vec<String> {
    let call = |up: &str, cfg: &str, c: usize| call_of(r, up, cfg, c);
    let res = |up: &str, cfg: &str| res_of(r, up, cfg);
    let na = || "not measured in this run".to_string();
    let mut out = Vec::new();
    let cfg = "sluice, no hooks";
    for up in ["Rust echo", "TS SDK echo"] {
        out.push(format!(
            "Added median latency at c=1, no hooks, {up}: {}",
            call(up, cfg, 1).map_or_else(na, |s| verdict(s.added_p50, 100.0, true, " µs"))
        ));
    }
    for up in ["Rust echo", "TS SDK echo"] {
        for c in CONCURRENCY {
            out.push(format!(
                "Gateway CPU per call, no hooks, {up}, c={c}: {}",
                call(up, cfg, *c).map_or_else(na, |s| verdict(s.gw_cpu_us, 30.0, true, " µs"))
            ));
        }
    }
    out.push(format!(
        "Throughput at c=16 with the TypeScript SDK upstream, no hooks: {}",
        call("TS SDK echo", cfg, 16).map_or_else(na, |s| verdict(
            s.rps_ratio,
            0.8,
            false,
            "× direct"
        ))
    ));
    out.push(format!(
        "Idle RSS (no hooks, HTTP upstream): {}",
        res("Rust echo", cfg)
            .and_then(|x| x.idle_rss_kb)
            .map_or_else(na, |k| verdict(k as f64 / 1024.0, 30.0, true, " MB"))
    ));
    out.push(format!(
        "RSS per idle session: {}",
        res("Rust echo", cfg)
            .and_then(|x| x.kb_per_session)
            .map_or_else(na, |k| verdict(k, 2.0, true, " KB"))
    ));
    out
}

/// Issue 17's figures: at the floor, cached lists, hooks nearly free, memory.
fn targets17(r: &Results) -> Vec<String> {
    let call = |cfg: &str, c: usize| call_of(r, "Rust echo", cfg, c);
    let res = |cfg: &str| res_of(r, "Rust echo", cfg);
    let na = || "not measured in this run".to_string();
    let cfg = "sluice, no hooks";
    let mut out = Vec::new();
    let variants = [
        (cfg, ""),
        ("sluice, no hooks, 1 worker thread", ", 1 worker thread"),
        ("sluice, no hooks, pinned threads", ", pinned threads"),
    ];
    for (cfg, tag, c) in variants
        .iter()
        .flat_map(|&(cfg, tag)| CONCURRENCY.iter().map(move |c| (cfg, tag, c)))
    {
        let pair = call(cfg, *c).zip(call(FLOOR, *c));
        out.push(format!(
            "At the floor, added p50, Rust echo{tag}, c={c}: {}",
            pair.as_ref()
                .map_or_else(na, |(s, f)| if f.added_p50 > 0.5 {
                    verdict(s.added_p50 / f.added_p50, 1.0, true, "× the floor")
                } else {
                    "the floor added nothing measurable".into()
                })
        ));
        out.push(format!(
            "At the floor, gateway CPU per call, Rust echo{tag}, c={c}: {}",
            pair.as_ref().map_or_else(na, |(s, f)| verdict(
                s.gw_cpu_us / f.gw_cpu_us,
                1.0,
                true,
                "× the floor"
            ))
        ));
    }
    // Against both upstreams: the Rust echo serves a list it serialised once (as the cache
    // does); the TypeScript SDK server builds its list for every request, as servers do.
    for up in ["Rust echo", "TS SDK echo"] {
        for list in [cfg, "sluice, explain hook"] {
            out.push(format!(
                "tools/list of 1,000 tools ({list}, {up}): {}",
                res_of(r, up, list)
                    .and_then(|x| x.list_ratio)
                    .map_or_else(na, |x| verdict(x, 0.5, true, "× direct"))
            ));
        }
        // What no server or gateway can take away: the client parsing the listing.
        let direct = res_of(r, up, "direct (the upstream alone)");
        if let Some((parse, whole)) = direct.and_then(|d| d.list_client_parse_us.zip(d.list_p50_us))
        {
            out.push(format!(
                "Of a direct listing from the {up} ({whole:.0} µs), the client spends {parse:.0} µs parsing the JSON: {:.2}× direct is the least any gateway could reach",
                parse / whole
            ));
        }
    }
    out.push(format!(
        "Five builtin hooks, CPU per call over no hooks, c=16: {}",
        call("sluice, 5 builtin hooks (chain)", 16)
            .zip(call(cfg, 16))
            .map_or_else(na, |(h, n)| verdict(
                h.gw_cpu_us - n.gw_cpu_us,
                10.0,
                true,
                " µs"
            ))
    ));
    for (hook, c) in [("process hook", 1), ("http hook", 1)] {
        out.push(format!(
            "The {hook}'s added p50 over no hooks, c={c}: {}",
            call(&format!("sluice, {hook}"), c)
                .zip(call(cfg, c))
                .map_or_else(na, |(h, n)| format!("{:+.0} µs", h.added_p50 - n.added_p50))
        ));
    }
    let row = res(cfg);
    out.push(format!(
        "RSS per idle session: {}",
        row.as_ref()
            .and_then(|x| x.kb_per_session)
            .map_or_else(na, |k| verdict(k, 2.0, true, " KB"))
    ));
    out.push(format!(
        "RSS per idle GET stream: {}",
        row.as_ref()
            .and_then(|x| x.kb_per_stream)
            .map_or_else(na, |k| verdict(k, 8.0, true, " KB"))
    ));
    out.push(format!(
        "Idle RSS (no hooks, HTTP upstream, one session): {}",
        row.and_then(|x| x.idle_rss_kb)
            .map_or_else(na, |k| format!("{} MB", mb(k)))
    ));
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A horizontal bar chart of the call matrix: throughput and median latency, each as a ratio
/// against the direct call (1.0 = as fast as calling the upstream directly), on log scales with
/// the bars growing from 1.0.
pub(crate) fn svg(r: &Results) -> String {
    const ROW: f64 = 17.0;
    const LABEL_W: f64 = 330.0;
    const PANEL_W: f64 = 300.0;
    const GAP: f64 = 60.0;
    const TOP: f64 = 84.0;
    let colours = ["#3b6fc4", "#e0862c", "#5aa45a", "#9b59b6"];
    // Lines: a group header when the upstream changes; rows not measured at any concurrency
    // merged into one line.
    enum Line<'a> {
        Header(&'a str),
        Row(&'a CallRow, String),
    }
    let mut lines: Vec<Line> = Vec::new();
    let mut last = "";
    let mut i = 0;
    while i < r.calls.len() {
        let row = &r.calls[i];
        if row.upstream != last {
            lines.push(Line::Header(&row.upstream));
            last = &row.upstream;
        }
        let mut cs = vec![row.c.to_string()];
        let mut j = i + 1;
        while row.summary.is_none()
            && j < r.calls.len()
            && r.calls[j].upstream == row.upstream
            && r.calls[j].config == row.config
            && r.calls[j].summary.is_none()
            && r.calls[j].note == row.note
        {
            cs.push(r.calls[j].c.to_string());
            j += 1;
        }
        lines.push(Line::Row(
            row,
            format!("{} · c={}", row.config, cs.join(", ")),
        ));
        i = j;
    }
    let scale = |vals: Vec<f64>| {
        let lo = vals.iter().copied().fold(0.5_f64, f64::min).max(0.005) * 0.8;
        let hi = vals.iter().copied().fold(2.0_f64, f64::max) * 1.25;
        (lo.ln(), hi.ln())
    };
    let measured = || r.calls.iter().filter_map(|x| x.summary.as_ref());
    let tp = scale(measured().map(|s| s.rps_ratio).collect());
    let lat = scale(measured().map(|s| s.p50_ratio).collect());
    let height = TOP + lines.len() as f64 * ROW + 56.0;
    let width = LABEL_W + 2.0 * PANEL_W + GAP + 70.0;
    let bottom = TOP + lines.len() as f64 * ROW;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">Sluice vs a direct call to the same upstream (tools/call echo)</text>"#
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="37" fill="#555">{} · {} · sluice {} · {} round(s) × {} s{}</text>"##,
        esc(&r.date),
        esc(&r.machine),
        esc(&r.sluice_rev),
        r.rounds,
        r.seconds,
        if r.quick { " · QUICK SMOKE RUN" } else { "" }
    );
    let panels = [
        (
            "Throughput ÷ direct (log scale; right is better)",
            tp,
            0usize,
        ),
        (
            "Median latency ÷ direct (log scale; left is better)",
            lat,
            1usize,
        ),
    ];
    let xpos = |(lo, hi): (f64, f64), k: usize, v: f64| {
        let x0 = LABEL_W + k as f64 * (PANEL_W + GAP);
        x0 + PANEL_W * ((v.max(1e-9).ln() - lo) / (hi - lo)).clamp(0.0, 1.0)
    };
    for (title, sc, k) in panels {
        let x0 = LABEL_W + k as f64 * (PANEL_W + GAP);
        let _ = writeln!(
            s,
            r#"<text x="{x0}" y="{}" font-weight="bold">{}</text>"#,
            TOP - 28.0,
            esc(title)
        );
        for t in [0.01_f64, 0.1, 0.5, 1.0, 2.0, 10.0, 100.0] {
            if t.ln() < sc.0 || t.ln() > sc.1 {
                continue;
            }
            let x = xpos(sc, k, t);
            let (stroke, dash) = if t == 1.0 {
                ("#333", "")
            } else {
                ("#ddd", r#" stroke-dasharray="2,3""#)
            };
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{bottom}" stroke="{stroke}"{dash}/><text x="{x:.1}" y="{}" text-anchor="middle" fill="#555">{t}×</text>"##,
                TOP - 6.0,
                TOP - 10.0
            );
        }
    }
    for (n, line) in lines.iter().enumerate() {
        let y = TOP + n as f64 * ROW;
        let (row, label) = match line {
            Line::Header(up) => {
                let _ = writeln!(
                    s,
                    r#"<text x="10" y="{}" font-weight="bold">{}</text>"#,
                    y + 12.0,
                    esc(up)
                );
                continue;
            }
            Line::Row(row, label) => (row, label),
        };
        let ci = CONCURRENCY.iter().position(|c| *c == row.c).unwrap_or(0);
        let colour = colours[ci % colours.len()];
        let _ = writeln!(s, r#"<text x="20" y="{}">{}</text>"#, y + 12.0, esc(label));
        match &row.summary {
            Some(sm) => {
                for (k, v, sc) in [(0usize, sm.rps_ratio, tp), (1, sm.p50_ratio, lat)] {
                    let one = xpos(sc, k, 1.0);
                    let x = xpos(sc, k, v);
                    let (a, b) = if x < one { (x, one) } else { (one, x) };
                    let (tx, anchor) = if x < one {
                        (a - 3.0, "end")
                    } else {
                        (b + 3.0, "start")
                    };
                    let _ = writeln!(
                        s,
                        r##"<rect x="{a:.1}" y="{}" width="{:.1}" height="{}" fill="{colour}"/><text x="{tx:.1}" y="{}" text-anchor="{anchor}" fill="#222">{v:.2}×</text>"##,
                        y + 2.0,
                        (b - a).max(1.0),
                        ROW - 4.0,
                        y + 12.0
                    );
                }
            }
            None => {
                let note = row.note.as_deref().unwrap_or("not measured");
                let short: String = note.chars().take(90).collect();
                let _ = writeln!(
                    s,
                    r##"<text x="{}" y="{}" fill="#999" font-style="italic">{}</text>"##,
                    LABEL_W + 6.0,
                    y + 12.0,
                    esc(&short)
                );
            }
        }
    }
    let ly = height - 18.0;
    for (i, c) in CONCURRENCY.iter().enumerate() {
        let x = 10.0 + i as f64 * 110.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}">concurrency {c}</text>"#,
            ly - 10.0,
            colours[i % colours.len()],
            x + 16.0,
            ly
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="240" y="{ly}" fill="#555">"stdio upstream" rows: the echo as the gateway's stdio child, compared with the direct HTTP echo.</text>"##
    );
    let _ = writeln!(s, "</svg>");
    s
}
