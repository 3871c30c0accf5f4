//! Building the chain from the manifest: each enabled hook's kind, matcher, timeout and
//! `on_error`, with a warning for each entry that cannot fire.

use super::{Chain, Hook, Kind, Matcher};
use crate::builtin::Builtin;
use crate::civic::CivicHook;
use crate::command::CommandHook;
use crate::http::HttpHook;
use crate::process::ProcessHook;
use crate::transcript::Transcripts;
use regex::Regex;
use sluice_config::{HookEventKind, HookKindSpec, HookSpec, HttpProtocol};
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
            let matcher = match s.matcher.as_str() {
                "" | "*" => Matcher::Always,
                m => match Regex::new(&format!("^(?:{m})$")) {
                    Ok(r) => Matcher::Regex(r),
                    Err(_) => Matcher::Never,
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
                        .with_plugin_root(s.claude.plugin_root.clone()),
                ),
                HookKindSpec::Process { command } => Kind::Process(ProcessHook::new(
                    s.id.clone(),
                    command.clone(),
                    cwd.to_path_buf(),
                    s.timeout,
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
                        Ok(h) => Kind::Http(h.with_protocol(*protocol)),
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
