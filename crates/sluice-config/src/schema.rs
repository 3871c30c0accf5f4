//! JSON Schemas (draft 2020-12) of the files of a tree, for editors and for `sluice schema`.
//!
//! **Where they come from.** The loaders are hand-written on purpose: they collect every error
//! with its file and field, accept the formats of the tools Sluice reads (toolfunnel's aliases,
//! `${env:…}`, `null` as absent), and their messages are part of the product. Rewriting them as
//! serde file-shape types would change those messages, so the schemas come from two sources the
//! loader itself reads, plus one table per file that a test holds to the loader:
//!
//! - the builtins' `options` are the serde structs of [`crate::builtin`], the very types
//!   [`BuiltinOptions::parse`] deserializes; their schemas are derived (`schemars`), doc
//!   comments becoming descriptions, one `if`/`then` per builtin name;
//! - the property names of every object whose unknown keys are errors (`sluice.json`, its
//!   `telemetry`, `auth/auth.config.json`, its `tokens[]` and `rules[]`) are the loader's own
//!   `KNOWN` lists, so a key added to the loader appears in the schema by itself;
//! - each field's type, constraint, default and description is one row of the declarative tables
//!   below ([`Field`], [`Obj`]). The tests drive the real loader with every row: a value of the
//!   wrong type (or out of range, or not in the enum) must fail both the schema and the loader; a
//!   row's default written out must load to the same configuration as the field left out; every
//!   name of a `KNOWN` list must have a row and every row must name a key the loader reads.
//!   A row that disagrees with the loader, or a loader field without a row, fails a test.
//!
//! Objects whose unknown keys the loader ignores (`mcp/expose.json`, the manifest, the register:
//! toolfunnel trees carry their own keys) stay open in the schema too. Every file may carry a
//! `$schema` key (the loaders ignore it or list it as known).

use crate::auth;
use crate::builtin::{BuiltinOptions, BUILTINS};
use crate::settings;
use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};

/// A file of the tree that has a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `sluice.json`.
    Settings,
    /// `mcp/expose.json`.
    Expose,
    /// `hooks/hooks.manifest.json`.
    Hooks,
    /// `tools/tools.register.json`.
    Tools,
    /// `auth/auth.config.json`.
    Auth,
    /// `mcp/endpoints.json`.
    Endpoints,
}

impl FileKind {
    /// Every kind, in the order `sluice schema --list` prints them.
    pub const ALL: [FileKind; 6] = [
        FileKind::Expose,
        FileKind::Endpoints,
        FileKind::Hooks,
        FileKind::Tools,
        FileKind::Settings,
        FileKind::Auth,
    ];

    /// The short name (`expose`, `hooks`, `tools`, `settings`, `auth`).
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Settings => "settings",
            FileKind::Expose => "expose",
            FileKind::Hooks => "hooks",
            FileKind::Tools => "tools",
            FileKind::Auth => "auth",
            FileKind::Endpoints => "endpoints",
        }
    }

    /// The file's path in the tree.
    pub fn file(self) -> &'static str {
        match self {
            FileKind::Settings => "sluice.json",
            FileKind::Expose => "mcp/expose.json",
            FileKind::Hooks => "hooks/hooks.manifest.json",
            FileKind::Tools => "tools/tools.register.json",
            FileKind::Auth => "auth/auth.config.json",
            FileKind::Endpoints => crate::endpoints::FILE,
        }
    }

    /// A kind by its short name, its file name, or a path ending in its file name.
    pub fn parse(s: &str) -> Option<FileKind> {
        let s = s.trim();
        FileKind::ALL.into_iter().find(|k| {
            let base = k.file().rsplit('/').next().unwrap_or(k.file());
            s == k.name() || s == k.file() || s == base || s.ends_with(&format!("/{base}"))
        })
    }

    /// The file's JSON Schema.
    pub fn schema(self) -> Value {
        let (obj, title) = match self {
            FileKind::Settings => (&SETTINGS, "Sluice server settings (sluice.json)"),
            FileKind::Expose => (
                &EXPOSE,
                "Sluice upstreams and curated tools (mcp/expose.json)",
            ),
            FileKind::Hooks => (&HOOKS, "Sluice hook chain (hooks/hooks.manifest.json)"),
            FileKind::Tools => (
                &TOOLS,
                "Sluice first-party tools (tools/tools.register.json)",
            ),
            FileKind::Auth => (
                &AUTH,
                "Sluice authentication and access rules (auth/auth.config.json)",
            ),
            FileKind::Endpoints => (
                &ENDPOINTS,
                "Sluice endpoints served at /mcp/<name> (mcp/endpoints.json)",
            ),
        };
        let mut generator = SchemaSettings::draft2020_12().into_generator();
        let mut root = obj.schema(&mut generator);
        let mut defs = Value::Object(generator.take_definitions(true));
        drop_list_defaults(&mut defs);
        let Value::Object(defs) = defs else {
            unreachable!("definitions are an object")
        };
        let mut out = Map::new();
        out.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        out.insert(
            "$id".into(),
            json!(format!("https://sluice.dev/schema/{}.json", self.name())),
        );
        out.insert("title".into(), json!(title));
        if let Value::Object(m) = &mut root {
            out.append(m);
        }
        if !defs.is_empty() {
            out.insert("$defs".into(), Value::Object(defs));
        }
        Value::Object(out)
    }
}

// --- the tables ------------------------------------------------------------------------------

/// The type of a field, as the loader reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ty {
    /// Any string.
    Str,
    /// A string with something other than white space (`required_string`).
    NonEmpty,
    /// A string matching a regex.
    Pattern(&'static str),
    /// A string of at least this many characters.
    MinLen(u64),
    /// `true` or `false`.
    Bool,
    /// A non-negative integer.
    UInt,
    /// An integer greater than 0.
    Positive,
    /// Any number.
    Number,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// An array of strings.
    Strings,
    /// An array of these strings.
    EnumStrings(&'static [&'static str]),
    /// A string or an array of strings.
    StringOrStrings,
    /// An object of strings (numbers and booleans are read as their text).
    StringMap,
    /// [`Ty::StringMap`] whose keys match a regex.
    KeyedStringMap(&'static str),
    /// An object of claim → scalar or list of scalars.
    Claims,
    /// An object described by a table.
    Object(&'static Obj),
    /// One of these strings, or an object described by a table (`sandbox.network`).
    EnumOrObject(&'static [&'static str], &'static Obj),
    /// An array of objects described by a table.
    Array(&'static Obj),
    /// A builtin's `options` (the schema is chosen by `builtin`, see [`Obj::builtins`]).
    Options,
}

/// One field of an object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    pub name: &'static str,
    pub ty: Ty,
    /// Must be present (whatever the other fields say).
    pub required: bool,
    pub doc: &'static str,
    /// The default, as JSON text (only when it is one value).
    pub default: Option<&'static str>,
    /// The loader ignores a value of another type (reads it as the default) instead of
    /// refusing it; the schema still names the type, so an editor flags the mistake.
    pub lenient: bool,
}

const fn f(name: &'static str, ty: Ty, doc: &'static str) -> Field {
    Field {
        name,
        ty,
        required: false,
        doc,
        default: None,
        lenient: false,
    }
}

impl Field {
    const fn req(self) -> Field {
        Field {
            required: true,
            ..self
        }
    }
    const fn def(self, default: &'static str) -> Field {
        Field {
            default: Some(default),
            ..self
        }
    }
    const fn lenient(self) -> Field {
        Field {
            lenient: true,
            ..self
        }
    }
}

/// A field required when another field has (or has not) one of some values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct When {
    /// The field looked at.
    pub field: &'static str,
    /// Its values.
    pub is: &'static [&'static str],
    /// The condition is "not one of `is`" (absent counts as not).
    pub negate: bool,
    /// An absent `field` counts as one of `is` (its default is among them).
    pub absent_is: bool,
    /// The fields then required.
    pub require: &'static [&'static str],
}

