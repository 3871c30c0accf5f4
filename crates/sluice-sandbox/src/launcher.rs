//! The launcher: `sluice sandbox-exec SPEC -- COMMAND ARGS…` restricts itself (user, namespaces,
//! rlimits, Landlock, in that order) and then becomes the server with `execve`.
//!
//! It must run single-threaded (a multi-threaded process cannot enter a new user namespace),
//! so the binary dispatches to [`exec`] before it starts anything else. Any failure is written
//! to stderr (the gateway's log and the upstream's stderr tail) and the launcher exits 125
//! without running the server: a sandbox is never skipped.

use crate::netlink;
use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use nix::sched::{unshare, CloneFlags};
use nix::sys::resource::{setrlimit, Resource};
use nix::unistd::{getegid, geteuid, setgid, setgroups, setuid, Gid, Uid, User};
use sluice_config::{Network, Sandbox};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

/// The hidden subcommand of the `sluice` binary that runs the launcher.
pub const SUBCOMMAND: &str = "sandbox-exec";

/// Exit code of a launcher that could not confine itself or run the server.
const FAILED: u8 = 125;

/// The file rights of Landlock ABI 5 (every file right there is, `ioctl` on devices included).
const FS_ABI: ABI = ABI::V5;

/// The program and arguments that run `command args` confined by `sandbox`: this binary as the
/// launcher. The server gets the environment, working folder and stdio of the launcher.
pub fn launcher_command(
    sandbox: &Sandbox,
    command: &str,
    args: &[String],
) -> std::io::Result<(PathBuf, Vec<OsString>)> {
    let exe = std::env::current_exe()?;
    let spec = serde_json::to_string(sandbox).map_err(std::io::Error::other)?;
    let mut argv: Vec<OsString> = vec![SUBCOMMAND.into(), spec.into(), "--".into(), command.into()];
    argv.extend(args.iter().map(OsString::from));
    Ok((exe, argv))
}

/// The launcher's main, given what follows `sandbox-exec`. Returns only when it failed: the
/// exit code (the reason is on stderr).
pub fn exec(args: &[OsString]) -> u8 {
    let err = match run(args) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    eprintln!("sluice sandbox-exec: {err}");
    FAILED
}

fn run(args: &[OsString]) -> Result<std::convert::Infallible, String> {
    let [spec, dashes, command, rest @ ..] = args else {
        return Err("usage: sluice sandbox-exec SPEC -- COMMAND [ARGS…]".into());
    };
    if dashes != "--" {
        return Err("usage: sluice sandbox-exec SPEC -- COMMAND [ARGS…]".into());
    }
    let spec = spec.to_str().ok_or("the sandbox is not UTF-8")?;
    let sandbox: Sandbox =
        serde_json::from_str(spec).map_err(|e| format!("the sandbox is not readable: {e}"))?;
    confine(&sandbox)?;
    let e = std::process::Command::new(command).args(rest).exec();
    let hint = if sandbox.fs.is_some() && e.kind() == std::io::ErrorKind::PermissionDenied {
        " (the sandbox's fs.read must hold the program and every library it loads)"
    } else {
        ""
    };
    Err(format!(
        "cannot run {}: {e}{hint}",
        command.to_string_lossy()
    ))
}

/// Restrict this process as `sandbox` says; every step is required.
fn confine(sandbox: &Sandbox) -> Result<(), String> {
    let (uid, gid) = match &sandbox.user {
        Some(name) => switch_user(name)?,
        None => (geteuid(), getegid()),
    };
    if sandbox.processes.is_some() && uid.is_root() {
        return Err(ROOT_NPROC.into());
    }
    let net = matches!(sandbox.network, Some(Network::None | Network::Loopback));
    namespaces(uid, gid, net)?;
    if sandbox.network == Some(Network::Loopback) {
        netlink::loopback_up()
            .map_err(|e| format!("cannot bring lo up in the new network namespace: {e}"))?;
    }
    limits(sandbox)?;
    landlock(sandbox)
}

/// Why `processes` needs a user other than root.
pub(crate) const ROOT_NPROC: &str = "sandbox.processes cannot be enforced for root: the kernel does not apply RLIMIT_NPROC to uid 0 (run the gateway as an ordinary user, or set sandbox.user)";

/// Become `name` (a user name or a numeric uid) with its primary group and no others.
fn switch_user(name: &str) -> Result<(Uid, Gid), String> {
    let (uid, gid) = resolve_user(name)?;
    if !geteuid().is_root() {
        if uid == geteuid() {
            return Ok((uid, getegid()));
        }
        return Err(format!(
            "sandbox.user {name:?}: only a gateway running as root can run a server as another user"
        ));
    }
    setgroups(&[gid]).map_err(|e| format!("setgroups: {e}"))?;
    setgid(gid).map_err(|e| format!("setgid({gid}): {e}"))?;
    setuid(uid).map_err(|e| format!("setuid({uid}): {e}"))?;
    // A change of uid leaves the process undumpable, its /proc files root's: the namespace's
    // maps could not be written. The server, once executed, is dumpable as any process is.
    nix::sys::prctl::set_dumpable(true).map_err(|e| format!("PR_SET_DUMPABLE: {e}"))?;
    Ok((uid, gid))
}

