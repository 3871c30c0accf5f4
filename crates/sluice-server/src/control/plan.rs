//! The reload plan: what putting a new configuration in force changes, worked out from the
//! running one before anything is touched. Which upstreams keep their slot, start, are replaced
//! or stop; whether the hook chain, the audit log and authentication are rebuilt; which edited
//! settings wait for a restart. Pure (no I/O, no state): `control::reload` computes it, then
//! applies it in one swap.
//!
//! What the plan leaves out is done on every reload: the catalog is rebuilt over the slots (the
//! curated tools, the funnel and the management tools follow the new tree), and the slots'
//! timing follows the settings. The first-party register is the `local` upstream, whose spec
//! changes only with the register's presence or `list_register_tools`; its tools are read
//! fresh from `tools/` on every list and call, so editing them needs no plan.

use sluice_config::{Config, Settings, UpstreamSpec};

/// What becomes of one upstream; `slot` indexes the running slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpstreamChange {
    /// The same spec: its running slot goes on (its process, its sessions' connections).
    Keep { slot: usize },
    /// An id the running configuration does not have: a new slot starts.
    Start,
    /// The same id with another spec: the running slot stops and a new one starts, keeping
    /// the old one's restart count.
    Replace { slot: usize },
    /// Gone from the new configuration: the running slot stops.
    Stop { slot: usize },
}

/// What a reload changes, computed from the running configuration and the new one.
#[derive(Debug, PartialEq)]
pub(crate) struct ReloadPlan {
    /// The configuration to put in force: the new one, with the restart-only settings kept at
    /// their running values.
    pub(crate) config: Config,
    /// Each upstream of the new configuration in its order (Keep, Start or Replace), then each
    /// running one it no longer has, in running order (Stop).
    pub(crate) upstreams: Vec<(String, UpstreamChange)>,
    /// The restart-only settings the new configuration edits (kept as running until the next
    /// restart), in the order `keep_restart_only_settings` checks them.
    pub(crate) restart_only: Vec<&'static str>,
    /// The server settings changed (the restart-only ones aside).
    pub(crate) settings: bool,
    /// The hooks changed: the chain is rebuilt, and the running one shut down.
    pub(crate) hooks: bool,
    /// The audit log's settings changed: it is reopened.
    pub(crate) audit: bool,
    /// Authentication or the access rules changed: the authenticator and the policy are rebuilt.
    pub(crate) auth: bool,
    /// The access rules changed: every list may look different to someone, so every list is
    /// announced as changed.
    pub(crate) rules: bool,
}

impl ReloadPlan {
    /// The plan that turns `running` (whose slots run `slots`, in order) into `new` (with the
    /// first-party `local` upstream already added). An upstream is kept when a running slot has
    /// exactly its spec (the first such slot), replaced when one has its id (the first such),
    /// and started otherwise; a running slot none of them keeps or replaces stops.
    pub(crate) fn new(running: &Config, slots: &[&UpstreamSpec], mut new: Config) -> ReloadPlan {
        let restart_only = keep_restart_only_settings(&mut new.settings, &running.settings);
        let mut upstreams: Vec<(String, UpstreamChange)> = new
            .expose
            .upstreams
            .iter()
            .map(|spec| {
                let change = if let Some(slot) = slots.iter().position(|s| *s == spec) {
                    UpstreamChange::Keep { slot }
                } else if let Some(slot) = slots.iter().position(|s| s.id == spec.id) {
                    UpstreamChange::Replace { slot }
                } else {
                    UpstreamChange::Start
                };
                (spec.id.clone(), change)
            })
            .collect();
        for (slot, spec) in slots.iter().enumerate() {
            let taken = upstreams.iter().any(|(_, c)| match *c {
                UpstreamChange::Keep { slot: s } | UpstreamChange::Replace { slot: s } => s == slot,
                UpstreamChange::Start | UpstreamChange::Stop { .. } => false,
            });
            if !taken {
                upstreams.push((spec.id.clone(), UpstreamChange::Stop { slot }));
            }
        }
        ReloadPlan {
            settings: new.settings != running.settings,
            // The chain also carries `keep_transcripts`: a change of it rebuilds the chain.
            hooks: new.hooks != running.hooks
                || new.settings.keep_transcripts != running.settings.keep_transcripts,
            audit: new.logs != running.logs,
            auth: new.auth != running.auth,
            rules: new.auth.rules != running.auth.rules,
            restart_only,
            upstreams,
            config: new,
        }
    }

