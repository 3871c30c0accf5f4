//! Configuration errors: what is wrong, in which file, at which field.

use std::fmt;
use std::path::Path;

/// One configuration problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or folder) the problem is in.
    pub file: String,
    /// The field path inside the file (`upstreams[2].command`), empty for the whole file.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// A problem in `file` at `field`.
    pub fn new(file: &Path, field: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: file.display().to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.field, self.message)
        }
    }
}

/// Every problem a load found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
