//! The `rewrite` builtin: changes the arguments of a `tools/call` before it goes on. Each rule
//! applies to the tools its `tool` regex matches (every tool without one): `set` writes values
//! (replacing what the agent sent), `default` writes values the agent left out, `remove` drops
//! arguments. Keys are argument names, dotted paths or JSON pointers. The Zato-style hook services' example, forcing
//! the region of `crm.order.status`, is one rule:
//! `{"tool": "crm\\.order\\.status", "set": {"region": "eu-central"}}`.

use super::path::JsonPath;
use super::ToolPattern;
use crate::decision::Decision;
use crate::event::HookEvent;
use serde_json::{Map, Value};
use sluice_config::builtin::RewriteOptions;
use sluice_config::OptionError;

#[derive(Debug, Clone)]
struct Rule {
    tool: Option<ToolPattern>,
    set: Vec<(JsonPath, Value)>,
    default: Vec<(JsonPath, Value)>,
    remove: Vec<JsonPath>,
}

/// Would `rules` surely leave `args` as they are? Each rule is checked against the arguments
/// as they are: when none of them would change those, applied in order none does either. A
/// `remove` changes nothing when its path reaches nothing; a `set` when its path (without `*`)
/// holds that value already; a `default` when its path (without `*`) holds a value. Anything
/// else is left to applying the rules to a copy.
fn surely_unchanged<'r>(mut rules: impl Iterator<Item = &'r Rule>, args: &Value) -> bool {
    rules.all(|r| {
        r.remove.iter().all(|p| {
            if p.has_any() {
                p.find(args).is_empty()
            } else {
                p.get(args).is_none()
            }
        }) && r
            .set
            .iter()
            .all(|(p, v)| !p.has_any() && p.get(args) == Some(v))
            && r.default
                .iter()
                .all(|(p, _)| !p.has_any() && p.get(args).is_some())
    })
}

/// The rewrite builtin.
#[derive(Debug, Clone)]
pub struct Rewrite {
    rules: Vec<Rule>,
}

fn assignments(pairs: &[(String, Value)], at: &str) -> Result<Vec<(JsonPath, Value)>, OptionError> {
    pairs
        .iter()
        .map(|(k, v)| {
            JsonPath::parse(k)
                .map(|p| (p, v.clone()))
                .map_err(|e| OptionError::new(format!("{at}.{k}"), e))
        })
        .collect()
}

impl Rewrite {
    /// Build from the hook's `options`: `rules` (`[{"tool"?, "set"?, "default"?, "remove"?}]`).
    pub fn from_options(options: &RewriteOptions) -> Result<Rewrite, OptionError> {
        let Some(items) = &options.rules else {
            return Err(OptionError::new(
                "options.rules",
                "is required (an array of rules)",
            ));
        };
        let mut rules = Vec::new();
        for (i, r) in items.iter().enumerate() {
            let at = format!("options.rules[{i}]");
            let tool = r
                .tool
                .as_deref()
                .map(|t| {
                    ToolPattern::regex(t).map_err(|e| OptionError::new(format!("{at}.tool"), e))
                })
                .transpose()?;
            let rule = Rule {
                tool,
                set: assignments(&r.set, &format!("{at}.set"))?,
                default: assignments(&r.default, &format!("{at}.default"))?,
                remove: super::json_paths(&format!("{at}.remove"), &r.remove)?,
            };
            if rule.set.is_empty() && rule.default.is_empty() && rule.remove.is_empty() {
                return Err(OptionError::new(at, "needs `set`, `default` or `remove`"));
            }
            rules.push(rule);
        }
        if rules.is_empty() {
            return Err(OptionError::new("options.rules", "must not be empty"));
        }
        Ok(Rewrite { rules })
    }

