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
//!
//! Writing costs one `write` per line: the files of the sessions written last stay open
//! (at most [`OPEN_FILES`]; the one written longest ago is closed first and opened again when
//! its session writes next), the folder is made once (and again if an open finds it gone), and
//! a line is serialised straight from the call's values: a result kept as the text it came as
//! goes into the line as that text. A file is known to exist while it is open, so a script that
//! deletes a live session's transcript loses that session's next lines (its path is not made
//! again until the file is closed); Sluice owns these files as Claude Code owns its own.

use crate::event::{failure_text, is_failure};
use parking_lot::Mutex;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;
use sluice_core::exact::Exact;
use sluice_core::{Kind, Message};
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Transcript files kept open at most.
pub const OPEN_FILES: usize = 256;

/// Where a chain's sessions write their transcripts.
#[derive(Debug)]
pub struct Transcripts {
    dir: PathBuf,
    warned: AtomicBool,
    /// The folder was made (or found) since the last open that found it missing.
    dir_made: AtomicBool,
    open: Mutex<OpenFiles>,
}

/// The files kept open, by session id, each with when it was last written.
#[derive(Debug, Default)]
struct OpenFiles {
    files: HashMap<String, (Arc<File>, u64)>,
    clock: u64,
}

impl OpenFiles {
    /// The open file of `session_id`, marked as written now.
    fn get(&mut self, session_id: &str) -> Option<Arc<File>> {
        self.clock += 1;
        let now = self.clock;
        self.files.get_mut(session_id).map(|(f, at)| {
            *at = now;
            f.clone()
        })
    }

    /// Keep `file` open for `session_id`, closing the one written longest ago when full.
    fn put(&mut self, session_id: &str, file: Arc<File>) {
        if self.files.len() >= OPEN_FILES && !self.files.contains_key(session_id) {
            let oldest = self
                .files
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.files.remove(&k);
            }
        }
        self.clock += 1;
        self.files
            .insert(session_id.to_string(), (file, self.clock));
    }
}

impl Transcripts {
    /// Transcripts under `dir` (created when first written).
    pub fn new(dir: PathBuf) -> Transcripts {
        Transcripts {
            dir,
            warned: AtomicBool::new(false),
            dir_made: AtomicBool::new(false),
            open: Mutex::new(OpenFiles::default()),
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

    /// The session `session_id` ended: close its file, and remove it unless `keep`; a missing
    /// file is fine.
    pub fn end(&self, session_id: &str, keep: bool) {
        self.open.lock().files.remove(session_id);
        if keep {
            return;
        }
        let path = self.path(session_id);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), "cannot remove the transcript: {e}"),
        }
    }

    /// The transcript of `session_id`, created (empty) when missing.
    pub fn touch(&self, session_id: &str) -> PathBuf {
        self.append(session_id, None);
        self.path(session_id)
    }

    /// The line of a call: the tool it names and its arguments (`{}` when it has none).
    pub fn tool_use(
        &self,
        session_id: &str,
        cwd: &Path,
        id: &str,
        name: &str,
        input: Option<&Value>,
    ) {
        let uuid = uuid::Uuid::new_v4().to_string();
        let timestamp = sluice_core::time::now_rfc3339();
        let cwd = cwd.to_string_lossy();
        let line = Line {
            kind: "assistant",
            session_id,
            uuid: &uuid,
            timestamp: &timestamp,
            cwd: Some(&cwd),
            message: Said {
                role: "assistant",
                content: [Part::ToolUse {
                    id,
                    name,
                    input: input.map_or(Json::EmptyObject, Json::Tree),
                }],
            },
            tool_use_result: None,
        };
        self.write_line(session_id, &line);
    }

    /// The line of a call's reply, as the agent got it.
    pub fn tool_result(&self, session_id: &str, id: &str, reply: &Message) {
        let uuid = uuid::Uuid::new_v4().to_string();
        let timestamp = sluice_core::time::now_rfc3339();
        let raw = raw_result(reply);
        let text;
        let error;
        let (content, is_error, result) = match &raw {
            Some(r) => (
                r.content.map_or(Json::EmptyArray, Json::Raw),
                r.is_error.is_some_and(|v| v.get() == "true"),
                Json::Raw(r.whole),
            ),
            None => match reply.result() {
                Some(r) => (
                    r.get("content").map_or(Json::EmptyArray, Json::Tree),
                    is_failure(reply),
                    Json::Tree(r),
                ),
                None => {
                    text = Value::String(failure_text(reply));
                    error = serde_json::json!({"error": reply.error_obj()});
                    (Json::Tree(&text), is_failure(reply), Json::Tree(&error))
                }
            },
        };
        let line = Line {
            kind: "user",
            session_id,
            uuid: &uuid,
            timestamp: &timestamp,
            cwd: None,
            message: Said {
                role: "user",
                content: [Part::ToolResult {
                    tool_use_id: id,
                    content,
                    is_error,
                }],
            },
            tool_use_result: Some(result),
        };
        self.write_line(session_id, &line);
    }

    fn write_line(&self, session_id: &str, line: &Line<'_>) {
        let mut text = match serde_json::to_vec(line) {
            Ok(t) => t,
            Err(e) => return self.warn(session_id, &e.into()),
        };
        text.push(b'\n');
        self.append(session_id, Some(&text));
    }

    /// Append `text` to the transcript of `session_id` (made when missing): one `write` on
    /// the file kept open for it, opened (and kept) when it is not.
    fn append(&self, session_id: &str, text: Option<&[u8]>) {
        let open = self.open.lock().get(session_id);
        let file = match open {
            Some(f) => f,
            None => match self.open_file(session_id) {
                Ok(f) => {
                    let f = Arc::new(f);
                    self.open.lock().put(session_id, f.clone());
                    f
                }
                Err(e) => return self.warn(session_id, &e),
            },
        };
        if let Some(text) = text {
            if let Err(e) = (&*file).write_all(text) {
                self.warn(session_id, &e);
            }
        }
    }

    /// Open (making it, and the folder, when missing) the transcript of `session_id`.
    fn open_file(&self, session_id: &str) -> std::io::Result<File> {
        let path = self.path(session_id);
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)
        };
        if self.dir_made.load(Ordering::Relaxed) {
            match open() {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                done => return done,
            }
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        self.dir_made.store(true, Ordering::Relaxed);
        open()
    }

    /// Log the first failure to write (writing is best effort).
    fn warn(&self, session_id: &str, e: &std::io::Error) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(path = %self.path(session_id).display(), "cannot write the session transcript hooks read: {e}");
        }
    }
}

