//! `sluice pins`: review and approve what upstreams offer against `mcp/pins.json` (the
//! definitions a running gateway has seen differ from their pins, or never approved).

use sluice_config::pins::{PinFile, Selector};
use std::path::PathBuf;
use std::process::ExitCode;

/// `sluice pins …`
#[derive(clap::Subcommand)]
pub(crate) enum PinsCmd {
    /// Print what awaits review: each changed or new definition with a diff against its pin.
    Diff {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// `UPSTREAM` or `UPSTREAM/NAME` (default: everything).
        which: Option<String>,
    },
    /// Approve what an upstream offers now: it becomes the pin (a running gateway lists it at
    /// once, and its clients are told the list changed).
    Approve {
        /// The tree.
        #[arg(long)]
        home: PathBuf,
        /// Everything awaiting review.
        #[arg(long, conflicts_with = "which")]
        all: bool,
        /// `UPSTREAM` or `UPSTREAM/NAME`.
        #[arg(required_unless_present = "all")]
        which: Option<String>,
    },
}

pub(crate) fn run(cmd: PinsCmd) -> ExitCode {
    match cmd {
        PinsCmd::Diff { home, which } => {
            let file = match PinFile::load(&home) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("sluice: {e}");
                    return ExitCode::from(1);
                }
            };
            let which = which.as_deref().map_or(Selector::All, Selector::parse);
            let pending: Vec<_> = file
                .pending()
                .into_iter()
                .filter(|p| which.takes(p.upstream, p.key))
                .collect();
            if pending.is_empty() {
                println!("nothing awaits review");
                return ExitCode::SUCCESS;
            }
            for p in pending {
                println!(
                    "{} {} is {} ({} -> {})",
                    p.kind.noun(),
                    p.selector(),
                    p.verdict().name(),
                    p.approved.map_or("never approved", |a| a.digest.as_str()),
                    p.seen.digest
                );
                print!("{}", p.diff());
                println!();
            }
            ExitCode::SUCCESS
        }
        PinsCmd::Approve { home, all, which } => {
            let which = if all {
                Selector::All
            } else {
                Selector::parse(which.as_deref().unwrap_or(""))
            };
            match sluice_config::manage::pins_approve(&home, &which) {
                Ok(done) if done.is_empty() => {
                    println!("nothing awaits review there");
                    ExitCode::SUCCESS
                }
                Ok(done) => {
                    for d in done {
                        println!("approved {d}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sluice: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
