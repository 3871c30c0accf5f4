//! The `cluster` object of `sluice.json`: the keys that seal session ids (`${env:NAME}`
//! expanded; an array rotates them) and the Redis URL every replica shares.

use crate::fields::{expand_env, Fields};

/// Keys the loader accepts in `cluster`.
pub(crate) const CLUSTER_KNOWN: &[&str] = &["key", "redis"];

/// The `cluster` object of `sluice.json`: the key that seals session ids and the Redis every
/// replica shares.
#[derive(Clone, PartialEq)]
pub struct ClusterSettings {
    /// The keys (32 bytes each, from base64): the first seals, every one opens (rotation).
    pub keys: Vec<[u8; 32]>,
    /// The Redis URL (`redis://[user[:password]@]host[:port][/db]`).
    pub redis: String,
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSettings")
            .field("keys", &format_args!("[{} hidden]", self.keys.len()))
            .field("redis", &crate::builtin::redis_url_shown(&self.redis))
            .finish()
    }
}

/// The `cluster` object's fields (`${env:NAME}` expanded in both).
pub(crate) fn load(
    f: &mut Fields,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<ClusterSettings> {
    for key in f.obj.keys() {
        if !CLUSTER_KNOWN.contains(&key.as_str()) {
            f.err(
                key,
                format!(
                    "unknown cluster setting (known: {})",
                    CLUSTER_KNOWN.join(", ")
                ),
            );
        }
    }
    let keys = load_keys(f, env, "sluice cluster keygen");
    let redis = match f.obj.get("redis") {
        Some(serde_json::Value::String(r)) => match expand_env(r, env) {
            Ok(url) => match crate::builtin::redis_url_problem(&url) {
                None => Some(url),
                Some(p) => {
                    f.err("redis", p);
                    None
                }
            },
            Err(e) => {
                f.err("redis", e);
                None
            }
        },
        None | Some(serde_json::Value::Null) => {
            f.err(
                "redis",
                "is required (redis://host:port/db: what every replica shares)",
            );
            None
        }
        Some(_) => {
            f.err("redis", "must be a string");
            None
        }
    };
    match (keys, redis) {
        (Some(keys), Some(redis)) => Some(ClusterSettings { keys, redis }),
        _ => None,
    }
}

/// The `key` field of `cluster` or `vault`: one key, or an array whose first seals and all open
/// (`${env:NAME}` expanded). None (with errors recorded) when it is missing or a key is bad.
pub(crate) fn load_keys(
    f: &mut Fields,
    env: &dyn Fn(&str) -> Option<String>,
    keygen: &str,
) -> Option<Vec<[u8; 32]>> {
    let mut ok = true;
    let texts: Vec<(String, String)> = match f.obj.get("key") {
        None | Some(serde_json::Value::Null) => {
            f.err(
                "key",
                format!("is required (32 random bytes in base64: `{keygen}` prints one)"),
            );
            return None;
        }
        Some(serde_json::Value::String(k)) => vec![("key".into(), k.clone())],
        Some(serde_json::Value::Array(a)) if !a.is_empty() => {
            let mut out = Vec::new();
            for (i, v) in a.iter().enumerate() {
                match v.as_str() {
                    Some(k) => out.push((format!("key[{i}]"), k.to_string())),
                    None => {
                        f.err(&format!("key[{i}]"), "must be a string");
                        ok = false;
                    }
                }
            }
            out
        }
        Some(_) => {
            f.err(
                "key",
                "must be a string or a non-empty array of strings (the first seals, all open)",
            );
            return None;
        }
    };
    let mut keys = Vec::new();
    for (at, text) in texts {
        match expand_env(&text, env)
            .map_err(|e| e.to_string())
            .and_then(|k| key_bytes_for(&k, keygen))
        {
            Ok(k) => keys.push(k),
            Err(e) => {
                f.err(&at, e);
                ok = false;
            }
        }
    }
    ok.then_some(keys)
}

/// A key: 32 bytes in standard or URL-safe base64 (padding optional), the errors naming `keygen`
/// as the command that prints one. The error never shows the key.
pub(crate) fn key_bytes_for(text: &str, keygen: &str) -> Result<[u8; 32], String> {
    use base64::Engine as _;
    let t = text.trim();
    let engines = [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    let decoded = engines.iter().find_map(|e| e.decode(t).ok());
    match decoded {
        None => Err(format!(
            "is not base64 (32 random bytes in base64: `{keygen}` prints one)"
        )),
        Some(b) => <[u8; 32]>::try_from(b.as_slice()).map_err(|_| {
            format!(
                "decodes to {} bytes, not 32 (`{keygen}` prints a key)",
                b.len()
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";

    fn read(v: serde_json::Value) -> (Option<ClusterSettings>, Vec<String>) {
        let obj = v.as_object().unwrap().clone();
        let mut errors = Vec::new();
        let file = std::path::Path::new("sluice.json");
        let mut f = Fields {
            file,
            path: "cluster".into(),
            obj: &obj,
            errors: &mut errors,
        };
        let env = |n: &str| match n {
            "SLUICE_CLUSTER_KEY" => Some(KEY.to_string()),
            "SHORT" => Some("c2hvcnQ=".to_string()),
            _ => None,
        };
        let c = load(&mut f, &env);
        let errors = errors
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        (c, errors)
    }

    #[test]
    fn keys_come_from_the_environment_and_rotate() {
        let (c, errors) =
            read(json!({"key": "${env:SLUICE_CLUSTER_KEY}", "redis": "redis://127.0.0.1:6379/0"}));
        assert!(errors.is_empty(), "{errors:?}");
        let c = c.unwrap();
        assert_eq!(
            c.keys,
            [key_bytes_for(KEY, "sluice cluster keygen").unwrap()]
        );
        assert_eq!(c.redis, "redis://127.0.0.1:6379/0");
        let other = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA";
        let (c, errors) = read(json!({"key": [other, KEY], "redis": "redis://h"}));
        assert!(errors.is_empty(), "{errors:?}");
        let keys = c.unwrap().keys;
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0][..3], [1, 2, 3]);
    }

    #[test]
    fn bad_keys_and_urls_are_named_without_showing_the_key() {
        let (c, errors) = read(
            json!({"key": ["${env:SHORT}", "not base64!", 5, "${env:NOPE}"], "redis": "http://x", "extra": 1}),
        );
        assert!(c.is_none());
        assert_eq!(
            errors,
            [
                "cluster.extra: unknown cluster setting (known: key, redis)",
                "cluster.key[2]: must be a string",
                "cluster.key[0]: decodes to 5 bytes, not 32 (`sluice cluster keygen` prints a key)",
                "cluster.key[1]: is not base64 (32 random bytes in base64: `sluice cluster keygen` prints one)",
                "cluster.key[3]: environment variable NOPE is not set",
                "cluster.redis: \"http://x\" is not a redis:// URL",
            ]
        );
        // Both missing fields are named at once.
        let (_, errors) = read(json!({}));
        assert_eq!(
            errors,
            [
                "cluster.key: is required (32 random bytes in base64: `sluice cluster keygen` prints one)",
                "cluster.redis: is required (redis://host:port/db: what every replica shares)",
            ]
        );
        let (_, errors) = read(json!({"key": KEY}));
        assert_eq!(
            errors,
            ["cluster.redis: is required (redis://host:port/db: what every replica shares)"]
        );
        let (_, errors) = read(json!({"key": [], "redis": "redis://h"}));
        assert_eq!(
            errors,
            ["cluster.key: must be a string or a non-empty array of strings (the first seals, all open)"]
        );
    }
}
