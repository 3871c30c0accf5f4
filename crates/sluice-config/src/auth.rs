//! `auth/auth.config.json`: who may use the MCP listener (static tokens stored as hashes, the
//! OAuth 2.1 resource server) and what each caller may see and call (access rules).
//!
//! Off by default (and then the listener stays on loopback). Unknown keys are errors: a typo in
//! a security setting must not silently weaken it.

use crate::error::ConfigError;
use crate::fields::{entry, read_object, Fields};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The authentication and authorization settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AuthConfig {
    /// Authenticate every request on the MCP listener. Default false.
    pub enabled: bool,
    /// The canonical resource URI of the MCP endpoint (RFC 8707 / RFC 9728 `resource`); a JWT's
    /// `aud` must name it unless `audience` says otherwise. Default `http://<listen>/mcp`.
    pub resource: Option<String>,
    /// Authorization servers advertised in the protected-resource metadata.
    pub authorization_servers: Vec<String>,
    /// Scopes every request needs (403 `insufficient_scope` without them).
    pub required_scopes: Vec<String>,
    /// Scopes advertised in the metadata (default: `required_scopes`).
    pub scopes_supported: Vec<String>,
    /// JWT validation, when an issuer is configured.
    pub oauth: Option<OAuth>,
    /// Static bearer tokens / API keys, stored as SHA-256 hashes.
    pub tokens: Vec<StaticToken>,
    /// Access rules over tools, prompts and resources.
    pub rules: Vec<AccessRule>,
}

/// How JWT access tokens are checked.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuth {
    /// The required `iss`.
    pub issuer: String,
    /// The accepted `aud` values (default: the resource URI).
    pub audience: Vec<String>,
    /// Where the signing keys come from.
    pub jwks: JwksSource,
    /// Accepted signature algorithms. Default RS256, RS384, RS512, PS256, PS384, PS512, ES256,
    /// ES384, EdDSA (never `none`, never HMAC: a resource server has no shared secret).
    pub algorithms: Vec<String>,
    /// Clock leeway for `exp` / `nbf`, seconds. Default 30.
    pub leeway_seconds: u64,
    /// How long a fetched key set is trusted before it is fetched again, seconds. Default 300.
    /// A token naming an unknown `kid` triggers an early refetch (at most one per 10 s).
    pub jwks_cache_seconds: u64,
    /// Sign a person's browser in at the issuer (OpenID Connect) before a connect link is used,
    /// so that only the principal the link was made for can connect an account with it.
    pub browser_sign_in: Option<BrowserSignIn>,
}

/// The gateway's client at its identity provider, for signing browsers in (OpenID Connect
/// authorization code flow with PKCE and a nonce; the ID token's `sub` is compared with the
/// principal's).
#[derive(Clone, PartialEq)]
pub struct BrowserSignIn {
    /// The client registered at the issuer (its redirect URI: `<public_url>/oauth/signed-in`).
    pub client_id: String,
    /// Its secret (`${env:NAME}` expanded); without one it is a public client.
    pub client_secret: Option<String>,
    /// Scopes asked for (default `openid`; `openid` is always sent).
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for BrowserSignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserSignIn")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[hidden]"),
            )
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// A key-set location.
#[derive(Debug, Clone, PartialEq)]
pub enum JwksSource {
    /// Fetched over HTTP(S) (plain HTTP only for loopback hosts).
    Url(String),
    /// A JWKS JSON file (relative paths resolve under the home folder); re-read when it changes.
    File(PathBuf),
}

/// The algorithms accepted when `algorithms` is not given.
pub const DEFAULT_ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// One static token.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticToken {
    /// The principal name the token stands for.
    pub name: String,
    /// Lowercase hex SHA-256 of the token.
    pub sha256: String,
    /// The scopes it grants.
    pub scopes: Vec<String>,
}

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The matching callers may.
    Allow,
    /// The matching callers may not.
    Deny,
}

