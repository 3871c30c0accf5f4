//! What a hook selects calls by, as Claude Code reads it: the `matcher` (exact names, a list,
//! or a regex) and the handler's `if` (one permission rule: `mcp__crm__find`, `mcp__crm__*`,
//! `Bash(git *)`, `Edit(src/**)`, `WebFetch(domain:example.com)`).

use regex::Regex;
use serde_json::Value;
use std::path::Path;

/// A hook's `matcher`.
pub(super) enum Matcher {
    /// `""`, `"*"` or absent: every name.
    Always,
    /// Only letters, digits, `_`, `-`, spaces, `,` and `|`: these exact names.
    Names(Vec<String>),
    /// Anything else: a regex that matches anywhere in the name (as Claude Code's does).
    Regex(Regex),
    /// A regex that does not compile: no name.
    Never,
}

impl Matcher {
    /// Read a matcher as Claude Code does.
    pub(super) fn parse(m: &str) -> Matcher {
        match m.trim() {
            "" | "*" => Matcher::Always,
            m if sluice_config::is_name_list(m) => Matcher::Names(
                m.split(['|', ','])
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect(),
            ),
            m => match Regex::new(m) {
                Ok(r) => Matcher::Regex(r),
                Err(_) => Matcher::Never,
            },
        }
    }

    /// Does it match `name`?
    pub(super) fn is_match(&self, name: &str) -> bool {
        match self {
            Matcher::Always => true,
            Matcher::Names(names) => names.iter().any(|n| n == name),
            Matcher::Regex(r) => r.is_match(name),
            Matcher::Never => false,
        }
    }
}

/// A handler's `if`: one permission rule, `Tool` or `Tool(content)`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct IfRule {
    tool: ToolPattern,
    content: Content,
}

