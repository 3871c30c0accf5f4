//! Sluice's hooks: the decision vocabulary ([`Decision`]), the event every hook is shown
//! ([`HookEvent`]), the hook kinds — [`builtin`] (Rust, in process), [`command`] (a process per
//! event, Claude Code / toolfunnel protocols), [`process`] (one long-lived child, JSON lines) and
//! [`http`] (a hook service, Zato-style or Claude Code's contract), [`civic`] (a server built
//! on Civic's `@civic/hook-common`), [`mcp_tool`] (a tool of one of the gateway's upstreams) —
//! the [`chain`] that runs them in onion order, and the
//! session [`transcript`]s Claude Code hook scripts read.
//!
//! Hooks know nothing of transports: the server builds a [`HookEvent`], the chain returns what
//! to do.

pub mod builtin;
pub mod chain;
pub mod civic;
mod claude;
pub mod command;
pub mod ctx;
pub mod decision;
pub mod event;
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub mod mcp_tool;
pub mod process;
pub mod transcript;
mod wire;

pub use chain::{AskRequest, Chain, Ctx, EndReason, HookRecord, RequestOutcome, Trace};
pub use decision::{Decision, HookFailure, Refusal};
pub use event::{ClaudeFields, HookEvent, Phase};
pub use mcp_tool::{ToolCallError, ToolRunner};
