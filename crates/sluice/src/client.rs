//! `sluice client`: a command-line MCP client in the binary. It talks to any MCP server
//! (Streamable HTTP, the legacy HTTP+SSE transport, or a stdio server it starts), in either
//! protocol era, through the gateway's own upstream connections ([`sluice_upstream::Connection`]):
//! list tools, prompts, resources and templates (every page), call a tool, get a prompt, read a
//! resource, or show the server's initialize result; list a server's skills and load one, its
//! files verified against its entry (the Skills extension: `client/skills.rs`, the checks in
//! `client/verify.rs`). The server's elicitation is answered as
//! `--elicit` says (refused, declined, or accepted with its defaults: `client/elicit.rs`), also
//! in a 2026-07-28 request's `input_required` rounds. Output is readable by default and the raw
//! result with `--output json`. Exit codes: 0 ok, 1 when the server answered with a JSON-RPC
//! error or a tool result with `isError: true`, 2 for usage and connection errors.

mod elicit;
mod skills;
mod verify;

use clap::{Args, ValueEnum};
use elicit::Elicit;
use serde_json::{json, Map, Value};
use sluice_config::{Era, Transport, UpstreamSpec};
use sluice_core::{codes, Kind, Message, RpcError};
use sluice_upstream::{
    call_with_rounds, tool_headers, Connection, Event, ExtraHeaders, OpenOptions, ProtocolError,
    StderrTail, UpstreamError,
};
use std::process::ExitCode;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

const ACTIONS: &str = "\
Actions:
  tools                      list the tools (every page)
  call TOOL [KEY=VALUE]...   call a tool; a VALUE that parses as JSON is taken as JSON (n=3 is a
                             number, flag=true a boolean), any other as a string (text=hello);
                             --json '{...}' gives the whole arguments object (KEY=VALUE pairs
                             are added to it)
  prompts                    list the prompts
  prompt NAME [KEY=VALUE]... get a prompt (prompt arguments are always strings)
  resources                  list the resources
  templates                  list the resource templates
  read URI                   read a resource
  info                       the server's initialize (or server/discover) result
  skills                     list the skills (the Skills extension: skills/list, every page);
                             reads no file
  skill NAME|URI [FILE]      load a skill (by its name in skills/list, or its SKILL.md URI with
                             skills/get): read SKILL.md, verify its size, sha256 digest and
                             frontmatter against the skill's entry, and print it; with FILE (a
                             path in the skill, such as references/FORMS.md, which the entry
                             must list) read, verify and print that file instead

Exit status: 0 ok; 1 the server answered with an error (JSON-RPC error, or a tool result with
isError: true), or a skill failed its checks (nothing more is read); 2 a usage or connection
error.

Examples:
  sluice client http://127.0.0.1:8750/mcp tools
  sluice client http://127.0.0.1:8750/mcp call demo_add a=2 b=40 reason='trying Sluice'
  sluice client --token \"$TOKEN\" https://mcp.example.com/mcp info --output json
  sluice client --stdio tools -- npx -y @modelcontextprotocol/server-everything stdio";

/// `sluice client` arguments.
#[derive(Args)]
#[command(
    override_usage = "sluice client [OPTIONS] URL ACTION [ARGS]...\n       sluice client [OPTIONS] --stdio ACTION [ARGS]... -- CMD [CMD_ARGS]...",
    after_help = ACTIONS
)]
pub(crate) struct ClientArgs {
    /// The server's URL, then the action and its arguments (with --stdio: no URL, the action
    /// first).
    #[arg(value_name = "URL ACTION ARGS", required = true)]
    words: Vec<String>,
    /// Start a stdio server: the command after `--`.
    #[arg(long, conflicts_with_all = ["token", "header", "transport"])]
    stdio: bool,
    /// The HTTP transport: Streamable HTTP, or the legacy HTTP+SSE transport (auto: sse when the
    /// URL ends in /sse).
    #[arg(long, value_enum, default_value_t = TransportArg::Auto)]
    transport: TransportArg,
    /// The protocol era: probe server/discover and fall back to initialize (auto), only the
    /// initialize handshake (handshake), or only 2026-07-28 (stateless).
    #[arg(long, value_enum, default_value_t = EraArg::Auto)]
    era: EraArg,
    /// A bearer token, sent as `Authorization: Bearer TOKEN` (default: $SLUICE_TOKEN).
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// An extra HTTP header (repeatable).
    #[arg(long, short = 'H', value_name = "NAME: VALUE")]
    header: Vec<String>,
    /// The arguments object of `call` or `prompt`, as JSON.
    #[arg(long, value_name = "JSON")]
    json: Option<String>,
    /// Readable text, or the raw result as one JSON document.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Seconds to wait for the connection and for each reply.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    timeout: f64,
    /// How to answer the server's elicitation: refuse it (no user to ask), decline it, or
    /// accept a form with its fields' defaults.
    #[arg(long, value_enum, default_value_t = Elicit::Refuse)]
    elicit: Elicit,
    /// The stdio server's command, for `--stdio -- CMD ARGS…`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
    /// Signing in to a server that asks for it (OAuth 2.1).
    #[command(flatten, next_help_heading = "Signing in (OAuth)")]
    oauth: crate::client_auth::OAuthArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportArg {
    Auto,
    Http,
    Sse,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum EraArg {
    Auto,
    /// The `initialize` handshake and sessions (2024-11-05 … 2025-11-25).
    #[value(alias = "legacy")]
    Handshake,
    /// 2026-07-28: no handshake, no sessions.
    #[value(alias = "modern")]
    Stateless,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

/// What to do once connected.
#[derive(Debug, PartialEq)]
enum Action {
    List(ListKind),
    Call {
        tool: String,
        args: Map<String, Value>,
    },
    Prompt {
        name: String,
        args: Map<String, Value>,
    },
    Read(String),
    Info,
    /// Load a skill (by name or SKILL.md URI) and print SKILL.md, or FILE of it.
    Skill {
        skill: String,
        file: Option<String>,
    },
}

/// The paginated lists.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ListKind {
    Tools,
    Prompts,
    Resources,
    Templates,
    /// The Skills extension's `skills/list`.
    Skills,
}

impl ListKind {
    fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::Templates => "resources/templates/list",
            ListKind::Skills => "skills/list",
        }
    }

