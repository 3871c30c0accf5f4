//! Ending a grant at its authorization server: RFC 7009 token revocation, the refresh token
//! when the grant has one (which ends the whole grant), else the access token, with the client
//! authentication of the token endpoint, through the bounded [`Fetcher`]. (The `oauth2` crate's
//! revocation requires https, which would refuse the loopback servers the rest of this crate
//! allows; the request is a small form POST.)

use crate::error::AuthError;
use crate::fetch::Fetcher;
use crate::token::{self, Grant, SigningKey};
use serde_json::Value;

/// What revoking a grant at its authorization server did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// The authorization server accepted the revocation (RFC 7009: it also answers so for a
    /// token it no longer knows).
    AtServer,
    /// The authorization server has no revocation endpoint: the grant was only forgotten.
    NoEndpoint,
}

/// Revoke `grant` at its authorization server's revocation endpoint, when it has one.
pub async fn revoke(
    fetcher: &Fetcher,
    grant: &Grant,
    key: Option<&SigningKey>,
) -> Result<Revoked, AuthError> {
    let Some(endpoint) = grant.revocation_endpoint.as_deref() else {
        return Ok(Revoked::NoEndpoint);
    };
    let form = match &grant.refresh_token {
        Some(rt) => vec![
            ("token", rt.clone()),
            ("token_type_hint", "refresh_token".to_string()),
        ],
        None => vec![
            ("token", grant.access_token.clone()),
            ("token_type_hint", "access_token".to_string()),
        ],
    };
    let (status, answer) =
        token::post_as_client(fetcher, endpoint, &grant.client, key, form).await?;
    if status.is_success() {
        return Ok(Revoked::AtServer);
    }
    let text = |k: &str| answer.get(k).and_then(Value::as_str);
    let why = match (text("error"), text("error_description")) {
        (Some(e), Some(d)) => format!("{e}: {d}"),
        (Some(e), None) => e.to_string(),
        _ => format!("HTTP {status}"),
    };
    Err(AuthError::Revocation {
        url: endpoint.to_string(),
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientCredentials;
    use crate::testing::{answer, Recorder};

    fn grant(endpoint: Option<String>, refresh: bool, method: &str) -> Grant {
        Grant {
            access_token: "AT-secret".into(),
            refresh_token: refresh.then(|| "RT-secret".into()),
            expires_at: None,
            scopes: vec!["a".into()],
            token_endpoint: "http://127.0.0.1:9/token".into(),
            resource: None,
            client: ClientCredentials {
                issuer: "http://127.0.0.1:9".into(),
                client_id: "gw".into(),
                client_secret: Some("client-secret".into()),
                auth_method: method.into(),
            },
            obtained_at: 0,
            revocation_endpoint: endpoint,
        }
    }

    #[tokio::test]
    async fn the_refresh_token_is_revoked_with_client_authentication() {
        let f = Fetcher::new(Vec::new());
        let server = Recorder::start(vec![answer(200, "")]).await;
        let g = grant(Some(server.url("/revoke")), true, "client_secret_basic");
        assert_eq!(revoke(&f, &g, None).await.unwrap(), Revoked::AtServer);
        let seen = server.requests();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].path, "/revoke");
        let form = seen[0].form();
        assert_eq!(form.get("token").map(String::as_str), Some("RT-secret"));
        assert_eq!(
            form.get("token_type_hint").map(String::as_str),
            Some("refresh_token")
        );
        assert!(seen[0]
            .header("authorization")
            .unwrap()
            .starts_with("Basic "));

        // No refresh token: the access token, and client_secret_post puts the secret in the form.
        let server = Recorder::start(vec![answer(200, "")]).await;
        let g = grant(Some(server.url("/revoke")), false, "client_secret_post");
        revoke(&f, &g, None).await.unwrap();
        let form = server.requests()[0].form();
        assert_eq!(form.get("token").map(String::as_str), Some("AT-secret"));
        assert_eq!(
            form.get("client_secret").map(String::as_str),
            Some("client-secret")
        );
    }

    #[tokio::test]
    async fn no_endpoint_and_refusals() {
        let f = Fetcher::new(Vec::new());
        let g = grant(None, true, "none");
        assert_eq!(revoke(&f, &g, None).await.unwrap(), Revoked::NoEndpoint);
        let server = Recorder::start(vec![answer(
            400,
            r#"{"error": "unsupported_token_type", "error_description": "no"}"#,
        )])
        .await;
        let g = grant(Some(server.url("/revoke")), true, "none");
        let e = revoke(&f, &g, None).await.unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "the revocation endpoint {} refused: unsupported_token_type: no",
                server.url("/revoke")
            )
        );
        assert!(!e.contains("RT-secret"));
        // Plain http to a non-loopback host is refused before anything is sent.
        let g = grant(Some("http://as.example.com/revoke".into()), true, "none");
        assert!(revoke(&f, &g, None).await.is_err());
    }
}
