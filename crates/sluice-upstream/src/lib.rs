//! Sluice's upstream connections: one live MCP session with an upstream server over stdio
//! (a child process), Streamable HTTP, or the legacy HTTP+SSE transport.
//!
//! The main type is [`Connection`]: open it with [`Connection::open`] (spawn or connect, then the
//! `initialize` handshake), send requests with [`Connection::call`] (the connection mints its own
//! request ids, so ids from different clients never collide upstream), notifications with
//! [`Connection::notify`], and replies to the upstream's own requests with [`Connection::send`].
//! Everything the upstream starts (requests, notifications) and the end of the connection arrive
//! as [`Event`]s on the channel given at open.
//!
//! Above connections, a [`Slot`] supervises one configured upstream: its control connection,
//! its lists, restarts with backoff, and the per-session connections; it reports to the gateway
//! with [`SlotEvent`]s.

mod connection;
mod core;
mod error;
pub mod framing;
mod http;
pub mod identity;
mod inline;
mod lists;
pub mod local;
mod pump;
mod rounds;
mod session_lists;
pub mod shared;
pub mod slot;
mod slot_events;
mod sse;
mod stdio;
pub mod tool_headers;

pub use self::core::{failure_reply, Answer, Event, ExtraHeaders, Held, Incoming, StderrTail};
pub use connection::{Connection, OpenOptions};
pub use error::{ConnectError, ProtocolError, Source, UpstreamError};
pub use http::header_value;
pub use identity::{exchanger_for, IdentityError, OAuthContext, PerUser};
pub use lists::{fetch_lists, ListError, UpstreamLists};
pub use rounds::call_with_rounds;
pub use shared::{end_shared, Claimed, SharedError, SharedSessions, UpstreamSession};
pub use slot::{
    client_info, Done, SessionRef, Slot, SlotEnv, SlotEvent, SlotState, Status, Timing,
};
