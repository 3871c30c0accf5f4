//! `logs/log.config.json`: the audit log's toggle and path (as in toolfunnel: off by default; the file
//! is not created until logging is on).

use crate::error::ConfigError;
use crate::fields::{read_object, Fields};
use std::path::{Path, PathBuf};

/// The audit log settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LogConfig {
    /// Write the audit log.
    pub enabled: bool,
    /// Where (relative paths resolve against the home folder). Default `logs/audit.jsonl`.
    pub path: PathBuf,
}

pub(crate) fn load(home: &Path, errors: &mut Vec<ConfigError>) -> LogConfig {
    let file = home.join("logs").join("log.config.json");
    let mut out = LogConfig {
        enabled: false,
        path: home.join("logs").join("audit.jsonl"),
    };
    let Some(obj) = read_object(&file, errors) else {
        return out;
    };
    let obj = &obj;
    let mut f = Fields {
        file: &file,
        path: String::new(),
        obj,
        errors,
    };
    out.enabled = f.bool("enabled", false);
    if let Some(p) = f.string("path") {
        out.path = home.join(p);
    }
    out
}
