//! What the running kernel offers a sandbox, and whether a given sandbox can be enforced.

use crate::launcher::{resolve_user, ROOT_NPROC, SUBCOMMAND};
use serde_json::Value;
use sluice_config::Sandbox;

/// The Landlock ABI every sandbox needs: 6, for the signal and abstract-unix-socket scopes
/// (files need 5, TCP rules 4).
pub(crate) const NEEDED_ABI: u32 = 6;

/// What the kernel offers, as the launcher found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// Why a user namespace (with a network namespace in it, and its `lo` up) could not be
    /// made; `None` when it could.
    pub namespaces: Option<String>,
    /// The kernel's Landlock ABI, when it has Landlock.
    pub landlock_abi: Option<u32>,
    /// Why Landlock is not available.
    pub landlock_error: Option<String>,
    /// The gateway's effective uid.
    pub euid: u32,
}

impl Support {
    /// Run this binary's launcher in its probe mode (a throw-away process that tries what a
    /// sandbox uses) and read its findings.
    pub fn probe() -> Support {
        let failed = |why: String| Support {
            namespaces: Some(why.clone()),
            landlock_abi: None,
            landlock_error: Some(why),
            euid: nix::unistd::geteuid().as_raw(),
        };
        let exe = match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => return failed(format!("cannot find the sluice binary: {e}")),
        };
        let out = match std::process::Command::new(exe)
            .args([SUBCOMMAND, "--probe"])
            .stdin(std::process::Stdio::null())
            .output()
        {
            Ok(o) => o,
            Err(e) => return failed(format!("cannot run the launcher: {e}")),
        };
        let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else {
            return failed(format!(
                "the launcher's probe failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        };
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Support {
            namespaces: text("namespaces"),
            landlock_abi: v
                .get("landlock_abi")
                .and_then(Value::as_u64)
                .map(|n| n as u32),
            landlock_error: text("landlock_error"),
            euid: v.get("euid").and_then(Value::as_u64).unwrap_or(0) as u32,
        }
    }

    /// What `sluice check` prints about the kernel.
    pub fn lines(&self) -> Vec<String> {
        let landlock = match (self.landlock_abi, &self.landlock_error) {
            (Some(abi), _) if abi >= NEEDED_ABI => format!(
                "Landlock ABI {abi}: files, TCP connect/bind, signal and abstract socket scopes"
            ),
            (Some(abi), _) => format!(
                "Landlock ABI {abi}: too old for a sandbox (ABI {NEEDED_ABI} or later, Linux 6.12)"
            ),
            (None, Some(e)) => format!("Landlock: unavailable ({e})"),
            (None, None) => "Landlock: unavailable".into(),
        };
        let ns = match &self.namespaces {
            None => "user namespaces: yes; network namespaces: yes".to_string(),
            Some(e) => format!("user and network namespaces: unavailable ({e})"),
        };
        let who = if self.euid == 0 {
            "running as root: `processes` needs sandbox.user (RLIMIT_NPROC does not apply to uid 0)"
                .to_string()
        } else {
            format!("running as uid {}: `user` cannot be used", self.euid)
        };
        vec![landlock, ns, who]
    }

    /// Whether `sandbox` can be enforced here; the reason when it cannot.
    pub fn enforceable(&self, sandbox: &Sandbox) -> Result<(), String> {
        if let Some(e) = &self.namespaces {
            return Err(format!("a sandbox needs user namespaces: {e}"));
        }
        match self.landlock_abi {
            Some(abi) if abi >= NEEDED_ABI => {}
            Some(abi) => {
                return Err(format!(
                    "a sandbox needs Landlock ABI {NEEDED_ABI} or later; this kernel has ABI {abi}"
                ))
            }
            None => {
                return Err(format!(
                    "a sandbox needs Landlock: {}",
                    self.landlock_error.as_deref().unwrap_or("unavailable")
                ))
            }
        }
        let uid = match &sandbox.user {
            Some(name) => {
                let (uid, _) = resolve_user(name)?;
                if self.euid != 0 && uid.as_raw() != self.euid {
                    return Err(format!(
                        "sandbox.user {name:?}: only a gateway running as root can run a server as another user"
                    ));
                }
                uid.as_raw()
            }
            None => self.euid,
        };
        if sandbox.processes.is_some() && uid == 0 {
            return Err(ROOT_NPROC.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_config::Network;

    fn kernel(abi: Option<u32>, euid: u32) -> Support {
        Support {
            namespaces: None,
            landlock_abi: abi,
            landlock_error: abi
                .is_none()
                .then(|| "the kernel has no Landlock".to_string()),
            euid,
        }
    }

    #[test]
    fn a_sandbox_needs_landlock_6_and_namespaces() {
        let s = Sandbox {
            network: Some(Network::None),
            ..Sandbox::default()
        };
        assert_eq!(kernel(Some(7), 1000).enforceable(&s), Ok(()));
        assert_eq!(
            kernel(Some(5), 1000).enforceable(&s),
            Err("a sandbox needs Landlock ABI 6 or later; this kernel has ABI 5".into())
        );
        assert_eq!(
            kernel(None, 1000).enforceable(&s),
            Err("a sandbox needs Landlock: the kernel has no Landlock".into())
        );
        let closed = Support {
            namespaces: Some("EPERM".into()),
            ..kernel(Some(7), 1000)
        };
        assert_eq!(
            closed.enforceable(&s),
            Err("a sandbox needs user namespaces: EPERM".into())
        );
    }

    #[test]
    fn processes_need_a_user_other_than_root_and_only_root_switches_users() {
        let capped = Sandbox {
            processes: Some(10),
            ..Sandbox::default()
        };
        assert_eq!(kernel(Some(7), 1000).enforceable(&capped), Ok(()));
        assert_eq!(
            kernel(Some(7), 0).enforceable(&capped),
            Err(ROOT_NPROC.into())
        );
        let as_nobody = Sandbox {
            user: Some("65534".into()),
            ..capped
        };
        assert_eq!(kernel(Some(7), 0).enforceable(&as_nobody), Ok(()));
        assert_eq!(
            kernel(Some(7), 1000).enforceable(&as_nobody),
            Err("sandbox.user \"65534\": only a gateway running as root can run a server as another user".into())
        );
        let as_root = Sandbox {
            user: Some("0".into()),
            ..as_nobody
        };
        assert_eq!(
            kernel(Some(7), 0).enforceable(&as_root),
            Err(ROOT_NPROC.into())
        );
    }

    #[test]
    fn the_launcher_gets_the_sandbox_as_json_then_the_command() {
        let s = Sandbox {
            memory_mb: Some(64),
            ..Sandbox::default()
        };
        let (_, argv) =
            crate::launcher_command(&s, "node", &["server.js".into(), "--x".into()]).unwrap();
        assert_eq!(
            argv,
            [
                "sandbox-exec",
                r#"{"memory_mb":64}"#,
                "--",
                "node",
                "server.js",
                "--x"
            ]
        );
    }
}