/// An object: its fields, whether other keys are errors, and the conditions between fields.
#[derive(Debug)]
pub(crate) struct Obj {
    pub doc: &'static str,
    pub fields: &'static [Field],
    /// The loader's list of accepted keys (unknown keys are errors); `None`: other keys are
    /// ignored by the loader, and allowed here.
    pub known: Option<&'static [&'static str]>,
    pub when: &'static [When],
    /// At least one of these arrays is present and not empty.
    pub one_of_lists: &'static [&'static str],
    /// `options` is chosen by `builtin` (the hook manifest).
    pub builtins: bool,
}

const OBJ: Obj = Obj {
    doc: "",
    fields: &[],
    known: None,
    when: &[],
    one_of_lists: &[],
    builtins: false,
};

const SCHEMA_KEY: Field = f(
    "$schema",
    Ty::Str,
    "The JSON Schema of this file, for editors (`sluice schema KIND` prints it); ignored by Sluice.",
)
.lenient();

const HOST_PORT: Ty = Ty::Pattern(r"^(\[[0-9A-Fa-f:.]+\]|[0-9.]+):[0-9]+$");
const HTTP_URL: Ty = Ty::Pattern(r"^https?://");
const ID: Ty = Ty::Pattern(r"^[A-Za-z0-9_.-]{1,64}$");
const TOOL_NAME: Ty = Ty::Pattern(r"^[A-Za-z0-9_.-]{1,128}$");
const SKILL_PATH: Ty = Ty::Pattern(r"^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$");
const HEADER_NAME: &str = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$";

pub(crate) static SETTINGS: Obj = Obj {
    doc: "Server settings. Every field is optional; unknown keys are errors.",
    known: Some(settings::KNOWN),
    fields: &[
        SCHEMA_KEY,
        f("listen", HOST_PORT, "Where the MCP listener binds, IP:PORT (`--listen` overrides it). A non-loopback address needs authentication.").def("\"127.0.0.1:8750\""),
        f("max_body_bytes", Ty::Positive, "Largest request body (HTTP) or line (stdio), bytes; larger is HTTP 413 / -32600.").def("4194304"),
        f("request_timeout_ms", Ty::Positive, "How long a forwarded request waits for its upstream, ms.").def("60000"),
        f("connect_timeout_ms", Ty::Positive, "How long an upstream may take to start and initialise, ms.").def("30000"),
        f("allowed_origins", Ty::Strings, "`Origin` values accepted besides loopback ones (`\"*\"` accepts any).").def("[]"),
        f("page_size", Ty::Positive, "Items per page of the gateway's list results.").def("500"),
        f("session_idle_secs", Ty::Positive, "A client session with no traffic this long is ended, seconds.").def("3600"),
        f("restart_initial_ms", Ty::Positive, "First restart delay of a failed upstream, ms (doubles up to `restart_max_ms`).").def("500"),
        f("restart_max_ms", Ty::Positive, "Longest restart delay, ms.").def("30000"),
        f("replay_events", Ty::Positive, "SSE events kept per stream for `Last-Event-ID` resumption.").def("256"),
        f("replay_bytes", Ty::Positive, "SSE bytes kept per stream for resumption; the oldest events beyond it are dropped.").def("1048576"),
        f("allowed_hosts", Ty::Strings, "`Host` values accepted (the whole value, or its host part without the port); empty: any host (DNS rebinding defence beside Origin).").def("[]"),
        f("header_timeout_ms", Ty::Positive, "A connection must deliver a complete request head within this time of opening, or of the first byte of its next request, ms.").def("10000"),
        f("idle_timeout_ms", Ty::Positive, "A kept-alive connection with nothing in flight and no bytes received this long is closed, ms.").def("60000"),
        f("body_timeout_ms", Ty::Positive, "A POST body not fully received within this time gets 408, ms.").def("30000"),
        f("max_connections", Ty::Positive, "Connections served at once; at it the connection idle the longest (nothing in flight) is closed for a new one, and when every one is busy new ones wait in the kernel backlog.").def("1024"),
        f("max_sessions", Ty::Positive, "Live client sessions at once; past it `initialize` gets 429.").def("10000"),
        f("max_sessions_per_principal", Ty::Positive, "Live sessions of one authenticated principal; past it `initialize` gets 429.").def("1000"),
        f("drain_ms", Ty::Positive, "At shutdown, how long calls in flight may finish, ms.").def("10000"),
        f("max_connections_per_ip", Ty::Positive, "Connections from one peer address at once; past it a new connection is closed at once. Behind a trusted proxy (`trusted_proxies`) the address `X-Forwarded-For` names is counted instead, by requests in flight (past it: 429). Default: no cap."),
        f("trusted_proxies", Ty::Strings, "Proxies (IP addresses or CIDR blocks) whose `X-Forwarded-For` names the real peer; their own connections are not capped per address.").def("[]"),
        f("min_body_bytes_per_sec", Ty::UInt, "The slowest a POST body may arrive, bytes per second on average after an allowance of the header timeout; slower is cut with 408. 0: off.").def("1024"),
        f("overload", Ty::Object(&OVERLOAD), "What the MCP listener does as its connections near `max_connections`."),
        f("max_inflight_per_principal", Ty::Positive, "Requests in flight per authenticated principal; past it the request is answered -32029 with `data.retryAfterMs`. Default: no cap."),
        f("max_memory_mb", Ty::Positive, "The memory ceiling, MB of resident memory (sampled every 250 ms): past it new sessions are answered 503 with `Retry-After`, and the replay buffers of finished streams are dropped, the least recently used sessions' first. Default: no ceiling."),
        f("funnel", Ty::Bool, "List the funnel's meta-tools (`<prefix>_list_tools`, `_tool_instructions`, `_run_tool`). Default: on when the tree has a `tools/` folder."),
        f("funnel_prefix", Ty::Pattern(r"^[A-Za-z0-9_.-]+$"), "The meta-tools' name prefix.").def("\"sluice\""),
        f("list_register_tools", Ty::Bool, "Also list first-party register tools directly in tools/list (under their ids).").def("false"),
        f("keep_transcripts", Ty::Bool, "Keep a session's hook transcript (`transcripts/<session>.jsonl`) when the session ends; by default it is removed after its Stop and SessionEnd hooks ran.").def("false"),
        f("management_tools", Ty::Bool, "List the MCP management tools (`<prefix>_list`, `_tool_add`, `_tool_set`, `_hook_add`, `_hook_set`, `_upstream_add`, `_upstream_set`, `_log`).").def("false"),
        f("tool_search", Ty::Bool, "List `<prefix>_search_tools`: ranks the caller's tools for a query (BM25 over name, title, description and parameter names), with their input schemas on request.").def("false"),
        f("discovery", Ty::Enum(&["all", "search"]), "What `tools/list` shows: every tool (`all`), or only `<prefix>_search_tools` and `<prefix>_run_tool` (`search`: progressive discovery; turns the search tool on).").def("\"all\""),
        f("admin", HOST_PORT, "Where the admin listener binds, IP:PORT (`--admin` overrides it). Default 127.0.0.1:8751."),
        f("admin_token", Ty::MinLen(16), "The admin token (at least 16 characters). Else `SLUICE_ADMIN_TOKEN`; else one is generated at start."),
        f("telemetry", Ty::Object(&TELEMETRY), "OpenTelemetry trace export (OTLP over HTTP)."),
        f("cluster", Ty::Object(&CLUSTER), "Scale-out: replicas that serve every session (sealed session ids, shared state in Redis). Needs a restart."),
        f("public_url", HTTP_URL, "The gateway's public base URL (`https://gateway.example.com`): the OAuth callback (`/oauth/callback`) and the client ID metadata document (`/oauth/client-metadata.json`) are served under it on the MCP listener. Default: the origin of `auth.resource`, else `http://` + `listen`. Needs a restart."),
        f("vault", Ty::Object(&VAULT), "Where grants and client registrations toward OAuth upstreams are kept, sealed (required when an upstream has `oauth`). With `cluster`, the vault is that Redis. Needs a restart."),
        f("oauth_http_hosts", Ty::Strings, "Hosts the OAuth client may reach over plain http besides loopback (labs and tests); everything else must be https. Needs a restart.").def("[]"),
    ],
    ..OBJ
};

