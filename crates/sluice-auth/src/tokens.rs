//! Static bearer tokens and API keys, looked up by the SHA-256 of what the caller sent (the
//! configuration never holds a token itself).

use sha2::{Digest, Sha256};
use sluice_config::StaticToken;
use sluice_core::Principal;
use std::collections::HashMap;

/// The configured tokens, by hash.
#[derive(Debug, Default)]
pub struct StaticTokens {
    by_hash: HashMap<String, (String, Vec<String>)>,
}

impl StaticTokens {
    /// Index the configured tokens.
    pub fn new(tokens: &[StaticToken]) -> StaticTokens {
        StaticTokens {
            by_hash: tokens
                .iter()
                .map(|t| (t.sha256.clone(), (t.name.clone(), t.scopes.clone())))
                .collect(),
        }
    }

    /// The principal `token` stands for, if it is one of ours.
    pub fn find(&self, token: &str) -> Option<Principal> {
        if self.by_hash.is_empty() {
            return None;
        }
        let (name, scopes) = self.by_hash.get(&hash(token))?;
        Some(Principal {
            id: name.clone(),
            kind: "token",
            scopes: scopes.clone(),
            claims: Default::default(),
        })
    }
}

/// Lowercase hex SHA-256.
pub fn hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_found_by_hash() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let t = StaticTokens::new(&[StaticToken {
            name: "ci".into(),
            sha256: hash("s3cret"),
            scopes: vec!["mcp".into()],
        }]);
        let p = t.find("s3cret").unwrap();
        assert_eq!(
            (p.id.as_str(), p.kind, p.scopes.clone()),
            ("ci", "token", vec!["mcp".to_string()])
        );
        assert!(t.find("s3cret ").is_none());
    }
}
