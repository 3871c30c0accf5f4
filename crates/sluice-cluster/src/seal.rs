//! Sealed session ids: XChaCha20-Poly1305 under the cluster key, with a key id so that several
//! keys can open (rotation: the first seals, every one opens).
//!
//! Wire format (ASCII, for `Mcp-Session-Id`): `s1` followed by base64url without padding of
//! `kid (4 bytes) ‖ nonce (24 bytes) ‖ ciphertext ‖ tag (16 bytes)`. The key id is derived from
//! the key (the first 4 bytes of the tag of an empty message under a fixed nonce), never chosen
//! by a client; the associated data is `sluice-session-v1` and the key id. An id that is not
//! this shape, names no key we hold, or does not authenticate opens to nothing — exactly as an
//! unknown one. The nonce, random per id and authenticated with it, is the session's *handle*:
//! the short name of its state in Redis.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

const PREFIX: &str = "s1";
const AAD: &[u8] = b"sluice-session-v1";
const KID: usize = 4;
const NONCE: usize = 24;
const TAG: usize = 16;

/// The cluster keys, ready to seal and open.
pub struct Keyring {
    keys: Vec<([u8; KID], XChaCha20Poly1305)>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("keys", &self.keys.len())
            .finish()
    }
}

/// What an opened id holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The session's handle (its nonce, base64url): the name of its state in Redis.
    pub handle: String,
    /// The sealed payload.
    pub payload: Vec<u8>,
}

fn aad(kid: &[u8; KID]) -> Vec<u8> {
    let mut a = AAD.to_vec();
    a.extend_from_slice(kid);
    a
}

impl Keyring {
    /// A keyring over `keys` (at least one): the first seals.
    pub fn new(keys: &[[u8; 32]]) -> Keyring {
        assert!(!keys.is_empty(), "a keyring needs a key");
        let keys = keys
            .iter()
            .map(|k| {
                let cipher = XChaCha20Poly1305::new(k.into());
                let probe = cipher
                    .encrypt(
                        &XNonce::default(),
                        Payload {
                            msg: b"",
                            aad: b"sluice-kid",
                        },
                    )
                    .expect("sealing an empty message");
                let mut kid = [0u8; KID];
                kid.copy_from_slice(&probe[..KID]);
                (kid, cipher)
            })
            .collect();
        Keyring { keys }
    }

    /// The key id of the sealing key (hex), for logs.
    pub fn sealing_kid(&self) -> String {
        self.keys[0].0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Seal `payload` under the first key: a new id (and its handle).
    pub fn seal(&self, payload: &[u8]) -> (String, String) {
        let (kid, cipher) = &self.keys[0];
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: payload,
                    aad: &aad(kid),
                },
            )
            .expect("sealing a session");
        let mut raw = Vec::with_capacity(KID + NONCE + sealed.len());
        raw.extend_from_slice(kid);
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&sealed);
        (
            format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&raw)),
            URL_SAFE_NO_PAD.encode(nonce),
        )
    }

    /// Open an id sealed by any of our keys; None for anything else (not this shape, another
    /// key, tampered, truncated).
    pub fn open(&self, id: &str) -> Option<Opened> {
        let raw = URL_SAFE_NO_PAD.decode(id.strip_prefix(PREFIX)?).ok()?;
        if raw.len() < KID + NONCE + TAG {
            return None;
        }
        let (kid, rest) = raw.split_at(KID);
        let (nonce, sealed) = rest.split_at(NONCE);
        let (kid, cipher) = self.keys.iter().find(|(k, _)| k == kid)?;
        let payload = cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: &aad(kid),
                },
            )
            .ok()?;
        Some(Opened {
            handle: URL_SAFE_NO_PAD.encode(nonce),
            payload,
        })
    }
}

/// A new cluster key: 32 random bytes from the OS, in standard base64.
pub fn keygen() -> String {
    let key = XChaCha20Poly1305::generate_key(&mut OsRng);
    base64::engine::general_purpose::STANDARD.encode(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> [u8; 32] {
        [n; 32]
    }

    #[test]
    fn an_id_opens_with_any_key_of_the_ring_and_nothing_else() {
        let a = Keyring::new(&[key(1)]);
        let (id, handle) = a.seal(b"{\"v\":1}");
        assert!(id.starts_with("s1"));
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
        assert_eq!(
            a.open(&id),
            Some(Opened {
                handle: handle.clone(),
                payload: b"{\"v\":1}".to_vec()
            })
        );
        // Rotation: a ring sealing with a new key still opens ids of the old one.
        let rotated = Keyring::new(&[key(2), key(1)]);
        assert_eq!(rotated.open(&id).unwrap().handle, handle);
        let (new_id, _) = rotated.seal(b"x");
        assert!(a.open(&new_id).is_none(), "the old ring lacks the new key");
        // A foreign key, a tampered byte, a truncated id, another shape: nothing.
        assert!(Keyring::new(&[key(3)]).open(&id).is_none());
        let mut raw = URL_SAFE_NO_PAD.decode(&id[2..]).unwrap();
        for i in [0, 5, 30, raw.len() - 1] {
            raw[i] ^= 1;
            assert!(
                a.open(&format!("s1{}", URL_SAFE_NO_PAD.encode(&raw)))
                    .is_none(),
                "byte {i}"
            );
            raw[i] ^= 1;
        }
        assert!(a.open(&id[..id.len() - 3]).is_none());
        assert!(a.open(&id[..20]).is_none());
        assert!(a.open(&id[2..]).is_none());
        assert!(a.open("").is_none());
        assert!(a.open("s1!!!").is_none());
        // Two seals of the same payload differ (fresh nonces).
        assert_ne!(a.seal(b"x").0, a.seal(b"x").0);
    }

    #[test]
    fn keygen_prints_32_bytes_of_base64() {
        use base64::engine::general_purpose::STANDARD;
        let k = keygen();
        assert_eq!(STANDARD.decode(&k).unwrap().len(), 32);
        assert_ne!(k, keygen());
    }
}
