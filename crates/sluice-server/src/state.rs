//! What is in force: the [`Snapshot`] built from one `Config` (settings, slots, catalog, hook
//! chain, access rules, authenticator, audit log), immutable once built and swapped whole, so a
//! request that loads it once sees one consistent configuration from start to end.

use crate::audit::Audit;
use crate::catalog::Catalog;
use crate::upstreams::Slot;
use sluice_auth::{Authenticator, Policy};
use sluice_config::{Config, Settings};
use sluice_hooks::Chain;
use std::sync::Arc;

/// Everything a configuration puts in force. A reload or a catalog rebuild makes a new one;
/// nothing in it changes after it is built.
pub struct Snapshot {
    /// The configuration (its `settings` are the ones in force: `listen`, `admin`,
    /// `admin_token` and `telemetry` keep their start-up values across reloads).
    pub config: Arc<Config>,
    /// One slot per configured upstream, in order.
    pub slots: Arc<[Arc<Slot>]>,
    /// The merged catalog over these slots.
    pub catalog: Arc<Catalog>,
    /// The hook chain.
    pub chain: Arc<Chain>,
    /// The access rules.
    pub policy: Arc<Policy>,
    /// Authentication of the HTTP listener (None: off).
    pub auth: Option<Arc<Authenticator>>,
    /// The audit log.
    pub audit: Arc<Audit>,
    /// The funnel's meta-tool prefix, when the funnel is on.
    pub funnel_prefix: Option<String>,
}

impl Snapshot {
    /// The server settings in force.
    pub fn settings(&self) -> &Settings {
        &self.config.settings
    }

    /// This snapshot with another catalog (an upstream's lists changed).
    pub fn with_catalog(&self, catalog: Catalog) -> Snapshot {
        Snapshot {
            catalog: Arc::new(catalog),
            ..self.clone_parts()
        }
    }

    /// This snapshot with another authenticator (the listener's real address is known).
    pub fn with_auth(&self, auth: Option<Arc<Authenticator>>) -> Snapshot {
        Snapshot {
            auth,
            ..self.clone_parts()
        }
    }

    fn clone_parts(&self) -> Snapshot {
        Snapshot {
            config: self.config.clone(),
            slots: self.slots.clone(),
            catalog: self.catalog.clone(),
            chain: self.chain.clone(),
            policy: self.policy.clone(),
            auth: self.auth.clone(),
            audit: self.audit.clone(),
            funnel_prefix: self.funnel_prefix.clone(),
        }
    }
}
