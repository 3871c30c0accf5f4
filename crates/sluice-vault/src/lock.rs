//! Locks shared by every process and replica using the same store (so that a token refresh
//! happens once, not once per replica): taken with a random holder token, expiring after their
//! time to live even if the holder dies, released only by their holder.

use std::time::{Duration, Instant};

use chacha20poly1305::aead::rand_core::RngCore as _;
use chacha20poly1305::aead::OsRng;

use crate::{each, Store, Token, Vault, VaultError};

/// How often [`Vault::lock`] tries again.
const POLL: Duration = Duration::from_millis(50);

/// A held lock: [`VaultLock::release`] or dropping it releases it (if it is still ours: after
/// its time to live another holder may have it).
#[derive(Debug)]
pub struct VaultLock {
    vault: Option<Vault>,
    name: String,
    token: Token,
}

impl Vault {
    /// Take the lock `name` for `ttl` if no one holds it: `Ok(None)` when another holder has it.
    /// The lock expires after `ttl` even if its holder never releases it.
    pub async fn try_lock(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<Option<VaultLock>, VaultError> {
        let mut token = Token::default();
        OsRng.fill_bytes(&mut token);
        let taken = each!(self, s => s.try_lock(name, token, ttl).await)?;
        Ok(taken.then(|| VaultLock {
            vault: Some(self.clone()),
            name: name.to_string(),
            token,
        }))
    }

    /// Wait (trying every 50 ms, for at most `wait`) until the lock `name` is free and take it
    /// for `ttl`; [`VaultError::Busy`] when the wait runs out.
    pub async fn lock(
        &self,
        name: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<VaultLock, VaultError> {
        let start = Instant::now();
        loop {
            if let Some(lock) = self.try_lock(name, ttl).await? {
                return Ok(lock);
            }
            let left = wait.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(VaultError::Busy { name: name.into() });
            }
            tokio::time::sleep(left.min(POLL)).await;
        }
    }

    async fn unlock(&self, name: &str, token: Token) {
        let done = each!(self, s => s.unlock(name, token).await);
        if let Err(e) = done {
            tracing::warn!(
                lock = name,
                "vault lock not released (it expires by itself): {e}"
            );
        }
    }
}

impl VaultLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Release the lock now (if it is still ours).
    pub async fn release(mut self) {
        if let Some(vault) = self.vault.take() {
            vault.unlock(&self.name, self.token).await;
        }
    }
}

impl Drop for VaultLock {
    fn drop(&mut self) {
        let Some(vault) = self.vault.take() else {
            return;
        };
        let (name, token) = (std::mem::take(&mut self.name), self.token);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { vault.unlock(&name, token).await });
            return;
        }
        // Outside a runtime: the file and memory release at once; a Redis lock expires.
        match &vault.inner.store {
            Store::File(s) => {
                if let Err(e) = s.unlock_blocking(&name, token) {
                    tracing::warn!(
                        lock = name,
                        "vault lock not released (it expires by itself): {e}"
                    );
                }
            }
            Store::Memory(s) => s.unlock_now(&name, token),
            Store::Redis(_) => {}
        }
    }
}
