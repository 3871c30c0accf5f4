//! Access rules: which callers may see and use which tools, prompts and resources. A deny rule
//! that matches the caller wins; otherwise, when allow rules select the item, the caller must
//! match one of them; an item no rule selects is open to every caller.

use serde_json::Value;
use sluice_config::{AccessRule, Effect};
use sluice_core::{glob_match, Principal};

/// What a rule selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// A tool, by client-facing name.
    Tool,
    /// A prompt, by name.
    Prompt,
    /// A resource, by URI (or a template, by URI template).
    Resource,
}

/// The access rules of one configuration.
#[derive(Debug, Default, Clone)]
pub struct Policy {
    rules: Vec<AccessRule>,
}

impl Policy {
    /// The rules, in file order.
    pub fn new(rules: &[AccessRule]) -> Policy {
        Policy {
            rules: rules.to_vec(),
        }
    }

    /// No rules: everything is open (the common case costs nothing).
    pub fn is_open(&self) -> bool {
        self.rules.is_empty()
    }

    /// May `principal` (None: an unauthenticated caller) see and use `name`?
    pub fn allows(&self, item: Item, name: &str, principal: Option<&Principal>) -> bool {
        let mut allow_rules = false;
        let mut allowed = false;
        for rule in &self.rules {
            let globs = match item {
                Item::Tool => &rule.tools,
                Item::Prompt => &rule.prompts,
                Item::Resource => &rule.resources,
            };
            if !globs.iter().any(|g| glob_match(g, name)) {
                continue;
            }
            let matches = caller_matches(rule, principal);
            match rule.effect {
                Effect::Deny if matches => return false,
                Effect::Deny => {}
                Effect::Allow => {
                    allow_rules = true;
                    allowed |= matches;
                }
            }
        }
        !allow_rules || allowed
    }
}

fn caller_matches(rule: &AccessRule, principal: Option<&Principal>) -> bool {
    if rule.principals.is_empty() && rule.scopes.is_empty() && rule.claims.is_empty() {
        return true;
    }
    let Some(p) = principal else {
        return false;
    };
    if !rule.principals.is_empty() && !rule.principals.iter().any(|g| glob_match(g, &p.id)) {
        return false;
    }
    if !rule.scopes.iter().all(|s| p.has_scope(s)) {
        return false;
    }
    rule.claims.iter().all(|(k, want)| {
        let Some(have) = p.claims.get(k) else {
            return false;
        };
        let wanted: Vec<&Value> = match want {
            Value::Array(a) => a.iter().collect(),
            v => vec![v],
        };
        match have {
            Value::Array(items) => items.iter().any(|i| wanted.contains(&i)),
            v => wanted.contains(&v),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map};

    fn rule(effect: Effect, tools: &[&str], f: impl FnOnce(&mut AccessRule)) -> AccessRule {
        let mut r = AccessRule {
            effect,
            tools: tools.iter().map(|s| s.to_string()).collect(),
            prompts: vec![],
            resources: vec![],
            principals: vec![],
            scopes: vec![],
            claims: Map::new(),
        };
        f(&mut r);
        r
    }

    fn who(id: &str, scopes: &[&str], claims: Value) -> Principal {
        Principal {
            id: id.into(),
            kind: "jwt",
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            claims: claims.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn deny_wins_allow_restricts_unselected_is_open() {
        let policy = Policy::new(&[
            rule(Effect::Allow, &["admin_*"], |r| {
                r.scopes = vec!["mcp:admin".into()]
            }),
            rule(Effect::Allow, &["admin_*"], |r| {
                r.claims = json!({"team": ["ops", "sre"]}).as_object().unwrap().clone()
            }),
            rule(Effect::Deny, &["*"], |r| {
                r.principals = vec!["banned-*".into()]
            }),
        ]);
        let admin = who("alice", &["mcp:admin"], json!({}));
        let ops = who("bob", &[], json!({"team": "ops"}));
        let sre = who("eve", &[], json!({"team": ["dev", "sre"]}));
        let dev = who("carol", &[], json!({"team": "dev"}));
        let banned = who("banned-1", &["mcp:admin"], json!({}));
        assert!(policy.allows(Item::Tool, "admin_reset", Some(&admin)));
        assert!(policy.allows(Item::Tool, "admin_reset", Some(&ops)));
        assert!(policy.allows(Item::Tool, "admin_reset", Some(&sre)));
        assert!(!policy.allows(Item::Tool, "admin_reset", Some(&dev)));
        assert!(!policy.allows(Item::Tool, "admin_reset", None));
        assert!(policy.allows(Item::Tool, "echo", Some(&dev)));
        assert!(policy.allows(Item::Tool, "echo", None));
        assert!(!policy.allows(Item::Tool, "echo", Some(&banned)));
        assert!(!policy.allows(Item::Tool, "admin_reset", Some(&banned)));
        // Rules selecting tools say nothing about prompts.
        assert!(policy.allows(Item::Prompt, "admin_reset", Some(&banned)));
        assert!(Policy::default().is_open());
    }
}