pub(crate) static OVERLOAD: Obj = Obj {
    doc: "Overload actions of the MCP listener; unknown keys are errors.",
    known: Some(crate::overload::OVERLOAD_KNOWN),
    fields: &[
        f("at_percent", Ty::Positive, "Open connections, in percent of `max_connections` (1 to 100), from which the header and idle timeouts below apply; at the cap, the connection idle the longest is closed to let a new one in.").def("80"),
        f("header_timeout_ms", Ty::Positive, "The header timeout under overload (when shorter than `header_timeout_ms`), ms.").def("1000"),
        f("idle_timeout_ms", Ty::Positive, "The idle timeout of kept-alive connections under overload (when shorter than `idle_timeout_ms`), ms.").def("1000"),
    ],
    ..OBJ
};

pub(crate) static VAULT: Obj = Obj {
    doc: "The vault of grants toward OAuth upstreams; unknown keys are errors.",
    known: Some(crate::oauth::VAULT_KNOWN),
    fields: &[
        f("key", Ty::StringOrStrings, "32 random bytes in base64 (`sluice vault keygen`; `${env:NAME}` expanded), or an array of them: the first seals, every one opens (rotation).").req(),
        f("path", Ty::NonEmpty, "The database file, relative to the home folder (unused with `cluster`).").def("\"vault.db\""),
    ],
    ..OBJ
};

pub(crate) static UPSTREAM_OAUTH: Obj = Obj {
    doc: "How Sluice signs in to an http/sse upstream (OAuth 2.1); unknown keys are errors. Needs `vault` in sluice.json.",
    known: Some(crate::oauth::OAUTH_KNOWN),
    fields: &[
        f("mode", Ty::Enum(&["shared", "client_credentials", "per_user", "exchange", "enterprise"]), "`shared`: one grant for the gateway, signed in once by an operator (`sluice upstream login ID`); `client_credentials`: the client credentials grant, no person; `per_user`: a grant per principal, each user connects their own account through a link the gateway sends (needs auth/auth.config.json); `exchange`: the client's own token exchanged for one toward this upstream (RFC 8693; needs an issuer in auth/auth.config.json); `enterprise`: enterprise-managed authorization (ID-JAG): the identity assertion exchanged at the IdP, then the JWT bearer grant at the upstream's authorization server, no person.").def("\"shared\""),
        f("client_id", Ty::NonEmpty, "A pre-registered client id (else a client ID metadata document when the server supports them, else dynamic registration). Required with client_credentials and exchange."),
        f("client_secret", Ty::NonEmpty, "Its secret (`${env:NAME}` expanded)."),
        f("issuer", HTTP_URL, "The authorization server the pre-registered client belongs to; its credentials are never shown to another."),
        f("scopes", Ty::Strings, "Scopes to ask for (default: what the server's challenge or metadata names; `offline_access` added when offered).").def("[]"),
        f("token_endpoint_auth", Ty::Enum(&["client_secret_basic", "client_secret_post", "none", "private_key_jwt"]), "How the client authenticates at the token endpoint (default: chosen from what the server lists)."),
        f("private_key_file", Ty::NonEmpty, "private_key_jwt: the PEM private key, relative to the home folder."),
        f("signing_alg", Ty::NonEmpty, "private_key_jwt: RS256, ES256, EdDSA… (default from the key)."),
        f("client_metadata_url", Ty::Pattern("^https://"), "Where this gateway's client metadata document is published, when not at `public_url` + `/oauth/client-metadata.json`."),
        f("token_endpoint", HTTP_URL, "exchange: the token endpoint where the client's token is exchanged (RFC 8693). Required with exchange."),
        f("audience", Ty::Str, "exchange: `audience`, the upstream's name at the authorization server."),
        f("resource", Ty::Str, "exchange: `resource`, the upstream's URI (RFC 8707)."),
        f("requested_token_type", Ty::Pattern("^urn:"), "exchange: the token type asked for.").def("\"urn:ietf:params:oauth:token-type:access_token\""),
        f("subject_token_type", Ty::Pattern("^urn:"), "exchange: the type of the client's token.").def("\"urn:ietf:params:oauth:token-type:access_token\""),
        f("actor", Ty::Bool, "exchange: send an actor token, the gateway's own (client credentials grant; needs client_secret or private_key_file).").def("false"),
        f("idp_token_endpoint", HTTP_URL, "enterprise: the identity provider's token endpoint, where the identity assertion is exchanged for an ID-JAG (RFC 8693). Required with enterprise."),
        f("idp_client_id", Ty::NonEmpty, "enterprise: the gateway's client id at the identity provider."),
        f("idp_client_secret", Ty::NonEmpty, "enterprise: its secret (`${env:NAME}` expanded)."),
        f("identity_assertion_file", Ty::NonEmpty, "enterprise: the identity assertion (an ID token of the IdP), relative to the home folder; read at each grant. Required with enterprise."),
    ],
    when: &[
        When { field: "mode", is: &["exchange"], negate: false, absent_is: false, require: &["token_endpoint", "client_id"] },
        When { field: "mode", is: &["enterprise"], negate: false, absent_is: false, require: &["idp_token_endpoint", "identity_assertion_file", "client_id"] },
    ],
    ..OBJ
};

