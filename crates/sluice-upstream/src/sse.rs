//! The legacy HTTP+SSE transport (2024-11-05): a GET event stream that first names the endpoint
//! to POST messages to, then carries every message from the server.

use crate::core::{ExtraHeaders, Inner};
use crate::error::{ConnectError, ProtocolError, UpstreamError};
use crate::http::{header_map, with_extra};
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use reqwest::StatusCode;
use sluice_config::UpstreamSpec;
use sluice_core::Message;
use sluice_http::shared_reqwest as shared_client;
use sluice_oauth::{Challenge, Identity};
use std::sync::Arc;

pub(crate) struct SseWire {
    client: reqwest::Client,
    endpoint: String,
    headers: HeaderMap,
    reader: tokio::task::JoinHandle<()>,
    identity: Option<Arc<Identity>>,
}

/// `headers` with the identity's bearer token.
fn with_bearer(mut headers: HeaderMap, identity: Option<&Arc<Identity>>) -> HeaderMap {
    if let Some(b) = identity.and_then(|i| i.bearer()) {
        headers.insert(AUTHORIZATION, (*b).clone());
    }
    headers
}

/// The challenge of a refusal, when the identity may fix it (401, 403 insufficient_scope).
fn refusal(resp: &reqwest::Response) -> Option<Challenge> {
    let status = resp.status();
    let c = Challenge::parse(
        resp.headers()
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    );
    (status == StatusCode::UNAUTHORIZED
        || (status == StatusCode::FORBIDDEN && c.insufficient_scope()))
    .then_some(c)
}

impl SseWire {
    pub(crate) async fn connect(
        spec: &UpstreamSpec,
        inner: &Arc<Inner>,
        identity: Option<Arc<Identity>>,
    ) -> Result<SseWire, UpstreamError> {
        use eventsource_stream::Eventsource;
        let client = shared_client();
        let headers = header_map(spec)?;
        let mut tries = 0;
        let resp = loop {
            let used = identity.as_ref().and_then(|i| i.bearer());
            let resp = client
                .get(&spec.url)
                .headers(with_bearer(headers.clone(), identity.as_ref()))
                .header(ACCEPT, "text/event-stream")
                .send()
                .await
                .map_err(|e| ConnectError::Get {
                    url: spec.url.clone(),
                    source: e,
                })?;
            match (&identity, refusal(&resp)) {
                (Some(id), Some(challenge)) if tries < 2 => {
                    tries += 1;
                    id.refused(resp.status().as_u16(), &challenge, used.as_deref())
                        .await?;
                }
                _ => break resp,
            }
        };
        if !resp.status().is_success() {
            return Err(ConnectError::GetStatus {
                url: spec.url.clone(),
                status: resp.status().as_u16(),
            }
            .into());
        }
        let mut events = resp.bytes_stream().eventsource();
        // The first event names the endpoint.
        let endpoint = loop {
            match events.next().await {
                Some(Ok(ev)) if ev.event == "endpoint" => break ev.data,
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(ProtocolError::Sse(e.into()).into()),
                None => return Err(ProtocolError::NoEndpoint.into()),
            }
        };
        let base = reqwest::Url::parse(&spec.url).map_err(|e| ConnectError::BadUrl {
            url: spec.url.clone(),
            source: e.into(),
        })?;
        let endpoint = match base.join(endpoint.trim()) {
            Ok(url) => url.to_string(),
            Err(e) => {
                return Err(ProtocolError::BadEndpoint {
                    endpoint,
                    source: e.into(),
                }
                .into())
            }
        };
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
            identity,
        })
    }

    pub(crate) fn send(
        &self,
        inner: &Arc<Inner>,
        msg: &Message,
        extra: &ExtraHeaders,
    ) -> Result<(), UpstreamError> {
        let post = |client: &reqwest::Client, headers: HeaderMap| {
            with_extra(
                client
                    .post(&self.endpoint)
                    .headers(headers)
                    .header(CONTENT_TYPE, "application/json")
                    .body(msg.to_json()),
                extra,
            )
        };
        let identity = self.identity.clone();
        let used = identity.as_ref().and_then(|i| i.bearer());
        let rb = post(
            &self.client,
            with_bearer(self.headers.clone(), identity.as_ref()),
        );
        // A refusal the identity fixes is sent once more, with the new token.
        let again = identity.as_ref().map(|_| {
            let headers = self.headers.clone();
            let client = self.client.clone();
            let endpoint = self.endpoint.clone();
            let body = msg.to_json();
            let extra = extra.clone();
            move |identity: &Arc<Identity>| {
                with_extra(
                    client
                        .post(&endpoint)
                        .headers(with_bearer(headers, Some(identity)))
                        .header(CONTENT_TYPE, "application/json")
                        .body(body),
                    &extra,
                )
            }
        });
        let inner = inner.clone();
        tokio::spawn(async move {
            let mut outcome = rb.send().await;
            if let (Some(id), Some(again), Ok(r)) = (&identity, again, &outcome) {
                if let Some(challenge) = refusal(r) {
                    match id
                        .refused(r.status().as_u16(), &challenge, used.as_deref())
                        .await
                    {
                        Ok(()) => outcome = again(id).send().await,
                        Err(e) => {
                            inner.close(e.to_string());
                            return;
                        }
                    }
                }
            }
            match outcome {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => {
                    tracing::warn!(upstream = %inner.label, status = %r.status(), "POST refused")
                }
                Err(e) => inner.close(format!("POST failed: {e}")),
            }
        });
        Ok(())
    }

    pub(crate) fn shutdown(&self) {
        self.reader.abort();
    }
}
