//! Who is calling: the identity the auth layer established for a request, shown to hooks, the
//! authorization rules, the rate limiter and the audit log.

use serde::Serialize;
use serde_json::{Map, Value};

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Principal {
    /// A stable name: the token's `name` for a static token, `sub` (or `client_id`) for a JWT,
    /// `stdio` for the local stdio client.
    pub id: String,
    /// How the caller proved it: `"token"`, `"jwt"` or `"local"`.
    pub kind: &'static str,
    /// The scopes granted (static token scopes, or the JWT's `scope` / `scp` claim).
    pub scopes: Vec<String>,
    /// Every claim of a JWT (empty for other kinds).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub claims: Map<String, Value>,
}

impl Principal {
    /// The JSON form given to hooks and written to the audit log.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The local user on the other end of `--stdio`: the process that started Sluice, trusted
    /// by the operating system.
    pub fn stdio() -> Principal {
        Principal {
            id: "stdio".into(),
            kind: "local",
            scopes: Vec::new(),
            claims: Map::new(),
        }
    }

    /// Whether the principal holds `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}
