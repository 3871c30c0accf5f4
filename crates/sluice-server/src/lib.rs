//! Sluice's server: the downstream transports (Streamable HTTP and stdio), client sessions, the
//! router, the merged catalog, and the upstream slots that keep each upstream connected.
//!
//! The main type is [`Gateway`]: build it from a [`sluice_config::Config`] with [`Gateway::new`],
//! [`Gateway::start`] its upstreams, then serve clients with [`http::serve`] or [`stdio::serve`].
//! See `ARCHITECTURE.md` for how a message travels.

pub mod access;
pub mod admin;
pub mod audit;
pub mod catalog;
pub mod funnel;
pub mod gateway;
pub mod http;
pub mod management;
pub mod modern;
pub mod pipeline;
pub mod router;
pub mod session;
pub mod state;
pub mod stdio;
pub mod stream;
pub mod telemetry;
pub mod upstreams;

pub use gateway::Gateway;