pub(crate) static CLUSTER: Obj = Obj {
    doc: "Scale-out across replicas; unknown keys are errors. Every replica needs the same tree, keys and Redis.",
    known: Some(crate::cluster::CLUSTER_KNOWN),
    fields: &[
        f("key", Ty::StringOrStrings, "32 random bytes in base64 (`sluice cluster keygen`; `${env:NAME}` expanded), or an array of them: the first seals session ids, every one opens them (rotation).").req(),
        f("redis", Ty::Pattern("^redis://"), "The Redis every replica shares (`redis://[user[:password]@]host[:port][/db]`, `${env:NAME}` expanded): session state, events, messages between replicas.").req(),
    ],
    ..OBJ
};

pub(crate) static TELEMETRY: Obj = Obj {
    doc: "OpenTelemetry trace export; unknown keys are errors. Without `otlp_endpoint` the standard `OTEL_*` variables decide.",
    known: Some(settings::TELEMETRY_KNOWN),
    fields: &[
        f("otlp_endpoint", Ty::Pattern(r"^https?://[^/\s]\S*$"), "The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); spans are POSTed to `<endpoint>/v1/traces`."),
        f("service_name", Ty::NonEmpty, "`service.name` of the exported resource. Default `OTEL_SERVICE_NAME`, else `sluice`."),
        f("headers", Ty::KeyedStringMap(HEADER_NAME), "Extra headers on every export request (`${env:NAME}` expanded).").def("{}"),
    ],
    ..OBJ
};

pub(crate) static EXPOSE: Obj = Obj {
    doc: "The upstream MCP servers and the curated tools drawn from them. Unknown keys are ignored (toolfunnel trees carry their own).",
    fields: &[
        SCHEMA_KEY,
        f("version", Ty::UInt, "Format version.").def("1"),
        f("on_collision", Ty::Enum(&["error", "first"]), "Two upstreams producing one final name (a tool, a prompt, a resource URI), or an `as` taking a name another upstream produces: `error` lists it for neither and refuses a call to it naming both; `first`: the first upstream in file order keeps it (a warning). Absent: `first`; the files Sluice writes say `error`.").def("\"first\""),
        f("upstreams", Ty::Array(&UPSTREAM), "The upstream MCP servers, in order (with `on_collision` `first`, the first keeps a colliding name).").def("[]"),
        f("expose", Ty::Array(&EXPOSE_ENTRY), "Curated tools: upstream tools listed under chosen names.").def("[]"),
        f("skills", Ty::Array(&SKILL_ENTRY), "Skills (the Skills extension) served under another path, or not at all.").def("[]"),
    ],
    ..OBJ
};

const HTTP_TRANSPORTS: &[&str] = &["http", "streamable-http", "streamableHttp", "sse"];

pub(crate) static UPSTREAM: Obj = Obj {
    doc: "One upstream MCP server.",
    fields: &[
        f("id", ID, "Stable unique key: letters, digits, `-`, `_`, `.` (at most 64); the prefix of its tools' names.").req(),
        f("transport", Ty::Enum(&["stdio", "http", "streamable-http", "streamableHttp", "sse"]), "stdio: spawn `command`; http: Streamable HTTP at `url`; sse: the legacy HTTP+SSE transport.").def("\"stdio\""),
        f("command", Ty::NonEmpty, "stdio: the program to spawn (required for stdio)."),
        f("args", Ty::Strings, "stdio: its arguments; a relative path that climbs out of the home folder is an error.").def("[]"),
        f("env", Ty::StringMap, "stdio: extra environment (`${env:NAME}` expanded).").def("{}"),
        f("cwd", Ty::Str, "stdio: working folder, relative to the home folder (default the home folder).").def("\"\""),
        f("url", HTTP_URL, "http/sse: the endpoint, `http://` or `https://` (required for http and sse)."),
        f("headers", Ty::StringMap, "http/sse: extra request headers (`${env:NAME}` expanded).").def("{}"),
        f("forward_authorization", Ty::Bool, "http/sse: send the client's own `Authorization` header with each request.").def("false"),
        f("oauth", Ty::Object(&UPSTREAM_OAUTH), "http/sse: sign in to it with OAuth 2.1 (see the OAuth page of the docs)."),
        f("enabled", Ty::Bool, "Start it at all.").def("true"),
        f("description", Ty::Str, "A note for people.").def("\"\""),
        f("expose_all", Ty::Bool, "List every tool of this upstream as `<id>_<tool>`, not only its `expose` entries.").def("false"),
        f("skill_prefix", Ty::Str, "The first segment its `skill://` URIs are shown under when it serves skills (default its id; `\"\"`: unchanged)."),
        f("isolation", Ty::Enum(&["shared", "session"]), "stdio: one process for every client session, or one per session.").def("\"shared\""),
        f("pin", Ty::Enum(&["hold", "warn", "off"]), "Pin what it offers (`mcp/pins.json`): a tool, prompt or resource template whose definition differs from the approved one is held (not listed, calls refused) or served and flagged; `off` pins only curated tools, as `warn`.").def("\"off\""),
        f("new", Ty::Enum(&["hold", "allow"]), "With `pin` on: a definition never approved is held until `sluice pins approve`, or served and pinned as first seen.").def("\"allow\""),
        f("timeout_ms", Ty::UInt, "Request timeout for this upstream, ms (default `request_timeout_ms`)."),
        f("sandbox", Ty::Object(&SANDBOX), "stdio: confine the server with the kernel's own mechanisms (Landlock, namespaces, rlimits); a sandbox the kernel cannot enforce is an error at start."),
        f("era", Ty::Enum(&["auto", "handshake", "stateless", "legacy", "modern"]), "The protocol era: probe `server/discover` and fall back to `initialize` (auto), or only one of them: `handshake` (the `initialize` handshake and sessions, 2024-11-05 … 2025-11-25) or `stateless` (2026-07-28). `legacy` and `modern` are the deprecated names of the same two (a load warning).").def("\"auto\""),
    ],
    when: &[
        When { field: "transport", is: &["stdio"], negate: false, absent_is: true, require: &["command"] },
        When { field: "transport", is: HTTP_TRANSPORTS, negate: false, absent_is: false, require: &["url"] },
    ],
    ..OBJ
};

