//! The `requestState` Sluice hands a 2026-07-28 client with an `input_required` result, and
//! checks when the retry brings it back: signed, so that only this gateway process (or, in a
//! cluster, a replica of it) can issue one.
//!
//! Wire format (at most 2,048 characters):
//!
//! ```text
//! sluice1.<body>.<tag>
//! body = base64url(JSON payload), no padding
//! tag  = base64url(HMAC-SHA256(key, body)), no padding; the key is random per process, or in a
//!        cluster HMAC-SHA256(cluster key, "sluice-request-state-v1")
//! payload = {"k": "<parked call token>" (in a cluster "<replica>.<token>"),
//!            "p": "<principal id>" | null,
//!            "d": "<request digest>", "e": <expiry, Unix seconds>}
//! ```
//!
//! A state is accepted when its tag verifies, `e` is not past, `d` is the [`digest`] of the
//! retry (same method, same params but for `_meta`, `inputResponses` and `requestState`), and `p`
//! is the retrying principal. Any other `requestState` (not starting `sluice1.`) belongs to a
//! 2026-07-28 upstream and goes to it untouched.
//!
//! Why not a JWT (HS256)? The format is smaller and needs no header; expiry is one comparison.

use base64::Engine;
use ring::hmac;
use serde_json::{json, Value};
use sluice_core::Message;
use std::time::{SystemTime, UNIX_EPOCH};

/// How Sluice's own `requestState` values begin.
pub(crate) const PREFIX: &str = "sluice1.";

/// The longest `requestState` Sluice reads.
const MAX_LEN: usize = 2048;

const NOT_OURS: &str = "it is not a Sluice request state";

/// What a state says: the parked call it continues and who may continue it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Claims {
    /// The key of the parked call.
    pub token: String,
    /// The principal the state was issued to.
    pub principal: Option<String>,
    /// The [`digest`] of the request.
    pub digest: String,
    /// When it expires, Unix seconds.
    pub expires: u64,
}

/// Signs and checks request states with a key of its own (or, in a cluster, keys derived
/// from the cluster keys, so that every replica can check what any replica issued: the first
/// signs, all verify).
pub(crate) struct Signer {
    key: hmac::Key,
    also: Vec<hmac::Key>,
}

impl Default for Signer {
    /// A signer with a fresh random key.
    fn default() -> Signer {
        let rng = ring::rand::SystemRandom::new();
        Signer {
            key: hmac::Key::generate(hmac::HMAC_SHA256, &rng).expect("the system RNG works"),
            also: Vec::new(),
        }
    }
}

impl Signer {
    /// A signer every replica of a cluster shares: keys derived from the cluster keys (never
    /// the keys themselves), the first signing.
    pub(crate) fn for_cluster(keys: &[[u8; 32]]) -> Signer {
        let mut derived = keys.iter().map(|k| {
            let tag = hmac::sign(
                &hmac::Key::new(hmac::HMAC_SHA256, k),
                b"sluice-request-state-v1",
            );
            hmac::Key::new(hmac::HMAC_SHA256, tag.as_ref())
        });
        let key = derived.next().expect("a cluster has a key");
        Signer {
            key,
            also: derived.collect(),
        }
    }
}

impl Signer {
    /// The state carrying these claims.
    pub(crate) fn sign(&self, c: &Claims) -> String {
        let payload = json!({
            "k": c.token,
            "p": c.principal,
            "d": c.digest,
            "e": c.expires,
        });
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let body = b64.encode(payload.to_string());
        let tag = hmac::sign(&self.key, body.as_bytes());
        format!("{PREFIX}{body}.{}", b64.encode(tag.as_ref()))
    }

    /// The payload of a state this signer issued, or why not.
    fn verify(&self, state: &str) -> Result<Value, &'static str> {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        if state.len() > MAX_LEN {
            return Err("it is too long");
        }
        let state = state.strip_prefix(PREFIX).ok_or(NOT_OURS)?;
        let (body, tag) = state.split_once('.').ok_or(NOT_OURS)?;
        let tag = b64.decode(tag).map_err(|_| NOT_OURS)?;
        std::iter::once(&self.key)
            .chain(&self.also)
            .find(|k| hmac::verify(k, body.as_bytes(), &tag).is_ok())
            .ok_or(
                "its signature does not verify (it was changed, or another gateway instance issued it)",
            )?;
        let bytes = b64.decode(body).map_err(|_| NOT_OURS)?;
        serde_json::from_slice(&bytes).map_err(|_| NOT_OURS)
    }

    /// The parked call's token, when `state` is one this signer issued, not expired at `now`
    /// (Unix seconds), for the request with this digest and this principal; else why not.
    pub(crate) fn open(
        &self,
        state: &str,
        digest: &str,
        principal: Option<&str>,
        now: u64,
    ) -> Result<String, &'static str> {
        let payload = self.verify(state)?;
        if payload["e"].as_u64().unwrap_or(0) < now {
            return Err("it has expired");
        }
        if payload["d"] != json!(digest) {
            return Err("it belongs to another request (method or params differ)");
        }
        if payload["p"] != json!(principal) {
            return Err("it was issued to another principal");
        }
        Ok(payload["k"].as_str().unwrap_or("").to_string())
    }
}

