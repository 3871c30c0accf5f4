//! Who Sluice is to an authorization server: a pre-registered client, a client ID metadata
//! document (its URL is the `client_id`), or a client registered dynamically (RFC 7591).
//! Registrations are kept per issuer and redirect URI, and never shown to another issuer.

use crate::discovery::AuthServer;
use crate::error::AuthError;
use crate::fetch::Fetcher;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sluice_vault::Vault;

/// The vault table of dynamic registrations (key: issuer, a newline, the redirect URI).
pub const CLIENTS: &str = "oauth.clients";

/// A client's credentials at one authorization server.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct ClientCredentials {
    /// The issuer they belong to (never presented to another).
    pub issuer: String,
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for confidential clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post`, `private_key_jwt` or `none`.
    pub auth_method: String,
}

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[hidden]"),
            )
            .field("auth_method", &self.auth_method)
            .finish()
    }
}

/// What the configuration says about the client.
#[derive(Clone, Default)]
pub struct ClientSettings {
    /// A pre-registered `client_id`.
    pub client_id: Option<String>,
    /// Its secret.
    pub client_secret: Option<String>,
    /// The issuer the pre-registered client belongs to (None: any); never presented to another.
    pub issuer: Option<String>,
    /// The token endpoint auth method to use (default: chosen from what the server lists).
    pub auth_method: Option<String>,
    /// The URL of this client's metadata document (an https URL), used as the `client_id`
    /// where the server supports client ID metadata documents.
    pub metadata_url: Option<String>,
    /// `client_name` for registration.
    pub client_name: String,
    /// Where the authorization server sends the person back.
    pub redirect_uri: String,
}

impl std::fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSettings")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[hidden]"),
            )
            .field("auth_method", &self.auth_method)
            .field("metadata_url", &self.metadata_url)
            .field("redirect_uri", &self.redirect_uri)
            .finish()
    }
}

/// The client metadata this client publishes (its client ID metadata document) and sends
/// when it registers.
pub fn metadata(settings: &ClientSettings, client_id: Option<&str>, auth_method: &str) -> Value {
    let mut doc = json!({
        "client_name": settings.client_name,
        "redirect_uris": [settings.redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": auth_method,
        "application_type": application_type(&settings.redirect_uri),
    });
    if let Some(id) = client_id {
        doc["client_id"] = json!(id);
    }
    doc
}

/// `native` for a loopback redirect (a CLI, a local gateway), else `web`.
fn application_type(redirect_uri: &str) -> &'static str {
    let loopback = url::Url::parse(redirect_uri).is_ok_and(|u| match u.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    });
    if loopback {
        "native"
    } else {
        "web"
    }
}

/// The method to authenticate at the token endpoint with a secret (or without one).
pub fn choose_method(server: &AuthServer, has_secret: bool) -> String {
    let offered = |m: &str| server.token_auth_methods.iter().any(|x| x == m);
    if has_secret {
        if offered("client_secret_basic") || !offered("client_secret_post") {
            "client_secret_basic".into()
        } else {
            "client_secret_post".into()
        }
    } else {
        "none".into()
    }
}

fn vault_key(issuer: &str, redirect_uri: &str) -> String {
    format!("{issuer}\n{redirect_uri}")
}

/// The client's credentials at `server`: pre-registered, else a metadata document URL (when
/// the server supports it), else a registration kept from before, else a new registration.
pub async fn identify(
    fetcher: &Fetcher,
    vault: &Vault,
    settings: &ClientSettings,
    server: &AuthServer,
) -> Result<ClientCredentials, AuthError> {
    let bound = settings
        .issuer
        .as_deref()
        .is_none_or(|i| i.trim_end_matches('/') == server.issuer.trim_end_matches('/'));
    if let (Some(id), true) = (&settings.client_id, bound) {
        let method = settings
            .auth_method
            .clone()
            .unwrap_or_else(|| choose_method(server, settings.client_secret.is_some()));
        return Ok(ClientCredentials {
            issuer: server.issuer.clone(),
            client_id: id.clone(),
            client_secret: settings.client_secret.clone(),
            auth_method: method,
        });
    }
    if let Some(url) = &settings.metadata_url {
        if server.client_id_metadata_documents {
            return Ok(ClientCredentials {
                issuer: server.issuer.clone(),
                client_id: url.clone(),
                client_secret: None,
                auth_method: "none".into(),
            });
        }
    }
    let key = vault_key(&server.issuer, &settings.redirect_uri);
    if let Some(bytes) = vault.get(CLIENTS, &key).await? {
        if let Ok(c) = serde_json::from_slice::<ClientCredentials>(&bytes) {
            if c.issuer == server.issuer {
                return Ok(c);
            }
        }
    }
    let c = register(fetcher, settings, server).await?;
    let bytes = serde_json::to_vec(&c).unwrap_or_default();
    vault.put(CLIENTS, &key, &bytes).await?;
    Ok(c)
}

/// Forget the registration kept for `issuer` (the server no longer knows it).
pub async fn forget(vault: &Vault, issuer: &str, redirect_uri: &str) -> Result<(), AuthError> {
    vault
        .delete(CLIENTS, &vault_key(issuer, redirect_uri))
        .await?;
    Ok(())
}

/// RFC 7591 dynamic client registration.
async fn register(
    fetcher: &Fetcher,
    settings: &ClientSettings,
    server: &AuthServer,
) -> Result<ClientCredentials, AuthError> {
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(AuthError::Registration {
            issuer: server.issuer.clone(),
            why: "the server offers no registration endpoint and no client ID metadata documents; configure a pre-registered client_id".into(),
        });
    };
    let asked = if server.token_auth_methods.iter().any(|m| m == "none") {
        "none".to_string()
    } else {
        choose_method(server, true)
    };
    let body = metadata(settings, None, &asked);
    let (status, answer) = fetcher.post_json(endpoint, &body).await?;
    if !status.is_success() {
        let why = answer
            .get("error_description")
            .or_else(|| answer.get("error"))
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(AuthError::Registration {
            issuer: server.issuer.clone(),
            why: format!("HTTP {status} {why}").trim_end().to_string(),
        });
    }
    let client_id = answer
        .get("client_id")
        .and_then(Value::as_str)
        .ok_or_else(|| AuthError::Registration {
            issuer: server.issuer.clone(),
            why: "the answer has no client_id".into(),
        })?;
    let secret = answer
        .get("client_secret")
        .and_then(Value::as_str)
        .map(str::to_string);
    let method = answer
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            if secret.is_some() {
                choose_method(server, true)
            } else {
                "none".into()
            }
        });
    Ok(ClientCredentials {
        issuer: server.issuer.clone(),
        client_id: client_id.to_string(),
        client_secret: secret,
        auth_method: method,
    })
}