pub(crate) static EXPOSE_ENTRY: Obj = Obj {
    doc: "One curated tool: an upstream tool listed under a chosen name.",
    fields: &[
        f("upstream", Ty::NonEmpty, "An `upstreams[].id`.").req(),
        f("tool", Ty::NonEmpty, "The tool's name at the upstream; `(upstream, tool)` is unique.").req(),
        f("as", TOOL_NAME, "The name clients see (1–128 of `A-Z a-z 0-9 _ . -`; unique among enabled entries). Default `<upstream>_<tool>`."),
        f("category", Ty::Str, "Grouping label.").def("\"\""),
        f("enabled", Ty::Bool, "Listed right now.").def("true"),
    ],
    ..OBJ
};

pub(crate) static SKILL_ENTRY: Obj = Obj {
    doc: "One skill of an upstream served under another path (or not at all): an `expose` entry for a skill.",
    fields: &[
        f("upstream", Ty::NonEmpty, "An `upstreams[].id`.").req(),
        f("skill", SKILL_PATH, "The skill's path at the upstream (`acme/billing/refunds` for `skill://acme/billing/refunds/SKILL.md`); `(upstream, skill)` is unique.").req(),
        f("as", SKILL_PATH, "The path clients see it under (`skill://<as>/SKILL.md`), ending in the skill's name; unique among enabled entries. Default: under the upstream's prefix."),
        f("enabled", Ty::Bool, "Served at all.").def("true"),
    ],
    ..OBJ
};

/// The manifest's event names ([`crate::HookEventKind::parse`] reads each).
pub(crate) const EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Elicitation",
    "ElicitationResult",
    "Stop",
    "SessionEnd",
    "PreCompact",
    "Request",
    "Response",
];

pub(crate) static HOOKS: Obj = Obj {
    doc: "The hook chain, in order: the request phase runs head to tail, the response phase tail to head. Unknown keys are ignored.",
    fields: &[
        SCHEMA_KEY,
        f("version", Ty::UInt, "Format version (not read).").lenient(),
        f("hooksDir", Ty::Str, "The folder `${HOOKS_DIR}` expands to (default the tree's `hooks/`)."),
        f("hooks", Ty::Array(&HOOK), "The hooks, in chain order.").def("[]"),
    ],
    ..OBJ
};

pub(crate) static HOOK: Obj = Obj {
    doc: "One hook.",
    fields: &[
        f("id", Ty::NonEmpty, "Unique key; `hooks.state.json` keys on it.").req(),
        f("event", Ty::Enum(EVENTS), "The lifecycle event (required except for builtins and civic hooks, which leave it out)."),
        f("type", Ty::Enum(&["command", "process", "http", "mcp_tool", "builtin", "civic"]), "How it runs.").def("\"command\""),
        f("matcher", Ty::Str, "The tool name (Elicitation: the upstream), as Claude Code reads it: only letters, digits, `_`, `-`, spaces, `,` and `|`: an exact name or a `|` / `,` list; anything else: a regex that matches anywhere in the name; `\"\"` or `\"*\"`: always.").def("\"\""),
        f("methods", Ty::Strings, "Method globs (`tools/*`, `*`). Default by event: `[\"tools/call\"]` for the tool events (and the mask, pii, size-cap and rate-limit builtins), `[\"initialize\"]` for SessionStart, else `[\"*\"]`."),
        f("command", Ty::NonEmpty, "command/process: the command line, run with `sh -c`; `${HOOKS_DIR}` is expanded. command with `args`: the program, run without a shell."),
        f("args", Ty::Strings, "command: the exec form's arguments (no shell; `${HOOKS_DIR}`, `${CLAUDE_PROJECT_DIR}` and `${CLAUDE_PLUGIN_ROOT}` are expanded)."),
        f("script", Ty::Str, "command: the script, relative to `hooks/` (for editing); it must not escape `hooks/`."),
        f("url", HTTP_URL, "http: the hook service's URL; civic: the hook server's URL (Civic's `HOOKS` URL)."),
        f("headers", Ty::StringMap, "http: extra request headers.").def("{}"),
        f("allowed_env_vars", Ty::Strings, "http: Claude Code's `allowedEnvVars`, the environment variables header values may name as `$NAME` or `${NAME}` (expanded when set, or with the claude-code protocol; an unlisted name becomes empty)."),
        f("protocol", Ty::Enum(&["zato", "claude-code"]), "http: how answers are read: the Zato-style contract, or Claude Code's http hook contract.").def("\"zato\""),
        f("tool_name", Ty::Enum(&["gateway", "mcp"]), "Which name the payload's `tool_name` carries: the gateway's, or Claude Code's `mcp__<upstream>__<tool>`.").def("\"gateway\""),
        f("permission_mode", Ty::Enum(crate::hooks::PERMISSION_MODES), "`permission_mode` of the payload.").def("\"default\""),
        f("plugin_root", Ty::Str, "The Claude Code plugin folder the hook came from (`CLAUDE_PLUGIN_ROOT`)."),
        f("ask_fallback", Ty::Enum(&["deny", "allow"]), "What an `ask` becomes for a client without elicitation.").def("\"deny\""),
        f("server", Ty::NonEmpty, "mcp_tool: the upstream whose tool the hook calls."),
        f("tool", Ty::NonEmpty, "mcp_tool: the upstream's own name of the tool."),
        f("input", Ty::Object(&MCP_TOOL_INPUT), "mcp_tool: the tool's arguments; `${path}` in a string is that value of the hook input (`${tool_input.file_path}`, `${session_id}`).").def("{}"),
        f("if", Ty::Str, "Claude Code's `if` (tool events): one permission rule (`mcp__crm__*`, `mcp__crm__find`, `Bash(git *)`); the hook runs only for the calls it matches."),
        f("once", Ty::Bool, "Claude Code's `once`: run once per session.").def("false"),
        f("async", Ty::Bool, "Claude Code's `async`: run in the background; never decides, never delays the message.").def("false"),
        f("on_failure", Ty::Enum(&["continue", "block"]), "Claude Code's `onFailure`: `block` refuses the message when the hook cannot start, times out, crashes or exits with a code other than 0 or 2 (http: answers non-2xx or unreadable; mcp_tool: its tool fails).").def("\"continue\""),
        f("continue_on_block", Ty::Bool, "Claude Code's `continueOnBlock` (PostToolUse): a block replaces the result with its reason as a tool error (`isError: true`) instead of appending the reason.").def("false"),
        f("builtin", Ty::Enum(BUILTINS), "builtin: which one."),
        f("options", Ty::Options, "builtin: its options (their schema depends on `builtin`)."),
        f("timeout", Ty::Number, "Seconds per event (at most 86400); absent or non-positive: 60 for command, 10 for the others."),
        f("sandbox", Ty::Object(&SANDBOX), "command/process: confine the hook's process as a stdio upstream's (Landlock, namespaces, rlimits); a sandbox the kernel cannot enforce is an error at start."),
        f("on_error", Ty::Enum(&["refuse", "pass"]), "What a timeout, crash or unreadable answer means.").def("\"refuse\""),
        f("enabled", Ty::Bool, "The manifest's state (`hooks.state.json` wins); anything but `true` is off.").def("false").lenient(),
        f("description", Ty::Str, "For people.").def("\"\""),
    ],
    when: &[
        When { field: "type", is: &["builtin", "civic"], negate: true, absent_is: false, require: &["event"] },
        When { field: "type", is: &["command", "process"], negate: false, absent_is: true, require: &["command"] },
        When { field: "type", is: &["http", "civic"], negate: false, absent_is: false, require: &["url"] },
        When { field: "type", is: &["builtin"], negate: false, absent_is: false, require: &["builtin"] },
        When { field: "type", is: &["mcp_tool"], negate: false, absent_is: false, require: &["server", "tool"] },
    ],
    builtins: true,
    ..OBJ
};

