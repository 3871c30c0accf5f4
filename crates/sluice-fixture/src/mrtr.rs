//! Server-to-client input in both eras: legacy requests send `elicitation/create`,
//! `sampling/createMessage` or `roots/list` to the client and wait; modern (2026-07-28) requests
//! use multi round-trip requests (`basic/patterns/mrtr`): the handler answers
//! `{resultType: "input_required", inputRequests, requestState}` and completes when the client
//! retries with `inputResponses` (and the echoed `requestState`).
//!
//! The requestState is `hex(payload) "." hex(mac)`: the payload (JSON) holds a digest of what
//! the state is bound to (method, name or URI, arguments), an expiry and the answers gathered in
//! earlier rounds; the MAC is keyed SipHash with a per-process random key, so tampered,
//! expired, foreign or replayed-elsewhere state is refused with `-32602`.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use crate::protocol::RpcError;
use crate::session::Ctx;
use crate::sync::lock;

/// How long a requestState stays valid.
const STATE_TTL_MS: u64 = 10 * 60 * 1000;

/// One input a handler needs from the client.
#[derive(Debug, Clone)]
pub(crate) struct InputRequest {
    /// The server-assigned key (unique within the request).
    pub key: String,
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: &'static str,
    /// The request's params.
    pub params: Value,
}

impl InputRequest {
    /// An input request `key` for `method` with `params`.
    pub(crate) fn new(key: &str, method: &'static str, params: Value) -> Self {
        InputRequest {
            key: key.to_string(),
            method,
            params,
        }
    }
}

/// Why [`Ctx::ask`] did not produce the answers.
#[derive(Debug)]
pub(crate) enum AskError {
    /// Modern: answer the request with this `InputRequiredResult` (and expect a retry).
    InputRequired(Value),
    /// Legacy: the client request failed or timed out (a message for the tool's text).
    Failed(String),
    /// A protocol error to answer the request with (missing capability, bad input responses,
    /// bad requestState).
    Rpc(RpcError),
}

