//! `sluice upstream login ID` and `logout ID`: an operator signs the gateway in to an OAuth
//! upstream (shared identity). The authorization URL is the first line of stdout; the redirect
//! comes back to the gateway's callback under its public URL: to this command's own listener
//! when no gateway serves there, else to the running gateway, which finishes the sign-in and
//! leaves the outcome in the vault for this command to read.

use crate::callback;
use sluice_config::{Config, OAuthMode};
use sluice_oauth::flow;
use sluice_upstream::identity::{grant_key, identity_for, CALLBACK_PATH};
use sluice_upstream::OAuthContext;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("sluice: {msg}");
    ExitCode::from(1)
}

/// The upstream's shared identity context, from the tree at `home`.
fn context(home: &Path, id: &str) -> Result<(Config, OAuthContext), String> {
    let env = |k: &str| std::env::var(k).ok();
    let (config, _) = Config::load(home, &env).map_err(|e| e.to_string())?;
    let spec = config
        .expose
        .upstreams
        .iter()
        .find(|u| u.id == id)
        .ok_or_else(|| format!("no upstream has the id {id:?}"))?;
    let Some(o) = &spec.oauth else {
        return Err(format!("upstream {id:?} has no oauth in mcp/expose.json"));
    };
    if o.mode == OAuthMode::ClientCredentials {
        return Err(format!(
            "upstream {id:?} signs in with client credentials by itself: no login needed"
        ));
    }
    if o.mode == OAuthMode::Enterprise {
        return Err(format!(
            "upstream {id:?} signs in with its identity assertion by itself (enterprise-managed authorization): no login needed"
        ));
    }
    let vault = sluice_server::vault_of(&config)
        .map_err(|e| e.to_string())?
        .ok_or("no vault in sluice.json (`sluice vault keygen` prints a key)")?;
    let ctx = OAuthContext {
        vault,
        fetcher: sluice_oauth::Fetcher::new(config.settings.oauth_http_hosts.clone()),
        public_url: config.public_url(),
        home_hint: Some(home.display().to_string()),
    };
    Ok((config, ctx))
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// `sluice upstream login ID --home DIR --timeout SECS`.
pub(crate) fn login(home: &Path, id: &str, timeout: u64) -> ExitCode {
    let (config, ctx) = match context(home, id) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let spec = config.expose.upstreams.iter().find(|u| u.id == id).cloned();
    let Some(spec) = spec else {
        return fail(format!("no upstream has the id {id:?}"));
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    rt.block_on(async move {
        let identity = match identity_for(&spec, &ctx) {
            Ok(Some(i)) => i,
            Ok(None) => return fail(format!("upstream {id:?} has no oauth")),
            Err(e) => return fail(e),
        };
        let redirect = ctx.redirect_uri();
        let started = match identity.start_sign_in(&redirect).await {
            Ok(s) => s,
            Err(e) => return fail(format!("signing in to {id}: {e}")),
        };
        println!("{}", started.url);
        let _ = std::io::stdout().flush();
        // Serve the callback here unless a gateway already does at that address.
        let _listener = own_callback(&ctx, &redirect).await;
        eprintln!(
            "Open the URL above to sign Sluice in to {id}; waiting up to {timeout} s for the redirect to {redirect}"
        );
        match flow::wait_outcome(&ctx.vault, &started.pending.state, Duration::from_secs(timeout)).await {
            Ok(flow::Outcome { error: None, .. }) => {
                let _ = identity.signed_in().await;
                match identity.status() {
                    sluice_oauth::Status::Connected { expires_at, scopes, refreshable } => {
                        let left = expires_at
                            .map(|e| format!(", expires in {} s", e.saturating_sub(sluice_oauth::token::now())))
                            .unwrap_or_default();
                        eprintln!(
                            "connected {id}: scopes [{}]{left}{}",
                            scopes.join(" "),
                            if refreshable { ", refreshable" } else { "" }
                        );
                    }
                    _ => eprintln!("connected {id}"),
                }
                ExitCode::SUCCESS
            }
            Ok(flow::Outcome { error: Some(e), .. }) => fail(format!("signing in to {id} failed: {e}")),
            Err(e) => fail(format!("signing in to {id}: {e}")),
        }
    })
}

/// Listen for the callback at the redirect URI's address when it is free (no gateway there):
/// the listener finishes the flow into the vault. None when the address is taken or not ours.
async fn own_callback(
    ctx: &OAuthContext,
    redirect: &str,
) -> Option<tokio::sync::mpsc::Receiver<String>> {
    let url = url_host_port(redirect)?;
    let listener = tokio::net::TcpListener::bind(&url).await.ok()?;
    let vault = ctx.vault.clone();
    let fetcher = ctx.fetcher.clone();
    let answer: callback::Answer = Arc::new(move |query: String| {
        let vault = vault.clone();
        let fetcher = fetcher.clone();
        Box::pin(async move {
            match flow::complete(&vault, &fetcher, &query, |_| None).await {
                Ok(_) => (
                    true,
                    "Sluice is connected. You can close this window.".to_string(),
                ),
                Err(e) => (false, e.to_string()),
            }
        })
    });
    Some(callback::serve(listener, CALLBACK_PATH, answer))
}

/// `host:port` of an http URL whose host is loopback (the only address this command binds).
fn url_host_port(u: &str) -> Option<String> {
    let rest = u.strip_prefix("http://")?;
    let hostport = rest.split('/').next()?;
    let (host, port) = hostport.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    loopback.then(|| {
        if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        }
    })
}

/// `sluice upstream logout ID --home DIR`: forget the grant (the gateway asks for a login at
/// its next use of the upstream).
pub(crate) fn logout(home: &Path, id: &str) -> ExitCode {
    let (_, ctx) = match context(home, id) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    rt.block_on(async move {
        match ctx.vault.delete(flow::GRANTS, &grant_key(id)).await {
            Ok(true) => {
                eprintln!("forgot the grant of {id}");
                ExitCode::SUCCESS
            }
            Ok(false) => {
                eprintln!("{id} had no grant");
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        }
    })
}

/// `sluice vault rotate --home DIR`: every grant and client registration sealed again with the
/// first key of `vault.key` (the older keys can then be dropped).
pub(crate) fn rotate(home: &Path) -> ExitCode {
    let env = |k: &str| std::env::var(k).ok();
    let config = match Config::load(home, &env) {
        Ok((c, _)) => c,
        Err(e) => return fail(e),
    };
    let vault = match sluice_server::vault_of(&config) {
        Ok(Some(v)) => v,
        Ok(None) => return fail("no vault in sluice.json"),
        Err(e) => return fail(e),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    rt.block_on(async move {
        let mut total = 0;
        for table in [flow::GRANTS, sluice_oauth::client::CLIENTS] {
            match vault.reseal(table).await {
                Ok(n) => total += n,
                Err(e) => return fail(format!("{table}: {e}")),
            }
        }
        eprintln!(
            "sealed {total} row(s) again with the first key ({})",
            vault.describe()
        );
        ExitCode::SUCCESS
    })
}
