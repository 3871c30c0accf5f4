//! The management commands: `sluice tool|hook|upstream|log …` over the shared management
//! operations of `sluice_config::manage` (validated, atomic; a running gateway applies them live).

use clap::Subcommand;
use serde_json::{json, Map, Value};
use sluice_config::manage::{self, ManageError};
use sluice_config::Config;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `sluice tool …`
#[derive(Subcommand)]
pub(crate) enum ToolCmd {
    /// Add a first-party tool to tools/tools.register.json.
    Add {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// Unique id.
        #[arg(long)]
        id: String,
        /// Display name (default: the id).
        #[arg(long)]
        name: Option<String>,
        /// One-line summary.
        #[arg(long, default_value = "")]
        summary: String,
        /// Category.
        #[arg(long, default_value = "")]
        category: String,
        /// Full instructions.
        #[arg(long, default_value = "")]
        instructions: String,
        /// A script under tools/scripts/ (`scripts/x.js`).
        #[arg(long, conflicts_with_all = ["shell", "reference"])]
        script: Option<String>,
        /// A shell command run at the tree root.
        #[arg(long, conflicts_with_all = ["script", "reference"])]
        shell: Option<String>,
        /// A reference tool: runs nothing, returns the instructions.
        #[arg(long)]
        reference: bool,
    },
    /// Enable, disable, hide or unhide a tool (tools/tools.state.json).
    Set {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// The tool id.
        id: String,
        /// Visible to clients.
        #[arg(long)]
        enabled: Option<bool>,
        /// Hidden from the manager listing.
        #[arg(long)]
        hidden: Option<bool>,
    },
    /// Accept a drifted curated tool's new description and schema.
    Accept {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// The curated tool's name (its `as`).
        name: String,
    },
    /// List register tools with their state (hidden ones only with --all), then curated tools
    /// whose upstream changed them (drift).
    List {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// Include hidden tools.
        #[arg(long)]
        all: bool,
    },
}

/// `sluice hook …`
#[derive(Subcommand)]
pub(crate) enum HookCmd {
    /// Add a hook to hooks/hooks.manifest.json.
    Add {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// Unique id.
        #[arg(long)]
        id: String,
        /// The event (PreToolUse, PostToolUse, PostToolUseFailure, SessionStart, Stop,
        /// SessionEnd, Elicitation, ElicitationResult, Request, Response); none for civic.
        #[arg(long)]
        event: Option<String>,
        /// command, process, http or civic.
        #[arg(long = "type", default_value = "command")]
        kind: String,
        /// The command (command, process).
        #[arg(long)]
        command: Option<String>,
        /// The URL (http, civic).
        #[arg(long)]
        url: Option<String>,
        /// Tool-name regex.
        #[arg(long, default_value = "")]
        matcher: String,
        /// Timeout, seconds.
        #[arg(long)]
        timeout: Option<f64>,
        /// refuse or pass.
        #[arg(long)]
        on_error: Option<String>,
        /// Start enabled.
        #[arg(long)]
        enabled: bool,
    },
    /// Turn a hook on or off.
    Set {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// The hook id.
        id: String,
        /// On or off (`--enabled true|false`).
        #[arg(long, action = clap::ArgAction::Set)]
        enabled: bool,
    },
    /// List the hooks in chain order.
    List {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
    },
}

