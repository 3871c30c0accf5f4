//! Sluice's server: the downstream transports (Streamable HTTP and stdio, both protocol eras),
//! client sessions, the driver that runs every message through access, hooks and dispatch, the
//! merged catalog, and the control of what is in force (build, reload, watch).
//!
//! The entry point is [`Server`]: build it from a [`sluice_config::Config`] with
//! [`Server::new`], [`Server::start`] its upstreams, then serve clients with
//! [`Server::serve_http`] or [`Server::serve_stdio`]. `ARCHITECTURE.md` maps every behaviour to
//! its file.

mod access;
pub mod admin;
mod calls;
mod catalog;
mod channel;
mod cluster;
mod connect_page;
mod control;
mod endpoints;
mod features;
mod gateway_tools;
mod hook_tools;
mod http_parts;
mod listeners;
mod modern;
mod overload;
mod pins;
mod proxy;
mod replicas;
mod scale;
mod session;
mod shared_upstreams;
mod state;
mod stream;
mod task_table;
#[cfg(test)]
mod testing;
mod traffic;
mod transport;
mod upstream_oauth;
mod views;

pub use cluster::sealed_id_cost;
pub use transport::workers::default_count as default_threads;
pub use upstream_oauth::{vault_of, VaultOpenError};

use parking_lot::Mutex;
use sluice_auth::Authenticator;
use sluice_config::Config;
use state::{Snapshot, State};
use std::sync::Arc;
use std::time::Duration;

/// A running gateway: its state, the modern era's rounds, and the drivers that serve them.
pub struct Server {
    /// What is in force and what is happening.
    state: Arc<State>,
    rounds: Arc<modern::rounds::Rounds>,
    inbound: Mutex<Option<control::Inbound>>,
    /// The MCP listener's serving threads, stopped at [`Server::shutdown`].
    workers: Mutex<Option<transport::workers::Workers>>,
}

impl Server {
    /// Build the gateway from a configuration (nothing is started yet).
    pub fn new(config: Config) -> Arc<Server> {
        let (state, inbound) = control::build(config);
        // In a cluster every replica checks the requestState any replica issued.
        let rounds = match (&state.rt.cluster(), &state.snapshot().settings().cluster) {
            (Some(c), Some(s)) => modern::rounds::Rounds::for_cluster(&s.keys, c.replica.clone()),
            _ => modern::rounds::Rounds::default(),
        };
        Arc::new(Server {
            state,
            rounds: Arc::new(rounds),
            inbound: Mutex::new(Some(inbound)),
            workers: Mutex::new(None),
        })
    }

    /// Start the inbound driver and every enabled upstream (waiting, bounded, for each first
    /// attempt).
    pub async fn start(&self) {
        if let Some(inbound) = self.inbound.lock().take() {
            tokio::spawn(proxy::inbound::run(self.state.clone(), inbound));
            tokio::spawn(upstream_oauth::audit_connections(self.state.clone()));
            tokio::spawn(replicas::run(self.state.clone(), self.rounds.clone()));
        }
        control::start(&self.state).await;
    }

    /// The admin listener's state over this gateway (serve it with [`admin::serve`]).
    pub fn start_admin(&self, opts: admin::AdminOptions) -> Arc<admin::Admin> {
        admin::Admin::start(self.state.clone(), opts)
    }

    /// Cancelled when the gateway shuts down.
    pub fn stopping(&self) -> tokio_util::sync::CancellationToken {
        self.state.rt.shutdown().clone()
    }

    /// What is in force now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.state.snapshot()
    }

    /// The authentication layer of the HTTP listener, when authentication is on.
    pub fn authenticator(&self) -> Option<Arc<Authenticator>> {
        self.state.snapshot().auth.clone()
    }

    /// The MCP listener is bound to `addr`.
    pub fn set_bound_address(&self, addr: &str) {
        control::set_bound_address(&self.state, addr);
    }

    /// Watch the tree's files and apply edits (polling every `every`).
    pub async fn watch(self: Arc<Server>, every: Duration) {
        control::watch(self.state.clone(), every).await;
    }

    /// Start the MCP listener's serving threads (`transport/workers.rs`): `threads` of them,
    /// with `pin` one per CPU pinned one to each. Called before [`Server::start`], so the
    /// upstreams' supervisors run on them too; [`Server::serve_http`] starts one per CPU
    /// (unpinned) when this was not called.
    pub fn start_threads(&self, threads: usize, pin: bool) -> std::io::Result<()> {
        let workers = transport::workers::Workers::start(threads, pin)?;
        let _ = self.state.rt.serving().set(workers.handles());
        *self.workers.lock() = Some(workers);
        Ok(())
    }

    /// Serve MCP over HTTP on `listener`, its connections on the serving threads, until
    /// `shutdown` resolves, then drain: GET streams end, calls in flight finish (within
    /// `drain_ms`). [`Server::shutdown`] follows, and stops the threads.
    pub async fn serve_http(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let face = Arc::new(transport::http::HttpFace {
            st: self.state.clone(),
            rounds: self.rounds.clone(),
        });
        let started = self.workers.lock().take();
        let workers = match started {
            Some(w) => w,
            None => transport::workers::Workers::start(transport::workers::default_count(), false)?,
        };
        let served = transport::listener::serve(face, listener, &workers, shutdown).await;
        *self.workers.lock() = Some(workers);
        served
    }

    /// Serve one client on `input`/`output` until the input ends (then shut down).
    pub async fn serve_stdio<R, W>(&self, input: R, output: W)
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (st, rounds) = (self.state.clone(), self.rounds.clone());
        transport::stdio::serve(st, rounds, None, input, output).await;
    }

    /// [`Server::serve_stdio`], serving the endpoint of this name of `mcp/endpoints.json`
    /// (`None`: what `/mcp` serves). Errors when there is no such endpoint (nothing is served).
    pub async fn serve_stdio_on<R, W>(
        &self,
        endpoint: Option<&str>,
        input: R,
        output: W,
    ) -> Result<(), String>
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        if let Some(name) = endpoint {
            let config = self.state.snapshot().config.clone();
            if config.endpoints.get(name).is_none() {
                let known: Vec<&str> = config
                    .endpoints
                    .endpoints
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect();
                let known = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(format!(
                    "no endpoint {name:?} in mcp/endpoints.json (known: {known})"
                ));
            }
        }
        let (st, rounds) = (self.state.clone(), self.rounds.clone());
        transport::stdio::serve(st, rounds, endpoint.map(Arc::from), input, output).await;
        Ok(())
    }

    /// Shut down: supervisors stop, sessions end, connections close.
    pub async fn shutdown(&self) {
        control::shutdown(&self.state).await;
        let workers = self.workers.lock().take();
        if let Some(w) = workers {
            w.stop().await;
        }
    }
}
