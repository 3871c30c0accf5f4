//! The `deny` builtin: refuses a `tools/call` (-32030, with a reason meant for the agent) when
//! the tool's name matches one of `tools`, or an argument value matches one of the
//! `arguments` rules (a regex searched in the value at `path`, or in every string anywhere in
//! the arguments when the rule has no path).

use super::path::JsonPath;
use super::{tool_patterns, ToolPattern};
use crate::decision::{Decision, Refusal};
use crate::event::HookEvent;
use regex::Regex;
use serde_json::Value;
use sluice_config::builtin::DenyOptions;
use sluice_config::OptionError;

/// One argument rule.
#[derive(Debug, Clone)]
struct ArgRule {
    path: Option<JsonPath>,
    pattern: Regex,
    tool: Option<ToolPattern>,
    reason: Option<String>,
}

/// The deny builtin.
#[derive(Debug, Clone)]
pub struct Deny {
    tools: Vec<ToolPattern>,
    arguments: Vec<ArgRule>,
    reason: Option<String>,
}

/// Does `pattern` occur in `v` (strings; numbers and booleans as their JSON text; every string
/// inside an object or array)?
fn value_matches(pattern: &Regex, v: &Value) -> Option<String> {
    match v {
        Value::String(s) => pattern.is_match(s).then(|| s.clone()),
        Value::Number(_) | Value::Bool(_) => {
            let s = v.to_string();
            pattern.is_match(&s).then_some(s)
        }
        Value::Array(a) => a.iter().find_map(|x| value_matches(pattern, x)),
        Value::Object(m) => m.values().find_map(|x| value_matches(pattern, x)),
        Value::Null => None,
    }
}

impl Deny {
    /// Build from the hook's `options`: `tools` (name regexes, full match), `arguments`
    /// (`[{"path"?, "pattern", "tool"?, "reason"?}]`), `reason` (what the agent is told;
    /// a default names the tool or the argument).
    pub fn from_options(options: &DenyOptions) -> Result<Deny, OptionError> {
        let tools = tool_patterns("options.tools", &options.tools)?;
        let mut arguments = Vec::new();
        for (i, r) in options.arguments.iter().enumerate() {
            let at = |key: &str| format!("options.arguments[{i}].{key}");
            let Some(pattern) = &r.pattern else {
                return Err(OptionError::new(at("pattern"), "is required"));
            };
            let pattern = Regex::new(pattern)
                .map_err(|e| OptionError::new(at("pattern"), super::regex_error(pattern, &e)))?;
            let path = r
                .path
                .as_deref()
                .map(|p| JsonPath::parse(p).map_err(|e| OptionError::new(at("path"), e)))
                .transpose()?;
            let tool = r
                .tool
                .as_deref()
                .map(|t| ToolPattern::regex(t).map_err(|e| OptionError::new(at("tool"), e)))
                .transpose()?;
            arguments.push(ArgRule {
                path,
                pattern,
                tool,
                reason: r.reason.clone(),
            });
        }
        if tools.is_empty() && arguments.is_empty() {
            return Err(OptionError::new(
                "options",
                "deny needs `tools` or `arguments`",
            ));
        }
        Ok(Deny {
            tools,
            arguments,
            reason: options.reason.clone(),
        })
    }

