//! The faces toward clients: the transports, each era on each. They parse, authenticate and
//! frame; what a message means is decided below them (`modern`, `proxy`).

mod bare_get;
mod conn_io;
pub mod http;
mod http_get;
pub mod http_modern;
mod http_session;
pub mod listener;
mod rules;
pub mod stdio;
pub mod stdio_modern;
pub mod workers;