    /// Decide on the request phase of a `tools/call` (a change is made to the event's message,
    /// which `Modify` carries away).
    pub fn decide(&self, ev: &mut HookEvent) -> Decision {
        let tool = ev.tool_name.as_deref().unwrap_or("");
        let applies = |r: &&Rule| r.tool.as_ref().is_none_or(|t| t.is_match(tool));
        let mut rules = self.rules.iter().filter(applies).peekable();
        if rules.peek().is_none() {
            return Decision::Pass;
        }
        // The rules run on a copy of the arguments; the message is copied only when they
        // changed something. Arguments none of the rules would change are not copied at all.
        let mut args = match ev.tool_input() {
            Some(a) if a.is_object() => {
                if surely_unchanged(rules, a) {
                    return Decision::Pass;
                }
                a.clone()
            }
            _ => Value::Object(Map::new()),
        };
        let args = &mut args;
        let mut changed = 0;
        // The rules that apply, in order (matched again, not collected: only a call they
        // change comes here).
        for r in self.rules.iter().filter(applies) {
            for p in &r.remove {
                changed += p.remove(args);
            }
            for (p, v) in &r.set {
                changed += p.set(args, v, false);
            }
            for (p, v) in &r.default {
                changed += p.set(args, v, true);
            }
        }
        if changed == 0 {
            return Decision::Pass;
        }
        let mut msg = ev.message.take();
        msg.set_param("arguments", std::mem::take(args));
        Decision::Modify(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::deny::tests::call;
    use serde_json::json;

    fn rewrite(options: Value) -> Rewrite {
        let sluice_config::BuiltinOptions::Rewrite(o) = crate::builtin::parsed("rewrite", options)
        else {
            unreachable!("rewrite options")
        };
        Rewrite::from_options(&o).unwrap()
    }

    fn args_after(r: &Rewrite, tool: &str, args: Value) -> Option<Value> {
        match r.decide(&mut call(tool, args)) {
            Decision::Modify(m) => Some(m.params().unwrap()["arguments"].clone()),
            Decision::Pass => None,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_example_region_in_one_rule() {
        let r = rewrite(json!({"rules": [
            {"tool": "crm\\.order\\.status", "set": {"region": "eu-central"}}
        ]}));
        assert_eq!(
            args_after(
                &r,
                "crm.order.status",
                json!({"order": "A-1", "region": "us-east"})
            ),
            Some(json!({"order": "A-1", "region": "eu-central"}))
        );
        assert_eq!(
            args_after(&r, "crm.order.status", json!({"order": "A-1"})),
            Some(json!({"order": "A-1", "region": "eu-central"}))
        );
        // Already right, or another tool: unchanged.
        assert_eq!(
            args_after(&r, "crm.order.status", json!({"region": "eu-central"})),
            None
        );
        assert_eq!(args_after(&r, "crm.order.cancel", json!({})), None);
    }

    #[test]
    fn arguments_the_rules_would_not_change_are_passed_as_they_are() {
        let r = rewrite(json!({"rules": [
            {"default": {"limit": 10, "/opts/safe": true, "list.1": 0}, "remove": ["debug", "opts.trace", "tags.*"]},
            {"set": {"opts.by": "sluice"}}
        ]}));
        let any = rewrite(json!({"rules": [{"set": {"items.*.x": 1}}]}));
        let held = json!({"limit": 3, "opts": {"safe": false, "by": "sluice"}, "list": [5, 6], "tags": {}});
        let cases = [
            // Every rule already holds: nothing to copy.
            (&r, held.clone(), true),
            // Each of these would change: the copy is made, and changes.
            (
                &r,
                json!({"opts": {"safe": false, "by": "sluice"}, "list": [5, 6]}),
                false,
            ),
            (
                &r,
                json!({"limit": 3, "opts": {"safe": false, "by": "me"}, "list": [5, 6]}),
                false,
            ),
            (
                &r,
                json!({"limit": 3, "opts": {"safe": false, "by": "sluice", "trace": 1}, "list": [5, 6]}),
                false,
            ),
            (
                &r,
                json!({"limit": 3, "opts": {"safe": false, "by": "sluice"}, "list": [5, 6], "tags": {"a": 1}}),
                false,
            ),
            (
                &r,
                json!({"limit": 3, "opts": {"safe": false, "by": "sluice"}, "list": [5]}),
                false,
            ),
            // A `*` in a set is not judged: the copy is made (here it changes nothing, there
            // it does).
            (&any, json!({"items": [{"x": 1}]}), false),
            (&any, json!({"items": [{"x": 2}]}), false),
        ];
        for (rw, args, sure) in cases {
            let rules: Vec<&Rule> = rw.rules.iter().collect();
            assert_eq!(surely_unchanged(rw.rules.iter(), &args), sure, "{args}");
            let changed = args_after(rw, "t", args.clone());
            // What the rules do to a copy is what the hook does, either way.
            let mut copy = args.clone();
            let n: usize = rules
                .iter()
                .map(|rule| {
                    rule.remove
                        .iter()
                        .map(|p| p.remove(&mut copy))
                        .sum::<usize>()
                        + rule
                            .set
                            .iter()
                            .map(|(p, v)| p.set(&mut copy, v, false))
                            .sum::<usize>()
                        + rule
                            .default
                            .iter()
                            .map(|(p, v)| p.set(&mut copy, v, true))
                            .sum::<usize>()
                })
                .sum();
            assert_eq!(n == 0, sure || changed.is_none(), "{args}");
            assert_eq!(changed, (n > 0).then_some(copy), "{args}");
        }
    }

    #[test]
    fn set_default_remove_with_paths() {
        let r = rewrite(json!({"rules": [
            {"default": {"limit": 10, "/opts/safe": true}, "remove": ["debug", "opts.trace"]},
            {"tool": "fx_.*", "set": {"opts.by": "sluice"}}
        ]}));
        assert_eq!(
            args_after(
                &r,
                "fx_echo",
                json!({"limit": 3, "debug": 1, "opts": {"trace": 1}})
            ),
            Some(json!({"limit": 3, "opts": {"safe": true, "by": "sluice"}}))
        );
        use crate::builtin::rejected;
        assert!(rejected("rewrite", json!({"rules": []})));
        assert!(rejected("rewrite", json!({"rules": [{"tool": "x"}]})));
        assert!(rejected("rewrite", json!({"rules": [{"set": []}]})));
        assert!(Rewrite::from_options(&RewriteOptions::default()).is_err());
    }
}