/// One access rule: what it selects, and which callers it is about.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessRule {
    /// Allow or deny.
    pub effect: Effect,
    /// Tool-name globs (client-facing names).
    pub tools: Vec<String>,
    /// Prompt-name globs.
    pub prompts: Vec<String>,
    /// Resource URI (or URI template) globs.
    pub resources: Vec<String>,
    /// Principal id globs (empty: any caller).
    pub principals: Vec<String>,
    /// Scopes the caller must all hold.
    pub scopes: Vec<String>,
    /// Claims the caller's token must carry: a string claim must equal the value; an array
    /// claim must contain it; a list of values means any of them.
    pub claims: Map<String, Value>,
}

/// The keys the loader accepts (`$schema` first); `sluice schema auth` lists the same.
pub(crate) const KNOWN: &[&str] = &[
    "$schema",
    "enabled",
    "resource",
    "authorization_servers",
    "required_scopes",
    "scopes_supported",
    "issuer",
    "audience",
    "jwks_url",
    "jwks_file",
    "algorithms",
    "leeway_seconds",
    "jwks_cache_seconds",
    "browser_sign_in",
    "tokens",
    "rules",
];

/// The keys of `browser_sign_in`.
pub(crate) const SIGN_IN_KEYS: &[&str] = &["client_id", "client_secret", "scopes"];

pub(crate) const ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// The keys of a `tokens[]` entry.
pub(crate) const TOKEN_KEYS: &[&str] = &["name", "sha256", "scopes"];

/// Load `auth/auth.config.json` under `home` (absent: authentication off).
pub(crate) fn load(
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
) -> AuthConfig {
    let file = home.join("auth").join("auth.config.json");
    let Some(obj) = read_object(&file, errors) else {
        return AuthConfig::default();
    };
    parse(&file, home, &obj, env, errors)
}

/// `browser_sign_in`, when present and an object.
fn sign_in(f: &mut Fields<'_>, env: &dyn Fn(&str) -> Option<String>) -> Option<BrowserSignIn> {
    let o = match f.obj.get("browser_sign_in") {
        None | Some(Value::Null) => return None,
        Some(Value::Object(o)) => o,
        Some(_) => {
            f.err("browser_sign_in", "must be an object");
            return None;
        }
    };
    let mut s = Fields {
        file: f.file,
        path: f.field_path("browser_sign_in"),
        obj: o,
        errors: &mut *f.errors,
    };
    for key in o.keys() {
        if !SIGN_IN_KEYS.contains(&key.as_str()) {
            s.err(
                key,
                format!("unknown field (known: {})", SIGN_IN_KEYS.join(", ")),
            );
        }
    }
    let client_id = s.required_string("client_id");
    let client_secret = s.expanded("client_secret", env);
    let mut scopes = s.strings("scopes");
    if !scopes.iter().any(|x| x == "openid") {
        scopes.insert(0, "openid".into());
    }
    (!client_id.is_empty()).then_some(BrowserSignIn {
        client_id,
        client_secret,
        scopes,
    })
}

