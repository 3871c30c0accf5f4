//! `sluice client` signs in: against an OAuth-protected server it runs Sluice's OAuth client
//! (discovery, registration, PKCE, refresh, step-up), shows the person the authorization URL,
//! waits for the redirect on a loopback listener, and keeps the grant in the user's config
//! folder (a vault sealed with a key file beside it), so the next run needs no sign-in.

use crate::callback;
use clap::Args;
use futures_util::future::BoxFuture;
use sluice_oauth::{
    AuthError, ClientSettings, Consent, Fetcher, Identity, IdentityConfig, Mode, SigningKey,
};
use sluice_vault::{Keyring, Vault};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How `sluice client` signs in to a server that asks for it.
#[derive(Args, Default, Clone)]
pub(crate) struct OAuthArgs {
    /// Do not open a browser to sign in: print the URL and wait for the redirect.
    #[arg(long)]
    pub no_browser: bool,
    /// Open the sign-in URL with this shell command (the URL is its last argument).
    #[arg(long, value_name = "CMD")]
    pub open_with: Option<String>,
    /// A pre-registered OAuth client id (else a client ID metadata document or dynamic
    /// registration).
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// Its secret (default: $SLUICE_CLIENT_SECRET).
    #[arg(long, value_name = "SECRET")]
    pub client_secret: Option<String>,
    /// An https URL publishing this client's metadata, used as the client id where the
    /// authorization server supports client ID metadata documents.
    #[arg(long, value_name = "URL")]
    pub client_metadata_url: Option<String>,
    /// A scope to ask for (repeatable; default: what the server names).
    #[arg(long = "scope", value_name = "SCOPE")]
    pub scopes: Vec<String>,
    /// Sign in with the client credentials grant (no person): --client-id with
    /// --client-secret, or with --private-key (private_key_jwt).
    #[arg(long)]
    pub client_credentials: bool,
    /// The PEM private key of private_key_jwt.
    #[arg(long, value_name = "FILE")]
    pub private_key: Option<PathBuf>,
    /// Its signing algorithm (default from the key: RS256, ES256, EdDSA).
    #[arg(long, value_name = "ALG")]
    pub signing_alg: Option<String>,
    /// Where grants are kept (default: $XDG_CONFIG_HOME/sluice, else ~/.config/sluice).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Never sign in (send only --token and --header).
    #[arg(long)]
    pub no_oauth: bool,
    /// The port of the loopback callback listener (default: any free port).
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub callback_port: u16,
    /// Enterprise-managed authorization (ID-JAG, no person): the identity assertion (an ID
    /// token of the enterprise's identity provider) in this file, exchanged at
    /// --idp-token-endpoint for an ID-JAG, presented at the server's authorization server as
    /// --client-id with --client-secret (or --private-key).
    #[arg(long, value_name = "FILE", requires = "idp_token_endpoint")]
    pub identity_assertion_file: Option<PathBuf>,
    /// The identity provider's token endpoint (with --identity-assertion-file).
    #[arg(long, value_name = "URL")]
    pub idp_token_endpoint: Option<String>,
    /// This client's id at the identity provider (with --identity-assertion-file).
    #[arg(long, value_name = "ID")]
    pub idp_client_id: Option<String>,
}

/// How long a person has to sign in.
const SIGN_IN_WAIT: Duration = Duration::from_secs(300);

/// The folder grants are kept in.
fn state_dir(args: &OAuthArgs) -> Result<PathBuf, String> {
    if let Some(d) = &args.state_dir {
        return Ok(d.clone());
    }
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(x).join("sluice"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".config").join("sluice"))
        .ok_or_else(|| "no HOME to keep sign-ins in (give --state-dir)".into())
}

/// The user's vault: `client-grants.db`, sealed with the key in `client-grants.key` (made on
/// first use, mode 0600).
fn user_vault(dir: &Path) -> Result<Vault, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let key_file = dir.join("client-grants.key");
    if !key_file.exists() {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&key_file)
            .map_err(|e| format!("cannot create {}: {e}", key_file.display()))?;
        writeln!(f, "{}", sluice_vault::keygen())
            .map_err(|e| format!("cannot write {}: {e}", key_file.display()))?;
    }
    let text = std::fs::read_to_string(&key_file)
        .map_err(|e| format!("cannot read {}: {e}", key_file.display()))?;
    let key =
        sluice_vault::key_from_base64(&text).map_err(|e| format!("{}: {e}", key_file.display()))?;
    let keys = Keyring::new(vec![key]).map_err(|e| e.to_string())?;
    Vault::open_file(&dir.join("client-grants.db"), keys).map_err(|e| e.to_string())
}

