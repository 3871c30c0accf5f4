//! The trace exporter: bounded, lossy, never blocking a call.
//!
//! A request's spans are pushed, once the request ends, onto a bounded queue ([`QUEUE`]; a full
//! queue drops and counts, never blocks); one task sends them in batches (every second, or as
//! soon as [`BATCH`] wait) to `<endpoint>/v1/traces`. A failing endpoint is logged once until
//! exports recover; dropped spans are logged with their count.

use crate::config::ExportConfig;
use crate::otlp::{export_body, Resource, SpanData};
use sluice_config::TelemetrySettings;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Notify};

/// Spans waiting for the exporter; past this, new spans are dropped (and counted).
pub const QUEUE: usize = 2048;
/// A batch is sent when it holds this many spans…
pub const BATCH: usize = 256;
/// …or this long after the last send.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// One export request may take this long.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Finished spans waiting for the exporter (bounded: past [`QUEUE`] new spans are dropped and
/// counted). A mutex-guarded vector rather than a channel: a call only takes a short lock and
/// pushes; the exporter is woken once per [`BATCH`] spans (or by its timer), not per span.
struct Queue {
    spans: parking_lot::Mutex<Vec<SpanData>>,
    /// Rung when a batch is full.
    full: Notify,
    dropped: AtomicU64,
}

/// The trace exporter: the queue and the task that drains it.
pub struct Telemetry {
    queue: Arc<Queue>,
    /// Asks the exporter to send what is queued now; dropping it stops the exporter.
    flush: mpsc::Sender<oneshot::Sender<()>>,
    /// The endpoint, for logs.
    pub url: String,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").field("url", &self.url).finish()
    }
}

impl Telemetry {
    /// Start exporting when an endpoint is configured (in `settings` or the environment) and a
    /// tokio runtime is running; else None (tracing off).
    pub fn start(settings: &TelemetrySettings) -> Option<Arc<Telemetry>> {
        let config = ExportConfig::resolve(settings, &|n| std::env::var(n).ok())?;
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("traces are off: no async runtime to export them from");
            return None;
        };
        let client = match reqwest::Client::builder().timeout(EXPORT_TIMEOUT).build() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("traces are off: cannot build the HTTP client: {e}");
                return None;
            }
        };
        let queue = Arc::new(Queue {
            spans: parking_lot::Mutex::new(Vec::with_capacity(BATCH)),
            full: Notify::new(),
            dropped: AtomicU64::new(0),
        });
        let (flush, flushes) = mpsc::channel(4);
        tracing::info!(
            "exporting traces to {} (OTLP/HTTP JSON, service.name {})",
            config.url,
            config.service_name
        );
        let url = config.url.clone();
        rt.spawn(export_loop(queue.clone(), flushes, client, config));
        Some(Arc::new(Telemetry { queue, flush, url }))
    }

    /// Spans dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.queue.dropped.load(Ordering::Relaxed)
    }

    /// Queue finished spans (never waits).
    pub(crate) fn export(&self, spans: impl IntoIterator<Item = SpanData>) {
        let mut q = self.queue.spans.lock();
        let before = q.len();
        for s in spans {
            if q.len() >= QUEUE {
                self.queue.dropped.fetch_add(1, Ordering::Relaxed);
            } else {
                q.push(s);
            }
        }
        if before < BATCH && q.len() >= BATCH {
            self.queue.full.notify_one();
        }
    }

    /// Send what is queued now (bounded by `within`; best effort, for shutdown).
    pub async fn flush(&self, within: Duration) {
        let _ = tokio::time::timeout(within, async {
            let (done, wait) = oneshot::channel();
            if self.flush.send(done).await.is_ok() {
                let _ = wait.await;
            }
        })
        .await;
    }
}

async fn export_loop(
    queue: Arc<Queue>,
    mut flushes: mpsc::Receiver<oneshot::Sender<()>>,
    client: reqwest::Client,
    config: ExportConfig,
) {
    let mut exporter = Exporter {
        client,
        resource: Resource::new(&config.service_name),
        config,
        failing: false,
        dropped_seen: 0,
    };
    loop {
        let done = tokio::select! {
            _ = queue.full.notified() => None,
            _ = tokio::time::sleep(FLUSH_EVERY) => None,
            f = flushes.recv() => match f {
                Some(done) => Some(done),
                // The gateway is gone: send what is left and stop.
                None => {
                    exporter.drain(&queue).await;
                    return;
                }
            },
        };
        exporter.drain(&queue).await;
        if let Some(done) = done {
            let _ = done.send(());
        }
    }
}

struct Exporter {
    client: reqwest::Client,
    config: ExportConfig,
    resource: Resource,
    /// The last export failed (logged once until one works again).
    failing: bool,
    dropped_seen: u64,
}

impl Exporter {
    /// Send everything queued, [`BATCH`] spans per request.
    async fn drain(&mut self, queue: &Queue) {
        let dropped = queue.dropped.load(Ordering::Relaxed);
        let before = std::mem::replace(&mut self.dropped_seen, dropped);
        if dropped > before {
            tracing::warn!(
                "{} spans dropped: the export queue ({QUEUE}) was full",
                dropped - before
            );
        }
        let fresh = Vec::with_capacity(BATCH);
        let spans = std::mem::replace(&mut *queue.spans.lock(), fresh);
        if spans.is_empty() {
            return;
        }
        for batch in spans.chunks(BATCH) {
            self.send(batch).await;
        }
    }

    async fn send(&mut self, batch: &[SpanData]) {
        let n = batch.len();
        let mut rb = self
            .client
            .post(&self.config.url)
            .header("content-type", "application/json")
            .body(export_body(&self.resource, batch));
        for (k, v) in &self.config.headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        let problem = match rb.send().await {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("HTTP {}", r.status())),
            Err(e) => Some(e.to_string()),
        };
        match problem {
            Some(p) if !self.failing => {
                self.failing = true;
                tracing::warn!(
                    "exporting {n} spans to {} failed: {p} (they are dropped; logged again when exports recover)",
                    self.config.url
                );
            }
            Some(p) => tracing::debug!("exporting {n} spans failed: {p}"),
            None if self.failing => {
                self.failing = false;
                tracing::info!("exporting traces to {} works again", self.config.url);
            }
            None => {}
        }
    }
}
