//! The MCP protocol revisions Sluice speaks.

/// Legacy-era revisions, oldest first. The last one is the one Sluice offers by default.
pub const LEGACY_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Modern-era revisions (no handshake; version and capabilities in every request's `_meta`).
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// Every revision Sluice speaks, newest first (`supportedVersions` of `server/discover`).
pub const ALL_VERSIONS: &[&str] = &[
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

/// Is `v` a modern revision Sluice supports?
pub fn is_modern(v: &str) -> bool {
    MODERN_VERSIONS.contains(&v)
}

/// The `_meta` keys of the modern era.
pub mod meta {
    /// The request's protocol version.
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's name and version.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The client's capabilities, per request.
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The server's name and version, on results.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The `subscriptions/listen` stream a notification belongs to.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// The log level a request opts in to.
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
}

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
