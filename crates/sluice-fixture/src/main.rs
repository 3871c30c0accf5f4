//! `sluice-fixture`: a fixture MCP server for Sluice's end-to-end tests and the official
//! conformance suite (server scenarios). Speaks the handshake-era protocol versions
//! 2024-11-05 … 2025-11-25 and the stateless 2026-07-28 (chosen per request, both at once by
//! default) over stdio or Streamable HTTP, with hand-written JSON-RPC (serde_json, no SDK).
//!
//! ```text
//! sluice-fixture --stdio [OPTIONS]
//! sluice-fixture --http 127.0.0.1:PORT [OPTIONS]     (endpoint: /mcp)
//!
//! OPTIONS:
//!   --name NAME         serverInfo.name (default "sluice-fixture")
//!   --many-tools N      also list tools bulk_0 … bulk_{N-1} (each echoes)
//!   --page-size N       paginate tools/list, prompts/list, resources/list (and templates),
//!                       skills/list and resources/directory/read
//!   --era ERA           legacy | modern | both (default): the protocol eras served
//!   --ttl-ms N          the ttlMs caching hint on 2026-07-28 cacheable results (default 0)
//!   --tasks             serve tasks (2025-11-25 and the 2026-07-28 extension) and their tools
//!   --skills            serve a fixed skill tree through the Skills extension
//!                       (io.modelcontextprotocol/skills, with directoryRead), both eras
//!   --skills-tamper MODE  (with --skills) serve pdf-processing's SKILL.md unlike its entry:
//!                       digest (same length, other bytes), size (one byte longer) or
//!                       frontmatter (the entry's description differs from the file's)
//! ```

mod catalog;
mod handlers;
mod http;
mod mrtr;
mod protocol;
mod session;
mod skills;
mod sse;
mod stdio;
mod sync;
mod task_methods;
mod tasks;
mod tools;

use std::net::SocketAddr;
use std::process::ExitCode;

use session::{Config, EraMode, Fixture};

const USAGE: &str =
    "usage: sluice-fixture (--stdio | --http ADDR) [--name NAME] [--many-tools N] [--page-size N] [--describe TOOL=TEXT] [--era legacy|modern|both] [--ttl-ms N] [--tasks] [--skills [--skills-tamper digest|size|frontmatter]]";

enum Mode {
    Stdio,
    Http(SocketAddr),
}

fn parse_args(args: &[String]) -> Result<(Mode, Config), String> {
    let mut mode = None;
    let mut config = Config {
        name: "sluice-fixture".to_string(),
        many_tools: 0,
        page_size: None,
        describe: Vec::new(),
        era: EraMode::Both,
        ttl_ms: 0,
        tasks: false,
        skills: false,
        skills_tamper: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |what: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{flag} needs {what}"))
        };
        let count = |v: String| {
            v.parse::<usize>()
                .map_err(|_| format!("{flag}: not a number: {v}"))
        };
        match flag {
            "--stdio" => mode = Some(Mode::Stdio),
            "--http" => {
                let addr = value("an address (e.g. 127.0.0.1:8080)")?;
                let addr = addr
                    .parse()
                    .map_err(|_| format!("--http: not a socket address: {addr}"))?;
                mode = Some(Mode::Http(addr));
            }
            "--name" => config.name = value("a name")?,
            "--describe" => {
                let v = value("TOOL=TEXT")?;
                let (tool, text) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--describe needs TOOL=TEXT, got {v:?}"))?;
                config.describe.push((tool.to_string(), text.to_string()));
            }
            "--many-tools" => config.many_tools = count(value("a count")?)?,
            "--page-size" => {
                let n = count(value("a count")?)?;
                if n == 0 {
                    return Err("--page-size must be at least 1".into());
                }
                config.page_size = Some(n);
            }
            "--era" => {
                config.era = match value("legacy, modern or both")?.as_str() {
                    "legacy" => EraMode::Legacy,
                    "modern" => EraMode::Modern,
                    "both" => EraMode::Both,
                    other => {
                        return Err(format!(
                            "--era: expected legacy, modern or both, got {other}"
                        ))
                    }
                }
            }
            "--ttl-ms" => {
                let v = value("milliseconds")?;
                config.ttl_ms = v
                    .parse()
                    .map_err(|_| format!("--ttl-ms: not a number: {v}"))?;
            }
            "--tasks" => config.tasks = true,
            "--skills" => config.skills = true,
            "--skills-tamper" => {
                config.skills_tamper = Some(skills::Tamper::parse(&value(
                    "digest, size or frontmatter",
                )?)?)
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    let mode = mode.ok_or("one of --stdio or --http ADDR is required")?;
    if config.skills_tamper.is_some() && !config.skills {
        return Err("--skills-tamper needs --skills".into());
    }
    Ok((mode, config))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, config) = match parse_args(&args) {
        Ok(parsed) => parsed,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("sluice-fixture: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let fixture = Fixture::new(config);
    let result = match mode {
        Mode::Stdio => stdio::run(fixture).await,
        Mode::Http(addr) => http::run(fixture, addr).await,
    };
    match result {
        // Exit at once: do not wait for in-flight handlers once stdin has closed.
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("sluice-fixture: {e}");
            ExitCode::FAILURE
        }
    }
}
