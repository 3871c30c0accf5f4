//! The authorization code flow with PKCE S256: the authorization URL (with `state`, `resource`
//! and the scopes), the pending flow parked in the vault for ten minutes (single use, found by
//! its `state`), and the callback: `state` and the RFC 9207 `iss` checked, the code exchanged,
//! the grant stored.

use crate::client::ClientCredentials;
use crate::connect;
use crate::discovery::Discovered;
use crate::error::AuthError;
use crate::events::{self, ConnectionEventKind};
use crate::fetch::Fetcher;
use crate::token::{self, Grant, SigningKey, TokenRequest};
use oauth2::basic::BasicClient;
use oauth2::{AuthUrl, ClientId, CsrfToken, PkceCodeChallenge, RedirectUrl, Scope};
use serde::{Deserialize, Serialize};
use sluice_vault::Vault;
use std::time::Duration;

/// The vault table of flows waiting for their callback (key: `state`).
pub const PENDING: &str = "oauth.pending";
/// The vault table of finished flows' outcomes (key: `state`), for whoever started them.
pub const OUTCOMES: &str = "oauth.outcomes";
/// The vault table of grants (key: whose grant, e.g. `upstream:github`).
pub const GRANTS: &str = "oauth.grants";
/// How long a sign-in link stays valid.
pub const FLOW_TTL: Duration = Duration::from_secs(600);

/// A flow between the authorization URL and its callback.
#[derive(Clone, Serialize, Deserialize)]
pub struct Pending {
    /// Where the grant goes in [`GRANTS`].
    pub grant_key: String,
    /// `state` (also the flow's key).
    pub state: String,
    /// The PKCE verifier.
    pub verifier: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// Did it advertise RFC 9207 `iss` in authorization responses?
    pub iss_parameter: bool,
    /// Its token endpoint.
    pub token_endpoint: String,
    /// The redirect URI sent.
    pub redirect_uri: String,
    /// RFC 8707 `resource` sent.
    pub resource: Option<String>,
    /// The client.
    pub client: ClientCredentials,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// The authorization server's RFC 7009 revocation endpoint, kept with the grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    /// The URL elicitation this flow answers (a user connecting their own account): its
    /// outcome is recorded under it for the call that waits ([`crate::connect`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("grant_key", &self.grant_key)
            .field("issuer", &self.issuer)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// A started flow: the URL to open and what its callback needs.
#[derive(Debug)]
pub struct Started {
    /// The authorization URL (no secret in it: `state` and the PKCE challenge only).
    pub url: String,
    /// The flow.
    pub pending: Pending,
}

/// Start a flow for `grant_key` at the discovered server.
pub fn start(
    d: &Discovered,
    client: ClientCredentials,
    redirect_uri: &str,
    grant_key: &str,
    scopes: &[String],
) -> Result<Started, AuthError> {
    let bad = |why: String| AuthError::Config(why);
    let oc = BasicClient::new(ClientId::new(client.client_id.clone()))
        .set_auth_uri(
            AuthUrl::new(d.server.authorization_endpoint.clone())
                .map_err(|e| bad(format!("bad authorization endpoint: {e}")))?,
        )
        .set_redirect_uri(
            RedirectUrl::new(redirect_uri.to_string())
                .map_err(|e| bad(format!("bad redirect URI: {e}")))?,
        );
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut req = oc
        .authorize_url(CsrfToken::new_random)
        .set_pkce_challenge(challenge);
    for s in scopes {
        req = req.add_scope(Scope::new(s.clone()));
    }
    if let Some(r) = &d.resource.resource {
        req = req.add_extra_param("resource", r.clone());
    }
    let (url, state) = req.url();
    Ok(Started {
        url: url.to_string(),
        pending: Pending {
            grant_key: grant_key.to_string(),
            state: state.secret().clone(),
            verifier: verifier.secret().clone(),
            issuer: d.server.issuer.clone(),
            iss_parameter: d.server.iss_parameter,
            token_endpoint: d.server.token_endpoint.clone(),
            redirect_uri: redirect_uri.to_string(),
            resource: d.resource.resource.clone(),
            client,
            scopes: scopes.to_vec(),
            revocation_endpoint: d.server.revocation_endpoint.clone(),
            elicitation_id: None,
        },
    })
}

/// The query of a callback request.
#[derive(Default, Clone, PartialEq, Eq)]
pub struct Callback {
    /// `code`.
    pub code: Option<String>,
    /// `state`.
    pub state: Option<String>,
    /// `iss` (RFC 9207).
    pub iss: Option<String>,
    /// `error`.
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callback")
            .field("code", &self.code.as_ref().map(|_| "[hidden]"))
            .field("iss", &self.iss)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl Callback {
    /// From a URL's query string (`code=…&state=…`).
    pub fn from_query(query: &str) -> Callback {
        let mut c = Callback::default();
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            let v = Some(v.into_owned());
            match k.as_ref() {
                "code" => c.code = v,
                "state" => c.state = v,
                "iss" => c.iss = v,
                "error" => c.error = v,
                "error_description" => c.error_description = v,
                _ => {}
            }
        }
        c
    }
}

/// The code of a callback that answers `pending`: its `error`, `state` and `iss` checked.
pub fn check<'a>(pending: &Pending, cb: &'a Callback) -> Result<&'a str, AuthError> {
    check_response(&pending.state, &pending.issuer, pending.iss_parameter, cb)
}

