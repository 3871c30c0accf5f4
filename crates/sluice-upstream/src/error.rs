//! Why an upstream call failed.

/// A failure talking to an upstream.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum UpstreamError {
    /// The process could not be started or the server could not be reached.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The connection ended (process exited, stream closed, session expired).
    #[error("connection closed: {0}")]
    Closed(String),
    /// No reply within the timeout.
    #[error("no reply within {0} ms")]
    Timeout(u64),
    /// The upstream broke the protocol or the transport (bad status, bad body).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The upstream refuses Sluice's identity and signing in (again) did not fix it: a person
    /// must sign in, or the authorization server refused.
    #[error("{0}")]
    Auth(#[from] sluice_oauth::AuthError),
}
