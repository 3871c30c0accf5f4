//! Building the chain from the manifest: each enabled hook's kind, matcher, `if`, timeout and
//! `on_error`, with a warning for each entry that cannot fire (and for each Claude Code setting
//! that cannot apply).

use super::{Chain, Hook, IfRule, Kind, Matcher};
use crate::builtin::Builtin;
use crate::civic::CivicHook;
use crate::command::CommandHook;
use crate::http::HttpHook;
use crate::mcp_tool::McpToolHook;
use crate::process::ProcessHook;
use crate::transcript::Transcripts;
use sluice_config::{HookEventKind, HookKindSpec, HookSpec, HttpProtocol, OnFailure};
use std::path::Path;

impl Chain {
    /// Build from the manifest (only enabled hooks that can fire). Returns the chain and
    /// warnings.
    pub fn build(specs: &[HookSpec], cwd: &Path) -> (Chain, Vec<String>) {
        let mut hooks = Vec::new();
        let mut controls = Vec::new();
        let mut warnings = Vec::new();
        for s in specs.iter().filter(|s| s.enabled) {
            let (request, response) = match s.event {
                HookEventKind::PreToolUse
                | HookEventKind::SessionStart
                | HookEventKind::Request => (true, false),
                HookEventKind::PostToolUse
                | HookEventKind::PostToolUseFailure
                | HookEventKind::Elicitation
                | HookEventKind::Response => (false, true),
                HookEventKind::ElicitationResult => (true, false),
                HookEventKind::Stop | HookEventKind::SessionEnd => (false, false),
                HookEventKind::UserPromptSubmit | HookEventKind::PreCompact => continue,
            };
            let matcher = Matcher::parse(&s.matcher);
            let fail_closed = s.claude.on_failure == OnFailure::Block;
            let if_rule = match s.claude.if_rule.as_deref() {
                None => None,
                Some(_)
                    if !matches!(
                        s.event,
                        HookEventKind::PreToolUse
                            | HookEventKind::PostToolUse
                            | HookEventKind::PostToolUseFailure
                    ) =>
                {
                    warnings.push(format!(
                        "hook {:?}: `if` applies to tool events only; as in Claude Code, a {} hook with `if` never runs; skipped",
                        s.id,
                        s.event.name()
                    ));
                    continue;
                }
                Some(r) => match IfRule::parse(r) {
                    Ok(rule) => {
                        if let Some(why) = rule.never_matches() {
                            warnings.push(format!("hook {:?}: if {r:?}: {why}", s.id));
                        }
                        Some(rule)
                    }
                    Err(e) => {
                        warnings.push(format!("hook {:?}: if: {e}; skipped", s.id));
                        continue;
                    }
                },
            };
            let kind = match &s.kind {
                HookKindSpec::Builtin { name, options } => match Builtin::build(options, s.timeout)
                {
                    Ok(b) => Kind::Builtin(b),
                    Err(e) => {
                        warnings.push(format!("hook {:?}: builtin {name:?}: {e}; skipped", s.id));
                        continue;
                    }
                },
                HookKindSpec::Command { command, args, .. } => Kind::Command(
                    CommandHook::new(command.clone(), cwd.to_path_buf(), s.timeout)
                        .with_args(args.clone())
                        .with_plugin_root(s.claude.plugin_root.clone())
                        .failing_closed(fail_closed)
                        .sandboxed(s.sandbox.clone()),
                ),
                HookKindSpec::McpTool {
                    server,
                    tool,
                    input,
                } => Kind::McpTool(
                    McpToolHook::new(server.clone(), tool.clone(), input.clone())
                        .failing_closed(fail_closed),
                ),
                HookKindSpec::Process { command } => Kind::Process(ProcessHook::confined(
                    s.id.clone(),
                    command.clone(),
                    cwd.to_path_buf(),
                    s.timeout,
                    s.sandbox.clone(),
                )),
                HookKindSpec::Http {
                    url,
                    headers,
                    allowed_env_vars,
                    protocol,
                } => {
                    // Claude Code's `allowedEnvVars`: header values naming environment
                    // variables are expanded (claude-code protocol, or a list given).
                    let expand =
                        allowed_env_vars.is_some() || *protocol == HttpProtocol::ClaudeCode;
                    let allowed = allowed_env_vars.as_deref().unwrap_or(&[]);
                    let headers = headers
                        .iter()
                        .map(|(k, v)| {
                            let v = if expand {
                                crate::http::expand_env(v, allowed, |n| std::env::var(n).ok())
                            } else {
                                v.clone()
                            };
                            (k.clone(), v)
                        })
                        .collect();
                    match HttpHook::new(url.clone(), headers, s.timeout) {
                        Ok(h) => Kind::Http(h.with_protocol(*protocol).failing_closed(fail_closed)),
                        Err(e) => {
                            warnings.push(format!("hook {:?}: {e}; skipped", s.id));
                            continue;
                        }
                    }
                }
                HookKindSpec::Civic { url } => match CivicHook::new(url.clone(), s.timeout) {
                    Ok(h) => Kind::Civic(h),
                    Err(e) => {
                        warnings.push(format!("hook {:?}: {e}; skipped", s.id));
                        continue;
                    }
                },
            };
            // Builtins choose their own phases; a Civic hook server takes part in both.
            let (request, response) = match &kind {
                Kind::Builtin(b) => (b.phases().request, b.phases().response),
                Kind::Civic(_) => (true, true),
                _ => (request, response),
            };
            if s.claude.run_async
                && !matches!(&kind, Kind::Command(_) | Kind::Http(_) | Kind::McpTool(_))
            {
                warnings.push(format!(
                    "hook {:?}: `async` applies to command, http and mcp_tool hooks; it runs in line",
                    s.id
                ));
            }
            let stage = if matches!(&kind, Kind::Builtin(b) if b.control().is_some()) {
                &mut controls
            } else {
                &mut hooks
            };
            stage.push(Hook {
                id: s.id.clone(),
                record_id: s.id.as_str().into(),
                event: s.event,
                request,
                response,
                methods: s.methods.clone(),
                matcher,
                if_rule,
                timeout: s.timeout,
                on_error: s.on_error,
                claude: s.claude.clone(),
                kind,
            });
        }
        let transcripts = hooks
            .iter()
            .any(|h| !h.is_builtin())
            .then(|| Transcripts::new(cwd.join("transcripts")));
        (
            Chain {
                tools: None,
                once_ran: Default::default(),
                hooks,
                controls,
                cwd: cwd.to_path_buf(),
                transcripts,
                keep_transcripts: false,
            },
            warnings,
        )
    }
}
