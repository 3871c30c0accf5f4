//! How this gateway scales, [`Scale`]: one replica alone, or a replica of a cluster (`cluster` in
//! `sluice.json`). The runtime holds it; what the faces call on it (finding a session, handing a
//! message to the replica that holds it, …) is implemented beside the replicas
//! (`replicas/scale.rs`), so this type depends on nothing above the cluster's own state.

use crate::cluster::Cluster;
use std::sync::Arc;

/// How this gateway scales.
pub(crate) enum Scale {
    /// One replica: everything is in this process.
    Alone,
    /// A replica of a cluster.
    Cluster(Arc<Cluster>),
}

impl Scale {
    /// The scale of a gateway with this cluster (None: alone).
    pub(crate) fn of(cluster: Option<Arc<Cluster>>) -> Scale {
        match cluster {
            Some(c) => Scale::Cluster(c),
            None => Scale::Alone,
        }
    }
}
