//! Sluice's identity toward its upstreams, as configured: the `oauth` object of an upstream in
//! `mcp/expose.json` (shared or client credentials sign-in), and in `sluice.json` the `vault`
//! that keeps grants, the gateway's `public_url`, and `oauth_http_hosts`.

use crate::fields::{expand_env, Fields};
use std::path::{Path, PathBuf};

/// How an upstream's grant is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthMode {
    /// One grant for the gateway, obtained once by an operator (`sluice upstream login`).
    Shared,
    /// The client credentials grant (the `io.modelcontextprotocol/oauth-client-credentials`
    /// extension): no person involved.
    ClientCredentials,
}

/// The `oauth` object of an `http` / `sse` upstream.
#[derive(Clone, PartialEq)]
pub struct UpstreamOAuth {
    /// How the grant is obtained.
    pub mode: OAuthMode,
    /// A pre-registered `client_id` (else a client ID metadata document or dynamic
    /// registration).
    pub client_id: Option<String>,
    /// Its secret (`${env:NAME}` expanded).
    pub client_secret: Option<String>,
    /// The issuer the pre-registered client belongs to (it is never presented to another).
    pub issuer: Option<String>,
    /// Scopes to ask for (default: what the server's challenge or metadata names).
    pub scopes: Vec<String>,
    /// `client_secret_basic`, `client_secret_post`, `none` or `private_key_jwt` (default: chosen
    /// from what the authorization server lists).
    pub token_endpoint_auth: Option<String>,
    /// `private_key_jwt`: the PEM private key file (relative to the home folder).
    pub private_key_file: Option<PathBuf>,
    /// `private_key_jwt`: the signing algorithm (default from the key: RS256, ES256, EdDSA).
    pub signing_alg: Option<String>,
    /// Where this gateway's client ID metadata document is published, when not under
    /// `public_url` (an https URL).
    pub client_metadata_url: Option<String>,
}

impl std::fmt::Debug for UpstreamOAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamOAuth")
            .field("mode", &self.mode)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[hidden]"),
            )
            .field("issuer", &self.issuer)
            .field("scopes", &self.scopes)
            .field("token_endpoint_auth", &self.token_endpoint_auth)
            .field("private_key_file", &self.private_key_file)
            .finish_non_exhaustive()
    }
}

/// Keys the loader accepts in an upstream's `oauth`.
pub(crate) const OAUTH_KNOWN: &[&str] = &[
    "mode",
    "client_id",
    "client_secret",
    "issuer",
    "scopes",
    "token_endpoint_auth",
    "private_key_file",
    "signing_alg",
    "client_metadata_url",
];

const AUTH_METHODS: &[&str] = &[
    "client_secret_basic",
    "client_secret_post",
    "none",
    "private_key_jwt",
];

/// An upstream's `oauth` object.
pub(crate) fn load_upstream(
    f: &mut Fields,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<UpstreamOAuth> {
    for key in f.obj.keys() {
        if !OAUTH_KNOWN.contains(&key.as_str()) {
            f.err(
                key,
                format!("unknown oauth setting (known: {})", OAUTH_KNOWN.join(", ")),
            );
        }
    }
    let mode = match f.string("mode").as_deref() {
        None | Some("shared") => OAuthMode::Shared,
        Some("client_credentials") => OAuthMode::ClientCredentials,
        Some(other) => {
            f.err(
                "mode",
                format!("unknown mode {other:?} (shared or client_credentials)"),
            );
            OAuthMode::Shared
        }
    };
    let client_id = f.string("client_id");
    let client_secret = match f.string("client_secret") {
        Some(s) => match expand_env(&s, env) {
            Ok(v) => Some(v),
            Err(e) => {
                f.err("client_secret", e);
                None
            }
        },
        None => None,
    };
    let token_endpoint_auth = f.string("token_endpoint_auth");
    if let Some(m) = &token_endpoint_auth {
        if !AUTH_METHODS.contains(&m.as_str()) {
            f.err(
                "token_endpoint_auth",
                format!("unknown method {m:?} ({})", AUTH_METHODS.join(", ")),
            );
        }
    }
    let private_key_file = f.string("private_key_file").map(|p| home.join(p));
    if let Some(p) = &private_key_file {
        if !p.is_file() {
            f.err("private_key_file", format!("{} is not a file", p.display()));
        }
    }
    let jwt = token_endpoint_auth.as_deref() == Some("private_key_jwt");
    if jwt && private_key_file.is_none() {
        f.err("private_key_file", "is required with private_key_jwt");
    }
    if client_secret.is_some() && client_id.is_none() {
        f.err("client_id", "is required with a client_secret");
    }
    if mode == OAuthMode::ClientCredentials {
        if client_id.is_none() {
            f.err("client_id", "is required with mode client_credentials");
        }
        if client_secret.is_none() && private_key_file.is_none() {
            f.err(
                "client_secret",
                "mode client_credentials needs a client_secret or a private_key_file",
            );
        }
    }
    let client_metadata_url = f.string("client_metadata_url");
    if let Some(u) = &client_metadata_url {
        if !u.starts_with("https://") {
            f.err("client_metadata_url", "must be an https:// URL");
        }
    }
    Some(UpstreamOAuth {
        mode,
        client_id,
        client_secret,
        issuer: f.string("issuer"),
        scopes: f.strings("scopes"),
        token_endpoint_auth,
        private_key_file,
        signing_alg: f.string("signing_alg"),
        client_metadata_url,
    })
}

/// The `vault` object of `sluice.json`.
#[derive(Clone, PartialEq)]
pub struct VaultSettings {
    /// The keys (32 bytes each): the first seals, every one opens (rotation).
    pub keys: Vec<[u8; 32]>,
    /// The database file (relative to the home folder; default `vault.db`). Unused with
    /// `cluster`, whose Redis keeps the vault.
    pub path: PathBuf,
}

impl std::fmt::Debug for VaultSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VaultSettings")
            .field("keys", &format_args!("[{} hidden]", self.keys.len()))
            .field("path", &self.path)
            .finish()
    }
}

/// Keys the loader accepts in `vault`.
pub(crate) const VAULT_KNOWN: &[&str] = &["key", "path"];

/// The `vault` object's fields.
pub(crate) fn load_vault(
    f: &mut Fields,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<VaultSettings> {
    for key in f.obj.keys() {
        if !VAULT_KNOWN.contains(&key.as_str()) {
            f.err(
                key,
                format!("unknown vault setting (known: {})", VAULT_KNOWN.join(", ")),
            );
        }
    }
    let keys = crate::cluster::load_keys(f, env, "sluice vault keygen");
    let path = match f.string("path") {
        Some(p) if p.trim().is_empty() => {
            f.err("path", "must not be empty");
            home.join("vault.db")
        }
        Some(p) => home.join(p),
        None => home.join("vault.db"),
    };
    keys.map(|keys| VaultSettings { keys, path })
}
