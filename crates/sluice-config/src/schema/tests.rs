//! The schemas against the loader: every table row driven through both, the loader's `KNOWN`
//! lists against the rows, and every example file of the repo (the docs' JSON blocks included).

use super::*;
use crate::Config;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A valid cluster key (32 bytes, base64).
const CLUSTER_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";

/// A fresh, empty home folder.
fn home(label: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("sluice-schema-{label}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Load `doc` as `kind`'s file in `home` (every `${env:…}` is set; `KEY`, `…CLUSTER_KEY` and `…VAULT_KEY` to a key).
fn load(home: &Path, kind: FileKind, doc: &Value) -> Result<Config, Vec<String>> {
    let _ = std::fs::remove_dir_all(home);
    let file = home.join(kind.file());
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, doc.to_string()).unwrap();
    let env = |n: &str| {
        let key = n == "KEY" || n.ends_with("CLUSTER_KEY") || n.ends_with("VAULT_KEY");
        Some(if key { CLUSTER_KEY } else { "x" }.to_string())
    };
    Config::load(home, &env)
        .map(|(c, _)| c)
        .map_err(|e| e.0.iter().map(ToString::to_string).collect())
}

fn validator(kind: FileKind) -> jsonschema::Validator {
    jsonschema::validator_for(&kind.schema()).expect("the schema compiles")
}

fn schema_errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// A document of `kind` that both accept, and the object at `at` in it described by `obj`.
struct Case {
    kind: FileKind,
    base: Value,
    at: &'static str,
    obj: &'static Obj,
}

fn cases() -> Vec<Case> {
    let sha = "a".repeat(64);
    let c = |kind, base: Value, at, obj| Case {
        kind,
        base,
        at,
        obj,
    };
    vec![
        c(FileKind::Settings, json!({}), "", &SETTINGS),
        c(
            FileKind::Settings,
            json!({"telemetry": {}}),
            "/telemetry",
            &TELEMETRY,
        ),
        c(
            FileKind::Settings,
            json!({"cluster": {"key": "${env:KEY}", "redis": "redis://127.0.0.1:6379/0"}}),
            "/cluster",
            &CLUSTER,
        ),
        c(
            FileKind::Settings,
            json!({"vault": {"key": "${env:KEY}"}}),
            "/vault",
            &VAULT,
        ),
        c(
            FileKind::Settings,
            json!({"overload": {}}),
            "/overload",
            &OVERLOAD,
        ),
        c(FileKind::Expose, json!({}), "", &EXPOSE),
        c(
            FileKind::Expose,
            json!({"upstreams": [{"id": "u", "command": "x"}]}),
            "/upstreams/0",
            &UPSTREAM,
        ),
        c(
            FileKind::Expose,
            json!({"upstreams": [{"id": "u", "transport": "http", "url": "http://h/mcp"}]}),
            "/upstreams/0",
            &UPSTREAM,
        ),
        c(
            FileKind::Expose,
            json!({"upstreams": [{"id": "u", "command": "x", "sandbox": {}}]}),
            "/upstreams/0/sandbox",
            &SANDBOX,
        ),
        c(
            FileKind::Expose,
            json!({"upstreams": [{"id": "u", "command": "x", "sandbox": {"fs": {}}}]}),
            "/upstreams/0/sandbox/fs",
            &SANDBOX_FS,
        ),
        c(
            FileKind::Expose,
            json!({"upstreams": [{"id": "u", "command": "x", "sandbox": {"network": {"connect": ["*:443"]}}}]}),
            "/upstreams/0/sandbox/network",
            &SANDBOX_NETWORK,
        ),
        c(
            FileKind::Expose,
            json!({"upstreams": [{"id": "u", "command": "x"}], "expose": [{"upstream": "u", "tool": "t"}]}),
            "/expose/0",
            &EXPOSE_ENTRY,
        ),
        c(FileKind::Hooks, json!({}), "", &HOOKS),
        c(
            FileKind::Hooks,
            json!({"hooks": [{"id": "h", "event": "Request", "command": "true"}]}),
            "/hooks/0",
            &HOOK,
        ),
        c(
            FileKind::Hooks,
            json!({"hooks": [{"id": "h", "event": "Request", "type": "http", "url": "http://h/"}]}),
            "/hooks/0",
            &HOOK,
        ),
        c(
            FileKind::Hooks,
            json!({"hooks": [{"id": "h", "event": "PreToolUse", "type": "mcp_tool", "server": "s", "tool": "t"}]}),
            "/hooks/0",
            &HOOK,
        ),
        c(
            FileKind::Hooks,
            json!({"hooks": [{"id": "h", "type": "builtin", "builtin": "pii", "options": {"kinds": ["EMAIL"]}}]}),
            "/hooks/0",
            &HOOK,
        ),
        c(FileKind::Tools, json!({}), "", &TOOLS),
        c(
            FileKind::Tools,
            json!({"tools": [{"id": "t", "name": "T", "invoke": {"type": "shell", "command": "true"}}]}),
            "/tools/0",
            &TOOL,
        ),
        c(
            FileKind::Tools,
            json!({"tools": [{"id": "t", "name": "T", "invoke": {"type": "script", "path": "x.sh"}}]}),
            "/tools/0/invoke",
            &INVOKE,
        ),
        c(
            FileKind::Tools,
            json!({"tools": [{"id": "t", "name": "T", "invoke": {"type": "shell", "command": "true"}}]}),
            "/tools/0/invoke",
            &INVOKE,
        ),
        c(FileKind::Auth, json!({}), "", &AUTH),
        c(
            FileKind::Auth,
            json!({"tokens": [{"name": "a", "sha256": sha}]}),
            "/tokens/0",
            &TOKEN,
        ),
        c(
            FileKind::Auth,
            json!({"rules": [{"effect": "allow", "tools": ["x"]}]}),
            "/rules/0",
            &RULE,
        ),
        c(
            FileKind::Endpoints,
            json!({"version": 1, "endpoints": [{"name": "a", "tools": ["x"]}]}),
            "",
            &ENDPOINTS,
        ),
        c(
            FileKind::Endpoints,
            json!({"version": 1, "endpoints": [{"name": "a", "tools": ["x"]}]}),
            "/endpoints/0",
            &ENDPOINT,
        ),
    ]
}

/// Values a field of this type must refuse.
fn wrong(ty: Ty) -> Vec<Value> {
    match ty {
        Ty::Str | Ty::Pattern(_) | Ty::MinLen(_) => vec![json!(5)],
        Ty::NonEmpty => vec![json!(5), json!(" ")],
        Ty::Enum(_) => vec![json!(5), json!("no-such-value")],
        Ty::Bool => vec![json!("yes")],
        Ty::UInt => vec![json!("x"), json!(-1)],
        Ty::Positive => vec![json!("x"), json!(0)],
        Ty::Number => vec![json!("x")],
        Ty::Strings => vec![json!("x"), json!([5])],
        Ty::EnumStrings(_) => vec![json!("x"), json!(["no-such-value"])],
        Ty::StringOrStrings => vec![json!(5), json!([5])],
        Ty::StringMap => vec![json!("x"), json!({"k": []})],
        Ty::KeyedStringMap(_) => vec![json!("x"), json!({"bad name": "v"})],
        Ty::Claims => vec![json!("x"), json!({"k": {}})],
        Ty::Object(_) | Ty::Options => vec![json!("x")],
        Ty::EnumOrObject(..) => vec![json!(5), json!("no-such-value")],
        Ty::Array(_) => vec![json!("x"), json!([5])],
    }
}

fn with(case: &Case, edit: impl FnOnce(&mut Map<String, Value>)) -> Value {
    let mut doc = case.base.clone();
    edit(doc.pointer_mut(case.at).unwrap().as_object_mut().unwrap());
    doc
}

#[test]
fn the_bases_are_valid_for_both() {
    let dir = home("bases");
    for case in cases() {
        assert_eq!(
            schema_errors(&validator(case.kind), &case.base),
            Vec::<String>::new(),
            "{}",
            case.base
        );
        load(&dir, case.kind, &case.base).unwrap_or_else(|e| panic!("{}: {e:?}", case.base));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// For every row and every wrong value: the schema refuses it wherever the object appears, and
/// the loader refuses it in at least one case (a field may be read only for one transport or
/// kind), unless the row says the loader ignores it; then the loader accepts it everywhere.
#[test]
fn every_row_refuses_what_the_loader_refuses() {
    let dir = home("rows");
    let cases = cases();
    let mut checked = 0;
    for case in &cases {
        for field in case.obj.fields {
            for bad in wrong(field.ty) {
                let mut refused_by_loader = 0;
                let mut seen = 0;
                for other in cases.iter().filter(|c| std::ptr::eq(c.obj, case.obj)) {
                    seen += 1;
                    let doc = with(other, |m| {
                        m.insert(field.name.into(), bad.clone());
                    });
                    assert!(
                        !validator(other.kind).is_valid(&doc),
                        "the schema accepts {doc}"
                    );
                    if load(&dir, other.kind, &doc).is_err() {
                        refused_by_loader += 1;
                    }
                }
                if field.lenient {
                    assert_eq!(
                        refused_by_loader, 0,
                        "{}: the loader refuses {bad}; the row should not be lenient",
                        field.name
                    );
                } else {
                    assert!(
                        refused_by_loader > 0,
                        "{}: no case where the loader refuses {bad} ({seen} tried)",
                        field.name
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} checks");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Taking out a key of a valid document: schema and loader agree (a required field, or one a
/// condition requires, is refused by both).
#[test]
fn missing_fields_are_judged_alike() {
    let dir = home("missing");
    for case in cases() {
        let keys: Vec<String> = case
            .base
            .pointer(case.at)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        for key in keys {
            let doc = with(&case, |m| {
                m.remove(&key);
            });
            let by_schema = validator(case.kind).is_valid(&doc);
            let by_loader = load(&dir, case.kind, &doc);
            assert_eq!(
                by_schema,
                by_loader.is_ok(),
                "{doc}: schema {by_schema}, loader {by_loader:?}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writing every row's default out loads the same configuration as leaving it out.
#[test]
fn the_defaults_are_the_loaders() {
    let dir = home("defaults");
    for case in cases() {
        let plain = load(&dir, case.kind, &case.base).unwrap();
        let doc = with(&case, |m| {
            for field in case.obj.fields {
                if let (Some(d), false) = (field.default, m.contains_key(field.name)) {
                    m.insert(field.name.into(), serde_json::from_str(d).unwrap());
                }
            }
        });
        assert!(validator(case.kind).is_valid(&doc), "{doc}");
        assert_eq!(load(&dir, case.kind, &doc).unwrap(), plain, "{doc}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Unknown keys: errors where the loader lists its keys, allowed where it ignores them.
#[test]
fn unknown_keys_are_judged_alike() {
    let dir = home("unknown");
    for case in cases() {
        let doc = with(&case, |m| {
            m.insert("no_such_key".into(), json!(1));
        });
        let by_schema = validator(case.kind).is_valid(&doc);
        assert_eq!(
            by_schema,
            case.obj.known.is_none(),
            "{doc}: {:?}",
            schema_errors(&validator(case.kind), &doc)
        );
        assert_eq!(load(&dir, case.kind, &doc).is_ok(), by_schema, "{doc}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every key of a loader's `KNOWN` list has a row, and every row names a known key. A new
/// setting added to the loader fails here until its row is written in `schema.rs`.
#[test]
fn every_known_key_has_a_row() {
    for obj in [
        &SETTINGS,
        &TELEMETRY,
        &CLUSTER,
        &VAULT,
        &UPSTREAM_OAUTH,
        &AUTH,
        &TOKEN,
        &RULE,
        &SANDBOX,
        &SANDBOX_FS,
        &SANDBOX_NETWORK,
        &ENDPOINTS,
        &ENDPOINT,
    ] {
        let known = obj.known.unwrap();
        let missing: Vec<&str> = obj
            .rows()
            .into_iter()
            .filter(|(_, row)| row.is_none())
            .map(|(name, _)| name)
            .collect();
        assert!(
            missing.is_empty(),
            "{missing:?} are in the loader's KNOWN list but have no row in schema.rs ({})",
            obj.doc
        );
        for field in obj.fields {
            assert!(known.contains(&field.name), "{} is not known", field.name);
        }
    }
}

#[test]
fn enums_are_the_loaders() {
    for e in EVENTS {
        assert!(crate::HookEventKind::parse(e).is_some(), "{e}");
    }
    for name in BUILTINS {
        let mut generator = SchemaSettings::draft2020_12().into_generator();
        assert!(BuiltinOptions::json_schema(name, &mut generator).is_some());
    }
}

#[test]
fn kinds_parse_by_name_and_file() {
    for k in FileKind::ALL {
        assert_eq!(FileKind::parse(k.name()), Some(k));
        assert_eq!(FileKind::parse(k.file()), Some(k));
        assert_eq!(FileKind::parse(&format!("/srv/tree/{}", k.file())), Some(k));
        let schema = k.schema();
        assert!(jsonschema::meta::is_valid(&schema), "{}", k.name());
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert!(schema["$id"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{}.json", k.name())));
    }
    assert_eq!(FileKind::parse("sluice.json"), Some(FileKind::Settings));
    assert_eq!(
        FileKind::parse("hooks.manifest.json"),
        Some(FileKind::Hooks)
    );
    assert_eq!(FileKind::parse("logs"), None);
}

/// The builtins' options: the derived schemas refuse what `BuiltinOptions::parse` refuses.
#[test]
fn builtin_options_are_judged_alike() {
    let dir = home("builtins");
    let v = validator(FileKind::Hooks);
    let hook = |name: &str, options: Value| json!({"hooks": [{"id": "h", "type": "builtin", "builtin": name, "options": options}]});
    let good = [
        ("explain", Value::Null),
        ("validate", json!({})),
        (
            "deny",
            json!({"tools": ["a"], "arguments": [{"path": "p", "pattern": "x"}]}),
        ),
        (
            "rewrite",
            json!({"rules": [{"tool": "t", "set": {"a": 1}, "remove": ["b"]}]}),
        ),
        (
            "describe",
            json!({"tools": {"t": {"title": "T", "properties": {"a": {}}, "hide": ["b"]}}}),
        ),
        (
            "mask",
            json!({"paths": ["/a"], "keys": ["k"], "replacement": "*"}),
        ),
        ("pii", json!({"kinds": ["EMAIL"], "allow_tools": ["t"]})),
        (
            "size-cap",
            json!({"max_bytes": 10, "mode": "refuse", "per_tool": {"t*": 5}}),
        ),
        (
            "rate-limit",
            json!({"global": {"rate": 1, "per": "second", "burst": 2}, "per_tool": {"t": {"rate": 2, "per": "hour"}}}),
        ),
        (
            "tool-scan",
            json!({"lists": true, "results": ["tools/call"], "actions": {"invisible": "strip", "instruction": "hide", "shadowing": "flag", "exfiltration": "refuse"}, "patterns": ["x"], "exfiltration_patterns": ["y"], "allow_hosts": ["example.com"], "allow": ["t"]}),
        ),
    ];
    for (name, options) in good {
        let doc = hook(name, options);
        assert_eq!(schema_errors(&v, &doc), Vec::<String>::new(), "{doc}");
        load(&dir, FileKind::Hooks, &doc).unwrap_or_else(|e| panic!("{doc}: {e:?}"));
    }
    let bad = [
        ("explain", json!({"x": 1})),
        ("mask", json!({"keys": ["k", 7]})),
        ("mask", json!({"colour": 1})),
        ("size-cap", json!({"mode": "snip"})),
        ("size-cap", json!({"per_tool": {"a": "x"}})),
        (
            "rate-limit",
            json!({"global": {"rate": "fast", "per": "second"}}),
        ),
        ("rate-limit", json!({"global": {"rate": 1, "per": "day"}})),
        ("describe", json!({"tools": {"t": {"properties": []}}})),
        (
            "deny",
            json!({"arguments": [{"pattern": "x", "where": "y"}]}),
        ),
        ("pii", json!("all")),
        ("tool-scan", json!({"actions": {"invisible": "drop"}})),
        ("tool-scan", json!({"results": "tools/call"})),
    ];
    for (name, options) in bad {
        let doc = hook(name, options);
        assert!(!v.is_valid(&doc), "the schema accepts {doc}");
        assert!(
            load(&dir, FileKind::Hooks, &doc).is_err(),
            "the loader accepts {doc}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The repository's root (two folders above this crate).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The JSON blocks of a Markdown page under a `##` heading naming a file, with that kind.
fn doc_examples(page: &Path) -> Vec<(FileKind, String)> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut out = Vec::new();
    let mut kind = None;
    let mut block: Option<String> = None;
    for line in text.lines() {
        if let Some(b) = &mut block {
            if line.trim_start().starts_with("```") {
                if let Some(k) = kind {
                    out.push((k, block.take().unwrap()));
                }
                block = None;
            } else {
                b.push_str(line);
                b.push('\n');
            }
        } else if line.trim_start().starts_with("```json") {
            block = Some(String::new());
        } else if let Some(h) = line.strip_prefix("## ") {
            // The first file the heading names (`tools.register.json and tools.state.json`).
            kind = h
                .split('`')
                .skip(1)
                .step_by(2)
                .next()
                .and_then(|name| FileKind::ALL.into_iter().find(|k| k.file() == name));
        }
    }
    out
}

/// Example files in the repository (outside `target`, `node_modules`, `.git`).
fn repo_files(dir: &Path, out: &mut Vec<(FileKind, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !["target", "node_modules", ".git", ".venv"].contains(&name.as_str())
                && !name.starts_with("target")
            {
                repo_files(&path, out);
            }
        } else if let Some(k) = FileKind::ALL
            .into_iter()
            .find(|k| k.file().rsplit('/').next() == Some(name.as_str()))
        {
            out.push((k, path));
        }
    }
}

/// Every example of the repo is valid for its schema and for the loader.
#[test]
fn every_example_in_the_repo_is_valid() {
    let dir = home("examples");
    let mut examples: Vec<(FileKind, String, String)> = Vec::new();
    let docs = repo().join("docs");
    for page in std::fs::read_dir(&docs).unwrap().flatten() {
        if page.path().extension().is_some_and(|e| e == "md") {
            for (k, text) in doc_examples(&page.path()) {
                examples.push((k, page.path().display().to_string(), text));
            }
        }
    }
    let from_docs: Vec<FileKind> = examples.iter().map(|(k, _, _)| *k).collect();
    for k in FileKind::ALL {
        assert!(
            from_docs.contains(&k),
            "no example of {} in docs/",
            k.file()
        );
    }
    let mut files = Vec::new();
    repo_files(&repo(), &mut files);
    for (k, path) in files {
        examples.push((
            k,
            path.display().to_string(),
            std::fs::read_to_string(&path).unwrap(),
        ));
    }
    for (kind, source, text) in examples {
        let doc: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{source}: a {} example is not JSON: {e}", kind.file()));
        assert_eq!(
            schema_errors(&validator(kind), &doc),
            Vec::<String>::new(),
            "{source}: {text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if let Err(e) = load(&dir, kind, &doc) {
            panic!("{source}: the loader refuses {text}: {e:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file with an unknown key or a wrong type: both refuse it.
#[test]
fn a_bad_file_fails_schema_and_loader() {
    let dir = home("bad");
    let bad = [
        (
            FileKind::Settings,
            json!({"listen": "127.0.0.1:1", "request_timeout": 5}),
        ),
        (FileKind::Settings, json!({"page_size": "many"})),
        (FileKind::Auth, json!({"isuer": "https://a"})),
        (
            FileKind::Expose,
            json!({"upstreams": [{"id": "u", "command": "x", "enabled": "yes"}]}),
        ),
        (
            FileKind::Hooks,
            json!({"hooks": [{"id": "h", "event": "PreToolUse", "command": "x", "on_error": "ignore"}]}),
        ),
        (
            FileKind::Tools,
            json!({"tools": [{"id": "t", "name": "T", "invoke": {"type": "exe"}}]}),
        ),
    ];
    for (kind, doc) in bad {
        assert!(!validator(kind).is_valid(&doc), "the schema accepts {doc}");
        assert!(load(&dir, kind, &doc).is_err(), "the loader accepts {doc}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