/// The code of an authorization response `cb` to a request sent with `state` to `issuer`
/// (which says, with `iss_parameter`, whether it always sends RFC 9207's `iss`): its `error`,
/// `state` and `iss` checked.
pub fn check_response<'a>(
    state: &str,
    issuer: &str,
    iss_parameter: bool,
    cb: &'a Callback,
) -> Result<&'a str, AuthError> {
    if let Some(e) = &cb.error {
        let d = cb.error_description.as_deref().unwrap_or("");
        return Err(AuthError::Authorization(
            format!("the authorization server answered {e} {d}")
                .trim_end()
                .to_string(),
        ));
    }
    if cb.state.as_deref() != Some(state) {
        return Err(AuthError::Authorization("the state does not match".into()));
    }
    match (&cb.iss, iss_parameter) {
        (Some(iss), _) if iss != issuer => {
            return Err(AuthError::Authorization(format!(
                "the response's iss {iss:?} is not the issuer {issuer:?} (RFC 9207: a mix-up attack is refused)"
            )))
        }
        (None, true) => {
            return Err(AuthError::Authorization(format!(
                "the response has no iss, and {issuer} says it always sends one (RFC 9207)"
            )))
        }
        _ => {}
    }
    cb.code
        .as_deref()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| AuthError::Authorization("the response has no code".into()))
}

/// Exchange the callback's code for a grant.
pub async fn finish(
    fetcher: &Fetcher,
    pending: &Pending,
    cb: &Callback,
    key: Option<&SigningKey>,
) -> Result<Grant, AuthError> {
    let code = check(pending, cb)?;
    let tokens = token::request(
        fetcher,
        &pending.token_endpoint,
        &pending.client,
        key,
        pending.resource.as_deref(),
        TokenRequest::Code {
            code,
            verifier: &pending.verifier,
            redirect_uri: &pending.redirect_uri,
        },
    )
    .await?;
    let mut grant = tokens.into_grant(
        pending.client.clone(),
        &pending.token_endpoint,
        pending.resource.clone(),
        &pending.scopes,
        None,
    );
    grant.revocation_endpoint = pending.revocation_endpoint.clone();
    Ok(grant)
}

/// Park a started flow in the vault until its callback (ten minutes).
pub async fn park(vault: &Vault, pending: &Pending) -> Result<(), AuthError> {
    let bytes = serde_json::to_vec(pending).unwrap_or_default();
    vault
        .put_expiring(PENDING, &pending.state, &bytes, FLOW_TTL)
        .await?;
    Ok(())
}

/// What a finished flow left for whoever started it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Outcome {
    /// The grant key it was for.
    pub grant_key: String,
    /// None: connected; else why not.
    pub error: Option<String>,
}