fn parse(
    file: &Path,
    home: &Path,
    obj: &Map<String, Value>,
    env: &dyn Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
) -> AuthConfig {
    for key in obj.keys() {
        if !KNOWN.contains(&key.as_str()) {
            errors.push(ConfigError::new(
                file,
                key.as_str(),
                format!("unknown setting (known: {})", KNOWN[1..].join(", ")),
            ));
        }
    }
    let mut f = Fields {
        file,
        path: String::new(),
        obj,
        errors,
    };
    let enabled = f.bool("enabled", false);
    let resource = f.string("resource");
    if let Some(r) = &resource {
        if !(r.starts_with("https://") || r.starts_with("http://")) || r.contains('#') {
            f.err(
                "resource",
                "must be an absolute http(s) URI without a fragment",
            );
        }
    }
    let authorization_servers = f.strings("authorization_servers");
    let required_scopes = f.strings("required_scopes");
    let mut scopes_supported = f.strings("scopes_supported");
    if scopes_supported.is_empty() {
        scopes_supported = required_scopes.clone();
    }
    let issuer = f.string("issuer");
    let audience = match obj.get("audience") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(_) => f.strings("audience"),
    };
    let jwks_url = f.string("jwks_url");
    let jwks_file = f.string("jwks_file");
    let algorithms = f.strings("algorithms");
    for (i, a) in algorithms.iter().enumerate() {
        if !ALGORITHMS.contains(&a.as_str()) {
            f.err(
                &format!("algorithms[{i}]"),
                format!(
                    "unsupported algorithm {a:?} (supported: {}; never none or HMAC)",
                    ALGORITHMS.join(", ")
                ),
            );
        }
    }
    let leeway_seconds = f.u64("leeway_seconds").unwrap_or(30);
    let jwks_cache_seconds = f.u64("jwks_cache_seconds").unwrap_or(300);
    let browser_sign_in = sign_in(&mut f, env);
    let jwks = match (&jwks_url, &jwks_file) {
        (Some(_), Some(_)) => {
            f.err("jwks_file", "give jwks_url or jwks_file, not both");
            None
        }
        (Some(u), None) => {
            if !jwks_url_allowed(u) {
                f.err(
                    "jwks_url",
                    "must be an https:// URL (http:// only for a loopback host)",
                );
            }
            Some(JwksSource::Url(u.clone()))
        }
        (None, Some(p)) => {
            let p = PathBuf::from(p);
            Some(JwksSource::File(if p.is_absolute() {
                p
            } else {
                home.join(p)
            }))
        }
        (None, None) => None,
    };
    let oauth = match (issuer, jwks) {
        (Some(issuer), Some(jwks)) => Some(OAuth {
            issuer,
            audience,
            jwks,
            algorithms: if algorithms.is_empty() {
                DEFAULT_ALGORITHMS.iter().map(|s| s.to_string()).collect()
            } else {
                algorithms
            },
            leeway_seconds,
            jwks_cache_seconds,
            browser_sign_in,
        }),
        (Some(_), None) => {
            f.err("issuer", "needs jwks_url or jwks_file to check signatures");
            None
        }
        (None, Some(_)) => {
            f.err("jwks_url", "needs issuer (the required iss of every token)");
            None
        }
        (None, None) => {
            if browser_sign_in.is_some() {
                f.err(
                    "browser_sign_in",
                    "needs issuer (browsers sign in at the identity provider that issues the tokens)",
                );
            }
            None
        }
    };
    let token_values = f.array("tokens");
    let rule_values = f.array("rules");
    drop(f);
    let mut tokens: Vec<StaticToken> = Vec::new();
    for (i, v) in token_values.iter().enumerate() {
        let Some(mut t) = entry(file, "tokens", i, v, errors) else {
            continue;
        };
        for key in t.obj.keys() {
            if !TOKEN_KEYS.contains(&key.as_str()) {
                let field = t.field_path(key);
                t.errors.push(ConfigError::new(
                    file,
                    field,
                    "unknown field (known: name, sha256, scopes)",
                ));
            }
        }
        let name = t.required_string("name");
        let sha256 = t.required_string("sha256").to_ascii_lowercase();
        if !sha256.is_empty()
            && (sha256.len() != 64 || !sha256.chars().all(|c| c.is_ascii_hexdigit()))
        {
            t.err(
                "sha256",
                "must be the 64 hex digits of the token's SHA-256 (sluice auth hash TOKEN)",
            );
        }
        let scopes = t.strings("scopes");
        if !name.is_empty() && tokens.iter().any(|o| o.name == name) {
            t.err("name", format!("duplicate token name {name:?}"));
        }
        tokens.push(StaticToken {
            name,
            sha256,
            scopes,
        });
    }
    let mut rules = Vec::new();
    for (i, v) in rule_values.iter().enumerate() {
        if let Some(r) = entry(file, "rules", i, v, errors).and_then(parse_rule) {
            rules.push(r);
        }
    }
    if enabled && oauth.is_none() && tokens.is_empty() {
        errors.push(ConfigError::new(
            file,
            "enabled",
            "authentication is enabled but nothing can authenticate: configure issuer + jwks_url/jwks_file, or tokens",
        ));
    }
    AuthConfig {
        enabled,
        resource,
        authorization_servers,
        required_scopes,
        scopes_supported,
        oauth,
        tokens,
        rules,
    }
}

