//! Scale-out of the gateway over replicas that share nothing but a key and a Redis: session ids
//! sealed with the cluster key ([`seal`]: what is fixed at `initialize` travels in the id, so
//! any replica can open it), the Redis store of what changes ([`store`]: a session's live
//! state, its GET stream's events, health for `/readyz`) and the bus between replicas ([`bus`]:
//! Redis pub/sub — new events, ended sessions, messages for one replica).
//!
//! Redis is the engine: no consensus or membership of Sluice's own. Every Redis call is
//! bounded by a timeout, so an outage answers with an error instead of hanging.

pub mod bus;
pub mod seal;
pub mod store;

pub use bus::{Bus, BusMsg};
pub use seal::{keygen, Keyring, Opened};
pub use store::{Store, StoreError, UpstreamClaim};
