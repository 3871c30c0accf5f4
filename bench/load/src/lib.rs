//! The load generator behind `sluice-bench-load` and the benchmark runner `sluice-bench-suite`.
//!
//! - [`http`]: a minimal HTTP/1.1 client (one keep-alive connection per worker, `Content-Length`
//!   and chunked bodies), so the client costs as little as possible next to the server measured.
//! - [`mcp`]: an MCP session over it (initialize, `Mcp-Session-Id`, JSON or SSE replies).
//! - [`procfs`]: CPU time and RSS of a process from `/proc`.
//! - [`stats`]: latency percentiles.
//! - [`run`]: the four measurements (calls, list, sessions, startup) and their reports.
//! - [`streams`]: memory per idle GET stream.

pub mod http;
pub mod mcp;
pub mod procfs;
pub mod run;
pub mod stats;
pub mod streams;
