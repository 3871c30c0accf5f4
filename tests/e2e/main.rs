//! End-to-end tests: the real `sluice` binary against real upstream servers, driven by real
//! clients. One test binary; each module covers one area.

mod admin;
mod aggregation;
mod apply;
mod auth;
mod civic_hooks;
mod claude_hooks;
mod cli;
mod client;
mod cluster;
mod conformance;
mod exact_ids;
mod faults;
mod funnel;
mod get_streams;
mod guardrails;
mod hooks;
mod http_transport;
mod image;
mod interop;
mod limits;
mod manage;
mod modern;
mod modern_isolation;
mod modern_upstreams;
mod oauth;
mod orphans;
mod passthrough;
mod python_sdk;
mod ratelimit;
mod reload;
mod routing;
mod serving_threads;
mod session_hooks;
mod tasks;
mod telemetry;
