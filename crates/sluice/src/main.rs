//! The `sluice` command: `serve` (Streamable HTTP or stdio), `check` (validate a tree), `client`
//! (talk to any MCP server), and the built-in demo upstream.

/// mimalloc: the gateway allocates many short-lived buffers per call; glibc malloc showed up at
/// 14–16 % of CPU in the benchmark's profile. Built without its transparent-huge-page advice
/// (Cargo.toml: idle RSS 13.5 MB instead of 24 MB, the same CPU per call).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod callback;
mod client;
mod client_auth;
mod connections;
mod demo;
mod log;
mod log_fields;
mod login;
mod manage;
mod pins;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use sluice_config::{
    Config, ConfigErrors, HookEventKind, HookKindSpec, HookSpec, OnError, Settings, Transport,
    UpstreamSpec,
};
use sluice_server::Server;
use std::path::PathBuf;
use std::process::ExitCode;

/// Sluice: a fast MCP gateway with a hook pipeline.
#[derive(Parser)]
#[command(name = "sluice", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP clients (Streamable HTTP at http://LISTEN/mcp, or stdio with --stdio).
    Serve(ServeArgs),
    /// Validate a configuration tree; print every error with file and field; exit 1 on any.
    Check {
        /// The configuration tree (home folder).
        #[arg(long)]
        home: PathBuf,
        /// Also start every enabled upstream, read its lists, and report the names two of them
        /// produce (with `"on_collision": "error"`, each is an error).
        #[arg(long)]
        lists: bool,
    },
    /// Manage first-party tools (tools/tools.register.json, tools.state.json).
    #[command(subcommand)]
    Tool(manage::ToolCmd),
    /// Manage hooks (hooks/hooks.manifest.json, hooks.state.json).
    #[command(subcommand)]
    Hook(manage::HookCmd),
    /// Manage upstreams (mcp/expose.json).
    #[command(subcommand)]
    Upstream(manage::UpstreamCmd),
    /// Turn the audit log on or off, or print its tail.
    #[command(subcommand)]
    Log(manage::LogCmd),
    /// Import configuration from other tools.
    #[command(subcommand)]
    Import(ImportCmd),
    /// Static tokens for the MCP listener (auth/auth.config.json).
    #[command(subcommand)]
    Auth(manage::AuthCmd),
    /// Print the JSON Schema of a configuration file, for editors: expose, hooks, tools,
    /// settings or auth (or the file name: sluice.json, mcp/expose.json, …).
    Schema(manage::SchemaArgs),
    /// Talk to any MCP server: list its tools, call one, get prompts, read resources.
    Client(client::ClientArgs),
    /// Scale-out across replicas (`cluster` in sluice.json).
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// The vault of grants toward OAuth upstreams.
    #[command(subcommand)]
    Vault(VaultCmd),
    /// Review and approve what upstreams offer against their pins (mcp/pins.json).
    #[command(subcommand)]
    Pins(pins::PinsCmd),
    /// Users' own connections to per-user OAuth upstreams: list them, or revoke them.
    #[command(subcommand)]
    Connections(connections::ConnectionsCmd),
    /// Run the built-in demo upstream (a small stdio MCP server). Used by the default tree.
    #[command(hide = true)]
    DemoUpstream,
}

#[derive(Subcommand)]
enum ClusterCmd {
    /// Print a new cluster key (32 random bytes, base64) for `cluster.key` (e.g. in
    /// SLUICE_CLUSTER_KEY).
    Keygen,
}

#[derive(Subcommand)]
enum VaultCmd {
    /// Print a new vault key (32 random bytes, base64) for `vault.key` (e.g. in
    /// SLUICE_VAULT_KEY).
    Keygen,
    /// Seal every grant and client registration again with the first key of `vault.key`, so
    /// the older keys can be dropped from it.
    Rotate {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
    },
}

