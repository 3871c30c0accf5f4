//! The Skills extension (`io.modelcontextprotocol/skills`): whether a server declares it, a
//! skill's entry ([`entry`]), skill URIs under a gateway's namespace ([`uri`]), and what a
//! read returned checked against the entry: size, digest and frontmatter ([`verify`]).
//!
//! Shared by the gateway (which lists the skills of its upstreams under its own namespace and
//! checks every skill file it passes on) and `sluice client` (which loads a skill as a host
//! does).

pub mod entry;
pub mod uri;
pub mod verify;

use serde_json::Value;

pub use entry::{Entry, EntryError, File, Files, MAX_FILES, MAX_TOTAL_BYTES, SKILL_MD};
pub use verify::Mismatch;

/// The extension's identifier, the key under `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/skills";

/// The extension's settings when `capabilities` (a server's) declare it.
pub fn declared(capabilities: &Value) -> Option<&Value> {
    capabilities.get("extensions")?.get(EXTENSION)
}

/// Does the server implement `resources/directory/read` (`directoryRead: true`)?
pub fn directory_read(capabilities: &Value) -> bool {
    declared(capabilities)
        .and_then(|s| s.get("directoryRead"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests;