/// The client capability an input method needs.
pub(crate) fn capability_for(method: &str) -> &'static str {
    match method {
        "elicitation/create" => "elicitation",
        "sampling/createMessage" => "sampling",
        _ => "roots",
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Whether `v` has the shape of a result of `method` (as an input response).
fn valid_response(method: &str, v: &Value) -> bool {
    let Some(obj) = v.as_object() else {
        return false;
    };
    match method {
        "elicitation/create" => obj
            .get("action")
            .and_then(Value::as_str)
            .is_some_and(|a| matches!(a, "accept" | "decline" | "cancel")),
        "sampling/createMessage" => {
            obj.get("role").is_some_and(Value::is_string)
                && obj
                    .get("content")
                    .is_some_and(|c| c.is_object() || c.is_array())
        }
        _ => obj.get("roots").is_some_and(Value::is_array),
    }
}

impl Ctx {
    fn binding_digest(&self) -> String {
        let binding = self.modern().map(|m| m.binding.as_str()).unwrap_or("");
        format!("{:016x}", self.session.fixture.mac(binding.as_bytes()))
    }

    /// Sign a requestState carrying `answers`, bound to this request.
    pub(crate) fn sign_state(&self, answers: &Map<String, Value>) -> String {
        let payload = json!({
            "b": self.binding_digest(),
            "exp": now_ms() + STATE_TTL_MS,
            "n": uuid::Uuid::new_v4().simple().to_string(),
            "answers": answers,
        })
        .to_string();
        let mac = self.session.fixture.mac(payload.as_bytes());
        format!("{}.{mac:016x}", hex(payload.as_bytes()))
    }

    /// The answers carried by `state`, if it is authentic, unexpired and bound to this request.
    pub(crate) fn verify_state(&self, state: &str) -> Result<Map<String, Value>, RpcError> {
        let bad = |why: &str| RpcError::invalid_params(format!("Invalid requestState: {why}"));
        let (payload, mac) = state.split_once('.').ok_or_else(|| bad("malformed"))?;
        let payload = unhex(payload).ok_or_else(|| bad("malformed"))?;
        let mac = u64::from_str_radix(mac, 16).map_err(|_| bad("malformed"))?;
        if mac != self.session.fixture.mac(&payload) {
            return Err(bad("integrity check failed"));
        }
        let payload: Value = serde_json::from_slice(&payload).map_err(|_| bad("malformed"))?;
        if payload["b"].as_str() != Some(self.binding_digest().as_str()) {
            return Err(bad("issued for a different request"));
        }
        if payload["exp"].as_u64().is_none_or(|exp| exp < now_ms()) {
            return Err(bad("expired"));
        }
        Ok(payload["answers"].as_object().cloned().unwrap_or_default())
    }

    /// The answers of a verified requestState: `Ok(None)` when the request carries none.
    fn presented_state(&self) -> Result<Option<Map<String, Value>>, RpcError> {
        match self.modern().and_then(|m| m.request_state.as_ref()) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => self.verify_state(s).map(Some),
            Some(_) => Err(RpcError::invalid_params(
                "Invalid requestState: must be a string",
            )),
        }
    }

    /// The request's `inputResponses` object (`{}` when absent; `-32602` when not an object).
    fn presented_responses(&self) -> Result<Map<String, Value>, RpcError> {
        match self.modern().and_then(|m| m.input_responses.as_ref()) {
            None => Ok(Map::new()),
            Some(Value::Object(o)) => Ok(o.clone()),
            Some(_) => Err(RpcError::invalid_params(
                "Invalid params: inputResponses must be an object",
            )),
        }
    }

    /// An `InputRequiredResult` asking for `requests`, with a requestState carrying `answers`.
    pub(crate) fn input_required(
        &self,
        requests: &[InputRequest],
        answers: &Map<String, Value>,
    ) -> Value {
        let input_requests: Map<String, Value> = requests
            .iter()
            .map(|r| {
                (
                    r.key.clone(),
                    json!({ "method": r.method, "params": r.params }),
                )
            })
            .collect();
        json!({
            "resultType": "input_required",
            "inputRequests": input_requests,
            "requestState": self.sign_state(answers),
        })
    }

    /// Get the client's answers to `requests`, in order. Legacy: send each request to the
    /// client and wait. Modern: take them from `inputResponses` (or from answers carried in
    /// the requestState from earlier rounds); when any is missing, `AskError::InputRequired`
    /// asks for the missing ones. With `require_state`, modern answers only count when the
    /// retry also echoed a valid requestState.
    pub(crate) async fn ask(
        &self,
        requests: &[InputRequest],
        require_state: bool,
    ) -> Result<Vec<Value>, AskError> {
        if !self.is_modern() {
            let mut answers = Vec::with_capacity(requests.len());
            for r in requests {
                answers.push(
                    self.request(r.method, r.params.clone())
                        .await
                        .map_err(AskError::Failed)?,
                );
            }
            return Ok(answers);
        }
        for r in requests {
            let cap = capability_for(r.method);
            if !self.client_supports(cap) {
                return Err(AskError::Rpc(RpcError::missing_capability(cap)));
            }
        }
        let state = self.presented_state().map_err(AskError::Rpc)?;
        let responses = if require_state && state.is_none() {
            Map::new()
        } else {
            self.presented_responses().map_err(AskError::Rpc)?
        };
        let mut known = state.unwrap_or_default();
        known.extend(lock(&self.gathered).clone());
        let mut answers = Vec::with_capacity(requests.len());
        let mut missing = Vec::new();
        for r in requests {
            if let Some(v) = responses.get(&r.key) {
                if !valid_response(r.method, v) {
                    return Err(AskError::Rpc(RpcError::invalid_params(format!(
                        "Invalid params: inputResponses.{} is not a valid {} result",
                        r.key, r.method
                    ))));
                }
                known.insert(r.key.clone(), v.clone());
                answers.push(v.clone());
            } else if let Some(v) = known.get(&r.key) {
                answers.push(v.clone());
            } else {
                missing.push(r.clone());
            }
        }
        if missing.is_empty() {
            lock(&self.gathered).extend(known);
            Ok(answers)
        } else {
            Err(AskError::InputRequired(
                self.input_required(&missing, &known),
            ))
        }
    }

    /// [`Ctx::ask`] for one input.
    pub(crate) async fn ask_one(
        &self,
        key: &str,
        method: &'static str,
        params: Value,
    ) -> Result<Value, AskError> {
        let mut v = self
            .ask(&[InputRequest::new(key, method, params)], false)
            .await?;
        Ok(v.remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::parse_modern_meta;
    use crate::session::tests::fixture;
    use crate::session::{Era, EraMode, ModernReq};

    fn modern_ctx(fx: &std::sync::Arc<crate::session::Fixture>, params: Value) -> Ctx {
        let params = {
            let mut p = params;
            p["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}
            });
            p
        };
        let meta = parse_modern_meta(&params).unwrap();
        let era = Era::Modern(Box::new(ModernReq::new(meta, "tools/call", &params)));
        Ctx::for_test(fx.clone(), json!(1), era)
    }

    #[test]
    fn request_state_is_bound_and_tamper_evident() {
        let fx = fixture(EraMode::Both);
        let ctx = modern_ctx(&fx, json!({"name": "t", "arguments": {"a": 1}}));
        let mut answers = Map::new();
        answers.insert("k".into(), json!({"action": "accept"}));
        let state = ctx.sign_state(&answers);
        assert_eq!(ctx.verify_state(&state).unwrap(), answers);
        assert!(ctx.verify_state(&format!("{state}-TAMPERED")).is_err());
        let flipped = state.replacen('7', "8", 1);
        assert!(ctx.verify_state(&flipped).is_err());
        assert!(ctx.verify_state("garbage").is_err());
        // Bound to the tool and its arguments.
        let other = modern_ctx(&fx, json!({"name": "t", "arguments": {"a": 2}}));
        assert_eq!(other.verify_state(&state).unwrap_err().code, -32602);
        // And to this process's key.
        let stranger = modern_ctx(
            &fixture(EraMode::Both),
            json!({"name": "t", "arguments": {"a": 1}}),
        );
        assert!(stranger.verify_state(&state).is_err());
    }

    #[tokio::test]
    async fn ask_asks_then_completes_from_responses_and_state() {
        let fx = fixture(EraMode::Both);
        let first = modern_ctx(&fx, json!({"name": "t", "arguments": {}}));
        let q = || {
            vec![
                InputRequest::new("a", "elicitation/create", json!({"message": "A?"})),
                InputRequest::new("b", "elicitation/create", json!({"message": "B?"})),
            ]
        };
        let Err(AskError::InputRequired(r)) = first.ask(&q(), false).await else {
            panic!("expected input_required");
        };
        assert_eq!(r["resultType"], "input_required");
        assert_eq!(r["inputRequests"]["a"]["method"], "elicitation/create");
        assert_eq!(r["inputRequests"]["b"]["params"]["message"], "B?");
        // Only a answered: b is asked again, a travels in the state.
        let partial = modern_ctx(
            &fx,
            json!({"name": "t", "arguments": {},
            "inputResponses": {"a": {"action": "accept", "content": {"x": 1}}},
            "requestState": r["requestState"]}),
        );
        let Err(AskError::InputRequired(r2)) = partial.ask(&q(), false).await else {
            panic!("expected input_required");
        };
        assert!(r2["inputRequests"].get("a").is_none());
        let done = modern_ctx(
            &fx,
            json!({"name": "t", "arguments": {},
            "inputResponses": {"b": {"action": "decline"}, "extra": 1},
            "requestState": r2["requestState"]}),
        );
        let answers = done.ask(&q(), false).await.unwrap();
        assert_eq!(answers[0]["content"]["x"], 1);
        assert_eq!(answers[1]["action"], "decline");
        // Undeclared capability: -32021.
        let roots = [InputRequest::new("r", "roots/list", json!({}))];
        let Err(AskError::Rpc(e)) = first.ask(&roots, false).await else {
            panic!("expected an error");
        };
        assert_eq!(e.code, -32021);
        // inputResponses that is not an object: -32602.
        let bad = modern_ctx(
            &fx,
            json!({"name": "t", "arguments": {}, "inputResponses": null}),
        );
        let bad_ctx = Ctx::for_test(fx.clone(), json!(2), bad.era.clone());
        let Err(AskError::Rpc(e)) = bad_ctx.ask(&q(), false).await else {
            panic!("expected an error");
        };
        assert_eq!(e.code, -32602);
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(unhex(&hex(b"\x00\xffab")).unwrap(), b"\x00\xffab");
        assert!(unhex("abc").is_none());
        assert!(unhex("zz").is_none());
    }

    #[test]
    fn validates_response_shapes() {
        assert!(valid_response(
            "elicitation/create",
            &json!({"action": "accept", "content": {"a": 1}})
        ));
        assert!(!valid_response(
            "elicitation/create",
            &json!({"action": "maybe"})
        ));
        assert!(!valid_response("elicitation/create", &json!(12345)));
        assert!(valid_response(
            "sampling/createMessage",
            &json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"})
        ));
        assert!(!valid_response(
            "sampling/createMessage",
            &json!({"role": "assistant"})
        ));
        assert!(valid_response("roots/list", &json!({"roots": []})));
        assert!(!valid_response("roots/list", &json!({})));
        assert_eq!(capability_for("sampling/createMessage"), "sampling");
    }
}