#[derive(Debug, Clone, PartialEq)]
enum ToolPattern {
    /// `Bash`, `mcp__crm__find`: this name.
    Exact(String),
    /// `mcp__crm__*`: every tool of the server (`mcp__crm__`).
    Prefix(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Content {
    /// No parentheses, `()` or `(*)`: any arguments.
    Any,
    /// Bash / PowerShell: a pattern of the `command` argument (`*` is any text; `git *` also
    /// matches `git` alone; the old `npm run test:*` means `npm run test *`).
    Command(String),
    /// The file tools: a path pattern of `file_path` / `notebook_path` / `path` (`**` crosses
    /// folders, `*` does not), resolved as Claude Code resolves them.
    Path(String),
    /// WebFetch: `domain:HOST`, the host of `url`.
    Domain(String),
    /// Content for a tool Claude Code has no argument patterns for (an MCP tool): nothing.
    Unsupported,
}

/// The tools whose content is a command line.
const COMMAND_TOOLS: &[&str] = &["Bash", "PowerShell"];
/// The tools whose content is a path.
const PATH_TOOLS: &[&str] = &[
    "Read",
    "Edit",
    "Write",
    "MultiEdit",
    "NotebookEdit",
    "Glob",
    "Grep",
];

impl IfRule {
    /// Parse one rule; `Err` says why it is not one (the hook then never runs).
    pub(super) fn parse(rule: &str) -> Result<IfRule, String> {
        let rule = rule.trim();
        let (name, content) = match rule.split_once('(') {
            Some((name, rest)) => match rest.strip_suffix(')') {
                Some(c) => (name.trim(), Some(c.trim())),
                None => {
                    return Err(format!(
                        "{rule:?} is not a permission rule (an unclosed `(`)"
                    ))
                }
            },
            None => (rule, None),
        };
        if name.is_empty() || name.contains([' ', '|', ',']) {
            return Err(format!(
                "{rule:?} is not one permission rule (`if` takes one tool name, with an optional `(pattern)`)"
            ));
        }
        let tool = match name.strip_suffix('*') {
            Some(prefix) if prefix.starts_with("mcp__") && prefix.ends_with("__") => {
                ToolPattern::Prefix(prefix.to_string())
            }
            _ => ToolPattern::Exact(name.to_string()),
        };
        let content = match content {
            None | Some("") | Some("*") => Content::Any,
            Some(c) if COMMAND_TOOLS.contains(&name) => {
                Content::Command(match c.strip_suffix(":*") {
                    Some(prefix) => format!("{prefix} *"),
                    None => c.to_string(),
                })
            }
            Some(c) if PATH_TOOLS.contains(&name) => Content::Path(c.to_string()),
            Some(c) if name == "WebFetch" => match c.strip_prefix("domain:") {
                Some(host) => Content::Domain(host.to_ascii_lowercase()),
                None => Content::Unsupported,
            },
            Some(_) => Content::Unsupported,
        };
        Ok(IfRule { tool, content })
    }

    /// Why the rule can never match, when it cannot (for a warning at build).
    pub(super) fn never_matches(&self) -> Option<String> {
        if self.content == Content::Unsupported {
            return Some(
                "Claude Code has no argument patterns for this tool, so the rule matches no call"
                    .into(),
            );
        }
        match &self.tool {
            ToolPattern::Exact(n) if n.starts_with("mcp__") && n[5..].split("__").count() < 2 => {
                Some(format!(
                    "{n:?} names a server, not a tool: as in Claude Code it matches no call (write {n}__* for every tool of the server)"
                ))
            }
            _ => None,
        }
    }

    /// Does the rule match a call of a tool known by `names` (the gateway's name and Claude
    /// Code's `mcp__<upstream>__<tool>`), with these arguments? `cwd` resolves relative paths.
    pub(super) fn matches(&self, names: &[&str], input: Option<&Value>, cwd: &Path) -> bool {
        let tool_ok = names.iter().any(|n| match &self.tool {
            ToolPattern::Exact(t) => t == n,
            ToolPattern::Prefix(p) => n.starts_with(p.as_str()) && n.len() > p.len(),
        });
        if !tool_ok {
            return false;
        }
        let arg = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| input.and_then(|i| i.get(*k)).and_then(Value::as_str))
        };
        match &self.content {
            Content::Any => true,
            Content::Unsupported => false,
            Content::Command(p) => arg(&["command"]).is_some_and(|c| command_matches(p, c)),
            Content::Path(p) => arg(&["file_path", "notebook_path", "path"])
                .is_some_and(|f| path_matches(p, f, cwd)),
            Content::Domain(host) => arg(&["url"]).is_some_and(|u| {
                reqwest::Url::parse(u)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
                    .is_some_and(|h| &h == host)
            }),
        }
    }
}

/// A command pattern against a command line: the whole line, or any of its parts (split at
/// `&&`, `||`, `;`, `|` and line breaks), so `Bash(git push *)` sees `cd x && git push -f`.
fn command_matches(pattern: &str, command: &str) -> bool {
    let mut parts = vec![command.trim()];
    for sep in ["&&", "||", ";", "|", "\n"] {
        parts = parts
            .into_iter()
            .flat_map(|p| p.split(sep))
            .map(str::trim)
            .collect();
    }
    let one = |c: &str| {
        glob(pattern, c, true)
            || pattern
                .strip_suffix(" *")
                .is_some_and(|bare| glob(bare, c, true))
    };
    one(command.trim()) || parts.into_iter().any(one)
}

