//! Why an outbound HTTP request failed: the transport's error, with its source.

use sluice_core::error::with_causes;

/// A request that did not get (or finish reading) its response. Its text is the failure with
/// its causes, as hyper or reqwest tell them; [`std::error::Error::source`] is the
/// underlying error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The TCP connection to a plain `http://` host could not be opened.
    #[error("connecting to {authority} failed: {source}")]
    Connect {
        /// `host:port`.
        authority: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// hyper failed on a plain `http://` connection: the handshake, sending the request, or
    /// reading the response.
    #[error("{}", with_causes(.0))]
    Hyper(#[from] hyper::Error),
    /// reqwest failed (`https://`, or through a proxy): connecting, TLS, sending, reading.
    #[error("{}", with_causes(.0))]
    Reqwest(#[from] reqwest::Error),
    /// The host of a plain `http://` URL is not a valid `Host` header.
    #[error("bad host {host:?}: {source}")]
    BadHost {
        /// The host as the URL gave it.
        host: String,
        /// Why it is not a header value.
        #[source]
        source: hyper::header::InvalidHeaderValue,
    },
    /// The request target of a plain `http://` URL is not a valid URI.
    #[error("{0}")]
    Uri(#[from] hyper::http::uri::InvalidUri),
}
