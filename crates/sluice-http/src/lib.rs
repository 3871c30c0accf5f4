//! Sluice's outbound HTTP client, shared by the upstream wires and the hooks that call a
//! service: [`Client`] reaches a plain `http://` URL through hyper's connection API and a
//! keep-alive pool per serving thread ([`pool`]), and anything else (TLS, a proxy the
//! environment names) through reqwest.

mod client;
mod error;
mod pool;

pub use client::{reqwest_builder, shared_reqwest, Client, Reply};
pub use error::Error;
