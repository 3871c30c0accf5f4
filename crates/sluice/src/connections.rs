//! `sluice connections list|revoke`: the users' own connections to `per_user` upstreams, as
//! kept in the vault: who is connected to what, until when, with which scopes (never a token),
//! and ending one (the grant forgotten, and revoked at the authorization server when it has a
//! revocation endpoint, RFC 7009; with `cluster`, the running replicas are told through the bus
//! to forget it too).

use sluice_config::{Config, OAuthMode};
use sluice_oauth::{Fetcher, Revoked, Status};
use sluice_upstream::identity::principals_of;
use sluice_upstream::{OAuthContext, PerUser};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `sluice connections …`.
#[derive(clap::Subcommand)]
pub(crate) enum ConnectionsCmd {
    /// List users' connections: upstream, principal, expiry, scopes.
    List(Filter),
    /// End users' connections: each grant is forgotten and revoked at its authorization server.
    Revoke(Filter),
}

/// Which connections.
#[derive(clap::Args)]
pub(crate) struct Filter {
    /// The configuration tree.
    #[arg(long)]
    home: PathBuf,
    /// Only this principal's.
    #[arg(long)]
    principal: Option<String>,
    /// Only those to this upstream.
    #[arg(long)]
    upstream: Option<String>,
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("sluice: {msg}");
    ExitCode::from(1)
}

/// What `run` works on: the per-user upstreams, the OAuth context, and with `cluster` the store
/// whose bus tells the running replicas of a revoke.
type Opened = (Vec<PerUser>, OAuthContext, Option<sluice_cluster::Store>);

/// The tree's per-user upstreams (those `upstream` names, when given) and the OAuth context.
fn open(home: &Path, upstream: Option<&str>) -> Result<Opened, String> {
    let env = |k: &str| std::env::var(k).ok();
    let (config, _) = Config::load(home, &env).map_err(|e| e.to_string())?;
    let vault = sluice_server::vault_of(&config)
        .map_err(|e| e.to_string())?
        .ok_or("no vault in sluice.json: there are no connections")?;
    let ctx = OAuthContext {
        vault,
        fetcher: Fetcher::new(config.settings.oauth_http_hosts.clone()),
        public_url: config.public_url(),
        home_hint: Some(home.display().to_string()),
    };
    let mut users = Vec::new();
    for spec in &config.expose.upstreams {
        if upstream.is_some_and(|u| u != spec.id) {
            continue;
        }
        if spec.oauth.as_ref().map(|o| o.mode) != Some(OAuthMode::PerUser) {
            if upstream.is_some() {
                return Err(format!(
                    "upstream {:?} does not connect its users' own accounts (oauth.mode is not per_user)",
                    spec.id
                ));
            }
            continue;
        }
        if let Some(p) = PerUser::new(spec, &ctx).map_err(|e| format!("{}: {e}", spec.id))? {
            users.push(p);
        }
    }
    if let (Some(u), true) = (upstream, users.is_empty()) {
        return Err(format!("no upstream has the id {u:?}"));
    }
    let store = match &config.settings.cluster {
        Some(c) => {
            let shown = sluice_config::builtin::redis_url_shown(&c.redis);
            let store = sluice_cluster::Store::new(&c.redis, &shown, Duration::from_secs(2))
                .map_err(|e| e.to_string())?;
            Some(store)
        }
        None => None,
    };
    Ok((users, ctx, store))
}

/// One line of `list`: upstream, principal, expiry, scopes (tab-separated).
fn line(upstream: &str, principal: &str, status: &Status, now: u64) -> String {
    let Status::Connected {
        expires_at,
        scopes,
        refreshable,
    } = status
    else {
        return format!("{upstream}\t{principal}\t-\t-");
    };
    let expiry = match expires_at {
        Some(at) if *at > now => format!("expires in {} s", at - now),
        Some(_) => "expired".to_string(),
        None => "no expiry".to_string(),
    };
    let refresh = if *refreshable { ", refreshable" } else { "" };
    format!(
        "{upstream}\t{principal}\t{expiry}{refresh}\t{}",
        scopes.join(" ")
    )
}

/// `sluice connections list|revoke`.
pub(crate) fn run(cmd: ConnectionsCmd) -> ExitCode {
    let (revoke, f) = match cmd {
        ConnectionsCmd::List(f) => (false, f),
        ConnectionsCmd::Revoke(f) => (true, f),
    };
    let (users, ctx, store) = match open(&f.home, f.upstream.as_deref()) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    rt.block_on(async move {
        let mut failed = false;
        let mut count = 0;
        for u in &users {
            let listed = match principals_of(&ctx.vault, u.upstream()).await {
                Ok(l) => l,
                Err(e) => return fail(e),
            };
            for (principal, status) in listed {
                if f.principal.as_ref().is_some_and(|p| *p != principal) {
                    continue;
                }
                count += 1;
                if !revoke {
                    println!(
                        "{}",
                        line(u.upstream(), &principal, &status, sluice_oauth::token::now())
                    );
                    continue;
                }
                let outcome = u.revoke(&principal).await;
                if let (Some(store), Ok(Some(_))) = (&store, &outcome) {
                    if let Err(e) = store.user_revoked("cli", u.upstream(), &principal).await {
                        eprintln!(
                            "sluice: {} {principal}: the running replicas were not told ({e}); each forgets the grant when the upstream refuses its token",
                            u.upstream()
                        );
                    }
                }
                match outcome {
                    Ok(Some(Revoked::AtServer)) => println!(
                        "revoked {}\t{principal}\t(forgotten, and revoked at the authorization server)",
                        u.upstream()
                    ),
                    Ok(Some(Revoked::NoEndpoint)) => println!(
                        "revoked {}\t{principal}\t(forgotten; the authorization server has no revocation endpoint)",
                        u.upstream()
                    ),
                    Ok(None) => {}
                    Err(e) => {
                        failed = true;
                        eprintln!(
                            "sluice: {} {principal}: forgotten, but the revocation failed: {e}",
                            u.upstream()
                        );
                    }
                }
            }
        }
        if count == 0 {
            eprintln!("no connections");
        }
        if failed {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_shows_expiry_and_scopes_and_nothing_else() {
        let s = Status::Connected {
            expires_at: Some(1_100),
            scopes: vec!["crm.read".into(), "offline_access".into()],
            refreshable: true,
        };
        assert_eq!(
            line("crm", "jwt:alice", &s, 1_000),
            "crm\tjwt:alice\texpires in 100 s, refreshable\tcrm.read offline_access"
        );
        let s = Status::Connected {
            expires_at: Some(900),
            scopes: vec![],
            refreshable: false,
        };
        assert_eq!(line("crm", "bob", &s, 1_000), "crm\tbob\texpired\t");
        let s = Status::Connected {
            expires_at: None,
            scopes: vec!["a".into()],
            refreshable: false,
        };
        assert_eq!(line("crm", "bob", &s, 1_000), "crm\tbob\tno expiry\ta");
    }
}
