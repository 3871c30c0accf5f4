//! Idle GET streams: how much a server's memory grows per open `GET /mcp` event stream.

use crate::http::{Conn, Target};
use crate::{mcp, procfs, run::CLIENT};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The result of a `streams` measurement.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StreamsReport {
    /// Always "streams".
    pub kind: String,
    /// The label given.
    pub label: String,
    /// GET streams opened (and left open, idle).
    pub streams: u64,
    /// The watched process's VmRSS with the sessions open and no stream, kB.
    pub rss_before_kb: u64,
    /// … and with every stream open, kB.
    pub rss_after_kb: u64,
    /// (after − before) / streams: one idle stream and the connection it holds.
    pub kb_per_stream: f64,
}

/// Open `count` sessions, then one GET stream for each on a connection of its own (read up to
/// the response head, `200` with `text/event-stream`), and leave them idle; report how much the
/// watched process's RSS grew per stream. The sessions are open before the baseline is read,
/// so only the streams (and their connections) are counted.
pub async fn get_streams(label: &str, url: &str, count: u64, pid: u32) -> Result<StreamsReport> {
    let target = Target::parse(url)?;
    let mut conn = Conn::new(target.clone());
    let mut sessions = Vec::new();
    for _ in 0..count {
        let s = mcp::initialize(&mut conn, CLIENT).await?;
        let id =
            s.id.ok_or_else(|| anyhow!("the server gave no Mcp-Session-Id"))?;
        sessions.push((id, s.version));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = procfs::rss_kb(pid).ok_or_else(|| anyhow!("no process {pid}"))?;
    let mut streams = Vec::new();
    for (id, version) in &sessions {
        let mut s = TcpStream::connect(&target.addr)
            .await
            .context("connecting")?;
        let req = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {id}\r\nMCP-Protocol-Version: {version}\r\n\r\n",
            target.path, target.addr
        );
        s.write_all(req.as_bytes()).await?;
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
                .await
                .context("waiting for the GET stream's head")??;
            if n == 0 {
                bail!("the server closed the GET stream");
            }
            head.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
        if !text.starts_with("http/1.1 200") || !text.contains("text/event-stream") {
            bail!(
                "GET did not open an event stream: {}",
                text.lines().next().unwrap_or("")
            );
        }
        streams.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = procfs::rss_kb(pid).unwrap_or(0);
    drop(streams);
    Ok(StreamsReport {
        kind: "streams".into(),
        label: label.into(),
        streams: count,
        rss_before_kb: before,
        rss_after_kb: after,
        kb_per_stream: (after as f64 - before as f64) / count.max(1) as f64,
    })
}