    /// Decide on the request phase of a `tools/call`.
    pub fn decide(&self, ev: &HookEvent) -> Decision {
        let tool = ev.tool_name.as_deref().unwrap_or("");
        if self.tools.iter().any(|p| p.is_match(tool)) {
            return Decision::Refuse(Refusal::for_agent(self.reason.clone().unwrap_or_else(
                || format!("Tool {tool:?} is not allowed through this gateway."),
            )));
        }
        let Some(args) = ev.tool_input() else {
            return Decision::Pass;
        };
        for rule in &self.arguments {
            if rule.tool.as_ref().is_some_and(|t| !t.is_match(tool)) {
                continue;
            }
            let hit = match &rule.path {
                Some(p) => p
                    .find(args)
                    .into_iter()
                    .find_map(|v| value_matches(&rule.pattern, v)),
                None => value_matches(&rule.pattern, args),
            };
            if hit.is_some() {
                let reason = rule
                    .reason
                    .clone()
                    .or_else(|| self.reason.clone())
                    .unwrap_or_else(|| {
                        let which = match &rule.path {
                            Some(p) => format!("Argument {:?}", p.to_string()),
                            None => "An argument".to_string(),
                        };
                        format!(
                            "{which} of tool {tool:?} is not allowed: it matches the denied pattern \"{}\".",
                            rule.pattern.as_str()
                        )
                    });
                return Decision::Refuse(Refusal::for_agent(reason));
            }
        }
        Decision::Pass
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::Phase;
    use serde_json::json;
    use sluice_config::BuiltinOptions;
    use sluice_core::Message;

    pub(crate) fn call(tool: &str, args: Value) -> HookEvent {
        HookEvent {
            phase: Phase::Request,
            event_name: "PreToolUse",
            method: "tools/call".into(),
            session_id: "s".into(),
            tool_name: Some(tool.into()),
            upstream: None,
            message: Message::request(
                json!(1),
                "tools/call",
                Some(json!({"name": tool, "arguments": args})),
            ),
            request: None,
            era: "legacy",
            cwd: std::path::PathBuf::new(),
            principal: None,
            upstream_sub: None,
            claude: Default::default(),
        }
    }

    fn deny(options: Value) -> Deny {
        let BuiltinOptions::Deny(o) = crate::builtin::parsed("deny", options) else {
            unreachable!("deny options")
        };
        Deny::from_options(&o).unwrap()
    }

    fn reason(d: Decision) -> String {
        match d {
            Decision::Refuse(r) => {
                assert!(r.for_agent);
                r.reason
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn denies_tools_and_argument_patterns() {
        let d = deny(json!({
            "tools": ["crm\\.order\\.cancel", "fx_cr.*"],
            "arguments": [
                {"path": "command", "pattern": "rm\\s+-rf"},
                {"pattern": "(?i)drop\\s+table", "reason": "No schema changes."},
                {"tool": "fx_add", "path": "/a", "pattern": "^13$"}
            ]
        }));
        assert_eq!(
            reason(d.decide(&call("crm.order.cancel", json!({})))),
            "Tool \"crm.order.cancel\" is not allowed through this gateway."
        );
        assert!(matches!(
            d.decide(&call("crm.order.cancelled", json!({}))),
            Decision::Pass
        ));
        assert_eq!(
            reason(d.decide(&call("sh", json!({"command": "rm  -rf /"})))),
            r#"Argument "command" of tool "sh" is not allowed: it matches the denied pattern "rm\s+-rf"."#
        );
        // Only at its path.
        assert!(matches!(
            d.decide(&call("sh", json!({"note": "rm -rf"}))),
            Decision::Pass
        ));
        // Anywhere, nested.
        assert_eq!(
            reason(d.decide(&call(
                "sql",
                json!({"q": {"parts": ["x", "Drop Table users"]}})
            ))),
            "No schema changes."
        );
        // Numbers as their JSON text, only for the rule's tool.
        assert!(matches!(
            d.decide(&call("fx_add", json!({"a": 13}))),
            Decision::Refuse(_)
        ));
        assert!(matches!(
            d.decide(&call("fx_mul", json!({"a": 13}))),
            Decision::Pass
        ));
    }

    #[test]
    fn options_the_configuration_did_not_check_are_refused() {
        use sluice_config::builtin::ArgumentRule;
        assert!(Deny::from_options(&DenyOptions::default()).is_err());
        let rule = |pattern: Option<&str>| DenyOptions {
            arguments: vec![ArgumentRule {
                pattern: pattern.map(str::to_string),
                ..ArgumentRule::default()
            }],
            ..DenyOptions::default()
        };
        assert_eq!(
            Deny::from_options(&rule(Some("((")))
                .unwrap_err()
                .to_string(),
            "options.arguments[0].pattern: \"((\" is not a valid regex: unclosed group"
        );
        assert!(Deny::from_options(&rule(None)).is_err());
    }
}
