//! Sluice's configuration tree: the data model of a home folder (`mcp/expose.json`,
//! `sluice.json`, …), loading that collects every error before failing, and validation.
//!
//! The main types are [`Config`] (a loaded tree), [`UpstreamSpec`] (one upstream MCP server),
//! [`ExposeEntry`] (one curated tool), [`Settings`] (server settings) and [`ConfigError`]
//! (one problem, with file and field).

mod auth;
pub mod builtin;
pub mod claude_import;
pub mod claude_plugin;
mod cluster;
pub mod collisions;
pub mod endpoints;
mod error;
mod expose;
mod fields;
mod hooks;
mod logs;
pub mod manage;
mod oauth;
mod overload;
pub mod pins;
mod sandbox;
pub mod schema;
mod settings;
pub mod skill_paths;
pub mod store;
pub mod tools;

pub use auth::{
    AccessRule, AuthConfig, BrowserSignIn, Effect, JwksSource, OAuth, StaticToken,
    DEFAULT_ALGORITHMS,
};
pub use builtin::{BuiltinOptions, ExplainOptions, OptionError, BUILTINS, EXPLAIN_PRESETS};
pub use cluster::ClusterSettings;
pub use collisions::{Collisions, Listed};
pub use endpoints::{Endpoint, EndpointsFile, Selection};
pub use error::{ConfigError, ConfigErrors};
pub use expose::{Era, ExposeEntry, ExposeFile, Isolation, OnCollision, Transport, UpstreamSpec};
pub use hooks::{
    is_name_list, AskFallback, ClaudeSettings, HookEventKind, HookKindSpec, HookSpec, HooksFile,
    HttpProtocol, OnError, OnFailure, ToolNameForm, PERMISSION_MODES,
};
pub use logs::LogConfig;
pub use oauth::{
    EnterpriseAuth, OAuthMode, TokenExchange, UpstreamOAuth, VaultSettings, ACCESS_TOKEN_TYPE,
};
pub use overload::OverloadSettings;
pub use sandbox::{FsRules, HostPort, Network, Sandbox};
pub use schema::FileKind;
pub use settings::{Discovery, Settings, TelemetrySettings};
pub use skill_paths::SkillEntry;

use std::path::{Path, PathBuf};

/// A loaded configuration tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The home folder the tree was read from (absolute).
    pub home: PathBuf,
    /// `sluice.json`: server settings.
    pub settings: Settings,
    /// `mcp/expose.json`: upstreams and curated tools.
    pub expose: ExposeFile,
    /// `hooks/hooks.manifest.json` with its overlay: the hook chain.
    pub hooks: HooksFile,
    /// `logs/log.config.json`: the audit log.
    pub logs: LogConfig,
    /// `tools/tools.register.json` with its overlay: first-party tools.
    pub register: tools::Register,
    /// `auth/auth.config.json`: authentication and access rules.
    pub auth: AuthConfig,
    /// `mcp/endpoints.json`: the endpoints served at `/mcp/<name>` (none without the file).
    pub endpoints: EndpointsFile,
    /// `mcp/pins.json`: the approved definitions of what upstreams offer.
    pub pins: pins::PinFile,
}

/// Non-fatal findings of a load (shown by `sluice check` and logged at start).
pub type Warnings = Vec<String>;

/// `per_user` and `exchange` keep a grant or a token per principal: without authentication
/// there is no principal to keep them under, and `exchange` needs the clients' own tokens from
/// an identity provider.
fn principals_needed(
    home: &Path,
    expose: &ExposeFile,
    auth: &AuthConfig,
    errors: &mut Vec<ConfigError>,
) {
    for (i, u) in expose.upstreams.iter().enumerate() {
        let Some(mode) = u.oauth.as_ref().map(|o| o.mode) else {
            continue;
        };
        let why = match mode {
            OAuthMode::PerUser | OAuthMode::Exchange if !auth.enabled => format!(
                "upstream {:?}: oauth.mode {:?} needs principals: add auth/auth.config.json (with \"enabled\": true)",
                u.id,
                mode.name()
            ),
            OAuthMode::Exchange if auth.oauth.is_none() => format!(
                "upstream {:?}: oauth.mode \"exchange\" needs the clients' own tokens from an identity provider: add issuer and jwks_url (or jwks_file) to auth/auth.config.json",
                u.id
            ),
            _ => continue,
        };
        errors.push(ConfigError::new(
            &home.join("mcp").join("expose.json"),
            format!("upstreams[{i}].oauth.mode"),
            why,
        ));
    }
}

