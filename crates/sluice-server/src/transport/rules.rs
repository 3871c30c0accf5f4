//! The header rules of the HTTP face, for both eras: `Origin` and `Host` (DNS rebinding: 403),
//! one value of `MCP-Protocol-Version` and one `Mcp-Session-Id` (400), and the supported
//! protocol versions (400), and what `Accept` lists.

use crate::http_parts::{header_str, json_error, PROTOCOL, SESSION};
use crate::state::Snapshot;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use sluice_core::{version, RpcError};

/// Every rule a request's headers must pass before anything else is read (Origin, Host, the
/// single-valued MCP headers).
#[allow(clippy::result_large_err)] // the error is the HTTP response itself, built once
pub(crate) fn check(snap: &Snapshot, headers: &HeaderMap) -> Result<(), Response> {
    if !origin_allowed(snap, headers) {
        return Err(json_error(
            StatusCode::FORBIDDEN,
            RpcError::invalid_request("Origin not allowed"),
            None,
        ));
    }
    if let Err(host) = host_allowed(snap, headers) {
        return Err(json_error(
            StatusCode::FORBIDDEN,
            RpcError::invalid_request(format!("Host {host:?} not allowed")),
            None,
        ));
    }
    let mut versions = headers.get_all(PROTOCOL).into_iter();
    let first = versions.next();
    if versions.any(|v| Some(v) != first) {
        return Err(json_error(
            StatusCode::BAD_REQUEST,
            RpcError::invalid_request("conflicting MCP-Protocol-Version headers: send one"),
            None,
        ));
    }
    if headers.get_all(SESSION).iter().nth(1).is_some() {
        return Err(json_error(
            StatusCode::BAD_REQUEST,
            RpcError::invalid_request("more than one Mcp-Session-Id header: send one"),
            None,
        ));
    }
    Ok(())
}

/// Is this `Origin` allowed? Absent (non-browser clients), loopback, or configured.
fn origin_allowed(snap: &Snapshot, headers: &HeaderMap) -> bool {
    let Some(origin) = header_str(headers, axum::http::header::ORIGIN) else {
        return true;
    };
    if snap
        .settings()
        .allowed_origins
        .iter()
        .any(|o| o == origin || o == "*")
    {
        return true;
    }
    let host = origin
        .split("://")
        .nth(1)
        .unwrap_or("")
        .split('/')
        .next()
        .unwrap_or("");
    matches!(
        host_part(host).as_str(),
        "localhost" | "127.0.0.1" | "[::1]"
    )
}

/// Is the `Host` allowed? Any when `allowed_hosts` is empty; else an entry must equal the value
/// or its host part (without the port). The refused value is returned (`""` when absent).
fn host_allowed(snap: &Snapshot, headers: &HeaderMap) -> Result<(), String> {
    let allowed = &snap.settings().allowed_hosts;
    if allowed.is_empty() {
        return Ok(());
    }
    let value = headers
        .get(header::HOST)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let bare = host_part(&value);
    if !value.is_empty()
        && allowed
            .iter()
            .any(|a| a.eq_ignore_ascii_case(&value) || a.eq_ignore_ascii_case(&bare))
    {
        return Ok(());
    }
    Err(value)
}

/// `host[:port]` without the port (`[v6]` keeps its brackets).
fn host_part(host: &str) -> String {
    if host.starts_with('[') {
        host.split(']')
            .next()
            .map(|h| format!("{h}]"))
            .unwrap_or_default()
    } else {
        host.split(':').next().unwrap_or("").to_string()
    }
}

/// Check `MCP-Protocol-Version` (absent = 2025-03-26; unknown = 400).
#[allow(clippy::result_large_err)] // the error is the HTTP response itself, built once
pub(crate) fn check_version(headers: &HeaderMap) -> Result<(), Response> {
    match header_str(headers, PROTOCOL) {
        None => Ok(()),
        Some(v) if version::is_supported(v) => Ok(()),
        Some(v) => Err(json_error(
            StatusCode::BAD_REQUEST,
            RpcError::invalid_request(format!(
                "unsupported MCP-Protocol-Version {v:?} (supported: {})",
                version::LEGACY_VERSIONS.join(", ")
            )),
            None,
        )),
    }
}

/// Does `Accept` take each of `what` (or `*/*`)? One pass over the header's media ranges.
pub(crate) fn accepts_all<const N: usize>(headers: &HeaderMap, what: [&str; N]) -> bool {
    let mut seen = [false; N];
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let t = range.split(';').next().unwrap_or("").trim();
            if t == "*/*" {
                return true;
            }
            for (seen, w) in seen.iter_mut().zip(what) {
                *seen |= t.eq_ignore_ascii_case(w);
            }
            if seen.iter().all(|s| *s) {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::host_part;

    #[test]
    fn the_host_part_drops_the_port() {
        assert_eq!(host_part("example.com:8750"), "example.com");
        assert_eq!(host_part("example.com"), "example.com");
        assert_eq!(host_part("[::1]:8750"), "[::1]");
    }
}
