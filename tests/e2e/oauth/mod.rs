//! Sluice signing in to OAuth-protected MCP servers: the conformance suite's client
//! authorization scenarios (both ways Sluice is a client), and a real server end to end.

mod conformance;
