//! What the suite measures: the upstreams, and the configurations put in front of them.
//!
//! Everything that varies is data here. A hook configuration is ONE LINE in [`HOOKS`]; a peer
//! gateway is one entry in [`PEERS`]; how the gateway authenticates to an OAuth-protected
//! upstream, one entry in [`UPSTREAM_AUTH`].

/// The files of a configuration tree: (path inside the tree, content).
pub(crate) type Files = &'static [(&'static str, &'static str)];

/// ============================== HOOK CONFIGURATIONS ==========================================
///
/// One line per hook configuration of issue 5: its label, and the files of its configuration
/// tree, or `None` while it cannot run (listed in the table as "not yet available", never
/// measured or faked).
///
/// The suite writes the files into a generated home folder (under `target/bench/trees/`) next to
/// an `mcp/expose.json` that fronts the direct HTTP echo with its `echo` tool exposed as `echo`,
/// and runs `sluice serve --home THAT --listen …`. In the files, `{{UPSTREAM_URL}}` is the echo's
/// URL, `{{ECHO}}` the path of the `sluice-bench-echo` binary (`--hook-process` is a process
/// hook that passes everything), `{{HOOK_URL}}` an http hook service that passes everything (a
/// `sluice-bench-echo` started for the run: `POST /hook` → 200, no body), `{{SLUICE}}` the `sluice`
/// binary and `{{BENCH}}` the `bench/` folder. Every call carries a `reason` argument (which
/// `explain` requires and strips).
pub(crate) const HOOKS: &[(&str, Option<Files>)] = &[
    (
        "explain hook",
        Some(&[(
            MANIFEST,
            r#"{"version": 1, "hooks": [{"id": "explain", "type": "builtin", "builtin": "explain", "enabled": true}]}"#,
        )]),
    ),
    (
        "5 builtin hooks (chain)",
        Some(&[(
            MANIFEST,
            r#"{"version": 1, "hooks": [{"id": "explain", "type": "builtin", "builtin": "explain", "enabled": true}, {"id": "deny", "type": "builtin", "builtin": "deny", "enabled": true, "options": {"tools": ["never_.*"], "arguments": [{"pattern": "rm\\s+-rf"}]}}, {"id": "rewrite", "type": "builtin", "builtin": "rewrite", "enabled": true, "options": {"rules": [{"tool": "echo", "default": {"text": ""}}]}}, {"id": "validate", "type": "builtin", "builtin": "validate", "enabled": true}, {"id": "pii", "type": "builtin", "builtin": "pii", "enabled": true}]}"#,
        )]),
    ),
    (
        "process hook",
        Some(&[(
            MANIFEST,
            r#"{"version": 1, "hooks": [{"id": "process", "event": "PreToolUse", "type": "process", "command": "'{{ECHO}}' --hook-process", "enabled": true}]}"#,
        )]),
    ),
    (
        "http hook",
        Some(&[(
            MANIFEST,
            r#"{"version": 1, "hooks": [{"id": "http", "event": "PreToolUse", "type": "http", "url": "{{HOOK_URL}}", "enabled": true}]}"#,
        )]),
    ),
    (
        "command hook",
        Some(&[(
            MANIFEST,
            r#"{"version": 1, "hooks": [{"id": "command", "event": "PreToolUse", "type": "command", "command": "cat > /dev/null", "enabled": true}]}"#,
        )]),
    ),
];

/// Where the hook chain lives in a tree.
const MANIFEST: &str = "hooks/hooks.manifest.json";

/// Why a hook configuration with `None` is not measured.
pub(crate) const HOOKS_MISSING: &str =
    "not yet available (no configuration for it in the suite yet)";

/// How the gateway authenticates to its upstream in the rows that price it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpstreamAuth {
    /// `"headers": {"Authorization": "Bearer <token>"}` on the upstream: a token the suite
    /// obtained from the echo's `/token` before the run, sent as a configured header.
    StaticBearer,
    /// `"oauth": {"mode": "client_credentials", …}` on the upstream and a `vault` in
    /// `sluice.json`: Sluice discovers the authorization server, obtains its own token and holds
    /// it in memory (`Identity::bearer()` on every request; the vault is read on refresh only).
    ClientCredentials,
    /// `"oauth": {"mode": "per_user", …}` on the upstream, authentication on
    /// (`auth/auth.config.json` with the static token [`BENCH_USER`]) and a `vault`: before the
    /// rounds the suite connects that user's account once (the consent round trip: the
    /// connections tool's link, the confirmation page and its form, the echo's authorization
    /// endpoint, the callback), then calls as that user; each call goes through the user's own
    /// connection with the grant held in memory.
    PerUser,
}

