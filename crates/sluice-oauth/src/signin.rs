//! Signing a person's browser in at the gateway's own identity provider before a connect link
//! is used (OpenID Connect authorization code flow with PKCE S256, `state` and a `nonce`): the
//! flow parked in the vault until its callback (single use, ten minutes), and the callback
//! checked (`state`, RFC 9207 `iss`) and its code exchanged for the ID token. Verifying that
//! token (signature, `iss`, `aud`, `nonce`) and comparing its `sub` with the link's principal
//! is the caller's: it holds the identity provider's keys.

use crate::client::ClientCredentials;
use crate::discovery::{self, AuthServer};
use crate::error::AuthError;
use crate::fetch::Fetcher;
use crate::flow::{check_response, Callback};
use crate::token::{self, TokenRequest};
use oauth2::basic::BasicClient;
use oauth2::{AuthUrl, ClientId, CsrfToken, PkceCodeChallenge, RedirectUrl, Scope};
use serde::{Deserialize, Serialize};
use sluice_vault::Vault;
use std::time::Duration;

/// The vault table of browser sign-ins waiting for their callback (key: `state`).
pub const SIGN_INS: &str = "oauth.sign_in";
/// The callback's path under the public URL (the redirect URI registered at the provider).
pub const SIGNED_IN_PATH: &str = "/oauth/signed-in";
/// How long a started sign-in waits for its callback.
pub const SIGN_IN_TTL: Duration = Duration::from_secs(600);

/// A browser sign-in between the authorization URL and its callback.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct SignIn {
    /// `state` (also its key, and the value of the browser's cookie).
    pub state: String,
    /// The `nonce` the ID token must carry.
    pub nonce: String,
    /// The PKCE verifier.
    pub verifier: String,
    /// The connect link it is for (its id: a secret).
    pub ticket: String,
    /// The identity provider.
    pub issuer: String,
    /// Does it always send RFC 9207's `iss`?
    pub iss_parameter: bool,
    /// Its token endpoint.
    pub token_endpoint: String,
    /// The redirect URI sent.
    pub redirect_uri: String,
    /// The gateway's client there.
    pub client: ClientCredentials,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("issuer", &self.issuer)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// A started sign-in: where to send the browser, and what to park.
#[derive(Debug)]
pub struct Started {
    /// The authorization URL (`state`, `nonce` and the PKCE challenge: no secret).
    pub url: String,
    /// The sign-in to park until the callback.
    pub sign_in: SignIn,
}

/// The identity provider's metadata (RFC 8414 or OpenID discovery at `issuer`, checked).
pub async fn provider(fetcher: &Fetcher, issuer: &str) -> Result<AuthServer, AuthError> {
    discovery::auth_server(fetcher, issuer, false).await
}

/// Start signing a browser in at `server` as `client`, for the connect link `ticket`.
pub fn start(
    server: &AuthServer,
    client: ClientCredentials,
    redirect_uri: &str,
    ticket: &str,
    scopes: &[String],
) -> Result<Started, AuthError> {
    let bad = |why: String| AuthError::Config(why);
    let oc = BasicClient::new(ClientId::new(client.client_id.clone()))
        .set_auth_uri(
            AuthUrl::new(server.authorization_endpoint.clone())
                .map_err(|e| bad(format!("bad authorization endpoint: {e}")))?,
        )
        .set_redirect_uri(
            RedirectUrl::new(redirect_uri.to_string())
                .map_err(|e| bad(format!("bad redirect URI: {e}")))?,
        );
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let nonce = CsrfToken::new_random_len(32).secret().clone();
    let mut req = oc
        .authorize_url(CsrfToken::new_random)
        .set_pkce_challenge(challenge)
        .add_extra_param("nonce", nonce.clone());
    for s in scopes {
        req = req.add_scope(Scope::new(s.clone()));
    }
    let (url, state) = req.url();
    Ok(Started {
        url: url.to_string(),
        sign_in: SignIn {
            state: state.secret().clone(),
            nonce,
            verifier: verifier.secret().clone(),
            ticket: ticket.to_string(),
            issuer: server.issuer.clone(),
            iss_parameter: server.iss_parameter,
            token_endpoint: server.token_endpoint.clone(),
            redirect_uri: redirect_uri.to_string(),
            client,
        },
    })
}

