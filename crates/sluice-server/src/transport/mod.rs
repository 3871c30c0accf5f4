//! The faces toward clients: the transports, each era on each. They parse, authenticate and
//! frame; what a message means is decided below them (`modern`, `proxy`).

mod bare_get;
mod body;
mod conn_io;
pub(crate) mod http;
mod http_get;
pub(crate) mod http_modern;
mod http_session;
pub(crate) mod listener;
mod rules;
mod shed;
pub(crate) mod stdio;
pub(crate) mod stdio_modern;
pub(crate) mod workers;
