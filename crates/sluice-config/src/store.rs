//! Atomic writes: a temp file in the same folder, fsync, rename over the target, fsync the
//! folder. A crash leaves the old file or the new one, never half of one.

use serde_json::Value;
use std::io::Write;
use std::path::Path;

/// Write `value` as pretty JSON (with a trailing newline) to `path`, atomically.
pub fn write_json(path: &Path, value: &Value) -> std::io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    text.push('\n');
    write_bytes(path, text.as_bytes())
}

/// Write bytes to `path`, atomically (creating its folder).
pub fn write_bytes(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_and_replaces() {
        let dir = std::env::temp_dir().join(format!("sluice-store-{}", std::process::id()));
        let p = dir.join("a/b.json");
        super::write_json(&p, &serde_json::json!({"x": 1})).unwrap();
        super::write_json(&p, &serde_json::json!({"x": 2})).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\n  \"x\": 2\n}\n");
        let leftovers: Vec<_> = std::fs::read_dir(p.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp files left");
        let _ = std::fs::remove_dir_all(dir);
    }
}
