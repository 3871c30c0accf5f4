//! Sluice's identity toward its upstreams, as configured: the `oauth` object of an upstream in
//! `mcp/expose.json` (a shared sign-in, client credentials, a grant per user, or RFC 8693 token
//! exchange), and in `sluice.json` the `vault` that keeps grants, the gateway's `public_url`,
//! and `oauth_http_hosts`.

use crate::fields::Fields;
use std::path::{Path, PathBuf};

/// How an upstream's grant is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthMode {
    /// One grant for the gateway, obtained once by an operator (`sluice upstream login`).
    Shared,
    /// The client credentials grant (the `io.modelcontextprotocol/oauth-client-credentials`
    /// extension): no person involved.
    ClientCredentials,
    /// A grant per principal (each user of the gateway connects their own account, through a
    /// link the gateway sends them); needs principals (`auth/auth.config.json`).
    PerUser,
    /// RFC 8693 token exchange: the client's own validated token is exchanged at
    /// `token_endpoint` for a token toward this upstream, per principal; needs the clients'
    /// tokens to come from an identity provider (`issuer` in `auth/auth.config.json`).
    Exchange,
    /// Enterprise-managed authorization (the MCP extension, ID-JAG): the gateway's identity
    /// assertion from the enterprise IdP exchanged there for an ID-JAG (RFC 8693), presented
    /// at the upstream's authorization server with the JWT bearer grant (RFC 7523); no person.
    Enterprise,
}

impl OAuthMode {
    /// The name in the file (`shared`, `client_credentials`, `per_user`, `exchange`,
    /// `enterprise`).
    pub fn name(self) -> &'static str {
        match self {
            OAuthMode::Shared => "shared",
            OAuthMode::ClientCredentials => "client_credentials",
            OAuthMode::PerUser => "per_user",
            OAuthMode::Exchange => "exchange",
            OAuthMode::Enterprise => "enterprise",
        }
    }
}

/// RFC 8693 `urn:ietf:params:oauth:token-type:access_token`, the default of both token types.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The token exchange of `"mode": "exchange"` (RFC 8693).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenExchange {
    /// Where the client's token is exchanged.
    pub token_endpoint: String,
    /// `audience`: the logical name of the upstream at the authorization server.
    pub audience: Option<String>,
    /// `resource`: the upstream's URI (RFC 8707).
    pub resource: Option<String>,
    /// `requested_token_type` (default an access token).
    pub requested_token_type: String,
    /// `subject_token_type` of the client's token (default an access token).
    pub subject_token_type: String,
    /// Send an actor token: one the gateway gets for itself with the client credentials grant.
    pub actor: bool,
}

/// The identity provider's side of `"mode": "enterprise"`.
#[derive(Clone, PartialEq, Eq)]
pub struct EnterpriseAuth {
    /// The IdP's token endpoint, where the assertion is exchanged for an ID-JAG.
    pub idp_token_endpoint: String,
    /// The gateway's client id at the IdP.
    pub idp_client_id: Option<String>,
    /// Its secret (`${env:NAME}` expanded; without it the client id goes in the form).
    pub idp_client_secret: Option<String>,
    /// The identity assertion (an ID token of the IdP), read at each grant: whatever renews
    /// it rewrites the file.
    pub identity_assertion_file: PathBuf,
}

impl std::fmt::Debug for EnterpriseAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnterpriseAuth")
            .field("idp_token_endpoint", &self.idp_token_endpoint)
            .field("idp_client_id", &self.idp_client_id)
            .field(
                "idp_client_secret",
                &self.idp_client_secret.as_ref().map(|_| "[hidden]"),
            )
            .field("identity_assertion_file", &self.identity_assertion_file)
            .finish()
    }
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
    /// `"mode": "exchange"`: the exchange's settings (None for every other mode).
    pub exchange: Option<TokenExchange>,
    /// `"mode": "enterprise"`: the identity provider's side (None for every other mode).
    pub enterprise: Option<EnterpriseAuth>,
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
            .field("exchange", &self.exchange)
            .field("enterprise", &self.enterprise)
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
    "token_endpoint",
    "audience",
    "resource",
    "requested_token_type",
    "subject_token_type",
    "actor",
    "idp_token_endpoint",
    "idp_client_id",
    "idp_client_secret",
    "identity_assertion_file",
];

/// The keys only `"mode": "enterprise"` reads: the last four of [`OAUTH_KNOWN`].
const ENTERPRISE_ONLY: &[&str] = OAUTH_KNOWN.split_at(OAUTH_KNOWN.len() - 4).1;

