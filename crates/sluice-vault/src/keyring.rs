//! The vault keys and the sealed blob every backend stores: XChaCha20-Poly1305, the first key
//! seals, every key opens (rotation); the keys themselves from and to base64.
//!
//! Blob: version (1 byte, `1`) ‖ key id (4 bytes: the first 4 of SHA-256 of the key) ‖ nonce
//! (24 random bytes) ‖ ciphertext and tag. The associated data is `table ‖ 0x00 ‖ key`, so a
//! blob moved to another row does not open.

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

const VERSION: u8 = 1;
const KID: usize = 4;
const NONCE: usize = 24;
const TAG: usize = 16;

/// A key that is not usable (the message never echoes the text it was read from).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not base64 in any of the accepted alphabets.
    #[error("the vault key is not base64 (32 random bytes in base64)")]
    NotBase64,
    /// Base64, but not 32 bytes.
    #[error("the vault key decodes to {0} bytes, not 32")]
    Length(usize),
    /// A keyring needs at least one key.
    #[error("the vault needs at least one key")]
    NoKeys,
}

/// The vault keys, ready to seal and open: the first seals, every one opens.
#[derive(Clone)]
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

fn aad(table: &str, key: &str) -> Vec<u8> {
    [table.as_bytes(), &[0], key.as_bytes()].concat()
}

impl Keyring {
    /// A keyring over `keys`: the first seals new values, every one opens.
    pub fn new(keys: Vec<[u8; 32]>) -> Result<Keyring, KeyError> {
        if keys.is_empty() {
            return Err(KeyError::NoKeys);
        }
        let keys = keys
            .iter()
            .map(|k| {
                let mut kid = [0u8; KID];
                kid.copy_from_slice(&Sha256::digest(k)[..KID]);
                (kid, XChaCha20Poly1305::new(k.into()))
            })
            .collect();
        Ok(Keyring { keys })
    }

    /// Seal `value` for the row `table`/`key` under the first key.
    pub(crate) fn seal(&self, table: &str, key: &str, value: &[u8]) -> Vec<u8> {
        let (kid, cipher) = &self.keys[0];
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let aad = aad(table, key);
        let sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: value,
                    aad: &aad,
                },
            )
            .expect("XChaCha20-Poly1305 seals any message that fits in memory");
        [&[VERSION][..], kid, &nonce, &sealed].concat()
    }

    /// Open a blob sealed for `table`/`key` by any of our keys; None for anything else.
    pub(crate) fn open(&self, table: &str, key: &str, blob: &[u8]) -> Option<Vec<u8>> {
        if blob.len() < 1 + KID + NONCE + TAG || blob[0] != VERSION {
            return None;
        }
        let (kid, rest) = blob[1..].split_at(KID);
        let (nonce, sealed) = rest.split_at(NONCE);
        let aad = aad(table, key);
        self.keys
            .iter()
            .filter(|(k, _)| k == kid)
            .find_map(|(_, cipher)| {
                let msg = Payload {
                    msg: sealed,
                    aad: &aad,
                };
                cipher.decrypt(XNonce::from_slice(nonce), msg).ok()
            })
    }
}

impl Keyring {
    /// Was `blob` sealed with the key that seals now (the first)?
    pub(crate) fn is_current(&self, blob: &[u8]) -> bool {
        blob.len() > KID && blob[1..1 + KID] == self.keys[0].0[..]
    }
}

/// A new vault key: 32 random bytes from the OS, in standard base64.
pub fn keygen() -> String {
    base64::engine::general_purpose::STANDARD.encode(XChaCha20Poly1305::generate_key(&mut OsRng))
}

/// A vault key from base64 (standard or URL-safe, padding optional, surrounding blanks ignored):
/// the same rules as the cluster keys.
pub fn key_from_base64(text: &str) -> Result<[u8; 32], KeyError> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let t = text.trim();
    let bytes = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|e| e.decode(t).ok())
        .ok_or(KeyError::NotBase64)?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| KeyError::Length(bytes.len()))
}