    /// The new configuration's upstreams, in its order, each with what becomes of it (never
    /// Stop): the slots of the next snapshot.
    pub(crate) fn next_slots(&self) -> impl Iterator<Item = (&UpstreamSpec, UpstreamChange)> {
        let changes = self
            .upstreams
            .iter()
            .filter(|(_, c)| !matches!(c, UpstreamChange::Stop { .. }));
        self.config
            .expose
            .upstreams
            .iter()
            .zip(changes)
            .map(|(spec, (_, change))| (spec, *change))
    }

    /// The running slots that stop (removed, or replaced) with their ids, in running order:
    /// every one no upstream of the new configuration keeps.
    pub(crate) fn stopping(&self) -> Vec<(usize, &str)> {
        let kept = |slot: usize| {
            self.upstreams
                .iter()
                .any(|(_, c)| *c == UpstreamChange::Keep { slot })
        };
        let mut stopping: Vec<(usize, &str)> = self
            .upstreams
            .iter()
            .filter_map(|(id, c)| match *c {
                UpstreamChange::Replace { slot } | UpstreamChange::Stop { slot } => {
                    Some((slot, id.as_str()))
                }
                _ => None,
            })
            .filter(|(slot, _)| !kept(*slot))
            .collect();
        stopping.sort_by_key(|(slot, _)| *slot);
        stopping.dedup_by_key(|(slot, _)| *slot);
        stopping
    }

    /// What the reload reports (the admin API and the log show it).
    pub(crate) fn report(&self) -> ReloadReport {
        let ids = |keep: bool| -> Vec<String> {
            self.upstreams
                .iter()
                .filter(|(_, c)| match c {
                    UpstreamChange::Keep { .. } => keep,
                    UpstreamChange::Start | UpstreamChange::Replace { .. } => !keep,
                    UpstreamChange::Stop { .. } => false,
                })
                .map(|(id, _)| id.clone())
                .collect()
        };
        ReloadReport {
            kept: ids(true),
            started: ids(false),
            stopped: self
                .stopping()
                .into_iter()
                .map(|(_, id)| id.to_string())
                .collect(),
            hooks: self.hooks,
            audit: self.audit,
            auth: self.auth,
            settings: self.settings,
        }
    }
}

/// What a reload changed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ReloadReport {
    /// Upstreams kept running as they were.
    pub kept: Vec<String>,
    /// Upstreams started (new or changed).
    pub started: Vec<String>,
    /// Upstreams stopped (removed or changed).
    pub stopped: Vec<String>,
    /// The hook chain was rebuilt.
    pub hooks: bool,
    /// The audit log was reopened.
    pub audit: bool,
    /// Authentication or access rules were rebuilt.
    pub auth: bool,
    /// Server settings (`sluice.json`) changed.
    pub settings: bool,
}

/// The listener, the admin listener, the exporter, the cluster, the vault and the OAuth client
/// keep what they started with: `new` takes their running values. Returns the names of those
/// the edit changed (the log says they wait for a restart).
fn keep_restart_only_settings(new: &mut Settings, running: &Settings) -> Vec<&'static str> {
    let mut restart_only = Vec::new();
    if new.listen != running.listen {
        restart_only.push("listen");
    }
    if new.admin != running.admin {
        restart_only.push("admin");
    }
    if new.admin_token != running.admin_token {
        restart_only.push("admin_token");
    }
    if new.telemetry != running.telemetry {
        restart_only.push("telemetry");
    }
    if new.cluster != running.cluster {
        restart_only.push("cluster");
    }
    if new.vault != running.vault {
        restart_only.push("vault");
    }
    if new.public_url != running.public_url {
        restart_only.push("public_url");
    }
    if new.oauth_http_hosts != running.oauth_http_hosts {
        restart_only.push("oauth_http_hosts");
    }
    new.listen = running.listen.clone();
    new.admin = running.admin.clone();
    new.admin_token = running.admin_token.clone();
    new.telemetry = running.telemetry.clone();
    new.cluster = running.cluster.clone();
    new.vault = running.vault.clone();
    new.public_url = running.public_url.clone();
    new.oauth_http_hosts = running.oauth_http_hosts.clone();
    restart_only
}

