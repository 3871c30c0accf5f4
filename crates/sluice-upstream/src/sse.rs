//! The legacy HTTP+SSE transport (2024-11-05): a GET event stream that first names the endpoint
//! to POST messages to, then carries every message from the server.

use crate::core::{ExtraHeaders, Inner};
use crate::error::UpstreamError;
use crate::http::{header_map, with_extra};
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE};
use sluice_config::UpstreamSpec;
use sluice_core::Message;
use sluice_http::shared_reqwest as shared_client;
use std::sync::Arc;

pub(crate) struct SseWire {
    client: reqwest::Client,
    endpoint: String,
    headers: HeaderMap,
    reader: tokio::task::JoinHandle<()>,
}

impl SseWire {
    pub async fn connect(
        spec: &UpstreamSpec,
        inner: &Arc<Inner>,
    ) -> Result<SseWire, UpstreamError> {
        use eventsource_stream::Eventsource;
        let client = shared_client();
        let headers = header_map(spec)?;
        let resp = client
            .get(&spec.url)
            .headers(headers.clone())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| UpstreamError::Connect(format!("GET {} failed: {e}", spec.url)))?;
        if !resp.status().is_success() {
            return Err(UpstreamError::Connect(format!(
                "GET {} answered HTTP {}",
                spec.url,
                resp.status()
            )));
        }
        let mut events = resp.bytes_stream().eventsource();
        // The first event names the endpoint.
        let endpoint = loop {
            match events.next().await {
                Some(Ok(ev)) if ev.event == "endpoint" => break ev.data,
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(UpstreamError::Protocol(format!("SSE: {e}"))),
                None => {
                    return Err(UpstreamError::Protocol(
                        "the SSE stream ended before naming its endpoint".into(),
                    ))
                }
            }
        };
        let base = reqwest::Url::parse(&spec.url)
            .map_err(|e| UpstreamError::Connect(format!("bad url: {e}")))?;
        let endpoint = base
            .join(endpoint.trim())
            .map_err(|e| UpstreamError::Protocol(format!("bad endpoint {endpoint:?}: {e}")))?
            .to_string();
        let r_inner = inner.clone();
        let reader = tokio::spawn(async move {
            while let Some(ev) = events.next().await {
                match ev {
                    Ok(ev) if ev.event == "message" || ev.event.is_empty() => {
                        match Message::parse_reply(ev.data.as_bytes()) {
                            Ok(msg) => r_inner.dispatch(msg, None),
                            Err(e) => {
                                tracing::warn!(upstream = %r_inner.label, "bad SSE message: {}", e.error.message)
                            }
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        r_inner.close(format!("the SSE stream failed: {e}"));
                        return;
                    }
                }
            }
            r_inner.close("the SSE stream ended".into());
        });
        Ok(SseWire {
            client,
            endpoint,
            headers,
            reader,
        })
    }

    pub fn send(
        &self,
        inner: &Arc<Inner>,
        msg: &Message,
        extra: &ExtraHeaders,
    ) -> Result<(), UpstreamError> {
        let rb = self
            .client
            .post(&self.endpoint)
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(msg.to_json());
        let rb = with_extra(rb, extra);
        let inner = inner.clone();
        tokio::spawn(async move {
            match rb.send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => {
                    tracing::warn!(upstream = %inner.label, status = %r.status(), "POST refused")
                }
                Err(e) => inner.close(format!("POST failed: {e}")),
            }
        });
        Ok(())
    }

    pub fn shutdown(&self) {
        self.reader.abort();
    }
}
