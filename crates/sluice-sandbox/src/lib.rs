//! Sandboxes for stdio servers: the server is confined by the kernel's own mechanisms before
//! its first instruction runs, with no container runtime and no `unsafe` code.
//!
//! The gateway does not spawn a sandboxed server directly. It spawns its own binary as a small
//! launcher, `sluice sandbox-exec SPEC COMMAND ARGS…` ([`launcher_command`]): a fresh,
//! single-threaded process that restricts itself ([`exec`]) and then `execve`s the server,
//! which inherits every restriction (they cannot be lifted by a process or its children):
//!
//! 1. the user switch (`user`, root only), then a new **user namespace** (the server holds no
//!    capability outside it) and, for `"network": "none"` or `"loopback"`, a new **network
//!    namespace** in it (for `loopback`, its `lo` is brought up over netlink);
//! 2. **rlimits**: `RLIMIT_DATA` (`memory_mb`), `RLIMIT_NPROC` (`processes`, counted inside the
//!    new user namespace), `RLIMIT_CPU` (`cpu_seconds`);
//! 3. **Landlock** (`no_new_privs` set): the signal and abstract-unix-socket scopes always,
//!    file rules for `fs`, TCP connect rules (and no bind) for `{"connect": …}`, each a hard
//!    requirement: a kernel that lacks one is an error, never a weaker sandbox.
//!
//! [`Support`] says what the running kernel offers (probed by running the launcher in a probe
//! mode, so the answer is the launcher's own), and [`Support::enforceable`] whether a given
//! sandbox can be enforced; `sluice check` prints both, and `sluice serve` refuses to start a
//! tree with a sandbox the kernel cannot enforce.

mod launcher;
mod netlink;
mod support;

pub use launcher::{exec, launcher_command, probe_main, SUBCOMMAND};
pub use support::Support;