#[cfg(test)]
mod tests {
    use super::UpstreamChange::{Keep, Replace, Start, Stop};
    use super::*;
    use sluice_config::{
        AccessRule, ClaudeSettings, ClusterSettings, Effect, HookEventKind, HookKindSpec, HookSpec,
        OAuthMode, OnError, StaticToken, Transport, UpstreamOAuth, VaultSettings,
    };
    use std::time::Duration;

    fn stdio(id: &str) -> UpstreamSpec {
        UpstreamSpec::stdio(id, "mcp-server", vec!["--stdio".into()])
    }

    fn http(id: &str) -> UpstreamSpec {
        UpstreamSpec::http(id, "http://127.0.0.1:9000/mcp", Transport::Http)
    }

    /// A tree with these upstreams and nothing else.
    fn tree(upstreams: Vec<UpstreamSpec>) -> Config {
        let mut config = Config::passthrough(stdio("unused"), Settings::default());
        config.expose.upstreams = upstreams;
        config
    }

    /// The plan from `running` (its slots running its upstreams) to `new`.
    fn plan(running: &Config, new: Config) -> ReloadPlan {
        let slots: Vec<&UpstreamSpec> = running.expose.upstreams.iter().collect();
        ReloadPlan::new(running, &slots, new)
    }

    fn changes(list: &[(&str, UpstreamChange)]) -> Vec<(String, UpstreamChange)> {
        list.iter().map(|(id, c)| (id.to_string(), *c)).collect()
    }