/// Handle a callback: take its parked flow (single use), finish it, store the grant under the
/// flow's key and leave the outcome for whoever waits. The flow's `grant_key` comes back with
/// the result.
pub async fn complete(
    vault: &Vault,
    fetcher: &Fetcher,
    query: &str,
    key_for: impl Fn(&Pending) -> Option<SigningKey>,
) -> Result<(Pending, Grant), AuthError> {
    let cb = Callback::from_query(query);
    let Some(state) = cb.state.clone() else {
        return Err(AuthError::Authorization("the callback has no state".into()));
    };
    let Some(bytes) = vault.take(PENDING, &state).await? else {
        return Err(AuthError::Authorization(
            "no sign-in is waiting for this link (it was used already, or it expired after 10 minutes)".into(),
        ));
    };
    let pending: Pending = serde_json::from_slice(&bytes)
        .map_err(|_| AuthError::Vault("a parked sign-in does not read".into()))?;
    let result = finish(fetcher, &pending, &cb, key_for(&pending).as_ref()).await;
    let outcome = Outcome {
        grant_key: pending.grant_key.clone(),
        error: result.as_ref().err().map(ToString::to_string),
    };
    if let Ok(grant) = &result {
        store(vault, &pending.grant_key, grant).await?;
    }
    let bytes = serde_json::to_vec(&outcome).unwrap_or_default();
    vault
        .put_expiring(OUTCOMES, &pending.state, &bytes, FLOW_TTL)
        .await?;
    if let Some(eid) = &pending.elicitation_id {
        let outcome = connect_outcome(&pending, &cb, &result);
        let (kind, detail) = match &outcome {
            connect::Outcome::Connected { .. } => (ConnectionEventKind::Connected, None),
            connect::Outcome::Declined(why) => (ConnectionEventKind::Declined, Some(why.clone())),
            connect::Outcome::Failed(why) => (ConnectionEventKind::Failed, Some(why.clone())),
        };
        events::emit(&pending.grant_key, kind, detail);
        connect::record(vault, eid, &outcome).await?;
    }
    result.map(|g| (pending, g))
}

/// How a user's connect ended, for the call that waits on its elicitation.
fn connect_outcome(
    pending: &Pending,
    cb: &Callback,
    result: &Result<Grant, AuthError>,
) -> connect::Outcome {
    match result {
        Ok(_) => {
            // `user:<upstream>:<principal>`.
            let mut parts = pending.grant_key.splitn(3, ':').skip(1);
            connect::Outcome::Connected {
                upstream: parts.next().unwrap_or_default().to_string(),
                principal: parts.next().unwrap_or_default().to_string(),
            }
        }
        Err(_) if cb.error.as_deref() == Some("access_denied") => connect::Outcome::Declined(
            cb.error_description
                .clone()
                .unwrap_or_else(|| "consent was denied at the authorization server".into()),
        ),
        Err(e) => connect::Outcome::Failed(e.to_string()),
    }
}