/// The principal of the per-user row: its static token, and the token's SHA-256 (hex) as
/// `auth/auth.config.json` keeps it.
pub(crate) const BENCH_USER: (&str, &str, &str) = (
    "bench-user",
    "sluice-bench-user",
    "5a0f4179d1c07fc459f6adc59fe4fdc247a86bbc6edfd9d00e90c803c087d823",
);

/// The rows that differ only in how the upstream is authenticated: each runs `sluice serve
/// --no-admin --home TREE` whose one upstream is `sluice-bench-echo --oauth` (an OAuth-protected
/// echo with its own authorization server, on a port of its own), with its own clients
/// authenticated the same way in every row (the static token of [`BENCH_USER`]), and is
/// compared with that echo called directly with a token. Rust echo only.
pub(crate) const UPSTREAM_AUTH: &[(&str, UpstreamAuth)] = &[
    ("static bearer header", UpstreamAuth::StaticBearer),
    (
        "oauth (client credentials)",
        UpstreamAuth::ClientCredentials,
    ),
    ("oauth per user (held grant)", UpstreamAuth::PerUser),
];

/// The client `sluice-bench-echo --oauth` knows: (client id, secret), its `CLIENT_ID` and
/// `CLIENT_SECRET`.
pub(crate) const OAUTH_CLIENT: (&str, &str) = ("sluice-bench", "sluice-bench-secret");

/// Why the upstream-authentication rows have no TypeScript SDK figures.
pub(crate) const UPSTREAM_AUTH_RUST_ONLY: &str =
    "Rust echo only (the OAuth-protected upstream is `sluice-bench-echo --oauth`)";

/// Why the upstream-authentication rows have no start-up, memory or tools/list figures.
pub(crate) const UPSTREAM_AUTH_CALLS_ONLY: &str =
    "not measured: this row prices a call's upstream authentication (see tools/call)";

/// The two echo upstreams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Upstream {
    /// `sluice-bench-echo` (Rust, raw serde_json).
    Rust,
    /// `bench/ts-echo/server.mjs` (the official TypeScript SDK on Node 22).
    Ts,
}

impl Upstream {
    /// The name in tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Upstream::Rust => "Rust echo",
            Upstream::Ts => "TS SDK echo",
        }
    }
}

/// How a configuration reaches the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// Streamable HTTP to the same echo process the direct runs call.
    Http,
    /// A stdio child of the gateway (the direct runs call the HTTP echo).
    Stdio,
}

/// A peer gateway from a package registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Peer {
    /// `supergateway` (npm): stdio server → Streamable HTTP, `--stateful`.
    Supergateway,
    /// `mcp-proxy` (PyPI): stdio server → Streamable HTTP.
    McpProxy,
    /// `@civic/passthrough-mcp-server` (npm): Streamable HTTP → Streamable HTTP.
    Civic,
}

/// The peers measured with `--peers`: what they are called, where they come from, and how they
/// reach the upstream.
pub(crate) const PEERS: &[(Peer, &str, &str, Via)] = &[
    (
        Peer::Supergateway,
        "supergateway",
        "npm supergateway@4",
        Via::Stdio,
    ),
    (Peer::McpProxy, "mcp-proxy", "PyPI mcp-proxy", Via::Stdio),
    (
        Peer::Civic,
        "@civic/passthrough-mcp-server",
        "npm @civic/passthrough-mcp-server",
        Via::Http,
    ),
];

/// What runs in front of the upstream.
#[derive(Debug, Clone)]
pub(crate) enum Launch {
    /// `sluice-bench-floor --upstream URL`: the bare JSON-RPC-aware passthrough (`bench/floor`).
    Floor,
    /// `sluice serve --no-admin --passthrough URL` or `--passthrough -- CMD` (every Sluice row
    /// runs without the admin listener but the one that prices it).
    Sluice(Via),
    /// `sluice serve --passthrough URL --admin …`: the same with the admin listener on (the
    /// default outside the bench; it watches the traffic, which turns on the record phase).
    SluiceAdmin,
    /// `sluice serve --no-admin --threads 1 --passthrough URL`: no hooks on one worker thread
    /// (no hand-overs between workers; the default is one worker per CPU).
    SluiceOneWorker,
    /// `sluice serve --no-admin --pin --passthrough URL`: no hooks, the serving threads pinned
    /// one per CPU.
    SluicePinned,
    /// `sluice serve --home TREE` with these extra files (a hook configuration).
    SluiceTree(Files),
    /// `sluice serve --no-admin --home TREE` in front of the OAuth echo, authenticated this way.
    SluiceAuth(UpstreamAuth),
    /// A peer gateway.
    Peer(Peer),
    /// A Sluice launch run by the `--baseline` build instead (an A/B row).
    Baseline(Box<Launch>),
}

