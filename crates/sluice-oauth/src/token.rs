//! The token endpoint: the authorization code, refresh and client credentials grants (through
//! the `oauth2` crate), client authentication as the client's method says (`client_secret_basic`,
//! `client_secret_post`, `none`, `private_key_jwt`), and the grant kept afterwards.

use crate::client::ClientCredentials;
use crate::error::AuthError;
use crate::fetch::Fetcher;
use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AuthType, AuthorizationCode, ClientId, ClientSecret, ExtraTokenFields, PkceCodeVerifier,
    RedirectUrl, RefreshToken, RequestTokenError, Scope, StandardRevocableToken,
    StandardTokenResponse, TokenResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Refresh this long before the access token expires.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// A grant: what a sign-in produced and what keeps it alive.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct Grant {
    /// The access token.
    pub access_token: String,
    /// The refresh token, when given (rotation: the newest one is kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires (seconds since the epoch), when said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scopes granted (as said by the server, else as asked).
    pub scopes: Vec<String>,
    /// The token endpoint that refreshes it.
    pub token_endpoint: String,
    /// RFC 8707 `resource` it was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The client it belongs to.
    pub client: ClientCredentials,
    /// When it was obtained or last refreshed (seconds since the epoch).
    pub obtained_at: u64,
    /// The authorization server's RFC 7009 revocation endpoint, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("access_token", &"[hidden]")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "[hidden]"),
            )
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("issuer", &self.client.issuer)
            .finish()
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Grant {
    /// Seconds left before the access token expires (None: no expiry said).
    pub fn seconds_left(&self) -> Option<i64> {
        self.expires_at.map(|at| at as i64 - now() as i64)
    }

    /// Does it expire within `margin`?
    pub fn expires_within(&self, margin: Duration) -> bool {
        self.seconds_left()
            .is_some_and(|left| left <= margin.as_secs() as i64)
    }
}

/// The `sub` an access token names, when it is a JWT (RFC 9068, as most identity providers
/// issue them): read, not verified — the token came from the token endpoint, and the subject
/// only says whose account it is. None for an opaque token or one without a `sub`.
pub fn jwt_subject(access_token: &str) -> Option<String> {
    use base64::Engine;
    let mut parts = access_token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&raw).ok()?;
    claims
        .get("sub")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A key that signs `private_key_jwt` client assertions (RFC 7523).
#[derive(Clone)]
pub struct SigningKey {
    key: jsonwebtoken::EncodingKey,
    alg: jsonwebtoken::Algorithm,
    kid: Option<String>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({:?}, [hidden])", self.alg)
    }
}

impl SigningKey {
    /// A PEM private key (PKCS#8 or the traditional RSA / EC forms) with its algorithm
    /// (`RS256`, `RS384`, `RS512`, `PS256`, `ES256`, `ES384`, `EdDSA`; default: RS256 for RSA,
    /// ES256 for EC, EdDSA for Ed25519).
    pub fn from_pem(
        pem: &[u8],
        alg: Option<&str>,
        kid: Option<String>,
    ) -> Result<SigningKey, AuthError> {
        use jsonwebtoken::{Algorithm, EncodingKey};
        let text = String::from_utf8_lossy(pem);
        let guess = if text.contains("RSA PRIVATE KEY") {
            Algorithm::RS256
        } else if text.contains("EC PRIVATE KEY") {
            Algorithm::ES256
        } else if let Ok(_k) = EncodingKey::from_ec_pem(pem) {
            Algorithm::ES256
        } else if let Ok(_k) = EncodingKey::from_rsa_pem(pem) {
            Algorithm::RS256
        } else {
            Algorithm::EdDSA
        };
        let alg = match alg {
            None => guess,
            Some(a) => a
                .parse::<Algorithm>()
                .map_err(|_| AuthError::Config(format!("unknown signing algorithm {a:?}")))?,
        };
        let key =
            match alg {
                Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512 => EncodingKey::from_rsa_pem(pem),
                Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_pem(pem),
                Algorithm::EdDSA => EncodingKey::from_ed_pem(pem),
                _ => return Err(AuthError::Config(
                    "private_key_jwt needs an asymmetric algorithm (RS*, PS*, ES256, ES384, EdDSA)"
                        .into(),
                )),
            }
            .map_err(|_| AuthError::Config(format!("the private key is not a PEM {alg:?} key")))?;
        Ok(SigningKey { key, alg, kid })
    }

    /// A client assertion for `client_id` at `audience` (the authorization server's issuer, as
    /// the client credentials extension names it), valid 5 minutes.
    pub fn assertion(&self, client_id: &str, audience: &str) -> Result<String, AuthError> {
        let iat = now();
        let claims = serde_json::json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": iat,
            "exp": iat + 300,
            "jti": uuid::Uuid::new_v4().to_string(),
        });
        let mut header = jsonwebtoken::Header::new(self.alg);
        header.kid = self.kid.clone();
        jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|_| AuthError::Config("signing the client assertion failed".into()))
    }
}