/// A success reply kept as text, read without building it: the whole `result`, and its
/// `content` and `isError` as written.
struct RawResult<'a> {
    whole: &'a RawValue,
    content: Option<&'a RawValue>,
    is_error: Option<&'a RawValue>,
}

/// The members of a `result` a transcript line needs.
#[derive(Deserialize)]
struct ResultMembers<'a> {
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow, rename = "isError")]
    is_error: Option<&'a RawValue>,
}

/// [`RawResult`] of a success reply kept as text; `None` for any other message (and for a
/// result that names a member twice, which the tree reads as its last).
fn raw_result(reply: &Message) -> Option<RawResult<'_>> {
    if reply.kind() != Kind::Response {
        return None;
    }
    let text = reply.reply_member_text()?;
    let whole: &RawValue = serde_json::from_str(text).ok()?;
    let members: ResultMembers = serde_json::from_str(text).ok()?;
    Some(RawResult {
        whole,
        content: members.content,
        is_error: members.is_error,
    })
}

/// A JSON value of a line: as received, from a tree, or empty.
enum Json<'a> {
    Raw(&'a RawValue),
    Tree(&'a Value),
    EmptyObject,
    EmptyArray,
}

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Raw(r) => r.serialize(s),
            Json::Tree(v) => Exact(v).serialize(s),
            Json::EmptyObject => s.serialize_map(Some(0))?.end(),
            Json::EmptyArray => s.collect_seq(std::iter::empty::<()>()),
        }
    }
}

/// One transcript line, in Claude Code's shape (key order as Claude Code writes them).
#[derive(Serialize)]
struct Line<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(rename = "sessionId")]
    session_id: &'a str,
    uuid: &'a str,
    timestamp: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cwd: Option<&'a str>,
    message: Said<'a>,
    #[serde(rename = "toolUseResult", skip_serializing_if = "Option::is_none")]
    tool_use_result: Option<Json<'a>>,
}