    fn key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
            ListKind::Skills => "skills",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::Templates => "resource templates",
            ListKind::Skills => "skills",
        }
    }
}

/// How a run failed, and so its exit status.
#[derive(Debug)]
enum Failure {
    /// Bad arguments (exit 2).
    Usage(String),
    /// The server could not be reached or the connection broke (exit 2).
    Connect(String),
    /// The server answered with a JSON-RPC error (exit 1).
    Rpc(Value),
    /// A tool result with `isError: true`, or a result the client cannot complete (exit 1);
    /// already printed.
    Result(String),
}

/// Run `sluice client`.
pub(crate) fn run(args: ClientArgs) -> ExitCode {
    // Warnings only unless RUST_LOG says otherwise: the connection's info lines are for the
    // gateway's log, not for a command-line user.
    let _log = crate::init_logging("warn");
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice client: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let json_out = args.output == Output::Json;
    match rt.block_on(client(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(m)) => {
            eprintln!("sluice client: {m}\n(see `sluice client --help`)");
            ExitCode::from(2)
        }
        Err(Failure::Connect(m)) => {
            eprintln!("sluice client: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Rpc(e)) => {
            if json_out {
                println!("{}", pretty(&json!({"error": e})));
            }
            eprintln!("sluice client: {}", describe_error(&e));
            ExitCode::from(1)
        }
        Err(Failure::Result(m)) => {
            eprintln!("sluice client: {m}");
            ExitCode::from(1)
        }
    }
}

/// `code message` of a JSON-RPC error object, with its data when there is some.
fn describe_error(e: &Value) -> String {
    let code = e.get("code").map(Value::to_string).unwrap_or_default();
    let message = e.get("message").and_then(Value::as_str).unwrap_or("");
    let mut out = format!("error {code}: {message}");
    if let Some(data) = e.get("data").filter(|d| !d.is_null()) {
        out.push_str(&format!("\ndata: {data}"));
    }
    out
}

/// Where the server is.
#[derive(Debug, PartialEq)]
enum Target {
    Url(String),
    Stdio(Vec<String>),
}

/// Split the words into the target and the action (validated).
fn parse(args: &ClientArgs) -> Result<(Target, Action), Failure> {
    let (target, rest) = if args.stdio {
        if args.command.is_empty() {
            return Err(Failure::Usage(
                "--stdio needs the server's command after `--` (sluice client --stdio tools -- CMD ARGS…)".into(),
            ));
        }
        (Target::Stdio(args.command.clone()), &args.words[..])
    } else {
        if !args.command.is_empty() {
            return Err(Failure::Usage(
                "a command after `--` needs --stdio (sluice client --stdio tools -- CMD ARGS…)"
                    .into(),
            ));
        }
        let url = &args.words[0];
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Failure::Usage(format!(
                "{url:?} is not an http:// or https:// URL (the first argument is the server's URL; for a stdio server use --stdio ACTION -- CMD ARGS…)"
            )));
        }
        (Target::Url(url.clone()), &args.words[1..])
    };
    let action = parse_action(rest, args.json.as_deref())?;
    Ok((target, action))
}