/// The keys only `"mode": "exchange"` reads: the six before [`ENTERPRISE_ONLY`].
const EXCHANGE_ONLY: &[&str] = OAUTH_KNOWN
    .split_at(OAUTH_KNOWN.len() - 4)
    .0
    .split_at(OAUTH_KNOWN.len() - 10)
    .1;

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
        Some("per_user") => OAuthMode::PerUser,
        Some("exchange") => OAuthMode::Exchange,
        Some("enterprise") => OAuthMode::Enterprise,
        Some(other) => {
            f.err(
                "mode",
                format!(
                    "unknown mode {other:?} (shared, client_credentials, per_user, exchange or enterprise)"
                ),
            );
            OAuthMode::Shared
        }
    };
    let client_id = f.string("client_id");
    let client_secret = f.expanded("client_secret", env);
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
    let exchange = load_exchange(
        f,
        mode,
        client_id.is_some(),
        client_secret.is_some() || private_key_file.is_some(),
    );
    let enterprise = load_enterprise(f, mode, home, env, client_id.is_some());
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
        exchange,
        enterprise,
    })
}

/// The identity provider's side of `"mode": "enterprise"`; with another mode, each of its
/// settings is an error.
fn load_enterprise(
    f: &mut Fields,
    mode: OAuthMode,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    has_client: bool,
) -> Option<EnterpriseAuth> {
    if mode != OAuthMode::Enterprise {
        for key in ENTERPRISE_ONLY {
            if f.obj.get(*key).is_some_and(|v| !v.is_null()) {
                f.err(key, "is read only with mode enterprise");
            }
        }
        return None;
    }
    let idp_token_endpoint = f.required_string("idp_token_endpoint");
    let url =
        idp_token_endpoint.starts_with("https://") || idp_token_endpoint.starts_with("http://");
    if !idp_token_endpoint.is_empty() && !url {
        f.err(
            "idp_token_endpoint",
            "must be an https:// (or loopback http://) URL",
        );
    }
    let idp_client_secret = f.expanded("idp_client_secret", env);
    let idp_client_id = f.string("idp_client_id");
    if idp_client_secret.is_some() && idp_client_id.is_none() {
        f.err("idp_client_id", "is required with an idp_client_secret");
    }
    let file = f.required_string("identity_assertion_file");
    let identity_assertion_file = home.join(&file);
    if !file.is_empty() && !identity_assertion_file.is_file() {
        f.err(
            "identity_assertion_file",
            format!("{} is not a file", identity_assertion_file.display()),
        );
    }
    if !has_client {
        f.err(
            "client_id",
            "is required with mode enterprise (the client the authorization server knows, named in the ID-JAG)",
        );
    }
    Some(EnterpriseAuth {
        idp_token_endpoint,
        idp_client_id,
        idp_client_secret,
        identity_assertion_file,
    })
}

