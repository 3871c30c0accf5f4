//! Which endpoint a request is served on (`mcp/endpoints.json`): a snapshot's own endpoint and
//! its endpoints' snapshots, the snapshot a session is served from (that of the endpoint it was
//! initialised on), and what changed for each endpoint's sessions. `/mcp` (every session of a
//! tree without endpoints) is served from the snapshot in force, as it always was.

use crate::catalog::Catalog;
use crate::session::Session;
use crate::state::{Changed, Snapshot, State};
use std::sync::Arc;

impl State {
    /// What is in force for `session`: `/mcp`'s snapshot, or that of the endpoint it was
    /// initialised on (an endpoint removed meanwhile serves it nothing until it ends).
    pub(crate) fn snapshot_for(&self, session: &Session) -> Arc<Snapshot> {
        let root = self.snapshot();
        match &session.init.endpoint {
            None => root,
            Some(name) => match root.endpoint(name) {
                Some(e) => e.clone(),
                None => Arc::new(root.gone_endpoint(name)),
            },
        }
    }
}

impl Snapshot {
    /// The name of the endpoint this snapshot serves (`None`: `/mcp`).
    pub fn endpoint_name(&self) -> Option<&str> {
        self.endpoint.as_deref().map(|e| e.name.as_str())
    }

    /// The snapshot of the endpoint of this name, when `mcp/endpoints.json` has it.
    pub fn endpoint(&self, name: &str) -> Option<&Arc<Snapshot>> {
        self.endpoints
            .iter()
            .find(|e| e.endpoint_name() == Some(name))
    }

    /// What a session of an endpoint that is gone is served from until it ends: nothing (an
    /// empty catalog), never `/mcp`'s lists.
    pub fn gone_endpoint(&self, name: &str) -> Snapshot {
        Snapshot {
            catalog: Arc::new(Catalog::default()),
            endpoint: Some(Arc::new(sluice_config::Endpoint {
                name: name.to_string(),
                ..Default::default()
            })),
            endpoints: Arc::new([]),
            ..self.clone_parts()
        }
    }
}

impl Changed {
    /// The lists that changed for a session of `endpoint` (`None`: `/mcp`).
    pub(crate) fn lists_for(&self, endpoint: Option<&str>) -> &[&'static str] {
        match endpoint {
            None => &self.lists,
            Some(name) => self
                .endpoints
                .iter()
                .find(|(n, _)| n == name)
                .map_or(&[], |(_, l)| l.as_slice()),
        }
    }

    /// Did nothing change for anyone?
    pub(crate) fn is_empty(&self) -> bool {
        self.lists.is_empty() && self.endpoints.iter().all(|(_, l)| l.is_empty())
    }
}
