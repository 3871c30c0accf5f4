//! Sluice signing in to OAuth-protected MCP servers: the conformance suite's client
//! authorization scenarios (both ways Sluice is a client), a shared identity end to end against
//! an OAuth server in the test (refresh, restart, revocation, and no secret in any output).

mod admin;
mod cluster;
mod conformance;
mod sdk_server;
mod server;
mod shared;
mod support;