/// The exchange settings of `"mode": "exchange"`; with another mode, each of them is an error.
fn load_exchange(
    f: &mut Fields,
    mode: OAuthMode,
    has_client: bool,
    has_credentials: bool,
) -> Option<TokenExchange> {
    if mode != OAuthMode::Exchange {
        for key in EXCHANGE_ONLY {
            if f.obj.get(*key).is_some_and(|v| !v.is_null()) {
                f.err(key, "is read only with mode exchange");
            }
        }
        return None;
    }
    let token_endpoint = f.required_string("token_endpoint");
    let url = token_endpoint.starts_with("https://") || token_endpoint.starts_with("http://");
    if !token_endpoint.is_empty() && !url {
        f.err(
            "token_endpoint",
            "must be an https:// (or loopback http://) URL",
        );
    }
    let audience = f.string("audience");
    let resource = f.string("resource");
    let requested_token_type = f
        .string("requested_token_type")
        .unwrap_or_else(|| ACCESS_TOKEN_TYPE.to_string());
    let subject_token_type = f
        .string("subject_token_type")
        .unwrap_or_else(|| ACCESS_TOKEN_TYPE.to_string());
    for (key, v) in [
        ("requested_token_type", &requested_token_type),
        ("subject_token_type", &subject_token_type),
    ] {
        if !v.starts_with("urn:") {
            f.err(
                key,
                "must be a token type URI (urn:ietf:params:oauth:token-type:…)",
            );
        }
    }
    let actor = f.bool("actor", false);
    if !has_client {
        f.err(
            "client_id",
            "is required with mode exchange (the gateway authenticates at the token endpoint)",
        );
    }
    if actor && !has_credentials {
        f.err(
            "actor",
            "needs a client_secret or a private_key_file (the actor token is the gateway's own, by the client credentials grant)",
        );
    }
    Some(TokenExchange {
        token_endpoint,
        audience,
        resource,
        requested_token_type,
        subject_token_type,
        actor,
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

#[cfg(test)]
mod tests {
    use super::{OAuthMode, ACCESS_TOKEN_TYPE};
    use crate::Config;
    use serde_json::{json, Value};
    use std::path::PathBuf;

    const KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";

    /// A tree with a vault, `upstream`'s `oauth` and (when given) `auth/auth.config.json`.
    fn tree(label: &str, oauth: Value, auth: Option<Value>) -> PathBuf {
        let home = std::env::temp_dir().join(format!(
            "sluice-oauth-config-{label}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join("mcp")).unwrap();
        std::fs::write(
            home.join("sluice.json"),
            json!({"vault": {"key": "${env:K}"}}).to_string(),
        )
        .unwrap();
        let expose = json!({"version": 1, "upstreams": [
            {"id": "plain", "command": "x"},
            {"id": "x", "transport": "http", "url": "https://mcp.example.com/mcp", "oauth": oauth}
        ]});
        std::fs::write(home.join("mcp/expose.json"), expose.to_string()).unwrap();
        if let Some(a) = auth {
            std::fs::create_dir_all(home.join("auth")).unwrap();
            std::fs::write(home.join("auth/auth.config.json"), a.to_string()).unwrap();
        }
        home
    }

    fn load(home: &PathBuf) -> Result<Config, Vec<String>> {
        let r = Config::load(home, &|_| Some(KEY.to_string()))
            .map(|(c, _)| c)
            .map_err(|e| e.0.iter().map(ToString::to_string).collect());
        let _ = std::fs::remove_dir_all(home);
        r
    }

    fn tokens() -> Value {
        json!({"enabled": true, "tokens": [{"name": "alice", "sha256": "a".repeat(64)}]})
    }

    fn jwt() -> Value {
        json!({"enabled": true, "issuer": "https://idp.example.com",
               "jwks_url": "https://idp.example.com/jwks"})
    }

    #[test]
    fn per_user_and_exchange_need_principals() {
        let file = |home: &PathBuf| home.join("mcp/expose.json").display().to_string();
        let home = tree("pu-none", json!({"mode": "per_user"}), None);
        let f = file(&home);
        assert_eq!(
            load(&home).unwrap_err(),
            [format!(
                "{f}: upstreams[1].oauth.mode: upstream \"x\": oauth.mode \"per_user\" needs principals: add auth/auth.config.json (with \"enabled\": true)"
            )]
        );
        let home = tree("pu-tokens", json!({"mode": "per_user"}), Some(tokens()));
        let c = load(&home).unwrap();
        assert_eq!(
            c.expose.upstreams[1].oauth.as_ref().unwrap().mode,
            OAuthMode::PerUser
        );
        let ex = json!({"mode": "exchange", "client_id": "gw", "client_secret": "s",
                        "token_endpoint": "https://idp.example.com/token"});
        let home = tree("ex-none", ex.clone(), None);
        let f = file(&home);
        assert_eq!(
            load(&home).unwrap_err(),
            [format!(
                "{f}: upstreams[1].oauth.mode: upstream \"x\": oauth.mode \"exchange\" needs principals: add auth/auth.config.json (with \"enabled\": true)"
            )]
        );
        // Static tokens are principals, but there is no identity provider's token to exchange.
        let home = tree("ex-tokens", ex.clone(), Some(tokens()));
        let f = file(&home);
        assert_eq!(
            load(&home).unwrap_err(),
            [format!(
                "{f}: upstreams[1].oauth.mode: upstream \"x\": oauth.mode \"exchange\" needs the clients' own tokens from an identity provider: add issuer and jwks_url (or jwks_file) to auth/auth.config.json"
            )]
        );
        let home = tree("ex-jwt", ex, Some(jwt()));
        let c = load(&home).unwrap();
        let o = c.expose.upstreams[1].oauth.clone().unwrap();
        assert_eq!(o.mode, OAuthMode::Exchange);
        let e = o.exchange.unwrap();
        assert_eq!(e.token_endpoint, "https://idp.example.com/token");
        assert_eq!(e.requested_token_type, ACCESS_TOKEN_TYPE);
        assert_eq!(e.subject_token_type, ACCESS_TOKEN_TYPE);
        assert!(!e.actor);
        assert_eq!(e.audience, None);
    }

    #[test]
    fn exchange_fields_are_checked() {
        let home = tree(
            "ex-bad",
            json!({"mode": "exchange", "actor": true, "audience": "crm",
                   "requested_token_type": "jwt"}),
            Some(jwt()),
        );
        let f = home.join("mcp/expose.json").display().to_string();
        let errors = load(&home).unwrap_err();
        for want in [
            "upstreams[1].oauth.token_endpoint: is required",
            "upstreams[1].oauth.requested_token_type: must be a token type URI (urn:ietf:params:oauth:token-type:…)",
            "upstreams[1].oauth.client_id: is required with mode exchange (the gateway authenticates at the token endpoint)",
            "upstreams[1].oauth.actor: needs a client_secret or a private_key_file (the actor token is the gateway's own, by the client credentials grant)",
        ] {
            assert!(
                errors.contains(&format!("{f}: {want}")),
                "{want} not in {errors:#?}"
            );
        }
        // The exchange's fields with another mode are mistakes, not silently ignored.
        let home = tree(
            "pu-extra",
            json!({"mode": "per_user", "audience": "crm"}),
            Some(tokens()),
        );
        let f = home.join("mcp/expose.json").display().to_string();
        assert_eq!(
            load(&home).unwrap_err(),
            [format!(
                "{f}: upstreams[1].oauth.audience: is read only with mode exchange"
            )]
        );
        let home = tree("mode", json!({"mode": "personal"}), Some(tokens()));
        let f = home.join("mcp/expose.json").display().to_string();
        assert_eq!(
            load(&home).unwrap_err(),
            [format!(
                "{f}: upstreams[1].oauth.mode: unknown mode \"personal\" (shared, client_credentials, per_user, exchange or enterprise)"
            )]
        );
        let home = tree(
            "ex-full",
            json!({"mode": "exchange", "client_id": "gw", "client_secret": "s", "actor": true,
                   "token_endpoint": "http://127.0.0.1:9/token", "audience": "crm",
                   "resource": "https://mcp.example.com/mcp", "scopes": ["crm.read"],
                   "subject_token_type": "urn:ietf:params:oauth:token-type:jwt"}),
            Some(jwt()),
        );
        let e = load(&home).unwrap().expose.upstreams[1]
            .oauth
            .clone()
            .unwrap()
            .exchange
            .unwrap();
        assert!(e.actor);
        assert_eq!(e.audience.as_deref(), Some("crm"));
        assert_eq!(e.resource.as_deref(), Some("https://mcp.example.com/mcp"));
        assert_eq!(e.subject_token_type, "urn:ietf:params:oauth:token-type:jwt");
    }

    #[test]
    fn enterprise_fields_are_checked() {
        let home = tree(
            "ent-bad",
            json!({"mode": "enterprise", "idp_client_secret": "s"}),
            None,
        );
        let f = home.join("mcp/expose.json").display().to_string();
        let errors = load(&home).unwrap_err();
        for want in [
            "upstreams[1].oauth.idp_token_endpoint: is required",
            "upstreams[1].oauth.identity_assertion_file: is required",
            "upstreams[1].oauth.idp_client_id: is required with an idp_client_secret",
            "upstreams[1].oauth.client_id: is required with mode enterprise (the client the authorization server knows, named in the ID-JAG)",
        ] {
            assert!(
                errors.contains(&format!("{f}: {want}")),
                "{want} not in {errors:#?}"
            );
        }
        let home = tree(
            "ent-extra",
            json!({"mode": "shared", "idp_token_endpoint": "https://idp.example.com/token"}),
            None,
        );
        let f = home.join("mcp/expose.json").display().to_string();
        assert_eq!(
            load(&home).unwrap_err(),
            [format!(
                "{f}: upstreams[1].oauth.idp_token_endpoint: is read only with mode enterprise"
            )]
        );
        // No principals needed: the identity is the gateway's own assertion.
        let home = tree(
            "ent-ok",
            json!({"mode": "enterprise", "client_id": "c", "client_secret": "s",
                   "idp_token_endpoint": "https://idp.example.com/token", "idp_client_id": "i",
                   "identity_assertion_file": "id-token"}),
            None,
        );
        std::fs::write(home.join("id-token"), "eyJ.x.y").unwrap();
        let o = load(&home).unwrap().expose.upstreams[1]
            .oauth
            .clone()
            .unwrap();
        assert_eq!(o.mode, OAuthMode::Enterprise);
        let e = o.enterprise.unwrap();
        assert_eq!(e.idp_client_id.as_deref(), Some("i"));
        assert!(e.identity_assertion_file.ends_with("id-token"));
        assert!(o.exchange.is_none());
    }
}
