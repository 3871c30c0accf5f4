//! Builtin hooks: Rust, in process, no I/O on the call path.

pub mod explain;

pub use explain::Explain;