/// A user name or numeric uid, and its primary group (a uid unknown to the system: its own
/// number as the group).
pub(crate) fn resolve_user(name: &str) -> Result<(Uid, Gid), String> {
    let found = match name.parse::<u32>() {
        Ok(n) => User::from_uid(Uid::from_raw(n))
            .map_err(|e| e.to_string())?
            .map(|u| (u.uid, u.gid))
            .or(Some((Uid::from_raw(n), Gid::from_raw(n)))),
        Err(_) => User::from_name(name)
            .map_err(|e| e.to_string())?
            .map(|u| (u.uid, u.gid)),
    };
    found.ok_or_else(|| format!("sandbox.user {name:?}: no such user"))
}

/// A new user namespace (mapping this uid and gid to themselves) and, with `net`, a new
/// network namespace owned by it.
fn namespaces(uid: Uid, gid: Gid, net: bool) -> Result<(), String> {
    let mut flags = CloneFlags::CLONE_NEWUSER;
    if net {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| {
        format!(
            "cannot create a user namespace{}: {e} (see `sluice check`)",
            if net { " and a network namespace" } else { "" }
        )
    })?;
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| format!("writing {file}: {e}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(())
}

fn limits(sandbox: &Sandbox) -> Result<(), String> {
    let set = |what: Resource, soft: u64, hard: u64, field: &str| {
        setrlimit(what, soft, hard).map_err(|e| format!("sandbox.{field}: setrlimit: {e}"))
    };
    if let Some(mb) = sandbox.memory_mb {
        let bytes = mb.saturating_mul(1 << 20);
        set(Resource::RLIMIT_DATA, bytes, bytes, "memory_mb")?;
    }
    if let Some(n) = sandbox.processes {
        set(Resource::RLIMIT_NPROC, n, n, "processes")?;
    }
    if let Some(s) = sandbox.cpu_seconds {
        // SIGXCPU at the soft limit, SIGKILL at the hard one a second later.
        set(Resource::RLIMIT_CPU, s, s.saturating_add(1), "cpu_seconds")?;
    }
    Ok(())
}

/// The Landlock ruleset: the scopes always, files and TCP when asked, all hard requirements.
fn landlock(sandbox: &Sandbox) -> Result<(), String> {
    let err = |e: landlock::RulesetError| format!("Landlock: {e} (see `sluice check`)");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::from_all(ABI::V6))
        .map_err(err)?;
    if sandbox.fs.is_some() {
        ruleset = ruleset
            .handle_access(AccessFs::from_all(FS_ABI))
            .map_err(err)?;
    }
    let connect = match &sandbox.network {
        Some(Network::Connect(list)) => Some(list),
        _ => None,
    };
    if connect.is_some() {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(err)?;
    }
    let mut created = ruleset.create().map_err(err)?;
    if let Some(fs) = &sandbox.fs {
        let rules = fs
            .read
            .iter()
            .map(|p| (p, AccessFs::from_read(FS_ABI)))
            .chain(fs.write.iter().map(|p| (p, AccessFs::from_all(FS_ABI))));
        for (path, access) in rules {
            let Ok(meta) = std::fs::metadata(path) else {
                // A path that does not exist grants nothing.
                continue;
            };
            let access = if meta.is_dir() {
                access
            } else {
                access & AccessFs::from_file(FS_ABI)
            };
            let fd =
                PathFd::new(path).map_err(|e| format!("sandbox.fs: {}: {e}", path.display()))?;
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(err)?;
        }
    }
    if let Some(list) = connect {
        for hp in list {
            created = created
                .add_rule(NetPort::new(hp.port, AccessNet::ConnectTcp))
                .map_err(err)?;
        }
    }
    let status = created.restrict_self().map_err(err)?;
    if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
        return Err(format!(
            "Landlock did not fully enforce the sandbox: {status:?}"
        ));
    }
    Ok(())
}

/// `sluice sandbox-exec --probe`: try what a sandbox uses, in this (throw-away) process, and
/// print the findings as one JSON object on stdout.
pub fn probe_main() -> u8 {
    let namespaces = namespaces(geteuid(), getegid(), true)
        .and_then(|()| netlink::loopback_up().map_err(|e| format!("bringing lo up: {e}")));
    // Best effort on purpose: this only reads which ABI the kernel has.
    let landlock = Ruleset::default()
        .handle_access(AccessFs::Execute)
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self());
    let (abi, landlock_error) = match landlock {
        Ok(status) => match status.landlock {
            LandlockStatus::Available {
                effective_abi,
                kernel_abi,
            } => (
                kernel_abi.or_else(|| {
                    format!("{effective_abi:?}")
                        .trim_start_matches('V')
                        .parse()
                        .ok()
                }),
                None,
            ),
            LandlockStatus::NotEnabled => (
                None,
                Some("Landlock is not enabled (boot with lsm=…,landlock)".to_string()),
            ),
            LandlockStatus::NotImplemented => {
                (None, Some("the kernel has no Landlock".to_string()))
            }
        },
        Err(e) => (None, Some(e.to_string())),
    };
    let report = serde_json::json!({
        "namespaces": namespaces.err(),
        "landlock_abi": abi,
        "landlock_error": landlock_error,
        "euid": geteuid().as_raw(),
    });
    println!("{report}");
    0
}