#[derive(Subcommand)]
enum ImportCmd {
    /// Add the servers of an `mcpServers` JSON (Claude Desktop, Cursor, VS Code, Claude Code)
    /// as upstreams of the tree.
    McpServers {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// The JSON file.
        file: PathBuf,
    },
    /// Add the hooks of a Claude Code `settings.json` (FILE), or of a plugin (--plugin: its
    /// `hooks/hooks.json` and `.claude-plugin/plugin.json`'s hooks), to the hook manifest. Events Sluice never fires are left
    /// out with a warning saying why.
    ClaudeHooks {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// A plugin folder: its `hooks/hooks.json` and the hooks of its
        /// `.claude-plugin/plugin.json` (inline, or paths) are read, and `${CLAUDE_PLUGIN_ROOT}`
        /// means it.
        #[arg(long, value_name = "PLUGIN_DIR", conflicts_with = "file")]
        plugin: Option<PathBuf>,
        /// Which tool name the hooks are shown: `mcp` (Claude Code's `mcp__<upstream>__<tool>`)
        /// or `gateway` (the name clients call).
        #[arg(long, default_value = "mcp", value_parser = ["mcp", "gateway"])]
        tool_name: String,
        /// The settings file (`.claude/settings.json`, `~/.claude/settings.json`, …).
        #[arg(required_unless_present = "plugin")]
        file: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// The configuration tree. Without it (and without --passthrough) a built-in default tree
    /// with a demo upstream is served.
    #[arg(long)]
    home: Option<PathBuf>,
    /// Address of the MCP listener (overrides `listen` in sluice.json). Default 127.0.0.1:8750.
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// Serve one client on stdin/stdout instead of HTTP.
    #[arg(long)]
    stdio: bool,
    /// With --stdio: serve the endpoint of this name of mcp/endpoints.json (what /mcp/NAME
    /// serves over HTTP) instead of what /mcp serves.
    #[arg(long, value_name = "NAME", requires = "stdio")]
    endpoint: Option<String>,
    /// Front one upstream transparently: a URL (Streamable HTTP; a URL ending in /sse uses the
    /// legacy SSE transport), or, with no value, the command after `--`.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    passthrough: Option<String>,
    /// Threads serving MCP connections, each a runtime of its own (default: one per CPU, or
    /// TOKIO_WORKER_THREADS); the upstreams' supervisors run on them too. The main runtime
    /// (accept loop, admin) has as many workers.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Pin the serving threads to CPUs, one to each, when there is one per CPU the process may
    /// use (for a machine whose CPUs are the gateway's own; see docs/deployment.md).
    #[arg(long)]
    pin: bool,
    /// Write the audit log (JSON lines) to this file (overrides `logs/log.config.json`).
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Address of the admin listener (web page, management API, /metrics, /healthz, /readyz;
    /// overrides `admin` in sluice.json). Default 127.0.0.1:8751. A non-loopback address needs a
    /// configured admin token.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "no_admin")]
    admin: Option<String>,
    /// Do not start the admin listener.
    #[arg(long)]
    no_admin: bool,
    /// The upstream command for `--passthrough -- CMD ARGS…`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

fn main() -> ExitCode {
    // The sandbox launcher first, before anything starts a thread: a multi-threaded process
    // cannot enter a new user namespace. Not a clap subcommand: its arguments are the server's.
    let mut raw = std::env::args_os().skip(1);
    if raw.next().is_some_and(|a| a == sluice_sandbox::SUBCOMMAND) {
        let rest: Vec<std::ffi::OsString> = raw.collect();
        if rest.len() == 1 && rest[0] == "--probe" {
            return ExitCode::from(sluice_sandbox::probe_main());
        }
        return ExitCode::from(sluice_sandbox::exec(&rest));
    }
    let cli = Cli::parse();
    match cli.command {
        Command::DemoUpstream => {
            demo::run();
            ExitCode::SUCCESS
        }
        Command::Check { home, lists } => check(&home, lists),
        Command::Tool(c) => manage::tool(c),
        Command::Hook(c) => manage::hook(c),
        Command::Upstream(c) => manage::upstream(c),
        Command::Log(c) => manage::log(c),
        Command::Import(ImportCmd::McpServers { home, file }) => import(&home, &file),
        Command::Import(ImportCmd::ClaudeHooks {
            home,
            plugin,
            tool_name,
            file,
        }) => import_claude_hooks(&home, plugin.as_deref(), file.as_deref(), &tool_name),
        Command::Auth(c) => manage::auth(c),
        Command::Schema(a) => manage::schema(a),
        Command::Client(args) => client::run(args),
        Command::Cluster(ClusterCmd::Keygen) => {
            println!("{}", sluice_cluster::keygen());
            ExitCode::SUCCESS
        }
        Command::Vault(VaultCmd::Keygen) => {
            println!("{}", sluice_vault::keygen());
            ExitCode::SUCCESS
        }
        Command::Vault(VaultCmd::Rotate { home }) => login::rotate(&home),
        Command::Connections(c) => connections::run(c),
        Command::Pins(c) => pins::run(c),
        Command::Serve(args) => {
            // Held to the end: dropping it writes what is still queued.
            let _log = init_logging("info");
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            if let Some(n) = args.threads {
                builder.worker_threads(n.max(1));
            }
            let rt = builder.enable_all().build().expect("tokio runtime");
            match rt.block_on(serve(args)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("sluice: {e:#}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

fn import(home: &std::path::Path, file: &std::path::Path) -> ExitCode {
    let doc = match std::fs::read_to_string(file)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(d) => d,
        Err(e) => {
            eprintln!("sluice: cannot read {}: {e}", file.display());
            return ExitCode::from(1);
        }
    };
    match sluice_config::manage::import_mcp_servers(home, &doc) {
        Ok(ids) => {
            println!("imported {} upstream(s): {}", ids.len(), ids.join(", "));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(1)
        }
    }
}

fn import_claude_hooks(
    home: &std::path::Path,
    plugin: Option<&std::path::Path>,
    file: Option<&std::path::Path>,
    tool_name: &str,
) -> ExitCode {
    let (doc, root) = match (plugin, file) {
        (Some(p), _) => {
            let root = match std::fs::canonicalize(p) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("sluice: cannot read the plugin folder {}: {e}", p.display());
                    return ExitCode::from(1);
                }
            };
            // hooks/hooks.json and the hooks of .claude-plugin/plugin.json (inline or paths).
            match sluice_config::claude_plugin::hooks_of(&root) {
                Ok(doc) => (doc, Some(root)),
                Err(e) => {
                    eprintln!("sluice: {e}");
                    return ExitCode::from(1);
                }
            }
        }
        (None, Some(f)) => match std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(d) => (d, None),
            Err(e) => {
                eprintln!("sluice: cannot read {}: {e}", f.display());
                return ExitCode::from(1);
            }
        },
        (None, None) => unreachable!("clap requires one"),
    };
    match sluice_config::manage::import_claude_hooks(home, &doc, root.as_deref(), tool_name) {
        Ok((ids, warnings)) => {
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            println!("imported {} hook(s): {}", ids.len(), ids.join(", "));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(1)
        }
    }
}

/// Logs on stderr, filtered by RUST_LOG or else `default`, times and fields written by
/// [`log_fields`]. Lines are written by a thread of their own on a clock (see [`log`]): a
/// serving thread formats a line and appends it to a buffer. Nothing is dropped. The guard writes what is buffered when dropped.
fn init_logging(default: &str) -> log::LogGuard {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, guard) = log::writer();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(log_fields::Fields)
        .with_timer(log_fields::Time)
        .with_writer(writer)
        .with_ansi(ansi)
        .with_target(false)
        .init();
    guard
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn check(home: &std::path::Path, lists: bool) -> ExitCode {
    match Config::load(home, &env_lookup) {
        Ok((config, warnings)) => {
            for w in &warnings {
                println!("warning: {w}");
            }
            for risk in config.expose.collision_risks() {
                println!("collision: {risk}");
            }
            if lists {
                let found = listed_collisions(&config);
                let error = config.expose.on_collision == sluice_config::OnCollision::Error;
                for line in found.lines() {
                    let (tag, then) = if error {
                        ("error", "listed for none of them (on_collision: error)")
                    } else {
                        ("warning", "the first keeps it (on_collision: first)")
                    };
                    println!("{tag}: collision: {line}; {then}");
                }
                if error && !found.is_empty() {
                    println!("name collisions with on_collision \"error\"");
                    return ExitCode::from(1);
                }
            }
            let sandboxes = sandbox_report(&config);
            if sandboxes > 0 {
                println!("{sandboxes} sandbox(es) the kernel cannot enforce");
                return ExitCode::from(1);
            }
            for e in &config.endpoints.endpoints {
                println!("endpoint {}: served at /mcp/{}", e.name, e.name);
            }
            println!(
                "{}: ok ({} upstreams, {} curated tools)",
                config.home.display(),
                config.expose.upstreams.len(),
                config.expose.expose.len()
            );
            ExitCode::SUCCESS
        }
        Err(ConfigErrors(errors)) => {
            for e in &errors {
                println!("error: {e}");
            }
            println!("{} error(s)", errors.len());
            ExitCode::from(1)
        }
    }
}

/// `sluice check --lists`: start every enabled upstream (sandboxed ones through the launcher),
/// read its lists, stop it, and find the names two of them produce. An upstream that cannot be
/// listed is named and left out.
fn listed_collisions(config: &Config) -> sluice_config::Collisions {
    use sluice_upstream::{fetch_lists, Connection, OpenOptions, StderrTail};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let timeout = std::time::Duration::from_millis(config.settings.connect_timeout_ms);
    let listed = rt.block_on(async {
        let mut out = Vec::new();
        for spec in config.expose.upstreams.iter().filter(|u| u.enabled) {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let opts = OpenOptions {
                client_info: serde_json::json!({"name": "sluice-check", "version": env!("CARGO_PKG_VERSION")}),
                capabilities: serde_json::json!({}),
                protocol_version: sluice_core::version::LATEST_LEGACY.into(),
                connect_timeout: timeout,
                label: spec.id.clone(),
                stderr: StderrTail::default(),
                identity: None,
                bearer: None,
            };
            let lists = match Connection::open(spec, opts, tx).await {
                Ok(conn) => {
                    let caps = conn.init_result().get("capabilities").cloned();
                    let caps = caps.unwrap_or(serde_json::Value::Null);
                    let lists = fetch_lists(&conn, &caps, timeout).await;
                    conn.shutdown().await;
                    lists.map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            drop(rx);
            match lists {
                Ok(l) => {
                    println!("upstream {}: listed ({} tools, {} prompts, {} resources)", spec.id, l.tools.len(), l.prompts.len(), l.resources.len());
                    out.push((spec, l));
                }
                Err(e) => println!("warning: upstream {}: not listed: {e}", spec.id),
            }
        }
        out
    });
    let views: Vec<(&UpstreamSpec, sluice_config::Listed<'_>)> = listed
        .iter()
        .map(|(spec, l)| (*spec, l.listed(spec)))
        .collect();
    sluice_config::ExposeFile::collisions(&views, &config.expose.expose)
}

/// Every sandbox of the tree with what it confines: `upstream ID` or `hook ID`; with
/// `enabled_only`, only upstreams and hooks that run.
fn sandboxes(config: &Config, enabled_only: bool) -> Vec<(String, &sluice_config::Sandbox)> {
    let upstreams = config
        .expose
        .upstreams
        .iter()
        .filter(|u| !enabled_only || u.enabled)
        .filter_map(|u| Some((format!("upstream {}", u.id), u.sandbox.as_ref()?)));
    let hooks = config
        .hooks
        .hooks
        .iter()
        .filter(|h| !enabled_only || h.enabled)
        .filter_map(|h| Some((format!("hook {}", h.id), h.sandbox.as_ref()?)));
    upstreams.chain(hooks).collect()
}

/// `sluice check`'s sandbox part: what the kernel supports, then each sandbox with what is
/// enforced, or why it cannot be. Returns how many cannot be enforced.
fn sandbox_report(config: &Config) -> usize {
    let support = sluice_sandbox::Support::probe();
    println!("sandbox support of this kernel:");
    for line in support.lines() {
        println!("  {line}");
    }
    let mut failed = 0;
    for (who, sandbox) in sandboxes(config, false) {
        match support.enforceable(sandbox) {
            Ok(()) => {
                println!("{who}: sandboxed");
                for line in sandbox.describe() {
                    println!("  {line}");
                }
            }
            Err(e) => {
                println!("error: {who}: sandbox: {e}");
                failed += 1;
            }
        }
    }
    failed
}

/// Every sandbox of the tree can be enforced by this kernel (else the reasons): checked at
/// start, so a sandbox is never silently left out.
fn sandboxes_enforceable(config: &Config) -> Result<()> {
    let all = sandboxes(config, true);
    if all.is_empty() {
        return Ok(());
    }
    let support = sluice_sandbox::Support::probe();
    let errors: Vec<String> = all
        .iter()
        .filter_map(|(who, sandbox)| {
            let e = support.enforceable(sandbox).err()?;
            Some(format!("{who}: sandbox: {e}"))
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        bail!("{}", errors.join("\n"))
    }
}

/// The default tree: the demo upstream (this binary), every tool listed.
fn default_config() -> Result<Config> {
    let exe = std::env::current_exe().context("locating the sluice binary")?;
    let mut demo =
        UpstreamSpec::stdio("demo", &exe.to_string_lossy(), vec!["demo-upstream".into()]);
    demo.expose_all = true;
    demo.description = "Built-in demo upstream: echo, add, word_count.".into();
    let mut config = Config::passthrough(demo, Settings::default());
    config.expose.upstreams[0].transparent = false;
    // The explain hook is on in the default tree: every tool asks for a `reason`.
    config.hooks.hooks.push(HookSpec {
        id: "explain".into(),
        event: HookEventKind::Request,
        matcher: String::new(),
        methods: vec!["*".into()],
        kind: HookKindSpec::Builtin {
            name: "explain".into(),
            options: sluice_config::BuiltinOptions::Explain(Default::default()),
        },
        timeout: std::time::Duration::from_secs(1),
        on_error: OnError::Refuse,
        enabled: true,
        description: "Asks the agent for a reason for every tool call (Civic's explain hook)."
            .into(),
        claude: Default::default(),
        sandbox: None,
    });
    Ok(config)
}

fn passthrough_config(args: &ServeArgs, url: &str) -> Result<Config> {
    let mut spec = if url.is_empty() {
        let Some((cmd, rest)) = args.command.split_first() else {
            bail!("--passthrough needs a URL or a command after `--`");
        };
        UpstreamSpec::stdio("upstream", cmd, rest.to_vec())
    } else {
        let transport = if url.trim_end_matches('/').ends_with("/sse") {
            Transport::Sse
        } else {
            Transport::Http
        };
        UpstreamSpec::http("upstream", url, transport)
    };
    spec.transparent = true;
    Ok(Config::passthrough(spec, Settings::default()))
}

async fn serve(args: ServeArgs) -> Result<()> {
    let mut config = match (&args.passthrough, &args.home) {
        (Some(_), Some(_)) => bail!("--passthrough and --home cannot be combined"),
        (Some(url), None) => passthrough_config(&args, url)?,
        (None, Some(home)) => match Config::load(home, &env_lookup) {
            Ok((config, warnings)) => {
                for w in warnings {
                    tracing::warn!("{w}");
                }
                config
            }
            Err(errors) => bail!("the configuration has errors:\n{errors}"),
        },
        (None, None) => {
            if !args.command.is_empty() {
                bail!("a command after `--` needs --passthrough");
            }
            tracing::info!("no --home given: serving the built-in default tree (demo upstream)");
            default_config()?
        }
    };
    if let Some(listen) = &args.listen {
        config.settings.listen = listen.clone();
    }
    if let Some(path) = &args.audit_log {
        config.logs.enabled = true;
        config.logs.path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
    }
    sandboxes_enforceable(&config)?;
    let watch_tree = args.home.is_some();
    let admin = admin_listener(&args, &config.settings).await?;
    let server = Server::new(config);
    if let Some((listener, token)) = admin {
        let opts = sluice_server::admin::AdminOptions {
            token,
            editable: watch_tree,
        };
        let state = server.start_admin(opts);
        let stopping = server.stopping();
        tokio::spawn(async move {
            let stop = async move { stopping.cancelled().await };
            if let Err(e) = sluice_server::admin::serve(state, listener, stop).await {
                tracing::error!("the admin listener failed: {e}");
            }
        });
    }
    if watch_tree {
        // Edits to the tree apply live.
        tokio::spawn(server.clone().watch(std::time::Duration::from_millis(500)));
    }
    if args.stdio {
        if let Some(name) = &args.endpoint {
            if server.snapshot().config.endpoints.get(name).is_none() {
                bail!("--endpoint {name:?}: mcp/endpoints.json has no endpoint of that name");
            }
        }
        server.start().await;
        let (stdin, stdout) = (tokio::io::stdin(), tokio::io::stdout());
        if let Err(e) = server
            .serve_stdio_on(args.endpoint.as_deref(), stdin, stdout)
            .await
        {
            bail!("--endpoint: {e}");
        }
        return Ok(());
    }
    let listen = server.snapshot().settings().listen.clone();
    let addr: std::net::SocketAddr = listen
        .parse()
        .with_context(|| format!("--listen {listen:?} is not HOST:PORT"))?;
    if !addr.ip().is_loopback() && server.authenticator().is_none() {
        bail!(
            "refusing to listen on {addr} without authentication: configure auth/auth.config.json (tokens or OAuth) or listen on a loopback address"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    server.set_bound_address(&bound.to_string());
    // The serving threads first: the upstreams' supervisors run on them.
    let threads = args.threads.unwrap_or_else(sluice_server::default_threads);
    server
        .start_threads(threads, args.pin)
        .context("cannot start the serving threads")?;
    server.start().await;
    match server.authenticator() {
        Some(auth) => tracing::info!(
            "serving MCP at http://{bound}/mcp (authentication on; resource {})",
            auth.resource()
        ),
        None => tracing::info!("serving MCP at http://{bound}/mcp"),
    }
    let shutdown = async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
    };
    server.serve_http(listener, shutdown).await?;
    server.shutdown().await;
    Ok(())
}

/// Bind the admin listener and settle its token: `admin_token` in sluice.json, else
/// `SLUICE_ADMIN_TOKEN`, else a fresh one printed on stderr. A non-loopback address without a
/// configured token is refused. When the default address is taken, the gateway runs without it
/// (with a warning); an address asked for explicitly must bind.
async fn admin_listener(
    args: &ServeArgs,
    settings: &Settings,
) -> Result<Option<(tokio::net::TcpListener, String)>> {
    if args.no_admin {
        return Ok(None);
    }
    let explicit = args.admin.clone().or_else(|| settings.admin.clone());
    let text = explicit
        .clone()
        .unwrap_or_else(|| "127.0.0.1:8751".to_string());
    let addr: std::net::SocketAddr = text
        .parse()
        .with_context(|| format!("--admin {text:?} is not HOST:PORT with an IP address"))?;
    let configured = settings.admin_token.clone().or_else(|| {
        std::env::var("SLUICE_ADMIN_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
    });
    if !addr.ip().is_loopback() && configured.is_none() {
        bail!(
            "refusing to serve the admin API on {addr} without a configured admin token (set admin_token in sluice.json or SLUICE_ADMIN_TOKEN)"
        );
    }
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) if explicit.is_none() => {
            tracing::warn!("the admin listener is off: cannot listen on {addr}: {e} (use --admin HOST:PORT or --no-admin)");
            return Ok(None);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot listen on {addr} (admin)")),
    };
    let bound = listener.local_addr().unwrap_or(addr);
    let token = match configured {
        Some(t) => {
            tracing::info!("admin page at http://{bound}/ (token from the configuration)");
            t
        }
        None => {
            let t = sluice_server::admin::generate_token();
            eprintln!("sluice: admin page at http://{bound}/#token={t}");
            eprintln!("sluice: admin token (this run only; set admin_token in sluice.json or SLUICE_ADMIN_TOKEN to fix it): {t}");
            t
        }
    };
    Ok(Some((listener, token)))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
