//! A 2026-07-28 request's `input_required` rounds, run by the client that sends it: a result
//! `{"resultType": "input_required", "inputRequests": {KEY: request…}, "requestState"?}` is
//! answered by sending the same request again, with a fresh id, the answers as
//! `inputResponses: {KEY: result…}` and the `requestState` exactly as the server sent it (none
//! when it sent none). Each request starts from its own parameters: the answers of one never
//! travel with another.

use crate::core::ExtraHeaders;
use crate::{Connection, UpstreamError};
use serde_json::{json, Map, Value};
use sluice_core::Message;
use std::future::Future;
use std::time::Duration;

/// Send `method` with `params` (and `extra` headers on each attempt), then run up to `rounds`
/// input rounds, asking `answer(key, input request)` for each input request's result. Returns
/// the final reply: a result that is not `input_required`, an error, or the last
/// `input_required` result when `answer` gave no result for one of its requests (`None`) or the
/// rounds ran out.
pub async fn call_with_rounds<F, Fut>(
    conn: &Connection,
    method: &str,
    params: Map<String, Value>,
    extra: &ExtraHeaders,
    timeout: Duration,
    rounds: usize,
    mut answer: F,
) -> Result<Message, UpstreamError>
where
    F: FnMut(String, Value) -> Fut,
    Fut: Future<Output = Option<Value>>,
{
    let mut attempt = params.clone();
    let mut round = 0;
    loop {
        let id = conn.next_id();
        let msg = Message::request(json!(id), method, Some(Value::Object(attempt.clone())));
        let reply = conn
            .request(id, msg, timeout, extra)
            .await?
            .into_message(id);
        let Some(result) = reply.result() else {
            return Ok(reply);
        };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required")
            || round == rounds
        {
            return Ok(reply);
        }
        round += 1;
        let mut responses = Map::new();
        let requests = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (key, request) in requests {
            match answer(key.clone(), request).await {
                Some(r) => {
                    responses.insert(key, r);
                }
                None => return Ok(reply),
            }
        }
        attempt = params.clone();
        attempt.insert("inputResponses".into(), Value::Object(responses));
        if let Some(state) = result.get("requestState") {
            attempt.insert("requestState".into(), state.clone());
        }
    }
}