impl Config {
    /// Load the tree under `home`, collecting every error. `env` resolves `${env:NAME}`.
    pub fn load(
        home: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(Config, Warnings), ConfigErrors> {
        let home = std::path::absolute(home).unwrap_or_else(|_| home.to_path_buf());
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        if !home.is_dir() {
            return Err(ConfigErrors(vec![ConfigError::new(
                &home,
                "",
                "the home folder does not exist",
            )]));
        }
        let settings = settings::load(&home.join("sluice.json"), env, &mut errors);
        let expose = expose::load(&home, env, &mut errors, &mut warnings);
        let hooks = hooks::load(&home, env, &mut errors, &mut warnings);
        let logs = logs::load(&home, &mut errors);
        let register = tools::load(&home, &mut errors);
        let auth = auth::load(&home, env, &mut errors);
        let endpoints = endpoints::load(&home, &expose, &hooks, env, &mut errors, &mut warnings);
        if settings.vault.is_none() {
            if let Some(u) = expose.upstreams.iter().find(|u| u.oauth.is_some()) {
                errors.push(ConfigError::new(
                    &home.join("sluice.json"),
                    "vault",
                    format!(
                        "is required: upstream {:?} signs in with oauth, and its grant is kept sealed in the vault (\"vault\": {{\"key\": \"${{env:SLUICE_VAULT_KEY}}\"}}; `sluice vault keygen` prints a key)",
                        u.id
                    ),
                ));
            }
        }
        principals_needed(&home, &expose, &auth, &mut errors);
        let pins = pins::PinFile::load(&home).unwrap_or_else(|e| {
            errors.push(e);
            pins::PinFile::default()
        });
        if errors.is_empty() {
            Ok((
                Config {
                    home,
                    settings,
                    expose,
                    hooks,
                    logs,
                    register,
                    auth,
                    endpoints,
                    pins,
                },
                warnings,
            ))
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// The gateway's public base URL (no trailing slash): `public_url`, else the origin of
    /// `auth.resource`, else `http://` + `listen`.
    pub fn public_url(&self) -> String {
        if let Some(u) = &self.settings.public_url {
            return u.trim_end_matches('/').to_string();
        }
        if let Some(r) = &self.auth.resource {
            if let Some(rest) = r.split_once("://") {
                let host = rest.1.split('/').next().unwrap_or("");
                return format!("{}://{host}", rest.0);
            }
        }
        format!("http://{}", self.settings.listen)
    }

    /// A tree with one upstream exposed transparently (every tool under its own name), built
    /// from the command line (`sluice serve --passthrough`). Nothing is read from the working
    /// folder: no register, and the funnel stays off (a `tools/` folder there changes nothing).
    pub fn passthrough(upstream: UpstreamSpec, mut settings: Settings) -> Config {
        settings.funnel.get_or_insert(false);
        Config {
            home: std::env::current_dir().unwrap_or_default(),
            settings,
            expose: ExposeFile {
                upstreams: vec![upstream],
                expose: Vec::new(),
                version: 1,
                // A tree Sluice makes: a collision is an error (with one upstream, only with the
                // gateway's own tools).
                on_collision: OnCollision::Error,
                pins: Default::default(),
                skills: Vec::new(),
            },
            hooks: HooksFile::default(),
            logs: LogConfig::default(),
            register: tools::Register::default(),
            auth: AuthConfig::default(),
            endpoints: EndpointsFile::default(),
            pins: pins::PinFile::default(),
        }
    }
}