/// Park a started sign-in until its callback.
pub async fn park(vault: &Vault, sign_in: &SignIn) -> Result<(), AuthError> {
    let bytes = serde_json::to_vec(sign_in).unwrap_or_default();
    vault
        .put_expiring(SIGN_INS, &sign_in.state, &bytes, SIGN_IN_TTL)
        .await?;
    Ok(())
}

/// Take the sign-in a callback answers (once): None when none waits under its `state`.
pub async fn take(vault: &Vault, state: &str) -> Result<Option<SignIn>, AuthError> {
    let Some(bytes) = vault.take(SIGN_INS, state).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|_| AuthError::Vault("a parked browser sign-in does not read".into()))
}

/// Check the callback `cb` of `sign_in` and exchange its code for the ID token (unverified:
/// see the module's doc).
pub async fn finish(
    fetcher: &Fetcher,
    sign_in: &SignIn,
    cb: &Callback,
) -> Result<String, AuthError> {
    let code = check_response(&sign_in.state, &sign_in.issuer, sign_in.iss_parameter, cb)?;
    let tokens = token::request(
        fetcher,
        &sign_in.token_endpoint,
        &sign_in.client,
        None,
        None,
        TokenRequest::Code {
            code,
            verifier: &sign_in.verifier,
            redirect_uri: &sign_in.redirect_uri,
        },
    )
    .await?;
    tokens.id_token.ok_or_else(|| AuthError::Token {
        grant: "authorization_code",
        why: format!(
            "{}: the answer has no id_token (is openid among the scopes?)",
            sign_in.token_endpoint
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> AuthServer {
        AuthServer {
            issuer: "https://idp.example.com".into(),
            authorization_endpoint: "https://idp.example.com/auth".into(),
            token_endpoint: "https://idp.example.com/token".into(),
            registration_endpoint: None,
            revocation_endpoint: None,
            scopes_supported: None,
            token_auth_methods: vec!["client_secret_basic".into()],
            client_id_metadata_documents: false,
            iss_parameter: true,
            grant_types: vec!["authorization_code".into()],
        }
    }

    fn client() -> ClientCredentials {
        ClientCredentials {
            issuer: "https://idp.example.com".into(),
            client_id: "sluice".into(),
            client_secret: Some("s3cret".into()),
            auth_method: "client_secret_basic".into(),
        }
    }

    #[test]
    fn the_authorization_url_carries_state_nonce_pkce_and_openid_and_no_secret() {
        let s = start(
            &server(),
            client(),
            "https://gw.example.com/oauth/signed-in",
            "ticket-id",
            &["openid".into()],
        )
        .unwrap();
        let url = url::Url::parse(&s.url).unwrap();
        let q: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
        assert_eq!(q["state"], s.sign_in.state);
        assert_eq!(q["nonce"], s.sign_in.nonce);
        assert_eq!(q["scope"], "openid");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["redirect_uri"], "https://gw.example.com/oauth/signed-in");
        assert!(!s.url.contains("s3cret") && !s.url.contains("ticket-id"));
        assert!(!s.url.contains(&s.sign_in.verifier));
        let shown = format!("{:?}", s.sign_in);
        assert!(!shown.contains("s3cret") && !shown.contains("ticket-id"));
    }

    #[test]
    fn a_callback_from_another_issuer_or_state_is_refused() {
        let s = start(&server(), client(), "https://gw/cb", "t", &[])
            .unwrap()
            .sign_in;
        let cb = |q: &str| Callback::from_query(q);
        let ok = cb(&format!(
            "code=c&state={}&iss=https://idp.example.com",
            s.state
        ));
        assert_eq!(
            check_response(&s.state, &s.issuer, s.iss_parameter, &ok).unwrap(),
            "c"
        );
        let other = cb(&format!("code=c&state={}&iss=https://evil", s.state));
        let wrong_state = cb("code=c&state=nope&iss=https://idp.example.com");
        let no_iss = cb(&format!("code=c&state={}", s.state));
        for bad in [other, wrong_state, no_iss] {
            assert!(check_response(&s.state, &s.issuer, s.iss_parameter, &bad).is_err());
        }
    }
}
