//! Sluice's OAuth 2.1 client: how Sluice signs in to the upstream MCP servers it fronts, and how
//! `sluice client` signs in to any MCP server.
//!
//! - [`Challenge`]: what a 401 / 403 `WWW-Authenticate: Bearer` says.
//! - [`discovery`]: the protected resource metadata (RFC 9728) and the authorization server's
//!   metadata (RFC 8414, OpenID discovery), issuer and resource checked, PKCE S256 required.
//! - [`client`]: the client's identity: pre-registered, a client ID metadata document, or
//!   dynamic registration (RFC 7591), kept per issuer in the vault.
//! - [`flow`]: the authorization code flow with PKCE, `state`, `resource` (RFC 8707) and the
//!   RFC 9207 `iss` check; flows parked in the vault, single use, for ten minutes.
//! - [`connect`]: a user connecting their own account (per-user upstreams): the single-use link
//!   of a URL elicitation, and the outcome its sign-in records for the call that waits.
//! - [`signin`]: a person's browser signed in at the gateway's own identity provider
//!   (OpenID Connect) before a connect link is used, so the link serves its principal only.
//! - [`token`]: the token endpoint (code, refresh, client credentials; `client_secret_basic`,
//!   `client_secret_post`, `none`, `private_key_jwt`) and the [`Grant`] kept.
//! - [`Identity`]: one upstream's identity at run time: the token in memory, refresh before
//!   expiry and on 401 (once across replicas), step-up on 403, "needs login" when a person must
//!   act.
//! - [`revoke`]: RFC 7009 revocation of a grant at its authorization server.
//! - [`exchange`]: RFC 8693 token exchange, a client's own token for one toward an upstream,
//!   cached per principal ([`Exchanger`]).
//! - [`enterprise`]: enterprise-managed authorization (ID-JAG): an identity assertion
//!   exchanged at the IdP (RFC 8693), then the JWT bearer grant (RFC 7523) at the MCP server's
//!   authorization server ([`Mode::Enterprise`]).
//! - [`events`]: connects, revokes and refresh failures of users' grants, for the audit log.
//! - [`Fetcher`]: bounded HTTP (https except loopback, no cross-origin redirects, 1 MB, timeouts).
//!
//! Crates doing solved parts: `oauth2` (PKCE, state, the authorization URL, the token requests
//! and their responses), `jsonwebtoken` (the `private_key_jwt` assertion), `url`, `reqwest`.
//! Nothing here writes a token, secret, code or verifier to a log or an error.

pub mod challenge;
pub mod client;
pub mod connect;
pub mod discovery;
pub mod enterprise;
mod error;
pub mod events;
pub mod exchange;
pub mod fetch;
pub mod flow;
pub mod identity;
pub mod revoke;
pub mod signin;
#[cfg(test)]
mod testing;
pub mod token;

pub use challenge::Challenge;
pub use client::{ClientCredentials, ClientSettings};
pub use enterprise::{Assertion, EnterpriseConfig};
pub use error::AuthError;
pub use exchange::{ExchangeConfig, Exchanger};
pub use fetch::Fetcher;
pub use identity::{Consent, Identity, IdentityConfig, Mode, Status};
pub use revoke::Revoked;
pub use token::{Grant, SigningKey};
