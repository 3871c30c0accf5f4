//! The vocabulary of messages on their way to a client: what travels on a request's own
//! channel ([`Out`]), where it goes ([`Sink`]), and what became of a request ([`Outcome`]).

use serde_json::Value;
use sluice_core::{codes, Kind, Message, RpcError};
use tokio::sync::mpsc;

/// What travels toward a client on a request's own channel.
#[derive(Debug)]
pub(crate) enum Out {
    /// A message (related messages, then the reply).
    Msg(Message),
    /// The upstream opened an SSE reply stream (mirror it; prime with this retry, ms).
    Open(Option<u64>),
    /// The upstream paused the reply stream (SSE polling): end the client's stream with this
    /// retry hint (ms); the client resumes with `Last-Event-ID`.
    Pause(Option<u64>),
}

/// Where messages related to one client request go (its SSE stream, or stdout).
pub(crate) type Sink = mpsc::UnboundedSender<Out>;

/// Send a message on a sink; hand it back if the sink is closed.
pub(crate) fn send_msg(sink: &Sink, msg: Message) -> Result<(), Message> {
    sink.send(Out::Msg(msg)).map_err(|e| match e.0 {
        Out::Msg(m) => m,
        _ => unreachable!("sent a message"),
    })
}

/// Is this message the end of a request (its result or its error)?
pub(crate) fn is_reply(m: &Message) -> bool {
    matches!(m.kind(), Kind::Response | Kind::Error)
}

/// What became of a client request.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Send this reply.
    Reply(Message),
    /// The client cancelled it: send nothing (stdio) or a cancellation error (HTTP).
    Cancelled(Value),
}

impl Outcome {
    /// The reply to send on a transport that must answer every request.
    pub(crate) fn into_reply(self) -> Message {
        match self {
            Outcome::Reply(m) => m,
            Outcome::Cancelled(id) => Message::error(
                id,
                &RpcError::new(codes::INTERNAL_ERROR, "Request cancelled by the client"),
            ),
        }
    }
}
