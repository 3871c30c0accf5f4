//! The session transcripts hook scripts read through `transcript_path`: one JSON-lines file per
//! session, `<home>/transcripts/<session id>.jsonl`, holding the session's tool calls and their
//! results in the shape of Claude Code's own transcripts, so a script that walks a Claude Code
//! transcript reads this one unchanged:
//!
//! ```text
//! {"type":"assistant","sessionId":…,"uuid":…,"timestamp":…,"cwd":…,
//!  "message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_…","name":…,"input":{…}}]}}
//! {"type":"user","sessionId":…,"uuid":…,"timestamp":…,
//!  "message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_…","content":[…],"is_error":false}]},
//!  "toolUseResult":{…the call's result, or {"error": …}}}
//! ```
//!
//! The first line is written before the request hooks run (so a PreToolUse hook finds its own
//! call last), the second after the response hooks (what the agent got). The file exists from
//! the first event a command or http hook is shown. A gateway never sees prompts or the model's
//! text, so there are no other lines. A session's file is removed when it ends, after its Stop
//! and SessionEnd hooks ran (unless the `keep_transcripts` setting keeps them, as Claude Code
//! keeps its own); writing is best effort (a failure is logged once and the call goes on).
//! They hold the calls' arguments and results, so the folder is made `0700` and each file
//! `0600`. A line is a small append, written in line so the hook that runs next finds it.

use crate::event::{failure_text, is_failure};
use serde_json::{json, Value};
use sluice_core::Message;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Where a chain's sessions write their transcripts.
#[derive(Debug)]
pub struct Transcripts {
    dir: PathBuf,
    warned: AtomicBool,
}

impl Transcripts {
    /// Transcripts under `dir` (created when first written).
    pub fn new(dir: PathBuf) -> Transcripts {
        Transcripts {
            dir,
            warned: AtomicBool::new(false),
        }
    }

    /// The transcript of `session_id` (characters other than `A-Z a-z 0-9 - _ .` become `_`).
    pub fn path(&self, session_id: &str) -> PathBuf {
        let safe: String = session_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let safe = if safe.is_empty() || safe.starts_with('.') {
            format!("s{safe}")
        } else {
            safe
        };
        self.dir.join(format!("{safe}.jsonl"))
    }

    /// Remove the transcript of `session_id` (the session ended); a missing file is fine.
    pub fn remove(&self, session_id: &str) {
        let path = self.path(session_id);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), "cannot remove the transcript: {e}"),
        }
    }

    /// The transcript of `session_id`, created (empty) when missing.
    pub fn touch(&self, session_id: &str) -> PathBuf {
        let path = self.path(session_id);
        if !path.exists() {
            self.append(&path, None);
        }
        path
    }

    /// The line of a call: the tool it names and its arguments.
    pub fn tool_use(&self, session_id: &str, cwd: &Path, id: &str, name: &str, input: &Value) {
        let line = json!({
            "type": "assistant",
            "sessionId": session_id,
            "uuid": uuid::Uuid::new_v4().to_string(),
            "timestamp": sluice_core::time::now_rfc3339(),
            "cwd": cwd.to_string_lossy(),
            "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": name, "input": input}
            ]},
        });
        self.append(&self.path(session_id), Some(&line));
    }

    /// The line of a call's reply, as the agent got it.
    pub fn tool_result(&self, session_id: &str, id: &str, reply: &Message) {
        let is_error = is_failure(reply);
        let (content, result) = match reply.result() {
            Some(r) => (
                r.get("content").cloned().unwrap_or_else(|| json!([])),
                r.clone(),
            ),
            None => (
                json!(failure_text(reply)),
                json!({"error": reply.error_obj()}),
            ),
        };
        let line = json!({
            "type": "user",
            "sessionId": session_id,
            "uuid": uuid::Uuid::new_v4().to_string(),
            "timestamp": sluice_core::time::now_rfc3339(),
            "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error}
            ]},
            "toolUseResult": result,
        });
        self.append(&self.path(session_id), Some(&line));
    }

    fn append(&self, path: &Path, line: Option<&Value>) {
        let write = || -> std::io::Result<()> {
            if !self.dir.is_dir() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&self.dir)?;
            }
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)?;
            if let Some(line) = line {
                let mut text = serde_json::to_vec(&sluice_core::exact::Exact(line))?;
                text.push(b'\n');
                f.write_all(&text)?;
            }
            Ok(())
        };
        if let Err(e) = write() {
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(path = %path.display(), "cannot write the session transcript hooks read: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_in_claude_codes_shape() {
        let dir = std::env::temp_dir().join(format!("sluice-transcript-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let t = Transcripts::new(dir.clone());
        assert_eq!(t.path("a/b c"), dir.join("a_b_c.jsonl"));
        assert_eq!(t.path(".."), dir.join("s...jsonl"));
        let p = t.touch("s1");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        t.tool_use(
            "s1",
            Path::new("/h"),
            "toolu_1",
            "fx_echo",
            &json!({"a": 1}),
        );
        let ok = Message::response(
            json!(1),
            json!({"content": [{"type": "text", "text": "hi"}]}),
        );
        t.tool_result("s1", "toolu_1", &ok);
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0]["message"]["content"][0],
            json!({"type": "tool_use", "id": "toolu_1", "name": "fx_echo", "input": {"a": 1}})
        );
        assert_eq!(
            lines[1]["message"]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "toolu_1",
                   "content": [{"type": "text", "text": "hi"}], "is_error": false})
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