fn parse_action(words: &[String], json_args: Option<&str>) -> Result<Action, Failure> {
    let Some((verb, rest)) = words.split_first() else {
        return Err(Failure::Usage(
            "which action? tools, call, prompts, prompt, resources, templates, read, info, skills or skill".into(),
        ));
    };
    let no_more = |action: Action| {
        if let Some(extra) = rest.first() {
            return Err(Failure::Usage(format!(
                "`{verb}` takes no arguments (got {extra:?})"
            )));
        }
        if json_args.is_some() {
            return Err(Failure::Usage(format!("`{verb}` takes no --json")));
        }
        Ok(action)
    };
    match verb.as_str() {
        "tools" => no_more(Action::List(ListKind::Tools)),
        "prompts" => no_more(Action::List(ListKind::Prompts)),
        "resources" => no_more(Action::List(ListKind::Resources)),
        "templates" => no_more(Action::List(ListKind::Templates)),
        "info" => no_more(Action::Info),
        "skills" => no_more(Action::List(ListKind::Skills)),
        "skill" => match rest {
            [skill] | [skill, _] if json_args.is_none() => Ok(Action::Skill {
                skill: skill.clone(),
                file: rest.get(1).cloned(),
            }),
            [] => Err(Failure::Usage(
                "skill needs a skill's name or the URI of its SKILL.md".into(),
            )),
            _ => Err(Failure::Usage(
                "skill takes a skill's name or URI, and optionally one FILE of it".into(),
            )),
        },
        "read" => match rest {
            [uri] if json_args.is_none() => Ok(Action::Read(uri.clone())),
            [] => Err(Failure::Usage("read needs a resource URI".into())),
            _ => Err(Failure::Usage("read takes one resource URI".into())),
        },
        "call" | "prompt" => {
            let Some((name, pairs)) = rest.split_first() else {
                return Err(Failure::Usage(format!(
                    "{verb} needs a {} name",
                    if verb == "call" { "tool" } else { "prompt" }
                )));
            };
            let strings = verb == "prompt";
            let args = arguments(json_args, pairs, strings)?;
            Ok(if strings {
                Action::Prompt {
                    name: name.clone(),
                    args,
                }
            } else {
                Action::Call {
                    tool: name.clone(),
                    args,
                }
            })
        }
        other => Err(Failure::Usage(format!(
            "unknown action {other:?}: tools, call, prompts, prompt, resources, templates, read, info, skills or skill"
        ))),
    }
}

/// The arguments object: `--json` (an object), then each `KEY=VALUE` (a value that parses as
/// JSON is JSON, any other a string; with `strings`, always the string as given).
fn arguments(
    json_args: Option<&str>,
    pairs: &[String],
    strings: bool,
) -> Result<Map<String, Value>, Failure> {
    let mut args = match json_args {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(Failure::Usage("--json must be a JSON object".into())),
            Err(e) => return Err(Failure::Usage(format!("--json is not JSON: {e}"))),
        },
    };
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return Err(Failure::Usage(format!(
                "{pair:?} is not KEY=VALUE (use --json '{{…}}' for the whole arguments object)"
            )));
        };
        let value = if strings {
            Value::String(value.to_string())
        } else {
            serde_json::from_str::<Value>(value).unwrap_or_else(|_| Value::String(value.into()))
        };
        args.insert(key.to_string(), value);
    }
    Ok(args)
}

/// The upstream spec for the target.
fn spec(args: &ClientArgs, target: &Target) -> Result<UpstreamSpec, Failure> {
    let mut spec = match target {
        Target::Stdio(cmd) => UpstreamSpec::stdio("server", &cmd[0], cmd[1..].to_vec()),
        Target::Url(url) => {
            let transport = match args.transport {
                TransportArg::Sse => Transport::Sse,
                TransportArg::Http => Transport::Http,
                TransportArg::Auto if url.trim_end_matches('/').ends_with("/sse") => Transport::Sse,
                TransportArg::Auto => Transport::Http,
            };
            let mut spec = UpstreamSpec::http("server", url, transport);
            for h in &args.header {
                let Some((name, value)) = h.split_once(':') else {
                    return Err(Failure::Usage(format!("--header {h:?} is not NAME: VALUE")));
                };
                spec.headers
                    .insert(name.trim().to_string(), value.trim().to_string());
            }
            let token = args
                .token
                .clone()
                .or_else(|| std::env::var("SLUICE_TOKEN").ok().filter(|t| !t.is_empty()));
            if let Some(token) = token {
                spec.headers
                    .insert("Authorization".into(), format!("Bearer {token}"));
            }
            spec
        }
    };
    spec.era = match args.era {
        EraArg::Auto => Era::Auto,
        EraArg::Handshake => Era::Legacy,
        EraArg::Stateless => Era::Modern,
    };
    if spec.era == Era::Modern && spec.transport == Transport::Sse {
        return Err(Failure::Usage(
            "--era stateless needs Streamable HTTP or stdio (the legacy SSE transport has no 2026-07-28 era)".into(),
        ));
    }
    Ok(spec)
}

