//! Child processes in a process group of their own (the `process` feature): spawning one, and
//! signalling or stopping its whole group, for hooks, register tools and stdio upstreams alike.
//!
//! [`spawn`] starts a command as the leader of a new process group (its pgid is its pid), with
//! tokio's `kill_on_drop`, and returns the child with its [`Group`]. Whatever the command starts
//! (`sh -c 'sleep 97 & exec server'`) stays in that group unless it leaves it on purpose
//! (`setsid`), so signalling the group reaches it all.
//!
//! A [`Group`] is killed (SIGKILL) when it is dropped armed, so a task or connection that is
//! dropped without stopping its child does not leave the group behind. [`Group::stop`] is the
//! graceful stop: wait for the leader to exit on its own (the caller closed its stdin), then
//! SIGTERM to the group, a grace period for every member to go, then SIGKILL.
//!
//! What this cannot cover: a gateway killed with SIGKILL runs no code, so its children are not
//! signalled. A stdio upstream then sees its stdin close (most MCP servers exit on that), but a
//! member of its group that does not read stdin keeps running. Linux's `PR_SET_PDEATHSIG` would
//! need `pre_exec`, which is `unsafe` (forbidden here); run the gateway under a supervisor that
//! kills its whole cgroup (systemd's default `KillMode=control-group`, a container) for that.

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::io;
use std::time::Duration;
use tokio::process::{Child, Command};

/// How often [`Group::stop`] looks whether the group is gone.
const POLL: Duration = Duration::from_millis(20);

/// Spawn `cmd` as the leader of a new process group, killed (the leader) when its [`Child`] is
/// dropped and (the group) when its [`Group`] is dropped armed.
pub fn spawn(cmd: &mut Command) -> io::Result<(Child, Group)> {
    cmd.process_group(0).kill_on_drop(true);
    let child = cmd.spawn()?;
    let group = Group::of(&child);
    Ok((child, group))
}

/// The process group a child leads; SIGKILLed when dropped armed.
#[derive(Debug)]
pub struct Group {
    pgid: Option<Pid>,
    armed: bool,
}

impl Group {
    /// The group `child` leads (it was spawned with `process_group(0)`): none if it was
    /// already reaped.
    pub fn of(child: &Child) -> Group {
        Group {
            pgid: child
                .id()
                .and_then(|p| i32::try_from(p).ok())
                .map(Pid::from_raw),
            armed: true,
        }
    }

    /// The group id (the leader's pid).
    pub fn id(&self) -> Option<u32> {
        self.pgid.map(|p| p.as_raw() as u32)
    }

    /// Send `sig` to every member; false when the group is gone (or there is none).
    pub fn signal(&self, sig: Signal) -> bool {
        match self.pgid {
            Some(g) => killpg(g, sig).is_ok(),
            None => false,
        }
    }

    /// SIGKILL to every member, and disarm.
    pub fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        self.disarm();
    }

    /// Not killed when dropped: the leader was reaped and what it left in the group may keep
    /// running (after the group is gone its id may be reused).
    pub fn disarm(&mut self) {
        self.armed = false;
    }

    /// Whether no process (a zombie counts) is left in the group.
    pub fn is_gone(&self) -> bool {
        match self.pgid {
            Some(g) => killpg(g, None) == Err(Errno::ESRCH),
            None => true,
        }
    }

    /// Stop the group gracefully: wait up to `polite` for the leader to exit on its own, then
    /// SIGTERM to the group and up to `grace` for the leader and every member to go, then
    /// SIGKILL to the group; the leader is reaped. Returns how it went, for the log.
    pub async fn stop(&mut self, child: &mut Child, polite: Duration, grace: Duration) -> Stopped {
        let how = if tokio::time::timeout(polite, child.wait()).await.is_ok() && self.is_gone() {
            Stopped::Exited
        } else {
            self.signal(Signal::SIGTERM);
            if self.wait_gone(child, grace).await {
                Stopped::Terminated
            } else {
                self.signal(Signal::SIGKILL);
                let _ = child.wait().await;
                Stopped::Killed
            }
        };
        // Whatever is left is past the grace period.
        self.kill();
        how
    }

    /// Wait up to `within` for the leader to exit and the group to empty.
    async fn wait_gone(&self, child: &mut Child, within: Duration) -> bool {
        let end = tokio::time::Instant::now() + within;
        loop {
            let leader_gone = !matches!(child.try_wait(), Ok(None));
            if leader_gone && self.is_gone() {
                return true;
            }
            let now = tokio::time::Instant::now();
            if now >= end {
                return false;
            }
            if leader_gone {
                tokio::time::sleep(POLL.min(end - now)).await;
            } else {
                let _ = tokio::time::timeout(POLL.min(end - now), child.wait()).await;
            }
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if self.armed {
            self.kill();
        }
    }
}

/// How [`Group::stop`] ended the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The leader exited within the polite wait and left nothing behind.
    Exited,
    /// Everything was gone within the grace period after SIGTERM.
    Terminated,
    /// SIGKILL was needed.
    Killed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    /// Whether the group is gone within 3 s (its orphans are reaped by pid 1, not by us).
    async fn settles(group: &Group) -> bool {
        let end = tokio::time::Instant::now() + Duration::from_secs(3);
        while !group.is_gone() && tokio::time::Instant::now() < end {
            tokio::time::sleep(POLL).await;
        }
        group.is_gone()
    }

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::null());
        c
    }

    #[tokio::test]
    async fn a_leader_that_exits_on_stdin_close_leaves_nothing_and_stragglers_are_terminated() {
        // Exits on stdin close: nothing left.
        let (mut child, mut group) = spawn(&mut sh("cat >/dev/null")).unwrap();
        drop(child.stdin.take());
        let how = group
            .stop(&mut child, Duration::from_secs(5), Duration::from_secs(5))
            .await;
        assert_eq!(how, Stopped::Exited);
        assert!(group.is_gone());

        // A straggler in the group: SIGTERM ends it.
        let (mut child, mut group) = spawn(&mut sh("sleep 30 & exec cat >/dev/null")).unwrap();
        drop(child.stdin.take());
        let how = group
            .stop(
                &mut child,
                Duration::from_millis(300),
                Duration::from_secs(5),
            )
            .await;
        assert_eq!(how, Stopped::Terminated);
        assert!(group.is_gone());
    }

    #[tokio::test]
    async fn a_group_that_ignores_sigterm_is_killed() {
        let (mut child, mut group) =
            spawn(&mut sh("trap '' TERM; sleep 30 & exec sleep 30")).unwrap();
        let how = group
            .stop(
                &mut child,
                Duration::from_millis(100),
                Duration::from_millis(300),
            )
            .await;
        // An ignored signal stays ignored across exec: both sleeps outlive SIGTERM.
        assert_eq!(how, Stopped::Killed);
        assert!(settles(&group).await);
    }

    #[tokio::test]
    async fn dropping_an_armed_group_kills_it() {
        let (mut child, group) = spawn(&mut sh("sleep 30 & exec sleep 30")).unwrap();
        let pgid = group.id().unwrap();
        drop(group);
        let _ = child.wait().await;
        let probe = Group {
            pgid: Some(Pid::from_raw(pgid as i32)),
            armed: false,
        };
        assert!(settles(&probe).await);
    }
}
