//! What `/proc` says about a process: CPU time (utime + stime of every thread, from
//! `/proc/PID/stat`, in clock ticks; and each thread's time on a CPU in nanoseconds from
//! `/proc/PID/task/*/schedstat`) and memory (`VmRSS`, `VmHWM` from `/proc/PID/status`). Linux
//! only.

use std::sync::OnceLock;

/// Clock ticks per second (`getconf CLK_TCK`; 100 when that fails).
pub fn clock_ticks() -> u64 {
    static TCK: OnceLock<u64> = OnceLock::new();
    *TCK.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// CPU seconds (user + system) the process has used so far, all threads.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / clock_ticks() as f64)
}

/// Seconds the machine's CPUs have spent idle so far, all CPUs together (`idle` and `iowait`
/// of the first line of `/proc/stat`).
pub fn idle_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    // "cpu  user nice system idle iowait …": idle and iowait are the 4th and 5th numbers.
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .take(5)
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    Some((ticks.get(3)? + ticks.get(4)?) as f64 / clock_ticks() as f64)
}

/// Nanoseconds each live thread of the process has run on a CPU (`schedstat`'s first field):
/// the same time as [`cpu_seconds`] without its 10 ms ticks.
pub fn cpu_ns_by_thread(pid: u32) -> Option<std::collections::HashMap<u32, u64>> {
    schedstat_by_thread(pid, 0)
}

/// Nanoseconds each live thread of the process has waited on a run queue, runnable but not
/// running (`schedstat`'s second field).
pub fn wait_ns_by_thread(pid: u32) -> Option<std::collections::HashMap<u32, u64>> {
    schedstat_by_thread(pid, 1)
}

/// Field `field` of each live thread's `schedstat`.
fn schedstat_by_thread(pid: u32, field: usize) -> Option<std::collections::HashMap<u32, u64>> {
    let mut out = std::collections::HashMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(entry) = entry else { continue };
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        if let Some(ns) = text
            .split_whitespace()
            .nth(field)
            .and_then(|n| n.parse().ok())
        {
            out.insert(tid, ns);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Seconds between two per-thread readings ([`cpu_ns_by_thread`], [`wait_ns_by_thread`]);
/// `None` when a thread of the first has gone (its time is no longer readable: use
/// [`cpu_seconds`] then).
pub fn seconds_between(
    start: &std::collections::HashMap<u32, u64>,
    end: &std::collections::HashMap<u32, u64>,
) -> Option<f64> {
    let mut ns = 0u64;
    for (tid, before) in start {
        ns += end.get(tid)?.saturating_sub(*before);
    }
    for (tid, now) in end {
        if !start.contains_key(tid) {
            ns += now;
        }
    }
    Some(ns as f64 / 1e9)
}

/// A `kB` field of `/proc/PID/status` (`VmRSS`, `VmHWM`, …).
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Current resident set size, kB.
pub fn rss_kb(pid: u32) -> Option<u64> {
    status_kb(pid, "VmRSS")
}

/// Peak resident set size, kB.
pub fn peak_rss_kb(pid: u32) -> Option<u64> {
    status_kb(pid, "VmHWM")
}

/// The direct children of a process (from `/proc/PID/task/*/children`).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A process and every process below it.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let kids = children(out[i]);
        out.extend(kids);
        i += 1;
    }
    out
}