pub(crate) const RULE_KEYS: &[&str] = &[
    "effect",
    "tools",
    "prompts",
    "resources",
    "principals",
    "scopes",
    "claims",
    "description",
];

pub(crate) fn parse_rule(mut r: Fields<'_>) -> Option<AccessRule> {
    for key in r.obj.keys() {
        if !RULE_KEYS.contains(&key.as_str()) {
            let field = r.field_path(key);
            r.errors.push(ConfigError::new(
                r.file,
                field,
                format!("unknown field (known: {})", RULE_KEYS.join(", ")),
            ));
        }
    }
    let effect = match r.required_string("effect").as_str() {
        "allow" => Some(Effect::Allow),
        "deny" => Some(Effect::Deny),
        "" => None,
        other => {
            r.err(
                "effect",
                format!("must be \"allow\" or \"deny\", not {other:?}"),
            );
            None
        }
    };
    let tools = r.strings("tools");
    let prompts = r.strings("prompts");
    let resources = r.strings("resources");
    if tools.is_empty() && prompts.is_empty() && resources.is_empty() {
        r.err(
            "tools",
            "a rule must select something: tools, prompts or resources (globs)",
        );
    }
    let principals = r.strings("principals");
    let scopes = r.strings("scopes");
    let claims = match r.obj.get("claims") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let ok = match v {
                    Value::String(_) | Value::Bool(_) | Value::Number(_) => true,
                    Value::Array(items) => items
                        .iter()
                        .all(|i| matches!(i, Value::String(_) | Value::Bool(_) | Value::Number(_))),
                    _ => false,
                };
                if !ok {
                    r.err(
                        &format!("claims.{k}"),
                        "must be a string, number, boolean or a list of them",
                    );
                }
            }
            m.clone()
        }
        Some(_) => {
            r.err("claims", "must be an object of claim → value");
            Map::new()
        }
    };
    Some(AccessRule {
        effect: effect?,
        tools,
        prompts,
        resources,
        principals,
        scopes,
        claims,
    })
}

