//! The MCP protocol revisions Sluice speaks.

/// Legacy-era revisions, oldest first. The last one is the one Sluice offers by default.
pub const LEGACY_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The newest legacy revision (what Sluice answers when a client asks for one it does not know).
pub const LATEST_LEGACY: &str = "2025-11-25";

/// The revision assumed when an HTTP request after initialisation carries no
/// `MCP-Protocol-Version` header (the 2025-06-18 transport rule).
pub const DEFAULT_HTTP_VERSION: &str = "2025-03-26";

/// Is `v` a legacy revision Sluice supports?
pub fn is_supported(v: &str) -> bool {
    LEGACY_VERSIONS.contains(&v)
}

/// The version to answer an `initialize` that asked for `requested`: the same one when supported,
/// else the latest.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| LEGACY_VERSIONS.iter().find(|v| **v == r).copied())
        .unwrap_or(LATEST_LEGACY)
}
