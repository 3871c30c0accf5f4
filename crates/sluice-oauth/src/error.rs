//! Why signing in to an upstream failed: one enum, every message naming the URL or the step, and
//! never a token, secret, code or verifier.

/// A failure of the OAuth client.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum AuthError {
    /// A document or endpoint could not be fetched (network, timeout, status, size, scheme).
    #[error("{url}: {why}")]
    Fetch {
        /// The URL asked for.
        url: String,
        /// What went wrong.
        why: String,
    },
    /// A metadata document was fetched but is not acceptable (bad JSON, missing fields, wrong
    /// issuer or resource, no PKCE S256).
    #[error("{url}: {why}")]
    Metadata {
        /// The document's URL.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// No protected resource metadata and no authorization server could be found.
    #[error("no authorization server found for {0}")]
    Discovery(String),
    /// Registering the client failed or is impossible (no registration endpoint, no client ID
    /// metadata document support, nothing pre-registered).
    #[error("client registration at {issuer}: {why}")]
    Registration {
        /// The authorization server.
        issuer: String,
        /// Why.
        why: String,
    },
    /// The authorization response was refused (state, iss, an `error` from the server).
    #[error("authorization refused: {0}")]
    Authorization(String),
    /// The token endpoint refused a request (its OAuth error code and description).
    #[error("the token endpoint refused the {grant} request: {why}")]
    Token {
        /// `authorization_code`, `refresh_token` or `client_credentials`.
        grant: &'static str,
        /// The OAuth error and description, or the transport failure.
        why: String,
    },
    /// The revocation endpoint (RFC 7009) refused to revoke a grant.
    #[error("the revocation endpoint {url} refused: {why}")]
    Revocation {
        /// The revocation endpoint.
        url: String,
        /// The OAuth error and description.
        why: String,
    },
    /// A person must sign in (again): no grant, a revoked grant, more scopes needed.
    #[error("needs login: {0}")]
    NeedsLogin(String),
    /// A 403 `insufficient_scope` asks for scopes already asked for and granted: asking again
    /// would be refused the same way.
    #[error(
        "the server refuses the request for lack of scopes already granted ({0}); not asking again"
    )]
    ScopeRefused(String),
    /// Step-up was tried too often for the same request.
    #[error("the server still refuses after {0} authorization attempts (insufficient_scope)")]
    RetryLimit(u32),
    /// The configuration cannot work (a key file that does not load, a bad URL).
    #[error("{0}")]
    Config(String),
    /// The vault failed.
    #[error("vault: {0}")]
    Vault(String),
}

impl From<sluice_vault::VaultError> for AuthError {
    fn from(e: sluice_vault::VaultError) -> AuthError {
        AuthError::Vault(e.to_string())
    }
}