impl Launch {
    /// Does it front the OAuth-protected echo (`sluice-bench-echo --oauth`) instead of the plain
    /// one?
    pub(crate) fn oauth_upstream(&self) -> bool {
        match self {
            Launch::SluiceAuth(_) => true,
            Launch::Baseline(inner) => inner.oauth_upstream(),
            _ => false,
        }
    }

    /// Does it authenticate its clients as one user of its own (the per-user row)?
    pub(crate) fn per_user(&self) -> bool {
        match self {
            Launch::SluiceAuth(UpstreamAuth::PerUser) => true,
            Launch::Baseline(inner) => inner.per_user(),
            _ => false,
        }
    }

    /// The headers its clients send: the rows that price upstream authentication authenticate
    /// their client as [`BENCH_USER`]; the others none.
    pub(crate) fn client_headers(&self) -> Vec<(String, String)> {
        if self.oauth_upstream() {
            vec![(
                "Authorization".to_string(),
                format!("Bearer {}", BENCH_USER.1),
            )]
        } else {
            Vec::new()
        }
    }
}

/// One configuration of the matrix (a row of the tables).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The row label.
    pub name: String,
    /// How it reaches the upstream.
    pub via: Via,
    /// How to start it, or why it is not measured.
    pub launch: Result<Launch, String>,
    /// Is this a peer (not Sluice)?
    pub peer: bool,
    /// Does the load generator speak 2026-07-28 to it (the direct runs stay in the handshake
    /// era: the echo upstreams are legacy servers, so this row prices the bridge)?
    pub modern_client: bool,
}

/// The floor row's label.
pub(crate) const FLOOR: &str = "floor (bare passthrough)";

/// The configurations of one run: the floor, Sluice with no hooks over HTTP and over stdio,
/// the hook configurations, the upstream-authentication rows, (with `--baseline`) each Sluice row again on the baseline build,
/// and (with `--peers`) the peer gateways; `only` keeps the rows whose label contains one of
/// its words (and always the floor).
pub(crate) fn configs(peers: bool, baseline: bool, only: &[String]) -> Vec<Config> {
    let mut out = sluice_configs();
    if baseline {
        let again: Vec<Config> = out
            .iter()
            .map(|c| Config {
                name: format!("{} [baseline]", c.name),
                launch: c.launch.clone().map(|l| Launch::Baseline(Box::new(l))),
                ..c.clone()
            })
            .collect();
        out.extend(again);
    }
    out.insert(
        0,
        Config {
            name: FLOOR.into(),
            via: Via::Http,
            launch: Ok(Launch::Floor),
            peer: false,
            modern_client: false,
        },
    );
    if peers {
        for (peer, name, _, via) in PEERS {
            out.push(Config {
                name: (*name).into(),
                via: *via,
                launch: Ok(Launch::Peer(*peer)),
                peer: true,
                modern_client: false,
            });
        }
    }
    if !only.is_empty() {
        out.retain(|c| c.name == FLOOR || only.iter().any(|w| c.name.contains(w.as_str())));
    }
    out
}

fn sluice_configs() -> Vec<Config> {
    let mut out = vec![
        Config {
            name: "sluice, no hooks".into(),
            via: Via::Http,
            launch: Ok(Launch::Sluice(Via::Http)),
            peer: false,
            modern_client: false,
        },
        Config {
            name: "sluice, no hooks, admin listener on".into(),
            via: Via::Http,
            launch: Ok(Launch::SluiceAdmin),
            peer: false,
            modern_client: false,
        },
        Config {
            name: "sluice, no hooks, 1 worker thread".into(),
            via: Via::Http,
            launch: Ok(Launch::SluiceOneWorker),
            peer: false,
            modern_client: false,
        },
        Config {
            name: "sluice, no hooks, pinned threads".into(),
            via: Via::Http,
            launch: Ok(Launch::SluicePinned),
            peer: false,
            modern_client: false,
        },
        Config {
            name: "sluice, stdio upstream".into(),
            via: Via::Stdio,
            launch: Ok(Launch::Sluice(Via::Stdio)),
            peer: false,
            modern_client: false,
        },
        Config {
            name: "sluice, 2026-07-28 client".into(),
            via: Via::Http,
            launch: Ok(Launch::Sluice(Via::Http)),
            peer: false,
            modern_client: true,
        },
    ];
    for (name, files) in HOOKS {
        out.push(Config {
            name: format!("sluice, {name}"),
            via: Via::Http,
            launch: files
                .map(Launch::SluiceTree)
                .ok_or_else(|| HOOKS_MISSING.to_string()),
            peer: false,
            modern_client: false,
        });
    }
    for (name, auth) in UPSTREAM_AUTH {
        out.push(Config {
            name: format!("sluice, {name}"),
            via: Via::Http,
            launch: Ok(Launch::SluiceAuth(*auth)),
            peer: false,
            modern_client: false,
        });
    }
    out
}