async fn client(args: ClientArgs) -> Result<(), Failure> {
    let (target, action) = parse(&args)?;
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(Failure::Usage(
            "--timeout must be a positive number of seconds".into(),
        ));
    }
    let timeout = Duration::from_secs_f64(args.timeout);
    let spec = spec(&args, &target)?;
    let readable = args.output == Output::Text;
    let where_ = match &target {
        Target::Url(url) => url.clone(),
        Target::Stdio(cmd) => format!("`{}`", cmd.join(" ")),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let (conn_tx, conn_rx) = oneshot::channel();
    let pump = tokio::spawn(pump(rx, conn_rx, readable, args.elicit));
    let stderr = StderrTail::default();
    // A server asking for a token gets Sluice's own sign-in, unless a token was given.
    let identity = match &target {
        Target::Url(url)
            if !spec
                .headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization")) =>
        {
            crate::client_auth::identity(&args.oauth, url).map_err(Failure::Usage)?
        }
        _ => None,
    };
    // Signing in waits for a person: before the connection, outside its deadline. A server
    // that cannot be reached, or names no authorization server Sluice can use, is met without
    // signing in: the connection then says what it answers (an HTTP 401 with its hint).
    let identity = match identity {
        Some(id) => match id.sign_in_if_needed().await {
            Ok(()) => Some(id),
            Err(
                e @ (sluice_oauth::AuthError::Fetch { .. }
                | sluice_oauth::AuthError::Metadata { .. }
                | sluice_oauth::AuthError::Discovery(_)),
            ) => {
                tracing::info!("not signing in to {where_}: {e}");
                None
            }
            Err(e) => return Err(Failure::Connect(format!("signing in to {where_}: {e}"))),
        },
        None => None,
    };
    let opts = OpenOptions {
        client_info: json!({"name": "sluice-client", "title": "sluice client", "version": env!("CARGO_PKG_VERSION")}),
        capabilities: capabilities(&action, args.elicit),
        protocol_version: sluice_core::version::LATEST_LEGACY.into(),
        connect_timeout: timeout,
        label: "client".into(),
        stderr: stderr.clone(),
        identity,
        bearer: None,
    };
    let conn = match Connection::open(&spec, opts, tx).await {
        Ok(c) => c,
        Err(e) => return Err(Failure::Connect(connect_message(&where_, &e, &stderr))),
    };
    let _ = conn_tx.send(conn.clone());
    let outcome = act(&conn, &action, timeout, readable, args.elicit).await;
    let outcome = outcome.map_err(|f| match f {
        Failure::Connect(m) => Failure::Connect(connect_message_text(&where_, &m, &stderr)),
        other => other,
    });
    conn.shutdown().await;
    pump.abort();
    outcome
}

/// The client capabilities to declare: elicitation as `--elicit` says, and the Skills extension
/// for `skills` and `skill` (as the gateway declares it toward its upstreams).
fn capabilities(action: &Action, elicit: Elicit) -> Value {
    let mut caps = elicit.capabilities();
    if matches!(
        action,
        Action::List(ListKind::Skills) | Action::Skill { .. }
    ) {
        caps["extensions"] = json!({ sluice_skills::EXTENSION: {} });
    }
    caps
}

/// Why the connection could not be opened, with a hint for the usual causes.
fn connect_message(where_: &str, e: &UpstreamError, stderr: &StderrTail) -> String {
    let text = match e {
        // The handshake failed on its way (a failed POST): say what failed, once.
        UpstreamError::Protocol(ProtocolError::Initialize {
            cause: Some(cause), ..
        }) => match &**cause {
            UpstreamError::Connect(c) => c.to_string(),
            other => other.to_string(),
        },
        // The server answered the handshake with an error: its message.
        UpstreamError::Protocol(ProtocolError::Initialize { error, cause: None }) => error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| e.to_string(), str::to_string),
        _ => e.to_string(),
    };
    let mut m = format!("cannot connect to {where_}: {text}");
    match e.http_status() {
        Some(401) => {
            m.push_str("\nthe server wants a token: pass --token TOKEN (or set SLUICE_TOKEN)")
        }
        Some(403) => {
            m.push_str("\nthe token was refused for this resource (wrong scope or audience?)")
        }
        _ => {}
    }
    with_stderr(m, stderr)
}

fn connect_message_text(where_: &str, m: &str, stderr: &StderrTail) -> String {
    with_stderr(format!("{where_}: {m}"), stderr)
}

/// Add the last lines a stdio server wrote to stderr (what usually says why it failed).
fn with_stderr(mut m: String, stderr: &StderrTail) -> String {
    let lines = stderr.lines();
    if !lines.is_empty() {
        m.push_str("\nthe server's stderr (last lines):");
        for l in lines.iter().rev().take(10).rev() {
            m.push_str("\n  ");
            m.push_str(l);
        }
    }
    m
}

/// Handle what the server sends on its own: answer `ping`, refuse what a command-line client
/// cannot give (sampling, elicitation, roots), and show notifications (readable mode).
async fn pump(
    mut rx: mpsc::UnboundedReceiver<Event>,
    conn: oneshot::Receiver<Connection>,
    readable: bool,
    elicit: Elicit,
) {
    let Ok(conn) = conn.await else { return };
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Reply(held) => conn.resolve(held),
            Event::Message(incoming) => on_message(&conn, &incoming.msg, readable, elicit),
            Event::Stream { .. } => {}
            Event::Closed(_) => break,
        }
        conn.event_done();
    }
}