pub(crate) static MCP_TOOL_INPUT: Obj = Obj {
    doc: "An mcp_tool hook's arguments for its tool (any keys).",
    ..OBJ
};

pub(crate) static TOOLS: Obj = Obj {
    doc: "First-party tools (toolfunnel's register). Unknown keys are ignored.",
    fields: &[
        SCHEMA_KEY,
        f("version", Ty::UInt, "Format version.").def("1"),
        f("description", Ty::Str, "Free text.").def("\"\""),
        f("tools", Ty::Array(&TOOL), "The tools, in order.").def("[]"),
    ],
    ..OBJ
};

pub(crate) static TOOL: Obj = Obj {
    doc: "One register tool.",
    fields: &[
        f("id", Ty::NonEmpty, "Stable unique key.").req(),
        f("name", Ty::NonEmpty, "Display name.").req(),
        f("summary", Ty::Str, "One line.").def("\"\""),
        f("category", Ty::Str, "Grouping label.").def("\"\""),
        f("instructions", Ty::Str, "The full usage doc.").def("\"\""),
        f("mode", Ty::Enum(&["gateway", "reference"]), "gateway: Sluice runs `invoke`; reference: the run returns the instructions. Default: gateway with an invoke, else reference."),
        f("invoke", Ty::Object(&INVOKE), "How a gateway tool runs (required unless `mode` is `reference`)."),
        f("timeout", Ty::Number, "Seconds; the process group is killed past it (absent or non-positive: 60; past a day: a day).").lenient(),
    ],
    when: &[When { field: "mode", is: &["reference"], negate: true, absent_is: false, require: &["invoke"] }],
    ..OBJ
};

pub(crate) static INVOKE: Obj = Obj {
    doc: "`{\"type\": \"script\", \"path\": …}` (a file under `tools/scripts/`) or `{\"type\": \"shell\", \"command\": …}`.",
    fields: &[
        f("type", Ty::Enum(&["script", "shell"]), "script or shell.").req(),
        f("path", Ty::NonEmpty, "script: its basename is run from `tools/scripts/`."),
        f("interpreter", Ty::Str, "script: the interpreter (default by extension: node, python3, bash; else the script itself)."),
        f("command", Ty::NonEmpty, "shell: run verbatim by `sh -c` at the tree root."),
    ],
    when: &[
        When { field: "type", is: &["script"], negate: false, absent_is: false, require: &["path"] },
        When { field: "type", is: &["shell"], negate: false, absent_is: false, require: &["command"] },
    ],
    ..OBJ
};

/// `sandbox` of a stdio upstream or a command/process hook (`sandbox.rs` loads it).
pub(crate) static SANDBOX: Obj = Obj {
    doc: "What the kernel confines a stdio server to (Landlock, namespaces, rlimits; see the sandbox page of the docs). Each part left out is not restricted; unknown keys are errors.",
    known: Some(crate::sandbox::SANDBOX_KNOWN),
    fields: &[
        f("fs", Ty::Object(&SANDBOX_FS), "Files (Landlock): only these paths, and what is beneath them, may be used; without it files are not restricted."),
        f("network", Ty::EnumOrObject(&["none", "loopback"], &SANDBOX_NETWORK), "`none`: a new network namespace, nothing reachable; `loopback`: a new network namespace with only its own loopback up (not the host's); `{\"connect\": [\"host:port\"]}`: TCP connect only to those ports (Landlock filters by port, not host), no TCP bind. Without it the network is not restricted."),
        f("memory_mb", Ty::Positive, "RLIMIT_DATA of each process, MiB (heap and private writable mappings)."),
        f("processes", Ty::Positive, "RLIMIT_NPROC: processes and threads alive at once in the sandbox (needs a non-root user: the gateway's own, or `user`)."),
        f("cpu_seconds", Ty::Positive, "RLIMIT_CPU of each process: CPU seconds before SIGXCPU, and SIGKILL a second later."),
        f("user", Ty::NonEmpty, "Run the server as this user (a name or a numeric uid, with its primary group); the gateway must run as root."),
    ],
    ..OBJ
};

pub(crate) static SANDBOX_FS: Obj = Obj {
    doc: "Paths the server may use (absolute, `~/…`, `${env:NAME}`, or relative to the home folder); unknown keys are errors.",
    known: Some(crate::sandbox::FS_KNOWN),
    fields: &[
        f("read", Ty::Strings, "Read, list and execute beneath each path.").def("[]"),
        f("write", Ty::Strings, "Read, write, create, rename and remove beneath each path.").def("[]"),
    ],
    ..OBJ
};