/// A path pattern against a path: `//abs` is an absolute path, `~/x` under the home folder, `/x`
/// and `./x` and `x` under the project (the gateway's home); a pattern without a `/` matches
/// the file name anywhere (as a gitignore line does).
fn path_matches(pattern: &str, path: &str, cwd: &Path) -> bool {
    let cwd = cwd.to_string_lossy();
    let cwd = cwd.trim_end_matches('/');
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{}", path.trim_start_matches("./"))
    };
    let anchored = if let Some(abs) = pattern.strip_prefix("//") {
        format!("/{abs}")
    } else if let Some(rest) = pattern.strip_prefix("~/") {
        match std::env::var("HOME") {
            Ok(h) => format!("{}/{rest}", h.trim_end_matches('/')),
            Err(_) => return false,
        }
    } else if let Some(rest) = pattern.strip_prefix('/') {
        format!("{cwd}/{rest}")
    } else if let Some(rest) = pattern.strip_prefix("./") {
        format!("{cwd}/{rest}")
    } else if !pattern.contains('/') {
        format!("**/{pattern}")
    } else {
        format!("{cwd}/{pattern}")
    };
    glob(&anchored, &full, false)
}

/// A glob: `**` is any text, `*` any text (without `/` unless `star_crosses`).
fn glob(pattern: &str, text: &str, star_crosses: bool) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // at[i][j]: does p[i..] match t[j..]? Filled from the end.
    let mut at = vec![vec![false; t.len() + 1]; p.len() + 1];
    at[p.len()][t.len()] = true;
    for i in (0..p.len()).rev() {
        let double = p[i] == '*' && p.get(i + 1) == Some(&'*');
        let next = if double { i + 2 } else { i + 1 };
        for j in (0..=t.len()).rev() {
            at[i][j] = if p[i] == '*' {
                // `**/` also matches no folder at all.
                let skip_slash = double && p.get(next) == Some(&'/') && at[next + 1][j];
                let crosses = double || star_crosses;
                at[next][j]
                    || skip_slash
                    || (j < t.len() && (crosses || t[j] != '/') && at[i][j + 1])
            } else {
                j < t.len() && p[i] == t[j] && at[i + 1][j + 1]
            };
        }
    }
    at[0][0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matchers_of_names_are_exact_and_the_rest_regexes_anywhere() {
        let m = Matcher::parse("Edit|Write");
        assert!(m.is_match("Edit") && m.is_match("Write"));
        assert!(!m.is_match("MultiEdit"), "exact, not a regex");
        let m = Matcher::parse("mcp__crm__find, mcp__crm__get-all");
        assert!(m.is_match("mcp__crm__find") && m.is_match("mcp__crm__get-all"));
        assert!(!m.is_match("mcp__crm__get"));
        // A server prefix alone is an exact name: it matches no tool.
        assert!(!Matcher::parse("mcp__crm").is_match("mcp__crm__find"));
        // Anything else is a regex, matched anywhere in the name.
        let m = Matcher::parse("mcp__crm__.*");
        assert!(m.is_match("mcp__crm__find") && !m.is_match("mcp__fs__read"));
        assert!(Matcher::parse("Notebook.*").is_match("NotebookEdit"));
        assert!(Matcher::parse("Edit.?").is_match("MultiEdit"), "unanchored");
        assert!(
            Matcher::parse("^Edit$").is_match("Edit")
                && !Matcher::parse("^Edit$").is_match("MultiEdit")
        );
        assert!(Matcher::parse("").is_match("x") && Matcher::parse("*").is_match("x"));
        assert!(!Matcher::parse("(").is_match("("));
    }

    fn rule(r: &str) -> IfRule {
        IfRule::parse(r).unwrap()
    }

    #[test]
    fn if_rules_match_mcp_tools_and_arguments_as_claude_code_does() {
        let cwd = Path::new("/srv/proj");
        let call =
            |r: &str, names: &[&str], input: Value| rule(r).matches(names, Some(&input), cwd);
        // MCP tools: one tool, or every tool of a server.
        assert!(call(
            "mcp__crm__find",
            &["crm_find", "mcp__crm__find"],
            json!({})
        ));
        assert!(!call(
            "mcp__crm__find",
            &["crm_get", "mcp__crm__get"],
            json!({})
        ));
        assert!(call(
            "mcp__crm__*",
            &["crm_get", "mcp__crm__get"],
            json!({})
        ));
        assert!(!call(
            "mcp__crm__*",
            &["fs_read", "mcp__fs__read"],
            json!({})
        ));
        // The gateway's name works too.
        assert!(call("crm_find", &["crm_find", "mcp__crm__find"], json!({})));
        // A server alone matches nothing, and says so.
        assert!(!call(
            "mcp__crm",
            &["crm_find", "mcp__crm__find"],
            json!({})
        ));
        assert!(rule("mcp__crm").never_matches().is_some());
        assert!(rule("mcp__crm__*").never_matches().is_none());
        // Bash: a pattern of the command, `*` any text, ` *` also the bare word, `:*` the old prefix form.
        let bash = |r: &str, c: &str| call(r, &["Bash"], json!({"command": c}));
        assert!(bash("Bash(git *)", "git push --force origin main"));
        assert!(bash("Bash(git *)", "git"));
        assert!(!bash("Bash(git *)", "gitk"));
        assert!(bash("Bash(git push*)", "git push-all"));
        assert!(bash("Bash(npm run test:*)", "npm run test --watch"));
        assert!(!bash("Bash(npm run test:*)", "npm run lint"));
        assert!(
            bash("Bash(rm -rf *)", "cd /tmp && rm -rf build"),
            "any part of a compound command"
        );
        assert!(bash("Bash", "anything") && bash("Bash(*)", "anything"));
        assert!(
            !call("Bash(git *)", &["Bash"], json!({"cmd": "git x"})),
            "no command: no match"
        );
        assert!(
            !bash("Bash(git *)", "ls") && !call("Bash(ls)", &["Shell"], json!({"command": "ls"}))
        );
        // File tools: path patterns.
        let edit = |r: &str, p: &str| call(r, &["Edit"], json!({"file_path": p}));
        assert!(edit("Edit(src/**)", "/srv/proj/src/a/b.rs"));
        assert!(edit("Edit(src/**)", "src/a.rs"));
        assert!(!edit("Edit(src/**)", "/srv/proj/docs/a.md"));
        assert!(edit("Edit(/src/*.rs)", "/srv/proj/src/a.rs"));
        assert!(
            !edit("Edit(/src/*.rs)", "/srv/proj/src/a/b.rs"),
            "* stays in its folder"
        );
        assert!(edit("Edit(//etc/**)", "/etc/passwd"));
        assert!(
            edit("Edit(*.env)", "/srv/proj/config/prod.env"),
            "a bare name matches anywhere"
        );
        assert!(edit("Edit(.env)", "/srv/proj/.env"));
        // WebFetch: the URL's host.
        let fetch = |r: &str, u: &str| call(r, &["WebFetch"], json!({"url": u}));
        assert!(fetch(
            "WebFetch(domain:example.com)",
            "https://Example.com/a"
        ));
        assert!(!fetch(
            "WebFetch(domain:example.com)",
            "https://evil.test/example.com"
        ));
        // Arguments of an MCP tool: Claude Code has no patterns for them.
        let r = rule("mcp__crm__find(name:*x)");
        assert!(r.never_matches().is_some());
        assert!(!r.matches(&["mcp__crm__find"], Some(&json!({"name": "x"})), cwd));
        assert!(rule("mcp__crm__find(*)").matches(&["mcp__crm__find"], None, cwd));
        // Not one rule.
        assert!(IfRule::parse("Bash(git *").is_err());
        assert!(IfRule::parse("Edit|Write").is_err());
        assert!(IfRule::parse("").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob("a*c", "abbc", false));
        assert!(!glob("a*c", "ab/c", false));
        assert!(glob("a*c", "ab/c", true));
        assert!(glob("a/**/c", "a/c", false));
        assert!(glob("a/**/c", "a/x/y/c", false));
        assert!(glob("**", "", false));
        assert!(!glob("a", "ab", false));
    }
}