fn on_message(conn: &Connection, msg: &Message, readable: bool, elicit: Elicit) {
    let method = msg.method().unwrap_or("");
    match msg.kind() {
        Kind::Request => {
            let id = msg.id().cloned().unwrap_or(Value::Null);
            let elicited = (method == "elicitation/create")
                .then(|| elicit.answer(msg.params().unwrap_or(&Value::Null)));
            let reply = if method == "ping" {
                Message::response(id, json!({}))
            } else if let Some(Ok(answer)) = elicited {
                Message::response(id, answer)
            } else {
                eprintln!("sluice client: the server asked for {method}; refused (a command-line client has no model, no user to ask and no roots)");
                Message::error(
                    id,
                    &RpcError::new(
                        codes::METHOD_NOT_FOUND,
                        format!("sluice client cannot answer {method}: a command-line client has no model, no user to ask and no roots"),
                    ),
                )
            };
            if let Err(e) = conn.send(&reply) {
                tracing::warn!("cannot answer the server's {method}: {e}");
            }
        }
        Kind::Notification if readable => {
            let p = msg.params().cloned().unwrap_or(Value::Null);
            match method {
                "notifications/progress" => {
                    let mut line = format!("progress: {}", p["progress"]);
                    if let Some(total) = p.get("total").filter(|t| !t.is_null()) {
                        line.push_str(&format!("/{total}"));
                    }
                    if let Some(m) = p.get("message").and_then(Value::as_str) {
                        line.push_str(&format!(" {m}"));
                    }
                    eprintln!("{line}");
                }
                "notifications/message" => {
                    let level = p["level"].as_str().unwrap_or("info");
                    let logger = p
                        .get("logger")
                        .and_then(Value::as_str)
                        .map(|l| format!(" {l}"))
                        .unwrap_or_default();
                    let data = match &p["data"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    eprintln!("log {level}{logger}: {data}");
                }
                _ => eprintln!("notification: {method}"),
            }
        }
        _ => {}
    }
}

/// One request; its result, or the failure (a JSON-RPC error, a broken connection).
async fn request(
    conn: &Connection,
    method: &str,
    params: Option<Value>,
    timeout: Duration,
) -> Result<Value, Failure> {
    let reply = conn
        .call(method, params, timeout)
        .await
        .map_err(|e| Failure::Connect(format!("{method}: {e}")))?;
    result_of(method, reply)
}

/// How many `input_required` rounds one request may take.
const INPUT_ROUNDS: usize = 8;

/// A request that may need input (`tools/call`, `prompts/get`, `resources/read`): its
/// 2026-07-28 `input_required` rounds are run, answering elicitation as `--elicit` says (a
/// request for anything else ends them, and the run: see [`input_required`]).
async fn request_with_input(
    conn: &Connection,
    method: &str,
    params: Map<String, Value>,
    extra: &ExtraHeaders,
    timeout: Duration,
    elicit: Elicit,
) -> Result<Value, Failure> {
    let answer = |_key: String, request: Value| async move {
        if request.get("method").and_then(Value::as_str) != Some("elicitation/create") {
            return None;
        }
        elicit
            .answer(request.get("params").unwrap_or(&Value::Null))
            .ok()
    };
    let reply = call_with_rounds(conn, method, params, extra, timeout, INPUT_ROUNDS, answer)
        .await
        .map_err(|e| Failure::Connect(format!("{method}: {e}")))?;
    let result = result_of(method, reply)?;
    input_required(&result)?;
    Ok(result)
}

/// The headers of a `tools/call` of `tool` with `args`: on a connection that mirrors
/// `x-mcp-header` parameters, those of the tool's definition (read from `tools/list`), and a
/// refusal when that definition must be rejected.
async fn call_headers(
    conn: &Connection,
    tool: &str,
    args: &Map<String, Value>,
    timeout: Duration,
) -> Result<ExtraHeaders, Failure> {
    if !conn.mirrors_param_headers() {
        return Ok(ExtraHeaders::NONE);
    }
    let tools = list_all(conn, ListKind::Tools, timeout).await?;
    let Some(schema) = tools
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(tool))
        .and_then(|t| t.get("inputSchema"))
    else {
        return Ok(ExtraHeaders::NONE);
    };
    if let Some(why) = tool_headers::invalid_declaration(schema) {
        return Err(Failure::Result(format!(
            "not calling {tool}: its definition is invalid ({why}), and a 2026-07-28 client must reject it"
        )));
    }
    Ok(tool_headers::param_headers(
        schema,
        &Value::Object(args.clone()),
    ))
}

/// A reply's result, or the failure it is.
fn result_of(method: &str, reply: Message) -> Result<Value, Failure> {
    if let Some(r) = reply.result() {
        return Ok(r.clone());
    }
    match reply.error_obj() {
        Some(e) => Err(Failure::Rpc(e.clone())),
        None => Err(Failure::Connect(format!(
            "{method}: a reply with neither result nor error"
        ))),
    }
}