pub(crate) static SANDBOX_NETWORK: Obj = Obj {
    doc: "TCP connect allow-list; unknown keys are errors.",
    known: Some(crate::sandbox::NETWORK_KNOWN),
    fields: &[SANDBOX_CONNECT],
    ..OBJ
};

const SANDBOX_CONNECT: Field = f(
    "connect",
    Ty::Strings,
    "`host:port` entries (`*:443` for any host); only the port is enforced.",
)
.req();

pub(crate) static AUTH: Obj = Obj {
    doc: "Authentication of the MCP listener and access rules. Off when absent or `enabled` is false; unknown keys are errors.",
    known: Some(auth::KNOWN),
    fields: &[
        SCHEMA_KEY,
        f("enabled", Ty::Bool, "Authenticate every request on the MCP listener (needs `tokens`, or `issuer` with `jwks_url`/`jwks_file`).").def("false"),
        f("resource", Ty::Pattern(r"^https?://[^#]*$"), "The canonical resource URI of the endpoint (RFC 8707), without a fragment. Default `http://<listen>/mcp`."),
        f("authorization_servers", Ty::Strings, "Advertised in the protected-resource metadata.").def("[]"),
        f("required_scopes", Ty::Strings, "Scopes every request needs (403 `insufficient_scope` without them).").def("[]"),
        f("scopes_supported", Ty::Strings, "Advertised in the metadata (default `required_scopes`)."),
        f("issuer", Ty::Str, "The `iss` every JWT must carry (needs `jwks_url` or `jwks_file`)."),
        f("audience", Ty::StringOrStrings, "Accepted `aud` values (default the resource URI)."),
        f("jwks_url", HTTP_URL, "The issuer's key set: https, or http to a loopback host."),
        f("jwks_file", Ty::Str, "A JWKS file instead (relative to the home folder)."),
        f("algorithms", Ty::EnumStrings(auth::ALGORITHMS), "Accepted signature algorithms (never none or HMAC). Default all of them."),
        f("leeway_seconds", Ty::UInt, "Clock leeway for `exp` and `nbf`.").def("30"),
        f("jwks_cache_seconds", Ty::UInt, "How long a fetched key set is trusted.").def("300"),
        f("browser_sign_in", Ty::Object(&BROWSER_SIGN_IN), "Sign a person's browser in at the issuer before a connect link of a per-user upstream is used; the ID token's `sub` must be the link's principal (needs `issuer`)."),
        f("tokens", Ty::Array(&TOKEN), "Static bearer tokens / API keys, stored as SHA-256 hashes.").def("[]"),
        f("rules", Ty::Array(&RULE), "Access rules over tools, prompts and resources.").def("[]"),
    ],
    ..OBJ
};

pub(crate) static BROWSER_SIGN_IN: Obj = Obj {
    doc: "The gateway's OpenID Connect client at the issuer (redirect URI `<public_url>/oauth/signed-in`); unknown keys are errors.",
    known: Some(auth::SIGN_IN_KEYS),
    fields: &[
        f("client_id", Ty::NonEmpty, "The client registered at the issuer.").req(),
        f("client_secret", Ty::Str, "Its secret (`${env:NAME}` expanded); without one, a public client."),
        f("scopes", Ty::Strings, "Scopes asked for; `openid` is always sent.").def("[\"openid\"]"),
    ],
    ..OBJ
};

pub(crate) static TOKEN: Obj = Obj {
    doc: "One static token; unknown keys are errors.",
    known: Some(auth::TOKEN_KEYS),
    fields: &[
        f(
            "name",
            Ty::NonEmpty,
            "The principal the token stands for (unique).",
        )
        .req(),
        f(
            "sha256",
            Ty::Pattern("^[0-9A-Fa-f]{64}$"),
            "The 64 hex digits of the token's SHA-256 (`sluice auth hash TOKEN`).",
        )
        .req(),
        f("scopes", Ty::Strings, "The scopes it grants.").def("[]"),
    ],
    ..OBJ
};

pub(crate) static RULE: Obj = Obj {
    doc: "One access rule; it selects tools, prompts or resources (at least one); unknown keys are errors.",
    known: Some(auth::RULE_KEYS),
    fields: &[
        f("effect", Ty::Enum(&["allow", "deny"]), "Allow or deny.").req(),
        f("tools", Ty::Strings, "Globs over client-facing tool names."),
        f("prompts", Ty::Strings, "Globs over prompt names."),
        f("resources", Ty::Strings, "Globs over resource URIs (and templates' `uriTemplate`)."),
        f("principals", Ty::Strings, "Globs over the principal id (none: any caller)."),
        f("scopes", Ty::Strings, "Scopes the caller must all hold."),
        f("claims", Ty::Claims, "Claims the caller's token must carry: a value, or a list meaning any of them."),
        f("description", Ty::Str, "For people (not read).").lenient(),
    ],
    one_of_lists: &["tools", "prompts", "resources"],
    ..OBJ
};

pub(crate) static ENDPOINTS: Obj = Obj {
    doc: "Named endpoints, each served at `/mcp/<name>` beside `/mcp` with a curated selection of the gateway's tools, prompts and resources; unknown keys are errors.",
    known: Some(crate::endpoints::KNOWN),
    fields: &[
        SCHEMA_KEY,
        f("version", Ty::UInt, "Format version: 1.").req(),
        f("endpoints", Ty::Array(&ENDPOINT), "The endpoints (names unique).").req(),
    ],
    ..OBJ
};

pub(crate) static ENDPOINT: Obj = Obj {
    doc: "One endpoint, served at `/mcp/<name>`. An item is served when its upstream is among `upstreams` (if given), a tool's category among `categories` (if given), and its name matches one of its kind's globs; a kind without globs is served whole when `upstreams` is given (tools: or `categories`), else not at all. Unknown keys are errors.",
    known: Some(crate::endpoints::ENDPOINT_KEYS),
    fields: &[
        f("name", Ty::Pattern(crate::endpoints::NAME_PATTERN), "The URL's last segment (`/mcp/<name>`), also the `endpoint` label of metrics, audit lines and traces.").req(),
        f("description", Ty::Str, "For people (the admin page shows it).").def("\"\""),
        f("tools", Ty::Strings, "Globs over the tools' final (client-facing) names."),
        f("prompts", Ty::Strings, "Globs over prompt names."),
        f("resources", Ty::Strings, "Globs over resource URIs and resource templates' `uriTemplate`."),
        f("upstreams", Ty::Strings, "Upstream ids of `mcp/expose.json` (`local`: the register's tools)."),
        f("categories", Ty::Strings, "Tool categories (an expose entry's or register tool's `category`, else the upstream id)."),
        f("hooks", Ty::Array(&HOOK), "Hooks run after the manifest's, for this endpoint only (manifest entries; on unless `enabled` is false).").def("[]"),
        f("rules", Ty::Array(&RULE), "Access rules applied with `auth/auth.config.json`'s, for this endpoint only.").def("[]"),
        f("funnel", Ty::Bool, "List the funnel's meta-tools, over this endpoint's tools. Default: as `sluice.json` says."),
        f("tool_search", Ty::Bool, "List `<prefix>_search_tools`, searching this endpoint's tools. Default: as `sluice.json` says."),
        f("discovery", Ty::Enum(&["all", "search"]), "What this endpoint's `tools/list` shows: every tool it selects (`all`), or only the search and run tools (`search`). Default: as `sluice.json` says."),
        f("instructions", Ty::Str, "The `instructions` of its `initialize` result (default the gateway's)."),
        f("server_name", Ty::NonEmpty, "The `serverInfo.name` of its `initialize` result (default `sluice`)."),
    ],
    ..OBJ
};