/// `https://…`, or `http://` to a loopback host.
fn jwks_url_allowed(url: &str) -> bool {
    if url.starts_with("https://") {
        return true;
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split(['/', '?']).next().unwrap_or("");
    if host == "localhost" || host.starts_with("localhost:") {
        return true;
    }
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host),
    };
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_json(v: Value) -> (AuthConfig, Vec<String>) {
        let mut errors = Vec::new();
        let file = PathBuf::from("/h/auth/auth.config.json");
        let env = |k: &str| (k == "IDP_SECRET").then(|| "s3cret".to_string());
        let cfg = parse(
            &file,
            Path::new("/h"),
            v.as_object().unwrap(),
            &env,
            &mut errors,
        );
        (
            cfg,
            errors
                .iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect(),
        )
    }

    #[test]
    fn a_full_file_parses() {
        let (cfg, errors) = parse_json(json!({
            "enabled": true,
            "resource": "https://mcp.example.com/mcp",
            "authorization_servers": ["https://auth.example.com"],
            "required_scopes": ["mcp"],
            "issuer": "https://auth.example.com",
            "jwks_file": "auth/jwks.json",
            "tokens": [{"name": "ci", "sha256": "A".repeat(64), "scopes": ["mcp"]}],
            "rules": [{"effect": "deny", "tools": ["fx_*"], "claims": {"team": ["ops", "dev"]}}]
        }));
        assert_eq!(errors, Vec::<String>::new());
        assert!(cfg.enabled);
        assert_eq!(cfg.scopes_supported, vec!["mcp"]);
        let oauth = cfg.oauth.unwrap();
        assert_eq!(
            oauth.jwks,
            JwksSource::File(PathBuf::from("/h/auth/jwks.json"))
        );
        assert_eq!(oauth.leeway_seconds, 30);
        assert_eq!(oauth.algorithms.len(), DEFAULT_ALGORITHMS.len());
        assert_eq!(cfg.tokens[0].sha256, "a".repeat(64));
        assert_eq!(cfg.rules[0].effect, Effect::Deny);
    }

    #[test]
    fn browser_sign_in_always_asks_for_openid_and_needs_an_issuer() {
        let (cfg, errors) = parse_json(json!({
            "enabled": true,
            "issuer": "https://auth.example.com",
            "jwks_file": "auth/jwks.json",
            "browser_sign_in": {"client_id": "sluice", "client_secret": "${env:IDP_SECRET}", "scopes": ["profile"]}
        }));
        assert_eq!(errors, Vec::<String>::new());
        let s = cfg.oauth.clone().unwrap().browser_sign_in.unwrap();
        assert_eq!(
            (s.client_id.as_str(), s.client_secret.as_deref(), s.scopes),
            (
                "sluice",
                Some("s3cret"),
                vec!["openid".into(), "profile".into()]
            )
        );
        assert!(!format!("{:?}", cfg.oauth).contains("s3cret"));
        let (_, errors) = parse_json(json!({
            "tokens": [{"name": "ci", "sha256": "A".repeat(64)}],
            "browser_sign_in": {"client_id": "sluice", "secret": "x"}
        }));
        assert_eq!(
            errors,
            vec![
                "browser_sign_in.secret: unknown field (known: client_id, client_secret, scopes)",
                "browser_sign_in: needs issuer (browsers sign in at the identity provider that issues the tokens)"
            ]
        );
    }

    #[test]
    fn every_mistake_is_named() {
        let (_, errors) = parse_json(json!({
            "enabled": true,
            "isuer": "x",
            "resource": "mcp.example.com",
            "issuer": "https://a",
            "jwks_url": "http://auth.example.com/jwks",
            "algorithms": ["HS256", "none"],
            "tokens": [{"name": "a", "sha256": "zz"}, {"name": "a", "sha256": "b".repeat(64), "scope": []}],
            "rules": [{"effect": "maybe", "tools": ["x"]}, {"effect": "allow"}, 3]
        }));
        assert_eq!(
            errors,
            vec![
                "isuer: unknown setting (known: enabled, resource, authorization_servers, required_scopes, scopes_supported, issuer, audience, jwks_url, jwks_file, algorithms, leeway_seconds, jwks_cache_seconds, browser_sign_in, tokens, rules)",
                "resource: must be an absolute http(s) URI without a fragment",
                "algorithms[0]: unsupported algorithm \"HS256\" (supported: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA; never none or HMAC)",
                "algorithms[1]: unsupported algorithm \"none\" (supported: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA; never none or HMAC)",
                "jwks_url: must be an https:// URL (http:// only for a loopback host)",
                "tokens[0].sha256: must be the 64 hex digits of the token's SHA-256 (sluice auth hash TOKEN)",
                "tokens[1].scope: unknown field (known: name, sha256, scopes)",
                "tokens[1].name: duplicate token name \"a\"",
                "rules[0].effect: must be \"allow\" or \"deny\", not \"maybe\"",
                "rules[1].tools: a rule must select something: tools, prompts or resources (globs)",
                "rules[2]: must be an object",
            ]
        );
    }

    #[test]
    fn enabled_needs_a_way_to_authenticate() {
        let (_, errors) = parse_json(json!({"enabled": true}));
        assert_eq!(errors, vec!["enabled: authentication is enabled but nothing can authenticate: configure issuer + jwks_url/jwks_file, or tokens"]);
        let (cfg, errors) = parse_json(json!({"enabled": false}));
        assert!(errors.is_empty() && !cfg.enabled);
        assert!(jwks_url_allowed("http://127.0.0.1:9/jwks"));
        assert!(jwks_url_allowed("http://localhost/jwks"));
        assert!(!jwks_url_allowed("http://127.example.com/jwks"));
    }
}
