//! Sluice's message model: a thin JSON-RPC 2.0 envelope over `serde_json` that keeps every field
//! (and key order) it was given, the error codes the gateway answers with, and the protocol
//! versions it speaks. No I/O lives here, but for the optional [`process`] module (feature
//! `process`): child processes in a process group of their own.
//!
//! The main types are [`Message`] (one parsed JSON-RPC message, classified by [`Kind`]) and
//! [`RpcError`] (a JSON-RPC error object the gateway produces).

pub mod canonical;
pub mod error;
pub mod exact;
pub mod glob;
pub mod headers;
pub mod member;
pub mod message;
pub mod principal;
#[cfg(feature = "process")]
pub mod process;
mod raw;
mod raw_request;
pub mod time;
pub mod version;
pub mod worker;

pub use error::{codes, RpcError};
pub use glob::glob_match;
pub use message::{Kind, Message, ParseError};
pub use principal::Principal;