    fn names(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn hook(id: &str, command: &str) -> HookSpec {
        HookSpec {
            id: id.into(),
            event: HookEventKind::PreToolUse,
            matcher: String::new(),
            methods: Vec::new(),
            kind: HookKindSpec::Command {
                command: command.into(),
                args: None,
                script: None,
            },
            timeout: Duration::from_secs(5),
            on_error: OnError::Refuse,
            enabled: true,
            description: String::new(),
            claude: ClaudeSettings::default(),
            sandbox: None,
        }
    }

    fn deny(tool: &str) -> AccessRule {
        AccessRule {
            effect: Effect::Deny,
            tools: vec![tool.into()],
            prompts: Vec::new(),
            resources: Vec::new(),
            principals: Vec::new(),
            scopes: Vec::new(),
            claims: Default::default(),
        }
    }

    /// Nothing but upstreams changed (the plan's other parts all false, nothing restart-only).
    fn only_upstreams(p: &ReloadPlan) {
        assert_eq!(p.restart_only, Vec::<&str>::new());
        assert!(!p.settings && !p.hooks && !p.audit && !p.auth && !p.rules);
    }

    #[test]
    fn an_unchanged_tree_keeps_everything_and_rebuilds_nothing() {
        let running = tree(vec![stdio("a"), http("b")]);
        let p = plan(&running, running.clone());
        assert_eq!(
            p.upstreams,
            changes(&[("a", Keep { slot: 0 }), ("b", Keep { slot: 1 })])
        );
        only_upstreams(&p);
        assert_eq!(p.stopping(), Vec::<(usize, &str)>::new());
        assert_eq!(p.config, running);
        assert_eq!(
            p.report(),
            ReloadReport {
                kept: names(&["a", "b"]),
                ..ReloadReport::default()
            }
        );
    }

    #[test]
    fn an_added_upstream_starts() {
        let running = tree(vec![stdio("a")]);
        let p = plan(&running, tree(vec![stdio("a"), http("b")]));
        assert_eq!(
            p.upstreams,
            changes(&[("a", Keep { slot: 0 }), ("b", Start)])
        );
        only_upstreams(&p);
        let next: Vec<_> = p.next_slots().map(|(s, c)| (s.id.as_str(), c)).collect();
        assert_eq!(next, vec![("a", Keep { slot: 0 }), ("b", Start)]);
        assert_eq!(
            p.report(),
            ReloadReport {
                kept: names(&["a"]),
                started: names(&["b"]),
                ..ReloadReport::default()
            }
        );
    }

    #[test]
    fn a_removed_upstream_stops() {
        let running = tree(vec![stdio("a"), stdio("b"), http("c")]);
        let p = plan(&running, tree(vec![stdio("a"), http("c")]));
        assert_eq!(
            p.upstreams,
            changes(&[
                ("a", Keep { slot: 0 }),
                ("c", Keep { slot: 2 }),
                ("b", Stop { slot: 1 })
            ])
        );
        only_upstreams(&p);
        assert_eq!(p.stopping(), vec![(1, "b")]);
        let next: Vec<_> = p.next_slots().map(|(s, c)| (s.id.as_str(), c)).collect();
        assert_eq!(next, vec![("a", Keep { slot: 0 }), ("c", Keep { slot: 2 })]);
        assert_eq!(
            p.report(),
            ReloadReport {
                kept: names(&["a", "c"]),
                stopped: names(&["b"]),
                ..ReloadReport::default()
            }
        );
    }

    #[test]
    fn a_changed_command_url_or_oauth_replaces_the_upstream() {
        let running = tree(vec![
            stdio("cmd"),
            http("url"),
            http("oauth"),
            stdio("same"),
        ]);
        let mut new = running.clone();
        new.expose.upstreams[0].args.push("--verbose".into());
        new.expose.upstreams[1].url = "http://127.0.0.1:9001/mcp".into();
        new.expose.upstreams[2].oauth = Some(UpstreamOAuth {
            mode: OAuthMode::Shared,
            client_id: Some("sluice".into()),
            client_secret: None,
            issuer: None,
            scopes: Vec::new(),
            token_endpoint_auth: None,
            private_key_file: None,
            signing_alg: None,
            client_metadata_url: None,
            exchange: None,
            enterprise: None,
        });
        let p = plan(&running, new.clone());
        assert_eq!(
            p.upstreams,
            changes(&[
                ("cmd", Replace { slot: 0 }),
                ("url", Replace { slot: 1 }),
                ("oauth", Replace { slot: 2 }),
                ("same", Keep { slot: 3 })
            ])
        );
        only_upstreams(&p);
        assert_eq!(p.stopping(), vec![(0, "cmd"), (1, "url"), (2, "oauth")]);
        // The new slots run the new specs.
        let next: Vec<_> = p.next_slots().map(|(s, _)| s.clone()).collect();
        assert_eq!(next, new.expose.upstreams);
        assert_eq!(
            p.report(),
            ReloadReport {
                kept: names(&["same"]),
                started: names(&["cmd", "url", "oauth"]),
                stopped: names(&["cmd", "url", "oauth"]),
                ..ReloadReport::default()
            }
        );
    }

    #[test]
    fn keeping_transcripts_rebuilds_the_chain_that_carries_it() {
        let running = tree(vec![stdio("a")]);
        let mut new = running.clone();
        new.settings.keep_transcripts = true;
        let p = plan(&running, new);
        assert!(p.hooks && p.settings);
        assert!(!p.audit && !p.auth && !p.rules);
    }

    #[test]
    fn a_changed_hook_rebuilds_the_chain_only() {
        let mut running = tree(vec![stdio("a")]);
        running
            .hooks
            .hooks
            .push(hook("pre-tool-use/check", "./check.sh"));
        let mut new = running.clone();
        new.hooks.hooks[0] = hook("pre-tool-use/check", "./check.sh --strict");
        let p = plan(&running, new);
        assert_eq!(p.upstreams, changes(&[("a", Keep { slot: 0 })]));
        assert!(p.hooks);
        assert!(!p.settings && !p.audit && !p.auth && !p.rules);
        assert_eq!(p.restart_only, Vec::<&str>::new());
        assert_eq!(
            p.report(),
            ReloadReport {
                kept: names(&["a"]),
                hooks: true,
                ..ReloadReport::default()
            }
        );
    }

    #[test]
    fn restart_only_settings_are_kept_as_running_and_named() {
        let running = tree(vec![stdio("a")]);
        let mut new = running.clone();
        let s = &mut new.settings;
        s.listen = "0.0.0.0:9750".into();
        s.admin = Some("127.0.0.1:9751".into());
        s.admin_token = Some("secret".into());
        s.telemetry.otlp_endpoint = Some("http://127.0.0.1:4318".into());
        s.cluster = Some(ClusterSettings {
            keys: vec![[7; 32]],
            redis: "redis://127.0.0.1:6379".into(),
        });
        s.vault = Some(VaultSettings {
            keys: vec![[9; 32]],
            path: "vault.db".into(),
        });
        s.public_url = Some("https://gateway.example.com".into());
        s.oauth_http_hosts = vec!["auth.test".into()];
        let p = plan(&running, new);
        assert_eq!(
            p.restart_only,
            vec![
                "listen",
                "admin",
                "admin_token",
                "telemetry",
                "cluster",
                "vault",
                "public_url",
                "oauth_http_hosts"
            ]
        );
        // Nothing else changed: the settings in force are the running ones.
        assert!(!p.settings);
        assert_eq!(p.config, running);
        assert_eq!(p.upstreams, changes(&[("a", Keep { slot: 0 })]));
        assert_eq!(
            p.report(),
            ReloadReport {
                kept: names(&["a"]),
                ..ReloadReport::default()
            }
        );
    }

    #[test]
    fn other_settings_apply_beside_restart_only_ones() {
        let running = tree(vec![stdio("a")]);
        let mut new = running.clone();
        new.settings.listen = "0.0.0.0:9750".into();
        new.settings.request_timeout_ms = 5_000;
        let p = plan(&running, new);
        assert_eq!(p.restart_only, vec!["listen"]);
        assert!(p.settings);
        assert_eq!(p.config.settings.listen, running.settings.listen);
        assert_eq!(p.config.settings.request_timeout_ms, 5_000);
        assert!(!p.hooks && !p.audit && !p.auth && !p.rules);
        assert!(p.report().settings);
    }

    #[test]
    fn a_new_token_rebuilds_authentication_but_keeps_the_rules() {
        let running = tree(vec![stdio("a")]);
        let mut new = running.clone();
        new.auth.tokens.push(StaticToken {
            name: "ci".into(),
            sha256: "00".repeat(32),
            scopes: Vec::new(),
        });
        let p = plan(&running, new);
        assert!(p.auth);
        assert!(!p.rules && !p.hooks && !p.audit && !p.settings);
    }

    #[test]
    fn several_changes_at_once() {
        let running = tree(vec![stdio("a"), stdio("b"), http("c")]);
        let mut new = tree(vec![http("c"), stdio("d"), stdio("a")]);
        new.expose.upstreams[0]
            .headers
            .insert("x-team".into(), "blue".into());
        new.logs.enabled = true;
        new.auth.rules.push(deny("a_*"));
        new.settings.page_size = 50;
        new.settings.admin = Some("127.0.0.1:9999".into());
        let p = plan(&running, new);
        assert_eq!(
            p.upstreams,
            changes(&[
                ("c", Replace { slot: 2 }),
                ("d", Start),
                ("a", Keep { slot: 0 }),
                ("b", Stop { slot: 1 })
            ])
        );
        assert_eq!(p.stopping(), vec![(1, "b"), (2, "c")]);
        let next: Vec<_> = p.next_slots().map(|(s, c)| (s.id.as_str(), c)).collect();
        assert_eq!(
            next,
            vec![
                ("c", Replace { slot: 2 }),
                ("d", Start),
                ("a", Keep { slot: 0 })
            ]
        );
        assert_eq!(p.restart_only, vec!["admin"]);
        assert!(p.settings && p.audit && p.auth && p.rules);
        assert!(!p.hooks);
        assert_eq!(
            p.report(),
            ReloadReport {
                kept: names(&["a"]),
                started: names(&["c", "d"]),
                stopped: names(&["b", "c"]),
                hooks: false,
                audit: true,
                auth: true,
                settings: true,
            }
        );
    }

    #[test]
    fn a_user_upstream_named_local_beside_the_register_is_matched_by_spec_first() {
        // The loader refuses duplicate ids in expose.json, but the register's `local` upstream
        // is added after it: an upstream of the user's may share its id.
        let mut register = UpstreamSpec::stdio("local", "", Vec::new());
        register.transport = Transport::Local;
        let running = tree(vec![stdio("local"), register.clone()]);
        let mut new = running.clone();
        new.expose.upstreams[0].command = "other-server".into();
        let p = plan(&running, new);
        assert_eq!(
            p.upstreams,
            changes(&[("local", Replace { slot: 0 }), ("local", Keep { slot: 1 })])
        );
        assert_eq!(p.stopping(), vec![(0, "local")]);
    }
}