/// Every page of one list (bounded to 1000 pages).
async fn list_all(
    conn: &Connection,
    kind: ListKind,
    timeout: Duration,
) -> Result<Vec<Value>, Failure> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let params = cursor.as_ref().map(|c| json!({"cursor": c}));
        let result = request(conn, kind.method(), params, timeout).await?;
        if let Some(items) = result.get(kind.key()).and_then(Value::as_array) {
            out.extend(items.iter().cloned());
        }
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => return Ok(out),
        }
    }
    eprintln!("sluice client: stopped after 1000 pages of {}", kind.noun());
    Ok(out)
}

async fn act(
    conn: &Connection,
    action: &Action,
    timeout: Duration,
    readable: bool,
    elicit: Elicit,
) -> Result<(), Failure> {
    match action {
        Action::Info => {
            let init = conn.init_result();
            if readable {
                print!("{}", render_info(init, conn.is_modern()));
            } else {
                println!("{}", pretty(init));
            }
            Ok(())
        }
        Action::Skill { skill, file } => {
            let load = skills::Load {
                skill,
                file: file.as_deref(),
                timeout,
                readable,
                elicit,
            };
            skills::load(conn, load).await
        }
        Action::List(kind) => {
            if *kind == ListKind::Skills {
                skills::declared(conn)?;
            }
            let mut items = list_all(conn, *kind, timeout).await?;
            if *kind == ListKind::Tools && conn.mirrors_param_headers() {
                for (name, why) in tool_headers::retain_valid_tools(&mut items) {
                    eprintln!("sluice client: left out the tool {name}: {why} (a 2026-07-28 client must reject its definition)");
                }
            }
            if readable {
                if items.is_empty() {
                    eprintln!("(no {})", kind.noun());
                }
                print!("{}", render_list(*kind, &items));
            } else {
                println!("{}", pretty(&json!({ kind.key(): items })));
            }
            Ok(())
        }
        Action::Call { tool, args } => {
            let extra = call_headers(conn, tool, args, timeout).await?;
            let mut params = Map::new();
            params.insert("name".into(), json!(tool));
            params.insert("arguments".into(), Value::Object(args.clone()));
            if readable {
                // A progress token, so that progress shows on stderr.
                params.insert("_meta".into(), json!({"progressToken": "sluice-client"}));
            }
            let result =
                request_with_input(conn, "tools/call", params, &extra, timeout, elicit).await?;
            let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
            if readable {
                let text = render_call(&result);
                if is_error {
                    eprint!("{text}");
                } else {
                    print!("{text}");
                }
            } else {
                println!("{}", pretty(&result));
            }
            if is_error {
                return Err(Failure::Result(format!(
                    "the tool {tool} reported an error (isError: true)"
                )));
            }
            Ok(())
        }
        Action::Prompt { name, args } => {
            let mut params = Map::new();
            params.insert("name".into(), json!(name));
            params.insert("arguments".into(), Value::Object(args.clone()));
            let none = &ExtraHeaders::NONE;
            let result =
                request_with_input(conn, "prompts/get", params, none, timeout, elicit).await?;
            if readable {
                print!("{}", render_prompt(&result));
            } else {
                println!("{}", pretty(&result));
            }
            Ok(())
        }
        Action::Read(uri) => {
            let mut params = Map::new();
            params.insert("uri".into(), json!(uri));
            let none = &ExtraHeaders::NONE;
            let result =
                request_with_input(conn, "resources/read", params, none, timeout, elicit).await?;
            if readable {
                print!("{}", render_read(&result));
            } else {
                println!("{}", pretty(&result));
            }
            Ok(())
        }
    }
}