/// A person signs in through the browser; the redirect comes back to a loopback listener.
struct Loopback {
    listener: Mutex<std::net::TcpListener>,
    redirect: String,
    open_with: Option<String>,
    no_browser: bool,
}

impl Consent for Loopback {
    fn redirect_uri(&self) -> String {
        self.redirect.clone()
    }

    fn authorize<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(async move {
            let listener = self
                .listener
                .lock()
                .map_err(|_| AuthError::Config("the callback listener is gone".into()))?
                .try_clone()
                .and_then(|l| {
                    l.set_nonblocking(true)?;
                    tokio::net::TcpListener::from_std(l)
                })
                .map_err(|e| AuthError::Config(format!("the callback listener: {e}")))?;
            let answer: callback::Answer = Arc::new(|_query| {
                Box::pin(async {
                    (
                        true,
                        "Sluice received the sign-in. You can close this window.".to_string(),
                    )
                })
            });
            let mut rx = callback::serve(listener, "/callback", answer);
            eprintln!("Sign in to continue: open this URL in a browser\n{url}");
            callback::open(url, self.open_with.as_deref(), self.no_browser);
            match tokio::time::timeout(SIGN_IN_WAIT, rx.recv()).await {
                Ok(Some(query)) => Ok(query),
                _ => Err(AuthError::NeedsLogin(format!(
                    "no redirect came back to {} within {} s",
                    self.redirect,
                    SIGN_IN_WAIT.as_secs()
                ))),
            }
        })
    }
}

/// The identity `sluice client` signs in to `url` with (None: --no-oauth).
pub(crate) fn identity(args: &OAuthArgs, url: &str) -> Result<Option<Arc<Identity>>, String> {
    if args.no_oauth {
        return Ok(None);
    }
    let vault = user_vault(&state_dir(args)?)?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", args.callback_port))
        .map_err(|e| format!("cannot listen for the sign-in callback: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let signing_key = match &args.private_key {
        Some(p) => {
            let pem = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
            Some(
                SigningKey::from_pem(&pem, args.signing_alg.as_deref(), None)
                    .map_err(|e| format!("{}: {e}", p.display()))?,
            )
        }
        None => None,
    };
    let client_secret = args.client_secret.clone().or_else(|| {
        std::env::var("SLUICE_CLIENT_SECRET")
            .ok()
            .filter(|s| !s.is_empty())
    });
    if args.client_credentials
        && (args.client_id.is_none() || (client_secret.is_none() && signing_key.is_none()))
    {
        return Err(
            "--client-credentials needs --client-id and --client-secret or --private-key".into(),
        );
    }
    let enterprise = match (&args.identity_assertion_file, &args.idp_token_endpoint) {
        (Some(file), Some(endpoint)) => {
            if args.client_id.is_none() {
                return Err("--identity-assertion-file needs --client-id (the client the authorization server knows)".into());
            }
            let assertion =
                std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
            Some(Arc::new(sluice_oauth::EnterpriseConfig {
                idp_token_endpoint: endpoint.clone(),
                idp_client: sluice_oauth::ClientCredentials {
                    issuer: endpoint.clone(),
                    client_id: args.idp_client_id.clone().unwrap_or_default(),
                    client_secret: None,
                    auth_method: "none".into(),
                },
                assertion: sluice_oauth::Assertion::Value(assertion.trim().to_string()),
            }))
        }
        _ => None,
    };
    let auth_method = signing_key.as_ref().map(|_| "private_key_jwt".to_string());
    let no_person = args.client_credentials || enterprise.is_some();
    let consent: Option<Arc<dyn Consent>> = if no_person {
        None
    } else {
        Some(Arc::new(Loopback {
            listener: Mutex::new(listener),
            redirect: redirect.clone(),
            open_with: args.open_with.clone(),
            no_browser: args.no_browser,
        }))
    };
    let mode = if let Some(e) = enterprise {
        Mode::Enterprise(e)
    } else if args.client_credentials {
        Mode::ClientCredentials
    } else {
        Mode::Person {
            hint: "sign in again".into(),
        }
    };
    let grant_key = format!(
        "client:{url}{}",
        if args.identity_assertion_file.is_some() {
            "#enterprise"
        } else if args.client_credentials {
            "#cc"
        } else {
            ""
        }
    );
    Ok(Some(Identity::new(
        IdentityConfig {
            server_url: url.to_string(),
            grant_key,
            client: ClientSettings {
                client_id: args.client_id.clone(),
                client_secret,
                issuer: None,
                auth_method,
                metadata_url: args.client_metadata_url.clone(),
                client_name: "sluice client".into(),
                redirect_uri: redirect,
            },
            scopes: args.scopes.clone(),
            mode,
            signing_key,
        },
        Fetcher::new(Vec::new()),
        vault,
        consent,
    )))
}
