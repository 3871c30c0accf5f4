//! An upstream's OAuth identity built from its configuration: the client settings, the
//! redirect URI and client ID metadata document under the gateway's public URL, the signing key
//! of `private_key_jwt`, and the "needs login" hint that names the command to run.

use sluice_config::{OAuthMode, UpstreamSpec};
use sluice_oauth::{ClientSettings, Fetcher, Identity, IdentityConfig, Mode, SigningKey};
use sluice_vault::Vault;
use std::path::PathBuf;
use std::sync::Arc;

/// Why an upstream's OAuth identity could not be made.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The `private_key_jwt` key file could not be read.
    #[error("cannot read the private key {}: {source}", path.display())]
    ReadKey {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The key file does not hold a usable key.
    #[error("{}: {source}", path.display())]
    BadKey {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: sluice_oauth::AuthError,
    },
    /// The upstream signs in with `oauth` and the gateway has no vault to keep grants in.
    #[error("it signs in with oauth and no vault is configured")]
    NoVault,
}

/// The path of the OAuth callback under the public URL.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// The path of the client ID metadata document under the public URL.
pub const CLIENT_METADATA_PATH: &str = "/oauth/client-metadata.json";

/// What every upstream identity of a gateway shares.
#[derive(Clone)]
pub struct OAuthContext {
    /// Where grants and registrations are kept.
    pub vault: Vault,
    /// The bounded HTTP client of discovery and the token endpoint.
    pub fetcher: Fetcher,
    /// The gateway's public base URL (no trailing slash).
    pub public_url: String,
    /// The home folder, for the hint (`--home DIR`), when not the default.
    pub home_hint: Option<String>,
}

impl OAuthContext {
    /// The redirect URI every sign-in of this gateway uses.
    pub fn redirect_uri(&self) -> String {
        format!("{}{CALLBACK_PATH}", self.public_url)
    }

    /// The URL of this gateway's client ID metadata document, when the public URL is https
    /// (an authorization server fetches it).
    pub fn metadata_url(&self) -> Option<String> {
        self.public_url
            .starts_with("https://")
            .then(|| format!("{}{CLIENT_METADATA_PATH}", self.public_url))
    }

    /// The client settings of `spec`'s identity.
    pub fn client_settings(&self, spec: &UpstreamSpec) -> ClientSettings {
        let o = spec.oauth.as_ref();
        ClientSettings {
            client_id: o.and_then(|o| o.client_id.clone()),
            client_secret: o.and_then(|o| o.client_secret.clone()),
            issuer: o.and_then(|o| o.issuer.clone()),
            auth_method: o.and_then(|o| o.token_endpoint_auth.clone()),
            metadata_url: o
                .and_then(|o| o.client_metadata_url.clone())
                .or_else(|| self.metadata_url()),
            client_name: "Sluice MCP gateway".into(),
            redirect_uri: self.redirect_uri(),
        }
    }
}

/// The grant key of an upstream's shared identity in the vault.
pub fn grant_key(upstream: &str) -> String {
    format!("upstream:{upstream}")
}

/// The identity of `spec` (None: it has no `oauth`). Err: its key file does not load.
pub fn identity_for(
    spec: &UpstreamSpec,
    ctx: &OAuthContext,
) -> Result<Option<Arc<Identity>>, IdentityError> {
    let Some(o) = &spec.oauth else {
        return Ok(None);
    };
    let signing_key = match &o.private_key_file {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| IdentityError::ReadKey {
                path: path.clone(),
                source: e,
            })?;
            Some(
                SigningKey::from_pem(&pem, o.signing_alg.as_deref(), None).map_err(|source| {
                    IdentityError::BadKey {
                        path: path.clone(),
                        source,
                    }
                })?,
            )
        }
        None => None,
    };
    let mode = match o.mode {
        OAuthMode::Shared => Mode::Person {
            hint: match &ctx.home_hint {
                Some(h) => format!("run sluice upstream login {} --home {h}", spec.id),
                None => format!("run sluice upstream login {}", spec.id),
            },
        },
        OAuthMode::ClientCredentials => Mode::ClientCredentials,
        // The shared identity of a per-user upstream lists its tools (an operator's login);
        // each user's own grant is `PerUser`'s.
        OAuthMode::PerUser => Mode::Person {
            hint: match &ctx.home_hint {
                Some(h) => format!(
                    "run sluice upstream login {} --home {h} (the login that lists its tools; each user connects their own account)",
                    spec.id
                ),
                None => format!(
                    "run sluice upstream login {} (the login that lists its tools; each user connects their own account)",
                    spec.id
                ),
            },
        },
        // No identity of its own: every token is a principal's, exchanged (`Exchanger`).
        OAuthMode::Exchange => return Ok(None),
    };
    let mut client = ctx.client_settings(spec);
    if o.mode == OAuthMode::ClientCredentials
        && signing_key.is_some()
        && client.auth_method.is_none()
    {
        client.auth_method = Some("private_key_jwt".into());
    }
    Ok(Some(Identity::new(
        IdentityConfig {
            server_url: spec.url.clone(),
            grant_key: grant_key(&spec.id),
            client,
            scopes: o.scopes.clone(),
            mode,
            signing_key,
        },
        ctx.fetcher.clone(),
        ctx.vault.clone(),
        None,
    )))
}