/// A 2026-07-28 result asking for input (elicitation, sampling, roots) that a command-line
/// client cannot give.
fn input_required(result: &Value) -> Result<(), Failure> {
    if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
        let asks: Vec<String> = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .map(|m| {
                m.values()
                    .filter_map(|r| r.get("method").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        return Err(Failure::Result(format!(
            "the server needs input a command-line client cannot give ({}); use --output json to see the request",
            if asks.is_empty() { "input_required".into() } else { asks.join(", ") }
        )));
    }
    Ok(())
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// The first line of an optional string field.
fn first_line(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .and_then(|s| s.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or("")
        .to_string()
}

/// Two columns: the key, padded to the widest (at most 40), then the text.
fn table(rows: &[(String, String)]) -> String {
    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0)
        .min(40);
    let mut out = String::new();
    for (k, text) in rows {
        let line = format!("{k:<width$}  {text}");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn render_list(kind: ListKind, items: &[Value]) -> String {
    let str_of =
        |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let rows: Vec<(String, String)> = items
        .iter()
        .map(|item| match kind {
            ListKind::Tools => (str_of(item, "name"), first_line(item, "description")),
            ListKind::Prompts => {
                let mut text = first_line(item, "description");
                let args: Vec<String> = item
                    .get("arguments")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .map(|arg| {
                                let name = str_of(arg, "name");
                                if arg.get("required").and_then(Value::as_bool) == Some(true) {
                                    name
                                } else {
                                    format!("[{name}]")
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if !args.is_empty() {
                    text = format!("{text} (arguments: {})", args.join(", "))
                        .trim_start()
                        .to_string();
                }
                (str_of(item, "name"), text)
            }
            ListKind::Resources | ListKind::Templates => {
                let key = if kind == ListKind::Resources {
                    "uri"
                } else {
                    "uriTemplate"
                };
                let name = str_of(item, "name");
                let desc = first_line(item, "description");
                let text = match (name.is_empty(), desc.is_empty()) {
                    (false, false) => format!("{name}: {desc}"),
                    (false, true) => name,
                    _ => desc,
                };
                (str_of(item, key), text)
            }
            ListKind::Skills => {
                let name = item
                    .pointer("/frontmatter/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string();
                let files = match item.get("resources") {
                    Some(Value::Array(files)) if files.len() == 1 => "1 file".into(),
                    Some(Value::Array(files)) => format!("{} files", files.len()),
                    Some(Value::String(s)) if s == "dynamic" => "dynamic".into(),
                    _ => "no valid resources".into(),
                };
                let desc = item
                    .get("frontmatter")
                    .map(|f| first_line(f, "description"));
                let text = format!(
                    "{} ({}, {files})",
                    desc.unwrap_or_default(),
                    str_of(item, "uri")
                );
                (name, text.trim_start().to_string())
            }
        })
        .collect();
    table(&rows)
}

fn render_info(init: &Value, modern: bool) -> String {
    let info = &init["serverInfo"];
    let mut out = String::new();
    let name = info.get("name").and_then(Value::as_str).unwrap_or("?");
    let version = info.get("version").and_then(Value::as_str).unwrap_or("");
    out.push_str(format!("server: {name} {version}").trim_end());
    out.push('\n');
    if let Some(t) = info.get("title").and_then(Value::as_str) {
        out.push_str(&format!("title: {t}\n"));
    }
    let protocol = init
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("?");
    let era = if modern { "modern" } else { "legacy" };
    out.push_str(&format!("protocol: {protocol} ({era})\n"));
    let caps: Vec<&str> = init
        .get("capabilities")
        .and_then(Value::as_object)
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    out.push_str(&format!("capabilities: {}\n", caps.join(", ")).replace(": \n", ":\n"));
    if let Some(i) = init
        .get("instructions")
        .and_then(Value::as_str)
        .filter(|i| !i.is_empty())
    {
        out.push_str(&format!("instructions: {i}\n"));
    }
    out
}

/// One content block as text: text as is, binary content as a short description.
fn render_content(item: &Value) -> String {
    let str_of =
        |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let size = |data: &str| data.len() / 4 * 3;
    match item.get("type").and_then(Value::as_str).unwrap_or("") {
        "text" => str_of(item, "text"),
        kind @ ("image" | "audio") => format!(
            "[{kind} {}, {} bytes]",
            str_of(item, "mimeType"),
            size(&str_of(item, "data"))
        ),
        "resource" => render_resource_contents(&item["resource"]),
        "resource_link" => {
            let name = str_of(item, "name");
            format!(
                "[resource link {}{}]",
                str_of(item, "uri"),
                if name.is_empty() {
                    String::new()
                } else {
                    format!(" ({name})")
                }
            )
        }
        _ => item.to_string(),
    }
}

/// A resource's contents: text as is (after its URI), a blob as a short description.
fn render_resource_contents(r: &Value) -> String {
    let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
    let mime = r.get("mimeType").and_then(Value::as_str).unwrap_or("");
    match (
        r.get("text").and_then(Value::as_str),
        r.get("blob").and_then(Value::as_str),
    ) {
        (Some(text), _) => format!("[resource {uri}]\n{text}"),
        (None, Some(blob)) => format!("[resource {uri}: {mime}, {} bytes]", blob.len() / 4 * 3),
        _ => format!("[resource {uri}]"),
    }
}

fn render_call(result: &Value) -> String {
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = String::new();
    for item in &content {
        out.push_str(&render_content(item));
        out.push('\n');
    }
    if let Some(sc) = result.get("structuredContent").filter(|s| !s.is_null()) {
        // Shown unless a text block already carries it as JSON.
        let repeated = content.iter().any(|c| {
            c.get("text")
                .and_then(Value::as_str)
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
                .is_some_and(|v| &v == sc)
        });
        if !repeated {
            out.push_str(&pretty(sc));
            out.push('\n');
        }
    }
    out
}

fn render_prompt(result: &Value) -> String {
    let mut out = String::new();
    if let Some(d) = result.get("description").and_then(Value::as_str) {
        out.push_str(&format!("{d}\n\n"));
    }
    for m in result
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
        out.push_str(&format!("[{role}] {}\n", render_content(&m["content"])));
    }
    out
}

fn render_read(result: &Value) -> String {
    let contents = result
        .get("contents")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = String::new();
    for c in &contents {
        match (c.get("text").and_then(Value::as_str), contents.len()) {
            // One text resource: its text alone, as `cat` would print it.
            (Some(text), 1) => {
                out.push_str(text);
                if !text.ends_with('\n') {
                    out.push('\n');
                }
            }
            _ => {
                out.push_str(&render_resource_contents(c));
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn key_value_pairs_are_json_when_they_parse() {
        let args = arguments(
            None,
            &words(&[
                "n=3",
                "text=hello",
                "flag=true",
                "list=[1,2]",
                "s=\"3\"",
                "empty=",
                "eq=a=b",
            ]),
            false,
        )
        .unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"n": 3, "text": "hello", "flag": true, "list": [1, 2], "s": "3", "empty": "", "eq": "a=b"})
        );
        let args = arguments(Some(r#"{"a": 1, "b": 2}"#), &words(&["b=5"]), false).unwrap();
        assert_eq!(Value::Object(args), json!({"a": 1, "b": 5}));
        let prompt = arguments(None, &words(&["n=3"]), true).unwrap();
        assert_eq!(Value::Object(prompt), json!({"n": "3"}));
        assert!(matches!(
            arguments(None, &words(&["novalue"]), false),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(
            arguments(Some("[1]"), &[], false),
            Err(Failure::Usage(_))
        ));
    }

    #[test]
    fn actions_are_checked() {
        assert_eq!(
            parse_action(&words(&["tools"]), None).unwrap(),
            Action::List(ListKind::Tools)
        );
        assert!(matches!(
            parse_action(&words(&["tools", "x"]), None),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(
            parse_action(&words(&["fly"]), None),
            Err(Failure::Usage(_))
        ));
        assert!(matches!(
            parse_action(&words(&["call"]), None),
            Err(Failure::Usage(_))
        ));
        assert_eq!(
            parse_action(&words(&["read", "test://x"]), None).unwrap(),
            Action::Read("test://x".into())
        );
        assert_eq!(
            parse_action(&words(&["skills"]), None).unwrap(),
            Action::List(ListKind::Skills)
        );
        assert_eq!(
            parse_action(&words(&["skill", "pdf", "references/FORMS.md"]), None).unwrap(),
            Action::Skill {
                skill: "pdf".into(),
                file: Some("references/FORMS.md".into())
            }
        );
        assert_eq!(
            parse_action(&words(&["skill", "skill://pdf/SKILL.md"]), None).unwrap(),
            Action::Skill {
                skill: "skill://pdf/SKILL.md".into(),
                file: None
            }
        );
        for bad in [&["skill"][..], &["skill", "a", "b", "c"], &["skills", "x"]] {
            assert!(matches!(
                parse_action(&words(bad), None),
                Err(Failure::Usage(_))
            ));
        }
    }

    #[test]
    fn calls_render_text_and_new_structured_content() {
        let r =
            json!({"content": [{"type": "text", "text": "42"}], "structuredContent": {"sum": 42}});
        assert_eq!(render_call(&r), "42\n{\n  \"sum\": 42\n}\n");
        let r = json!({"content": [{"type": "text", "text": "{\"sum\":42}"}], "structuredContent": {"sum": 42}});
        assert_eq!(render_call(&r), "{\"sum\":42}\n");
        let r = json!({"content": [{"type": "image", "mimeType": "image/png", "data": "AAAA"}]});
        assert_eq!(render_call(&r), "[image image/png, 3 bytes]\n");
    }

    #[test]
    fn skills_actions_declare_the_extension() {
        assert_eq!(
            capabilities(&Action::List(ListKind::Skills), Elicit::Refuse),
            json!({"extensions": {"io.modelcontextprotocol/skills": {}}})
        );
        let skill = Action::Skill {
            skill: "pdf".into(),
            file: None,
        };
        assert_eq!(
            capabilities(&skill, Elicit::Defaults),
            json!({"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/skills": {}}})
        );
        assert_eq!(
            capabilities(&Action::List(ListKind::Tools), Elicit::Refuse),
            json!({})
        );
    }

    #[test]
    fn lists_are_two_columns() {
        let tools = [
            json!({"name": "a", "description": "First.\nMore."}),
            json!({"name": "long_name"}),
        ];
        assert_eq!(
            render_list(ListKind::Tools, &tools),
            "a          First.\nlong_name\n"
        );
        let skills = [
            json!({"uri": "skill://a/pdf/SKILL.md", "frontmatter": {"name": "pdf", "description": "PDFs.\nMore."}, "resources": [{}, {}]}),
            json!({"uri": "skill://daily/SKILL.md", "frontmatter": {"name": "daily", "description": "Reports."}, "resources": "dynamic"}),
        ];
        assert_eq!(
            render_list(ListKind::Skills, &skills),
            "pdf    PDFs. (skill://a/pdf/SKILL.md, 2 files)\ndaily  Reports. (skill://daily/SKILL.md, dynamic)\n"
        );
    }
}