// --- generation ------------------------------------------------------------------------------

/// `schema`, or `null` (the loaders read `null` as absent).
fn nullable(mut schema: Value) -> Value {
    match schema.get("type").cloned() {
        Some(Value::String(t)) => {
            schema["type"] = json!([t, "null"]);
            if let Some(Value::Array(values)) = schema.get_mut("enum") {
                values.push(Value::Null);
            }
            schema
        }
        _ => json!({"anyOf": [schema, {"type": "null"}]}),
    }
}

/// Drop the `default` schemars writes for a map kept as a list of entries (`[]` on an object).
fn drop_list_defaults(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let object = match m.get("type") {
                Some(Value::String(t)) => t == "object",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
                _ => false,
            };
            if object && m.get("default").is_some_and(Value::is_array) {
                m.remove("default");
            }
            m.values_mut().for_each(drop_list_defaults);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_list_defaults),
        _ => {}
    }
}

impl Ty {
    fn schema(self, generator: &mut schemars::SchemaGenerator) -> Value {
        let scalar = json!({"type": ["string", "number", "boolean"]});
        match self {
            Ty::Str => json!({"type": "string"}),
            Ty::NonEmpty => json!({"type": "string", "pattern": "\\S"}),
            Ty::Pattern(p) => json!({"type": "string", "pattern": p}),
            Ty::MinLen(n) => json!({"type": "string", "minLength": n}),
            Ty::Bool => json!({"type": "boolean"}),
            Ty::UInt => json!({"type": "integer", "minimum": 0}),
            Ty::Positive => json!({"type": "integer", "minimum": 1}),
            Ty::Number => json!({"type": "number"}),
            Ty::Enum(values) => json!({"type": "string", "enum": values}),
            Ty::Strings => json!({"type": "array", "items": {"type": "string"}}),
            Ty::EnumStrings(values) => {
                json!({"type": "array", "items": {"type": "string", "enum": values}})
            }
            Ty::StringOrStrings => json!({"anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "string"}}
            ]}),
            Ty::StringMap => json!({"type": "object", "additionalProperties": scalar}),
            Ty::KeyedStringMap(keys) => json!({
                "type": "object",
                "propertyNames": {"pattern": keys},
                "additionalProperties": scalar
            }),
            Ty::Claims => json!({
                "type": "object",
                "additionalProperties": {"anyOf": [scalar, {"type": "array", "items": scalar}]}
            }),
            Ty::Object(o) => o.schema(generator),
            Ty::EnumOrObject(values, o) => json!({"anyOf": [
                {"type": "string", "enum": values},
                o.schema(generator)
            ]}),
            Ty::Array(o) => json!({"type": "array", "items": o.schema(generator)}),
            Ty::Options => json!({"type": "object"}),
        }
    }
}

impl Obj {
    /// The rows in the order the schema lists them: the loader's `known` list when there is
    /// one (a name without a row gets an empty schema; a test requires a row for each).
    pub(crate) fn rows(&self) -> Vec<(&'static str, Option<&'static Field>)> {
        match self.known {
            Some(known) => known
                .iter()
                .map(|k| (*k, self.fields.iter().find(|f| f.name == *k)))
                .collect(),
            None => self.fields.iter().map(|f| (f.name, Some(f))).collect(),
        }
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> Value {
        let mut props = Map::new();
        let mut required = Vec::new();
        for (name, row) in self.rows() {
            let Some(row) = row else {
                props.insert(name.into(), json!({}));
                continue;
            };
            let mut s = row.ty.schema(generator);
            if !row.required {
                s = nullable(s);
            }
            let mut m = Map::new();
            let doc = if row.lenient {
                format!("{} (Sluice ignores a value of another type.)", row.doc)
            } else {
                row.doc.to_string()
            };
            m.insert("description".into(), json!(doc));
            if let Some(d) = row.default {
                m.insert(
                    "default".into(),
                    serde_json::from_str(d).expect("a default is JSON"),
                );
            }
            if let Value::Object(inner) = s {
                m.extend(inner);
            }
            props.insert(name.into(), Value::Object(m));
            if row.required {
                required.push(name);
            }
        }
        let mut out = Map::new();
        out.insert("description".into(), json!(self.doc));
        out.insert("type".into(), json!("object"));
        out.insert("properties".into(), Value::Object(props));
        if !required.is_empty() {
            out.insert("required".into(), json!(required));
        }
        if self.known.is_some() {
            out.insert("additionalProperties".into(), json!(false));
        }
        let mut all_of = Vec::new();
        for w in self.when {
            let values = json!({"enum": w.is});
            let test = if w.negate {
                json!({"not": values})
            } else {
                values
            };
            let mut cond = json!({"properties": {w.field: test}});
            if !w.absent_is && !w.negate {
                cond["required"] = json!([w.field]);
            }
            all_of.push(json!({"if": cond, "then": {"required": w.require}}));
        }
        if !self.one_of_lists.is_empty() {
            let any: Vec<Value> = self
                .one_of_lists
                .iter()
                .map(|k| json!({"required": [k], "properties": {*k: {"type": "array", "minItems": 1}}}))
                .collect();
            all_of.push(json!({"anyOf": any}));
        }
        if self.builtins {
            for name in BUILTINS {
                let options = BuiltinOptions::json_schema(name, generator)
                    .expect("every builtin has an options schema");
                all_of.push(json!({
                    "if": {
                        "required": ["type", "builtin"],
                        "properties": {"type": {"const": "builtin"}, "builtin": {"const": name}}
                    },
                    "then": {"properties": {"options": nullable(options.to_value())}}
                }));
            }
        }
        if !all_of.is_empty() {
            out.insert("allOf".into(), Value::Array(all_of));
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests;
