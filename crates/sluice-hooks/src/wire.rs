//! What the command, process and http kinds share: the Zato-style hook services' answer shape (`{"request": …}`
//! / `{"response": …}`, read as [`crate::http`]'s table says), a hook's replacement object as a
//! message, and the texts their errors use (a cut string, a duration).

use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::{HookEvent, Phase};
use serde_json::{Map, Value};
use sluice_core::Message;
use std::time::Duration;

/// At most `n` characters of `s`.
pub(crate) fn truncate_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The Zato-style hook services' answer shape, shared by the http, process and command kinds: `{"request": obj}`
/// and `{"response": obj}`, read as the module docs' table says. `None` when the answer has
/// neither key in a form that means something in this phase.
pub(crate) fn native_decision(
    ev: &HookEvent,
    answer: &Map<String, Value>,
) -> Result<Option<Decision>, HookFailure> {
    match ev.phase {
        Phase::Request => {
            match answer.get("response") {
                None | Some(Value::Null) => {}
                Some(Value::Object(o)) => {
                    return Ok(Some(Decision::Answer(to_message(ev, o, "response")?)));
                }
                Some(_) => {
                    return Err(HookFailure(
                        "unreadable answer: `response` is not an object".into(),
                    ))
                }
            }
            match answer.get("request") {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Object(o)) => Ok(Some(replace(ev, to_message(ev, o, "request")?))),
                Some(_) => Err(HookFailure(
                    "unreadable answer: `request` is not an object".into(),
                )),
            }
        }
        Phase::Response => match answer.get("response") {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(replace(ev, to_message(ev, o, "response")?))),
            Some(_) => Ok(Some(Decision::Refuse(Refusal {
                reason: "the response hook returned a non-object response".into(),
                for_agent: false,
                error: None,
            }))),
        },
    }
}

/// Modify, or pass when the replacement is the message itself.
pub(crate) fn replace(ev: &HookEvent, msg: Message) -> Decision {
    if msg == ev.message {
        Decision::Pass
    } else {
        Decision::Modify(msg)
    }
}

/// A hook's replacement object as a message: `jsonrpc` and the original `id` are filled in when
/// left out; anything that is still not a JSON-RPC message is unreadable.
pub(crate) fn to_message(
    ev: &HookEvent,
    obj: &Map<String, Value>,
    what: &str,
) -> Result<Message, HookFailure> {
    let mut obj = obj.clone();
    if !obj.contains_key("jsonrpc") {
        obj.insert("jsonrpc".into(), Value::from("2.0"));
    }
    if !obj.contains_key("id") {
        if let Some(id) = ev.message.id() {
            obj.insert("id".into(), id.clone());
        }
    }
    Message::from_value(Value::Object(obj)).map_err(|e| {
        HookFailure(format!(
            "unreadable {what} from the hook: not a JSON-RPC message ({})",
            e.error.message
        ))
    })
}

/// A duration as a person writes it: `5s`, `1.5s`, `250ms`.
pub(crate) fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if d.subsec_millis() == 0 {
        format!("{}s", ms / 1000)
    } else if ms >= 1000 {
        format!("{}s", d.as_secs_f64())
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    fn ev(phase: Phase, message: Value) -> HookEvent {
        HookEvent {
            phase,
            event_name: "Request",
            method: "tools/call".into(),
            session_id: "s1".into(),
            tool_name: Some("t".into()),
            upstream: None,
            message: Message::from_value(message).unwrap(),
            request: None,
            era: "legacy",
            cwd: PathBuf::from("/"),
            principal: None,
            upstream_sub: None,
            claude: Default::default(),
        }
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn native_request_phase() {
        let e = ev(
            Phase::Request,
            json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t"}}),
        );
        assert_eq!(
            native_decision(&e, &obj(json!({"other": 1}))).unwrap(),
            None
        );
        assert_eq!(
            native_decision(&e, &obj(json!({"request": null}))).unwrap(),
            None
        );
        // An unchanged message passes.
        assert_eq!(
            native_decision(&e, &obj(json!({"request": e.message.to_value()}))).unwrap(),
            Some(Decision::Pass)
        );
        // Missing jsonrpc and id are filled in.
        let d = native_decision(
            &e,
            &obj(json!({"request": {"method":"tools/call","params":{"name":"u"}}})),
        )
        .unwrap();
        let Some(Decision::Modify(m)) = d else {
            panic!("{d:?}")
        };
        assert_eq!(
            m.to_value(),
            json!({"method":"tools/call","params":{"name":"u"},"jsonrpc":"2.0","id":4})
        );
        let d = native_decision(&e, &obj(json!({"response": {"result": {}}}))).unwrap();
        assert_eq!(
            d,
            Some(Decision::Answer(
                Message::from_value(json!({"result":{},"jsonrpc":"2.0","id":4})).unwrap()
            ))
        );
        assert!(native_decision(&e, &obj(json!({"request": {"foo": 1}})))
            .unwrap_err()
            .0
            .contains("unreadable request"));
        assert!(native_decision(&e, &obj(json!({"request": 3}))).is_err());
        assert!(native_decision(&e, &obj(json!({"response": "x"}))).is_err());
    }

    #[test]
    fn native_response_phase() {
        let e = ev(
            Phase::Response,
            json!({"jsonrpc":"2.0","id":4,"result":{"content":[]}}),
        );
        assert_eq!(
            native_decision(&e, &obj(json!({"request": {"x": 1}}))).unwrap(),
            None
        );
        let d = native_decision(
            &e,
            &obj(json!({"response": {"jsonrpc":"2.0","id":4,"result":{"a":1}}})),
        )
        .unwrap();
        assert!(matches!(d, Some(Decision::Modify(_))));
        for bad in [json!(null), json!("x"), json!([1])] {
            assert_eq!(
                native_decision(&e, &obj(json!({ "response": bad }))).unwrap(),
                Some(Decision::Refuse(Refusal {
                    reason: "the response hook returned a non-object response".into(),
                    for_agent: false,
                    error: None,
                }))
            );
        }
    }

    #[test]
    fn durations_and_cuts_read_as_people_write_them() {
        assert_eq!(fmt_duration(Duration::from_secs(5)), "5s");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(fmt_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("hi", 5), "hi");
    }
}