#[derive(Serialize)]
struct Said<'a> {
    role: &'static str,
    content: [Part<'a>; 1],
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Json<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: Json<'a>,
        is_error: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(p: &Path) -> Vec<Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sluice-transcript-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn lines_in_claude_codes_shape() {
        let dir = temp("shape");
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
            Some(&json!({"a": 1})),
        );
        let ok = Message::response(
            json!(1),
            json!({"content": [{"type": "text", "text": "hi"}]}),
        );
        t.tool_result("s1", "toolu_1", &ok);
        let text = std::fs::read_to_string(&p).unwrap();
        let first = text.lines().next().unwrap();
        assert!(
            first.starts_with(r#"{"type":"assistant","sessionId":"s1","uuid":""#),
            "{first}"
        );
        let lines = lines(&p);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["cwd"], "/h");
        assert_eq!(
            lines[0]["message"],
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "fx_echo", "input": {"a": 1}}]})
        );
        assert_eq!(
            lines[1]["message"],
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                   "content": [{"type": "text", "text": "hi"}], "is_error": false}]})
        );
        assert_eq!(
            lines[1]["toolUseResult"],
            json!({"content": [{"type": "text", "text": "hi"}]})
        );
        let keys: Vec<&str> = lines[1]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "type",
                "sessionId",
                "uuid",
                "timestamp",
                "message",
                "toolUseResult"
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A reply kept as text goes into the line as written; an error reply and a call without
    /// arguments read as before.
    #[test]
    fn a_reply_kept_as_text_is_written_as_it_came() {
        let dir = temp("raw");
        let t = Transcripts::new(dir.clone());
        let raw = Message::parse_reply(
            br#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"x"}],"n":1.10,"isError":true}}"#,
        )
        .unwrap();
        assert!(raw.reply_member_text().is_some(), "kept as text");
        t.tool_use("s", Path::new("/"), "toolu_2", "fx", None);
        t.tool_result("s", "toolu_2", &raw);
        let err = Message::parse_reply(
            br#"{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"upstream gone"}}"#,
        )
        .unwrap();
        t.tool_result("s", "toolu_3", &err);
        let p = t.path("s");
        let text = std::fs::read_to_string(&p).unwrap();
        let second = text.lines().nth(1).unwrap();
        assert!(
            second.ends_with(
                r#""toolUseResult":{"content":[{"type":"text","text":"x"}],"n":1.10,"isError":true}}"#
            ),
            "{second}"
        );
        let lines = lines(&p);
        assert_eq!(lines[0]["message"]["content"][0]["input"], json!({}));
        assert_eq!(lines[1]["message"]["content"][0]["is_error"], true);
        assert_eq!(
            lines[1]["message"]["content"][0]["content"],
            json!([{"type": "text", "text": "x"}])
        );
        assert_eq!(
            lines[2]["message"]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "toolu_3", "content": "upstream gone", "is_error": true})
        );
        assert_eq!(
            lines[2]["toolUseResult"],
            json!({"error": {"code": -32000, "message": "upstream gone"}})
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Files stay open up to the cap; past it the one written longest ago is closed and opened
    /// again when its session writes next. Ending a session closes its file and removes it
    /// (or keeps it); a folder removed under a running gateway is made again.
    #[test]
    fn open_files_are_capped_and_ended_with_their_session() {
        let dir = temp("open");
        let t = Transcripts::new(dir.clone());
        for i in 0..=OPEN_FILES {
            t.touch(&format!("s{i}"));
        }
        assert_eq!(t.open.lock().files.len(), OPEN_FILES);
        assert!(!t.open.lock().files.contains_key("s0"), "the oldest closed");
        t.tool_use("s0", Path::new("/"), "toolu_1", "fx", None);
        assert_eq!(
            lines(&t.path("s0")).len(),
            1,
            "written after it was reopened"
        );
        assert!(
            !t.open.lock().files.contains_key("s1"),
            "now s1 was the oldest"
        );

        t.end("s0", false);
        assert!(!t.path("s0").exists());
        assert!(!t.open.lock().files.contains_key("s0"));
        t.end("s2", true);
        assert!(t.path("s2").exists());
        assert!(!t.open.lock().files.contains_key("s2"));

        std::fs::remove_dir_all(&dir).unwrap();
        let p = t.touch("fresh");
        assert!(p.exists(), "the folder and the file made again");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Writing is best effort: a folder that cannot be made costs no call, and is logged once.
    #[test]
    fn a_transcript_that_cannot_be_written_is_skipped() {
        let t = Transcripts::new(PathBuf::from("/dev/null/transcripts"));
        assert!(!t.warned.load(Ordering::Relaxed));
        t.tool_use("s", Path::new("/"), "toolu_1", "fx", None);
        t.touch("s");
        assert!(t.warned.load(Ordering::Relaxed), "the failure was logged");
        assert!(t.open.lock().files.is_empty(), "nothing kept open");
        t.end("s", false);
    }
}