/// What a token response carries beside the standard fields: an OpenID Connect ID token.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct IdTokenField {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id_token: Option<String>,
}

impl ExtraTokenFields for IdTokenField {}

/// The `oauth2` client of every token request: the basic one, with the ID token kept.
type TokenEndpointClient = oauth2::Client<
    BasicErrorResponse,
    StandardTokenResponse<IdTokenField, BasicTokenType>,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
>;

/// What the token endpoint gave.
#[derive(Clone)]
pub struct Tokens {
    /// The access token.
    pub access_token: String,
    /// A refresh token, when given.
    pub refresh_token: Option<String>,
    /// `expires_in`, when given.
    pub expires_in: Option<Duration>,
    /// `scope`, when given.
    pub scopes: Option<Vec<String>>,
    /// An OpenID Connect ID token, when given (a code flow that asked for `openid`).
    pub id_token: Option<String>,
}

impl Tokens {
    /// The grant these tokens make (keeping `previous`'s refresh token when none came).
    pub fn into_grant(
        self,
        client: ClientCredentials,
        token_endpoint: &str,
        resource: Option<String>,
        asked: &[String],
        previous: Option<&Grant>,
    ) -> Grant {
        let at = now();
        Grant {
            access_token: self.access_token,
            refresh_token: self
                .refresh_token
                .or_else(|| previous.and_then(|p| p.refresh_token.clone())),
            expires_at: self.expires_in.map(|d| at + d.as_secs()),
            scopes: self
                .scopes
                .or_else(|| previous.map(|p| p.scopes.clone()))
                .unwrap_or_else(|| asked.to_vec()),
            token_endpoint: token_endpoint.to_string(),
            resource,
            client,
            obtained_at: at,
            revocation_endpoint: previous.and_then(|p| p.revocation_endpoint.clone()),
        }
    }
}

/// POST `form` to `endpoint` as `client` authenticates (its method: `client_secret_basic`,
/// `client_secret_post`, `none`, `private_key_jwt`): for the requests the `oauth2` crate does
/// not make (token exchange) or makes only over https (revocation; the bounded [`Fetcher`] also
/// allows loopback). The status and the JSON answer.
pub(crate) async fn post_as_client(
    fetcher: &Fetcher,
    endpoint: &str,
    client: &ClientCredentials,
    key: Option<&SigningKey>,
    mut form: Vec<(&'static str, String)>,
) -> Result<(reqwest::StatusCode, serde_json::Value), AuthError> {
    let mut basic = None;
    match client.auth_method.as_str() {
        "client_secret_post" | "none" => {
            form.push(("client_id", client.client_id.clone()));
            if let (Some(s), "client_secret_post") =
                (&client.client_secret, client.auth_method.as_str())
            {
                form.push(("client_secret", s.clone()));
            }
        }
        "private_key_jwt" => {
            let key =
                key.ok_or_else(|| AuthError::Config("private_key_jwt needs a private key".into()))?;
            form.push(("client_id", client.client_id.clone()));
            form.push((
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_string(),
            ));
            form.push((
                "client_assertion",
                key.assertion(&client.client_id, &client.issuer)?,
            ));
        }
        _ => match &client.client_secret {
            Some(s) => basic = Some((client.client_id.as_str(), s.as_str())),
            None => form.push(("client_id", client.client_id.clone())),
        },
    }
    fetcher.post_form(endpoint, &form, basic).await
}

/// The `oauth2` crate's HTTP client: [`Fetcher::token_call`].
struct TokenClient(Fetcher);

impl<'c> oauth2::AsyncHttpClient<'c> for TokenClient {
    type Error = AuthError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<oauth2::HttpResponse, AuthError>> + Send>,
    >;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        let fetcher = self.0.clone();
        Box::pin(async move { fetcher.token_call(request).await })
    }
}

/// The token request to make.
pub enum TokenRequest<'a> {
    /// `authorization_code` with the PKCE verifier and the redirect URI used.
    Code {
        /// The code.
        code: &'a str,
        /// The PKCE verifier.
        verifier: &'a str,
        /// The redirect URI of the authorization request.
        redirect_uri: &'a str,
    },
    /// `refresh_token`.
    Refresh(&'a str),
    /// `client_credentials` with scopes.
    ClientCredentials(&'a [String]),
}

impl TokenRequest<'_> {
    fn grant(&self) -> &'static str {
        match self {
            TokenRequest::Code { .. } => "authorization_code",
            TokenRequest::Refresh(_) => "refresh_token",
            TokenRequest::ClientCredentials(_) => "client_credentials",
        }
    }
}