/// `sluice upstream …`
#[derive(Subcommand)]
pub(crate) enum UpstreamCmd {
    /// Add an upstream to mcp/expose.json: a command (stdio, after `--`) or `--url`.
    Add {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// Unique id.
        #[arg(long)]
        id: String,
        /// An HTTP (or, with --sse, legacy SSE) URL.
        #[arg(long)]
        url: Option<String>,
        /// Use the legacy HTTP+SSE transport for --url.
        #[arg(long)]
        sse: bool,
        /// List every tool as <id>_<tool>.
        #[arg(long)]
        expose_all: bool,
        /// The stdio command and its arguments.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Enable or disable an upstream.
    Set {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// The upstream id.
        id: String,
        /// Start it.
        #[arg(long)]
        enabled: Option<bool>,
        /// List every tool.
        #[arg(long)]
        expose_all: Option<bool>,
    },
    /// Sign the gateway in to an OAuth upstream (`"oauth": {"mode": "shared"}`): prints the
    /// authorization URL as the first line, waits for the redirect to the gateway's callback,
    /// stores the grant in the vault.
    Login {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// The upstream id.
        id: String,
        /// Seconds to wait for the redirect.
        #[arg(long, value_name = "SECS", default_value_t = 600)]
        timeout: u64,
    },
    /// Forget an OAuth upstream's grant (it needs a login again).
    Logout {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// The upstream id.
        id: String,
    },
    /// List the upstreams.
    List {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
    },
}

/// `sluice log …`
#[derive(Subcommand)]
pub(crate) enum LogCmd {
    /// Turn the audit log on.
    On {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
    },
    /// Turn the audit log off.
    Off {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
    },
    /// Print the last lines of the audit log.
    Tail {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// How many lines.
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: usize,
    },
}

/// `sluice schema …`
#[derive(clap::Args)]
pub(crate) struct SchemaArgs {
    /// The file: expose, hooks, tools, settings or auth (or its name: mcp/expose.json,
    /// hooks.manifest.json, tools.register.json, sluice.json, auth.config.json).
    #[arg(required_unless_present = "list")]
    kind: Option<String>,
    /// List the kinds and their files.
    #[arg(long, conflicts_with = "kind")]
    list: bool,
}

/// `sluice schema KIND` prints the JSON Schema (draft 2020-12); `--list` the kinds.
pub(crate) fn schema(args: SchemaArgs) -> ExitCode {
    use sluice_config::FileKind;
    use std::io::Write;
    if args.list {
        for k in FileKind::ALL {
            let _ = writeln!(std::io::stdout(), "{:<9} {}", k.name(), k.file());
        }
        return ExitCode::SUCCESS;
    }
    let name = args.kind.unwrap_or_default();
    match FileKind::parse(&name) {
        Some(k) => {
            let text = serde_json::to_string_pretty(&k.schema()).expect("a schema is JSON");
            // A closed pipe (`| head`) is not an error worth a panic.
            let _ = writeln!(std::io::stdout(), "{text}");
            ExitCode::SUCCESS
        }
        None => {
            let known: Vec<&str> = FileKind::ALL.iter().map(|k| k.name()).collect();
            eprintln!(
                "sluice: unknown file kind {name:?} (known: {}; or a file name such as mcp/expose.json)",
                known.join(", ")
            );
            ExitCode::from(2)
        }
    }
}

fn done(r: Result<(), ManageError>, what: &str) -> ExitCode {
    match r {
        Ok(()) => {
            println!("{what}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(1)
        }
    }
}

fn load(home: &Path) -> Result<Config, ExitCode> {
    let env = |n: &str| std::env::var(n).ok();
    Config::load(home, &env).map(|(c, _)| c).map_err(|e| {
        eprintln!("sluice: the tree has errors:\n{e}");
        ExitCode::from(1)
    })
}

/// Run `sluice tool …`.
pub(crate) fn tool(cmd: ToolCmd) -> ExitCode {
    match cmd {
        ToolCmd::Add {
            home,
            id,
            name,
            summary,
            category,
            instructions,
            script,
            shell,
            reference,
        } => {
            let mut entry = json!({
                "id": id, "name": name.unwrap_or_else(|| id.clone()),
                "summary": summary, "category": category, "instructions": instructions,
            });
            match (script, shell, reference) {
                (Some(p), _, _) => entry["invoke"] = json!({"type": "script", "path": p}),
                (_, Some(c), _) => entry["invoke"] = json!({"type": "shell", "command": c}),
                (_, _, true) => entry["mode"] = json!("reference"),
                _ => {
                    eprintln!("sluice: give --script, --shell or --reference");
                    return ExitCode::from(2);
                }
            }
            done(manage::tool_add(&home, entry), &format!("added tool {id}"))
        }
        ToolCmd::Accept { home, name } => done(
            manage::tool_accept(&home, &name),
            &format!("accepted {name}"),
        ),
        ToolCmd::Set {
            home,
            id,
            enabled,
            hidden,
        } => done(
            manage::tool_set(&home, &id, enabled, hidden),
            &format!("updated tool {id}"),
        ),
        ToolCmd::List { home, all } => {
            let config = match load(&home) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let r = &config.register;
            for t in &r.tools {
                let st = r.state.get(&t.id).copied().unwrap_or_default();
                if st.hidden && !all {
                    continue;
                }
                let mut flags = Vec::new();
                flags.push(if st.disabled { "disabled" } else { "enabled" });
                if st.hidden {
                    flags.push("hidden");
                }
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    t.id,
                    t.name,
                    t.category,
                    flags.join(","),
                    t.summary
                );
            }
            // Curated tools whose upstream changed them since their pin was approved.
            {
                for e in &config.expose.expose {
                    let changed = config
                        .pins
                        .get(&e.upstream, sluice_config::pins::Kind::Tool, &e.tool)
                        .is_some_and(|p| p.approved.is_some() && p.seen.is_some());
                    if changed {
                        println!(
                            "{}\t(curated)\t\tdrifted\tthe upstream changed it; `sluice tool accept {}`",
                            e.name, e.name
                        );
                    }
                }
            }
            ExitCode::SUCCESS
        }
    }
}

/// Run `sluice hook …`.
pub(crate) fn hook(cmd: HookCmd) -> ExitCode {
    match cmd {
        HookCmd::Add {
            home,
            id,
            event,
            kind,
            command,
            url,
            matcher,
            timeout,
            on_error,
            enabled,
        } => {
            let mut entry = Map::new();
            entry.insert("id".into(), json!(id));
            if let Some(e) = event {
                entry.insert("event".into(), json!(e));
            }
            entry.insert("matcher".into(), json!(matcher));
            entry.insert("type".into(), json!(kind));
            if let Some(c) = command {
                entry.insert("command".into(), json!(c));
            }
            if let Some(u) = url {
                entry.insert("url".into(), json!(u));
            }
            if let Some(t) = timeout {
                entry.insert("timeout".into(), json!(t));
            }
            if let Some(o) = on_error {
                entry.insert("on_error".into(), json!(o));
            }
            entry.insert("enabled".into(), json!(enabled));
            done(
                manage::hook_add(&home, Value::Object(entry)),
                &format!("added hook {id}"),
            )
        }
        HookCmd::Set { home, id, enabled } => done(
            manage::hook_set(&home, &id, enabled),
            &format!("hook {id} {}", if enabled { "enabled" } else { "disabled" }),
        ),
        HookCmd::List { home } => {
            let config = match load(&home) {
                Ok(c) => c,
                Err(code) => return code,
            };
            for h in &config.hooks.hooks {
                println!(
                    "{}\t{}\t{}\t{}",
                    h.id,
                    h.event.name(),
                    if h.enabled { "enabled" } else { "disabled" },
                    h.description
                );
            }
            ExitCode::SUCCESS
        }
    }
}

/// Run `sluice upstream …`.
pub(crate) fn upstream(cmd: UpstreamCmd) -> ExitCode {
    match cmd {
        UpstreamCmd::Login { home, id, timeout } => crate::login::login(&home, &id, timeout),
        UpstreamCmd::Logout { home, id } => crate::login::logout(&home, &id),
        UpstreamCmd::Add {
            home,
            id,
            url,
            sse,
            expose_all,
            command,
        } => {
            let mut entry = match (url, command.split_first()) {
                (Some(u), _) => {
                    json!({"id": id, "transport": if sse { "sse" } else { "http" }, "url": u})
                }
                (None, Some((cmd, args))) => {
                    json!({"id": id, "transport": "stdio", "command": cmd, "args": args})
                }
                (None, None) => {
                    eprintln!("sluice: give --url URL or a command after `--`");
                    return ExitCode::from(2);
                }
            };
            entry["enabled"] = json!(true);
            if expose_all {
                entry["expose_all"] = json!(true);
            }
            done(
                manage::upstream_add(&home, entry),
                &format!("added upstream {id}"),
            )
        }
        UpstreamCmd::Set {
            home,
            id,
            enabled,
            expose_all,
        } => {
            let mut fields = Map::new();
            if let Some(e) = enabled {
                fields.insert("enabled".into(), json!(e));
            }
            if let Some(e) = expose_all {
                fields.insert("expose_all".into(), json!(e));
            }
            done(
                manage::upstream_set(&home, &id, fields),
                &format!("updated upstream {id}"),
            )
        }
        UpstreamCmd::List { home } => {
            let config = match load(&home) {
                Ok(c) => c,
                Err(code) => return code,
            };
            for u in &config.expose.upstreams {
                let target = if u.url.is_empty() {
                    std::iter::once(u.command.as_str())
                        .chain(u.args.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" ")
                } else {
                    u.url.clone()
                };
                println!(
                    "{}\t{:?}\t{}\t{}",
                    u.id,
                    u.transport,
                    if u.enabled { "enabled" } else { "disabled" },
                    target
                );
            }
            ExitCode::SUCCESS
        }
    }
}

/// Run `sluice log …`.
pub(crate) fn log(cmd: LogCmd) -> ExitCode {
    match cmd {
        LogCmd::On { home } => match manage::log_set(&home, true) {
            Ok(p) => {
                println!("audit log on: {}", p.display());
                ExitCode::SUCCESS
            }
            Err(e) => done(Err(e), ""),
        },
        LogCmd::Off { home } => match manage::log_set(&home, false) {
            Ok(_) => {
                println!("audit log off");
                ExitCode::SUCCESS
            }
            Err(e) => done(Err(e), ""),
        },
        LogCmd::Tail { home, lines } => {
            let config = match load(&home) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let text = std::fs::read_to_string(&config.logs.path).unwrap_or_default();
            let all: Vec<&str> = text.lines().collect();
            for l in &all[all.len().saturating_sub(lines)..] {
                println!("{l}");
            }
            ExitCode::SUCCESS
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum AuthCmd {
    /// Print the SHA-256 of a token, as `tokens[].sha256` stores it (reads stdin without TOKEN).
    Hash {
        /// The token.
        token: Option<String>,
    },
    /// Create a token: print it once, store only its hash, turn authentication on.
    AddToken {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// The principal name the token stands for.
        name: String,
        /// A scope it grants (repeatable).
        #[arg(long = "scope")]
        scopes: Vec<String>,
    },
}

/// `sluice auth …`.
pub(crate) fn auth(cmd: AuthCmd) -> ExitCode {
    match cmd {
        AuthCmd::Hash { token } => {
            let token = match token {
                Some(t) => t,
                None => {
                    let mut t = String::new();
                    if let Err(e) = std::io::stdin().read_line(&mut t) {
                        eprintln!("sluice: cannot read the token from stdin: {e}");
                        return ExitCode::from(1);
                    }
                    t.trim_end_matches(['\r', '\n']).to_string()
                }
            };
            println!("{}", sluice_auth::hash_token(&token));
            ExitCode::SUCCESS
        }
        AuthCmd::AddToken { home, name, scopes } => {
            let token = format!(
                "sk-sluice-{}{}",
                uuid::Uuid::new_v4().simple(),
                uuid::Uuid::new_v4().simple()
            );
            match manage::token_add(&home, &name, &sluice_auth::hash_token(&token), &scopes) {
                Ok(()) => {
                    eprintln!(
                        "token {name:?} added to {} (only its hash is stored); it is shown once:",
                        home.join("auth/auth.config.json").display()
                    );
                    println!("{token}");
                    ExitCode::SUCCESS
                }
                Err(e) => done(Err(e), ""),
            }
        }
    }
}