/// Now, Unix seconds.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A digest of what identifies a request across its rounds: its method and its params without
/// `_meta`, `inputResponses` and `requestState`, keys sorted (hex SHA-256). It only has to be
/// stable inside one process. Each member of the params is parsed alone when the request is
/// kept as text (the rest, such as `_meta`, is never parsed for it); the canonical text
/// (objects `{"k":v,…,}` with sorted keys, arrays `[v,…,]`, other values as serde_json writes
/// them) is written into one buffer: no copy of the params, no string per key.
pub(crate) fn digest_of(msg: &Message) -> String {
    digest_entries(msg.method().unwrap_or(""), msg.param_entries())
}

fn digest_entries(method: &str, params: Option<Vec<(&str, &Value)>>) -> String {
    let mut text = Vec::with_capacity(256);
    text.extend_from_slice(method.as_bytes());
    if let Some(p) = params {
        let round_keys = ["_meta", "inputResponses", "requestState"];
        sluice_core::canonical::write_object(
            p.into_iter().filter(|(k, _)| !round_keys.contains(k)),
            &mut text,
        );
    }
    let d = ring::digest::digest(&ring::digest::SHA256, &text);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for b in d.as_ref() {
        hex.push(HEX[usize::from(b >> 4)] as char);
        hex.push(HEX[usize::from(b & 15)] as char);
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    /// [`digest_of`] of a method and params given as a map.
    fn digest(method: &str, params: Option<&Map<String, Value>>) -> String {
        digest_entries(
            method,
            params.map(|p| p.iter().map(|(k, v)| (k.as_str(), v)).collect()),
        )
    }

    fn claims(expires: u64) -> Claims {
        Claims {
            token: "t1".into(),
            principal: Some("alice".into()),
            digest: "d1".into(),
            expires,
        }
    }

    #[test]
    fn a_state_opens_for_its_request_and_principal_before_it_expires() {
        let s = Signer::default();
        let state = s.sign(&claims(100));
        assert!(state.starts_with(PREFIX));
        assert_eq!(s.open(&state, "d1", Some("alice"), 100), Ok("t1".into()));
        assert_eq!(
            s.open(&state, "d1", Some("alice"), 101),
            Err("it has expired")
        );
        assert_eq!(
            s.open(&state, "d2", Some("alice"), 0),
            Err("it belongs to another request (method or params differ)")
        );
        assert_eq!(
            s.open(&state, "d1", Some("bob"), 0),
            Err("it was issued to another principal")
        );
        assert_eq!(
            s.open(&state, "d1", None, 0),
            Err("it was issued to another principal")
        );
    }

    #[test]
    fn a_changed_or_foreign_state_does_not_verify() {
        let s = Signer::default();
        let state = s.sign(&claims(100));
        let bad_sig =
            "its signature does not verify (it was changed, or another gateway instance issued it)";
        // Another process (another key) issued it.
        assert_eq!(
            Signer::default().open(&state, "d1", Some("alice"), 0),
            Err(bad_sig)
        );
        // The payload was changed (a later expiry), the tag kept.
        let (_, tag) = state.rsplit_once('.').unwrap();
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let forged = b64.encode(json!({"k":"t1","p":"alice","d":"d1","e":u64::MAX}).to_string());
        assert_eq!(
            s.open(&format!("{PREFIX}{forged}.{tag}"), "d1", Some("alice"), 0),
            Err(bad_sig)
        );
        // A signed payload that is not JSON is not ours either.
        let body = b64.encode("not json");
        let tag = b64.encode(hmac::sign(&s.key, body.as_bytes()).as_ref());
        assert_eq!(
            s.open(&format!("{PREFIX}{body}.{tag}"), "d1", None, 0),
            Err(NOT_OURS)
        );
    }

    #[test]
    fn a_state_that_is_not_ours_or_too_long_is_refused_before_any_check() {
        let s = Signer::default();
        let state = s.sign(&claims(100));
        assert_eq!(s.open(&state[1..], "d1", Some("alice"), 0), Err(NOT_OURS));
        assert_eq!(s.open("sluice1.nodot", "d1", None, 0), Err(NOT_OURS));
        assert_eq!(s.open("sluice1.a.!!", "d1", None, 0), Err(NOT_OURS));
        let long = format!("{state}{}", "x".repeat(MAX_LEN));
        assert_eq!(s.open(&long, "d1", Some("alice"), 0), Err("it is too long"));
    }

    #[test]
    fn the_digest_ignores_key_order_and_the_round_keys() {
        let a = json!({"name": "t", "arguments": {"x": 1, "y": [1, {"b": 2, "a": 1}]}});
        let b = json!({
            "requestState": "sluice1.x.y",
            "arguments": {"y": [1, {"a": 1, "b": 2}], "x": 1},
            "_meta": {"k": "v"},
            "inputResponses": {"r": {}},
            "name": "t",
        });
        let d = |v: &Value| digest("tools/call", v.as_object());
        assert_eq!(d(&a), d(&b));
        assert_eq!(d(&a).len(), 64);
        assert_ne!(d(&a), digest("prompts/get", a.as_object()));
        assert_ne!(d(&a), d(&json!({"name": "t", "arguments": {"x": 2}})));
        // Array order matters.
        let c = json!({"name": "t", "arguments": {"x": 1, "y": [{"a": 1, "b": 2}, 1]}});
        assert_ne!(d(&a), d(&c));
        assert_eq!(digest("m", None), digest("m", None));
    }

    /// The digest as it was first written (a copy of the params without the round keys, a
    /// string per key, `format!` per byte): states signed by one build are opened by the next
    /// (a rolling upgrade of a cluster), so the text hashed must not change.
    fn digest_as_first_written(method: &str, params: Option<&Map<String, Value>>) -> String {
        fn canonical(v: &Value, out: &mut String) {
            match v {
                Value::Object(m) => {
                    let mut keys: Vec<&String> = m.keys().collect();
                    keys.sort();
                    out.push('{');
                    for k in keys {
                        out.push_str(&Value::String(k.clone()).to_string());
                        out.push(':');
                        canonical(&m[k], out);
                        out.push(',');
                    }
                    out.push('}');
                }
                Value::Array(a) => {
                    out.push('[');
                    for i in a {
                        canonical(i, out);
                        out.push(',');
                    }
                    out.push(']');
                }
                other => out.push_str(&other.to_string()),
            }
        }
        let mut text = String::from(method);
        if let Some(p) = params {
            let mut p = p.clone();
            for k in ["_meta", "inputResponses", "requestState"] {
                p.remove(k);
            }
            canonical(&Value::Object(p), &mut text);
        }
        let d = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn a_request_kept_as_text_has_the_digest_of_its_parsed_params() {
        let text = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"k":"v"},"arguments":{"y":[1,{"b":2,"a":1}],"x":1.50},"requestState":"s","name":"u"}}"#;
        let raw = Message::parse(text.as_bytes()).unwrap();
        let tree = Message::parse_tree(text.as_bytes()).unwrap();
        let want = digest("tools/call", tree.params().and_then(Value::as_object));
        assert_eq!(digest_of(&raw), want);
        assert_eq!(digest_of(&tree), want);
        let bare = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
        assert_eq!(digest_of(&bare), digest("ping", None));
        let empty = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}"#);
        assert_eq!(
            digest_of(&empty.unwrap()),
            digest("ping", Some(&Map::new()))
        );
    }

    #[test]
    fn the_digest_hashes_the_text_it_always_has() {
        let values = [
            json!({}),
            json!({"name": "t", "arguments": {"x": 1, "y": [1, {"b": 2, "a": 1}]}}),
            json!({
                "requestState": "sluice1.x.y",
                "arguments": {"q\"uote": "é\u{1}\n", "n": -1.5e300, "t": true, "z": null, "e": [], "o": {}},
                "_meta": {"k": "v"},
                "inputResponses": {"r": {}},
                "name": "ünï",
            }),
        ];
        for v in &values {
            assert_eq!(
                digest("tools/call", v.as_object()),
                digest_as_first_written("tools/call", v.as_object()),
                "{v}"
            );
        }
        assert_eq!(digest("m", None), digest_as_first_written("m", None));
    }
}
