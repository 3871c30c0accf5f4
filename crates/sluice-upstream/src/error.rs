//! Why an upstream call failed: [`UpstreamError`], with what could not be reached
//! ([`ConnectError`]) and how the upstream broke the protocol ([`ProtocolError`]). Each
//! variant keeps its cause as a value (and as [`std::error::Error::source`]); the text is
//! made only where it is shown (a JSON-RPC error message, a log line, a slot's status).

use serde_json::Value;
use std::error::Error;

/// Any error, boxed.
pub type Source = Box<dyn Error + Send + Sync>;

/// The reason of [`UpstreamError::SessionEnded`].
pub(crate) const SESSION_ENDED: &str = "the upstream ended the session (HTTP 404)";

/// A failure talking to an upstream.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The process could not be started or the server could not be reached.
    #[error("cannot connect: {0}")]
    Connect(#[from] ConnectError),
    /// The connection ended (process exited, stream closed, shut down by the gateway); the
    /// reason, as said to the calls waiting on it.
    #[error("connection closed: {0}")]
    Closed(String),
    /// The upstream ended the session: an HTTP 404 to a request that carried its
    /// `Mcp-Session-Id` (it restarted, or expired the session). The request ran nothing.
    #[error("connection closed: {SESSION_ENDED}")]
    SessionEnded,
    /// No reply within the timeout (ms).
    #[error("no reply within {0} ms")]
    Timeout(u64),
    /// The upstream answered a request with an HTTP error status and no JSON-RPC message.
    #[error("protocol error: HTTP {}{}", status_text(.status), body_text(.body))]
    Status {
        /// The status code.
        status: u16,
        /// The start of the body (at most 300 bytes), when it had one.
        body: Option<String>,
    },
    /// The upstream broke the protocol or the transport (bad body, broken stream).
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// The store the replicas of a cluster share upstream sessions through failed (see
    /// [`SharedSessions`](crate::SharedSessions)).
    #[error("{0}")]
    Shared(#[source] Source),
    /// The upstream refuses Sluice's identity and signing in (again) did not fix it: a person
    /// must sign in, or the authorization server refused.
    #[error("{0}")]
    Auth(#[from] sluice_oauth::AuthError),
}

impl UpstreamError {
    /// The HTTP status the upstream answered with, when that is what failed (directly, or as
    /// the cause of a failed `initialize`).
    pub fn http_status(&self) -> Option<u16> {
        match self {
            UpstreamError::Status { status, .. }
            | UpstreamError::Connect(ConnectError::GetStatus { status, .. })
            | UpstreamError::Protocol(ProtocolError::ResumeStatus { status }) => Some(*status),
            UpstreamError::Protocol(ProtocolError::Initialize {
                cause: Some(cause), ..
            }) => cause.http_status(),
            _ => None,
        }
    }
}

/// Why an upstream could not be started or reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The stdio server's process could not be started.
    #[error("cannot start {command:?}: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The configured URL does not parse.
    #[error("bad url {url:?}: {source}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: Source,
    },
    /// A configured header's name is not a valid header name.
    #[error("bad header name {name:?}: {source}")]
    BadHeaderName {
        /// The name.
        name: String,
        /// Why.
        #[source]
        source: Source,
    },
    /// A configured header's value is not a valid header value.
    #[error("bad value for header {name:?}: {source}")]
    BadHeaderValue {
        /// The header's name.
        name: String,
        /// Why.
        #[source]
        source: Source,
    },
    /// The id or version of an upstream session another replica recorded is not a valid
    /// header value.
    #[error("bad shared upstream session: {source}")]
    BadSharedSession {
        /// Why.
        #[source]
        source: Source,
    },
    /// Only a Streamable HTTP upstream session can be used by another replica.
    #[error("only a Streamable HTTP upstream session can be shared")]
    NotShareable,
    /// The GET that opens a legacy SSE stream failed.
    #[error("GET {url} failed: {source}")]
    Get {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The GET that opens a legacy SSE stream was answered with an error status.
    #[error("GET {url} answered HTTP {}", status_text(.status))]
    GetStatus {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// A POST of a message (Streamable HTTP) got no response.
    #[error("POST failed: {source}")]
    Post {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: sluice_http::Error,
    },
}

/// How an upstream broke the protocol or the transport.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The configuration says era "modern" and the upstream does not answer `server/discover`
    /// with 2026-07-28.
    #[error(
        "the upstream does not speak {} (server/discover failed) and the configuration says era \"modern\"",
        sluice_core::version::MODERN_VERSIONS[0]
    )]
    NotModern,
    /// `initialize` was answered with a JSON-RPC error: the upstream's, or the one Sluice
    /// answers a request with when it failed on its way (then `cause` says why).
    #[error("initialize failed: {error}")]
    Initialize {
        /// The error object.
        error: Value,
        /// Why the request failed on its way (None: the upstream answered with the error).
        #[source]
        cause: Option<Box<UpstreamError>>,
    },
    /// `initialize` was answered with neither a result nor an error.
    #[error("initialize: empty reply")]
    EmptyInitialize,
    /// The body of a response could not be read.
    #[error("reading the reply failed: {0}")]
    Body(#[source] sluice_http::Error),
    /// The body is not a JSON-RPC message.
    #[error("the reply is not JSON-RPC: {0}")]
    NotJsonRpc(String),
    /// A reply stream broke, and the GET that resumes it was answered with an error status.
    #[error("the reply stream broke and resuming it failed: HTTP {}", status_text(.status))]
    ResumeStatus {
        /// The status code.
        status: u16,
    },
    /// A reply stream broke, and the GET that resumes it failed.
    #[error("the reply stream broke and resuming it failed: {0}")]
    Resume(#[source] sluice_http::Error),
    /// A reply stream ended (after resuming) without the reply.
    #[error("the reply stream ended without a reply")]
    NoReply,
    /// The legacy SSE stream broke before naming its endpoint.
    #[error("SSE: {0}")]
    Sse(#[source] Source),
    /// The legacy SSE stream ended before naming its endpoint.
    #[error("the SSE stream ended before naming its endpoint")]
    NoEndpoint,
    /// The endpoint the legacy SSE stream named is not a URL.
    #[error("bad endpoint {endpoint:?}: {source}")]
    BadEndpoint {
        /// The endpoint as named.
        endpoint: String,
        /// Why.
        #[source]
        source: Source,
    },
}

/// A status as HTTP libraries show it: `404 Not Found`.
fn status_text(status: &u16) -> String {
    match reqwest::StatusCode::from_u16(*status) {
        Ok(s) => s.to_string(),
        Err(_) => status.to_string(),
    }
}

/// `: ` and the body, when there is one.
fn body_text(body: &Option<String>) -> String {
    body.as_deref()
        .map(|b| format!(": {b}"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts clients and logs see are the ones Sluice always gave (tests and users read
    /// them); the causes are values.
    #[test]
    fn texts_stay_as_they_were() {
        assert_eq!(
            UpstreamError::SessionEnded.to_string(),
            "connection closed: the upstream ended the session (HTTP 404)"
        );
        assert_eq!(
            UpstreamError::Status {
                status: 401,
                body: None
            }
            .to_string(),
            "protocol error: HTTP 401 Unauthorized"
        );
        assert_eq!(
            UpstreamError::Status {
                status: 500,
                body: Some("boom".into())
            }
            .to_string(),
            "protocol error: HTTP 500 Internal Server Error: boom"
        );
        assert_eq!(
            UpstreamError::Closed("the process closed its stdout (exited)".into()).to_string(),
            "connection closed: the process closed its stdout (exited)"
        );
        assert_eq!(
            UpstreamError::Timeout(250).to_string(),
            "no reply within 250 ms"
        );
        let spawn = UpstreamError::from(ConnectError::Spawn {
            command: "nope".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        assert_eq!(
            spawn.to_string(),
            "cannot connect: cannot start \"nope\": entity not found"
        );
        assert_eq!(
            UpstreamError::from(ProtocolError::NotModern).to_string(),
            "protocol error: the upstream does not speak 2026-07-28 (server/discover failed) and the configuration says era \"modern\""
        );
        assert_eq!(
            UpstreamError::from(ConnectError::GetStatus {
                url: "http://h/sse".into(),
                status: 403
            })
            .to_string(),
            "cannot connect: GET http://h/sse answered HTTP 403 Forbidden"
        );
    }

    /// The cause is the source, and the text with causes says it once.
    #[test]
    fn causes_are_sources() {
        let e = UpstreamError::from(ConnectError::Spawn {
            command: "nope".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        let connect = e.source().expect("the connect error");
        let io = connect.source().expect("the io error");
        assert!(io.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(sluice_core::error::with_causes(&e), e.to_string());
    }

    /// A failed `initialize` knows the status that failed it.
    #[test]
    fn the_status_under_a_failed_initialize_is_found() {
        let refused = UpstreamError::Status {
            status: 401,
            body: None,
        };
        let e = UpstreamError::from(ProtocolError::Initialize {
            error: serde_json::json!({"code": -32000, "message": refused.to_string()}),
            cause: Some(Box::new(refused)),
        });
        assert_eq!(e.http_status(), Some(401));
        assert_eq!(UpstreamError::SessionEnded.http_status(), None);
    }
}
