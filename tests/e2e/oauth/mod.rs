//! Sluice signing in to OAuth-protected MCP servers: the conformance suite's client
//! authorization scenarios (both ways Sluice is a client), a shared identity end to end against
//! an OAuth server in the test (refresh, restart, revocation, and no secret in any output);
//! RFC 8693 token exchange and RFC 7009 revocation against a real authorization server.

mod admin;
mod browser_sign_in;
mod cluster;
mod conformance;
mod connections;
mod exchange;
mod exchange_gateway;
mod isolation;
mod per_user;
mod sdk_server;
mod server;
mod shared;
mod support;
mod user_lists;