/// Make one token request at `token_endpoint` as `client`.
pub async fn request(
    fetcher: &Fetcher,
    token_endpoint: &str,
    client: &ClientCredentials,
    key: Option<&SigningKey>,
    resource: Option<&str>,
    req: TokenRequest<'_>,
) -> Result<Tokens, AuthError> {
    let grant = req.grant();
    let fail = |why: String| AuthError::Token { grant, why };
    fetcher.check(token_endpoint)?;
    let token_url = TokenUrl::new(token_endpoint.to_string())
        .map_err(|e| fail(format!("bad token endpoint: {e}")))?;
    let mut oc =
        TokenEndpointClient::new(ClientId::new(client.client_id.clone())).set_token_uri(token_url);
    let mut assertion = None;
    match client.auth_method.as_str() {
        "client_secret_post" => {
            oc = oc.set_auth_type(AuthType::RequestBody);
            if let Some(s) = &client.client_secret {
                oc = oc.set_client_secret(ClientSecret::new(s.clone()));
            }
        }
        "private_key_jwt" => {
            oc = oc.set_auth_type(AuthType::RequestBody);
            let key = key.ok_or_else(|| fail("private_key_jwt needs a private key".into()))?;
            assertion = Some(key.assertion(&client.client_id, &client.issuer)?);
        }
        "none" => oc = oc.set_auth_type(AuthType::RequestBody),
        _ => {
            oc = oc.set_auth_type(AuthType::BasicAuth);
            if let Some(s) = &client.client_secret {
                oc = oc.set_client_secret(ClientSecret::new(s.clone()));
            }
        }
    }
    // The bounded client: the token endpoint's answer is held to the discovery limits.
    let http = TokenClient(fetcher.clone());
    let mut extra: Vec<(&str, String)> = Vec::new();
    if let Some(r) = resource {
        extra.push(("resource", r.to_string()));
    }
    if let Some(a) = assertion {
        extra.push((
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
        ));
        extra.push(("client_assertion", a));
    }
    let outcome = match req {
        TokenRequest::Code {
            code,
            verifier,
            redirect_uri,
        } => {
            let redirect = RedirectUrl::new(redirect_uri.to_string())
                .map_err(|e| fail(format!("bad redirect URI: {e}")))?;
            let oc = oc.set_redirect_uri(redirect);
            let mut r = oc
                .exchange_code(AuthorizationCode::new(code.to_string()))
                .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_string()));
            for (k, v) in &extra {
                r = r.add_extra_param(*k, v.clone());
            }
            r.request_async(&http).await
        }
        TokenRequest::Refresh(rt) => {
            let rt = RefreshToken::new(rt.to_string());
            let mut r = oc.exchange_refresh_token(&rt);
            for (k, v) in &extra {
                r = r.add_extra_param(*k, v.clone());
            }
            r.request_async(&http).await
        }
        TokenRequest::ClientCredentials(scopes) => {
            let mut r = oc.exchange_client_credentials();
            for s in scopes {
                r = r.add_scope(Scope::new(s.clone()));
            }
            for (k, v) in &extra {
                r = r.add_extra_param(*k, v.clone());
            }
            r.request_async(&http).await
        }
    };
    match outcome {
        Ok(t) => Ok(Tokens {
            access_token: t.access_token().secret().clone(),
            refresh_token: t.refresh_token().map(|r| r.secret().clone()),
            expires_in: t.expires_in(),
            scopes: t
                .scopes()
                .map(|s| s.iter().map(|x| x.as_str().to_string()).collect()),
            id_token: t.extra_fields().id_token.clone(),
        }),
        Err(RequestTokenError::ServerResponse(e)) => {
            let mut why = format!("{token_endpoint}: {}", e.error().as_ref());
            if let Some(d) = e.error_description() {
                why.push_str(": ");
                why.push_str(d);
            }
            Err(fail(why))
        }
        Err(RequestTokenError::Request(e)) => Err(fail(e.to_string())),
        Err(RequestTokenError::Parse(_, _)) => Err(fail(format!(
            "{token_endpoint}: the answer is not a token response"
        ))),
        Err(RequestTokenError::Other(o)) => Err(fail(format!("{token_endpoint}: {o}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::jwt_subject;
    use base64::Engine;

    fn b64(v: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
    }

    #[test]
    fn a_jwt_access_token_names_its_subject_and_an_opaque_one_none() {
        let header = b64(r#"{"alg":"RS256","typ":"at+jwt"}"#);
        let jwt = |claims: &str| format!("{header}.{}.c2lnbmF0dXJl", b64(claims));
        assert_eq!(
            jwt_subject(&jwt(r#"{"sub":"alice@example.com","aud":"crm"}"#)).as_deref(),
            Some("alice@example.com")
        );
        assert_eq!(jwt_subject(&jwt(r#"{"aud":"crm"}"#)), None);
        assert_eq!(jwt_subject(&jwt(r#"{"sub":""}"#)), None);
        assert_eq!(jwt_subject(&jwt(r#"{"sub":7}"#)), None);
        assert_eq!(
            jwt_subject("gho_16C7e42F292c6912E7710c838347Ae178B4a"),
            None
        );
        assert_eq!(jwt_subject("a.b"), None);
        assert_eq!(jwt_subject("a.!!!.c"), None);
        let four = format!("{}.x", jwt(r#"{"sub":"alice"}"#));
        assert_eq!(jwt_subject(&four), None);
    }
}