/// Wait (polling the vault, bounded by `timeout`) for the outcome of the flow `state`.
pub async fn wait_outcome(
    vault: &Vault,
    state: &str,
    timeout: Duration,
) -> Result<Outcome, AuthError> {
    let until = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(bytes) = vault.take(OUTCOMES, state).await? {
            return serde_json::from_slice(&bytes)
                .map_err(|_| AuthError::Vault("an outcome does not read".into()));
        }
        if tokio::time::Instant::now() >= until {
            return Err(AuthError::NeedsLogin(format!(
                "no callback within {} s",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Store a grant under `key`.
pub async fn store(vault: &Vault, key: &str, grant: &Grant) -> Result<(), AuthError> {
    let bytes = serde_json::to_vec(grant).unwrap_or_default();
    vault.put(GRANTS, key, &bytes).await?;
    Ok(())
}

/// The grant stored under `key`.
pub async fn load(vault: &Vault, key: &str) -> Result<Option<Grant>, AuthError> {
    Ok(vault
        .get(GRANTS, key)
        .await?
        .and_then(|b| serde_json::from_slice(&b).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(iss_parameter: bool) -> Pending {
        Pending {
            grant_key: "upstream:x".into(),
            state: "s1".into(),
            verifier: "v".into(),
            issuer: "https://as.example.com".into(),
            iss_parameter,
            token_endpoint: "https://as.example.com/token".into(),
            redirect_uri: "http://127.0.0.1:1/cb".into(),
            resource: None,
            client: ClientCredentials {
                issuer: "https://as.example.com".into(),
                client_id: "c".into(),
                client_secret: None,
                auth_method: "none".into(),
            },
            scopes: vec![],
            revocation_endpoint: None,
            elicitation_id: None,
        }
    }

    /// A user's connect: the callback stores the grant under the user's key and records the
    /// outcome under the elicitation; a denied consent records a decline and stores nothing.
    #[tokio::test]
    async fn a_users_callback_records_its_elicitations_outcome() {
        use crate::testing::{answer, Recorder};
        let vault = Vault::memory(sluice_vault::Keyring::new(vec![[5u8; 32]]).unwrap());
        let fetcher = Fetcher::new(Vec::new());
        let server = Recorder::start(vec![answer(
            200,
            r#"{"access_token": "user-at", "token_type": "Bearer", "expires_in": 3600}"#,
        )])
        .await;
        let mut p = pending(false);
        p.grant_key = "user:crm:jwt:alice".into();
        p.token_endpoint = server.url("/token");
        p.elicitation_id = Some("el-ok".into());
        park(&vault, &p).await.unwrap();
        let (done, grant) = complete(&vault, &fetcher, "code=c1&state=s1", |_| None)
            .await
            .unwrap();
        assert_eq!(done.elicitation_id.as_deref(), Some("el-ok"));
        assert_eq!(grant.access_token, "user-at");
        assert!(load(&vault, "user:crm:jwt:alice").await.unwrap().is_some());
        assert_eq!(
            connect::outcome(&vault, "el-ok").await.unwrap(),
            Some(connect::Outcome::Connected {
                upstream: "crm".into(),
                principal: "jwt:alice".into()
            })
        );

        let mut p = pending(false);
        p.state = "s2".into();
        p.grant_key = "user:crm:bob".into();
        p.elicitation_id = Some("el-no".into());
        park(&vault, &p).await.unwrap();
        let e = complete(&vault, &fetcher, "error=access_denied&state=s2", |_| None)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("access_denied"), "{e}");
        assert!(load(&vault, "user:crm:bob").await.unwrap().is_none());
        assert_eq!(
            connect::outcome(&vault, "el-no").await.unwrap(),
            Some(connect::Outcome::Declined(
                "consent was denied at the authorization server".into()
            ))
        );
        assert_eq!(server.requests().len(), 1);
    }

    #[test]
    fn the_callback_is_checked_as_rfc_9207_says() {
        let p = pending(true);
        let ok = Callback::from_query("code=abc&state=s1&iss=https%3A%2F%2Fas.example.com");
        assert_eq!(check(&p, &ok).unwrap(), "abc");
        let wrong = Callback::from_query("code=abc&state=s1&iss=https%3A%2F%2Fevil.example.com");
        assert!(check(&p, &wrong)
            .unwrap_err()
            .to_string()
            .contains("mix-up"));
        let slash = Callback::from_query("code=abc&state=s1&iss=https%3A%2F%2Fas.example.com%2F");
        assert!(check(&p, &slash).is_err());
        let missing = Callback::from_query("code=abc&state=s1");
        assert!(check(&p, &missing)
            .unwrap_err()
            .to_string()
            .contains("has no iss"));
        // Not advertised: absent is fine, present must still match.
        let p = pending(false);
        assert_eq!(check(&p, &missing).unwrap(), "abc");
        assert!(check(&p, &wrong).is_err());
        let state = Callback::from_query("code=abc&state=other");
        assert_eq!(
            check(&p, &state).unwrap_err().to_string(),
            "authorization refused: the state does not match"
        );
        let denied = Callback::from_query("error=access_denied&state=s1");
        assert_eq!(
            check(&p, &denied).unwrap_err().to_string(),
            "authorization refused: the authorization server answered access_denied"
        );
    }
}
