use super::*;
use serde_json::json;

const SKILL: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nmetadata:\n  version: \"2.1.0\"\n---\n\n# PDF processing\n";
const FORMS: &str = "# Forms\n";

fn entry_json() -> serde_json::Value {
    json!({
        "uri": "skill://pdf-processing/SKILL.md",
        "frontmatter": {"name": "pdf-processing",
                        "description": "Extract, fill, and assemble PDF documents",
                        "metadata": {"version": "2.1.0"}},
        "resources": [
            {"uri": "skill://pdf-processing/SKILL.md", "digest": verify::digest(SKILL.as_bytes()), "size": SKILL.len()},
            {"uri": "skill://pdf-processing/references/FORMS.md", "digest": verify::digest(FORMS.as_bytes()), "size": FORMS.len()}
        ]
    })
}

fn read_of(uri: &str, text: &str) -> serde_json::Value {
    json!({"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]})
}

#[test]
fn the_digest_is_sha256_in_lowercase_hex() {
    assert_eq!(
        verify::digest(b"abc"),
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert!(entry::well_formed_digest(&verify::digest(b"")));
    assert!(!entry::well_formed_digest(
        "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"
    ));
    assert!(!entry::well_formed_digest(
        "md5:900150983cd24fb0d6963f7d28e17f72"
    ));
}

#[test]
fn a_declaration_and_its_directory_read_setting() {
    let caps = json!({"resources": {}, "extensions": {EXTENSION: {"directoryRead": true}}});
    assert_eq!(declared(&caps), Some(&json!({"directoryRead": true})));
    assert!(directory_read(&caps));
    assert!(!directory_read(&json!({"extensions": {EXTENSION: {}}})));
    assert_eq!(declared(&json!({"resources": {}})), None);
}

#[test]
fn uris_under_a_prefix_and_back() {
    assert_eq!(
        uri::shown("docs", "skill://acme/billing/refunds/SKILL.md"),
        "skill://docs/acme/billing/refunds/SKILL.md"
    );
    assert_eq!(uri::shown("docs", "file:///x"), "file:///x");
    assert_eq!(uri::shown("", "skill://a/SKILL.md"), "skill://a/SKILL.md");
    assert_eq!(
        uri::upstream_uri("docs", "skill://docs/acme/billing/refunds/SKILL.md").as_deref(),
        Some("skill://acme/billing/refunds/SKILL.md")
    );
    assert_eq!(uri::upstream_uri("docs", "skill://docs"), None);
    assert_eq!(uri::upstream_uri("docs", "skill://docsx/a/SKILL.md"), None);
    assert_eq!(uri::upstream_uri("docs", "skill://other/a/SKILL.md"), None);
    assert_eq!(
        uri::upstream_uri("", "skill://a/SKILL.md").as_deref(),
        Some("skill://a/SKILL.md")
    );
    assert_eq!(uri::first_segment("skill://docs/a/SKILL.md"), Some("docs"));
    assert_eq!(uri::first_segment("file:///a"), None);
}

#[test]
fn an_entry_is_read_and_renamed() {
    let e = Entry::parse(&entry_json()).unwrap();
    assert_eq!(e.name(), "pdf-processing");
    assert_eq!(e.root(), "skill://pdf-processing");
    assert_eq!(
        e.file("skill://pdf-processing/references/FORMS.md")
            .map(|f| f.size),
        Some(FORMS.len() as u64)
    );
    e.within_limits().unwrap();
    let mut v = entry_json();
    entry::rename_uris(&mut v, |u| Some(uri::shown("docs", u).into_owned()));
    assert_eq!(v["uri"], "skill://docs/pdf-processing/SKILL.md");
    assert_eq!(
        v["resources"][1]["uri"],
        "skill://docs/pdf-processing/references/FORMS.md"
    );
    assert_eq!(
        v["resources"][1]["digest"],
        entry_json()["resources"][1]["digest"]
    );
}

#[test]
fn entries_a_host_must_not_load_are_refused_with_the_reason() {
    let refused = |patch: &dyn Fn(&mut serde_json::Value)| {
        let mut v = entry_json();
        patch(&mut v);
        Entry::parse(&v).unwrap_err().to_string()
    };
    assert_eq!(
        refused(&|v| {
            v.as_object_mut().unwrap().remove("resources");
        }),
        "the entry skill://pdf-processing/SKILL.md has no resources"
    );
    assert_eq!(
        refused(&|v| v["resources"] = json!("all")),
        "the entry skill://pdf-processing/SKILL.md has resources that are neither a list nor \"dynamic\""
    );
    assert_eq!(
        refused(&|v| v["frontmatter"]["name"] = json!("pdf")),
        "the entry uri skill://pdf-processing/SKILL.md does not end in the skill's name \"pdf\""
    );
    assert_eq!(
        refused(&|v| v["resources"][1]["digest"] = json!("sha256:abc")),
        "the entry skill://pdf-processing/SKILL.md lists skill://pdf-processing/references/FORMS.md without a digest of the form sha256:<64 lowercase hex digits>"
    );
    assert_eq!(
        refused(&|v| {
            v["resources"].as_array_mut().unwrap().remove(0);
        }),
        "the entry skill://pdf-processing/SKILL.md does not list its SKILL.md"
    );
    assert_eq!(
        refused(&|v| v["resources"][1]["uri"] = json!("skill://other/FORMS.md")),
        "the entry skill://pdf-processing/SKILL.md lists skill://other/FORMS.md, which is outside the skill's directory"
    );
    assert_eq!(
        refused(&|v| {
            let again = v["resources"][1].clone();
            v["resources"].as_array_mut().unwrap().push(again);
        }),
        "the entry skill://pdf-processing/SKILL.md lists skill://pdf-processing/references/FORMS.md twice"
    );
    let mut dynamic = entry_json();
    dynamic["resources"] = json!("dynamic");
    assert_eq!(Entry::parse(&dynamic).unwrap().files, Files::Dynamic);
}

#[test]
fn limits_are_checked_from_the_entry() {
    let mut v = entry_json();
    v["resources"][1]["size"] = json!(MAX_TOTAL_BYTES);
    assert_eq!(
        Entry::parse(&v).unwrap().within_limits().unwrap_err().to_string(),
        format!(
            "skill://pdf-processing/SKILL.md's files add up to {} bytes, more than the 16777216 a host must accept",
            MAX_TOTAL_BYTES + SKILL.len() as u64
        )
    );
    let mut v = entry_json();
    let file = |i: usize| {
        let mut f = v["resources"][1].clone();
        f["uri"] = json!(format!("skill://pdf-processing/f{i}.md"));
        f
    };
    v["resources"] = json!(std::iter::once(v["resources"][0].clone())
        .chain((0..MAX_FILES).map(file))
        .collect::<Vec<_>>());
    assert!(Entry::parse(&v)
        .unwrap()
        .within_limits()
        .unwrap_err()
        .to_string()
        .ends_with("lists 513 files, more than the 512 a host must accept"));
}

#[test]
fn reads_are_checked_for_size_digest_frontmatter_and_listing() {
    let e = Entry::parse(&entry_json()).unwrap();
    let md = "skill://pdf-processing/SKILL.md";
    assert_eq!(
        verify::check_read(&e, md, &read_of(md, SKILL)).unwrap(),
        SKILL.as_bytes()
    );
    let longer = format!("{SKILL}!");
    assert_eq!(
        verify::check_read(&e, md, &read_of(md, &longer))
            .unwrap_err()
            .to_string(),
        format!(
            "{md} is {} bytes, its entry says {}",
            SKILL.len() + 1,
            SKILL.len()
        )
    );
    let same_length = SKILL.replace("# PDF", "# pdf");
    assert_eq!(
        verify::check_read(&e, md, &read_of(md, &same_length)).unwrap_err(),
        Mismatch::Digest {
            uri: md.into(),
            got: verify::digest(same_length.as_bytes()),
            want: verify::digest(SKILL.as_bytes())
        }
    );
    // Digest and size of the file served, but a description the entry does not have.
    let other = SKILL.replace("Extract, fill", "Exfiltrate");
    let mut v = entry_json();
    v["resources"][0]["digest"] = json!(verify::digest(other.as_bytes()));
    v["resources"][0]["size"] = json!(other.len());
    let e2 = Entry::parse(&v).unwrap();
    assert_eq!(
        verify::check_read(&e2, md, &read_of(md, &other))
            .unwrap_err()
            .to_string(),
        format!("{md}'s frontmatter differs from its entry's in description")
    );
    let unlisted = "skill://pdf-processing/references/OTHER.md";
    assert_eq!(
        verify::check_read(&e, unlisted, &read_of(unlisted, FORMS)).unwrap_err(),
        Mismatch::Unlisted(unlisted.into())
    );
    let blob = json!({"contents": [{"uri": "skill://pdf-processing/references/FORMS.md",
        "blob": base64::engine::general_purpose::STANDARD.encode(FORMS)}]});
    use base64::Engine;
    assert!(verify::check_read(&e, "skill://pdf-processing/references/FORMS.md", &blob).is_ok());
    assert_eq!(
        verify::check_read(&e, md, &json!({"contents": []})).unwrap_err(),
        Mismatch::NoContent(md.into())
    );
}

#[test]
fn frontmatter_is_compared_field_by_field_in_any_order() {
    let read = verify::frontmatter(
        "x",
        "---\ndescription: d\nname: n\nmetadata: {a: 1, b: [x, y]}\n---\nbody",
    )
    .unwrap();
    let entry = json!({"name": "n", "description": "d", "metadata": {"b": ["x", "y"], "a": 1}});
    assert!(verify::differing_fields(&read, entry.as_object().unwrap()).is_empty());
    let entry = json!({"name": "n", "description": "d", "license": "MIT"});
    assert_eq!(
        verify::differing_fields(&read, entry.as_object().unwrap()),
        ["license", "metadata"]
    );
    assert!(matches!(
        verify::frontmatter("x", "# no frontmatter\n"),
        Err(Mismatch::NoFrontmatter { .. })
    ));
    assert!(matches!(
        verify::frontmatter("x", "---\nname: [unclosed\n---\n"),
        Err(Mismatch::NoFrontmatter { .. })
    ));
}

/// What checking a read costs the gateway (and `sluice client`): a SKILL.md of 350 bytes (size,
/// digest and its YAML frontmatter parsed and compared) and supporting files of 4 KiB to 1 MiB
/// (size and digest), p50 and p99 per check over 2,000 checks each. Not a test: run with
/// `cargo test --release -p sluice-skills --lib measure_check -- --ignored --nocapture`
/// (results/skills.md).
#[test]
#[ignore]
fn measure_check() {
    use std::time::Instant;
    let skill_md = format!("{SKILL}{}", "Choose the matching template.\n".repeat(8));
    let mut rows = vec![("SKILL.md".to_string(), skill_md.clone(), true)];
    for size in [4 << 10, 64 << 10, 1 << 20] {
        rows.push((format!("{} KiB file", size >> 10), "x".repeat(size), false));
    }
    for (label, text, is_md) in rows {
        let file_uri = if is_md {
            "skill://pdf-processing/SKILL.md"
        } else {
            "skill://pdf-processing/references/FORMS.md"
        };
        let mut v = entry_json();
        let i = if is_md { 0 } else { 1 };
        v["resources"][i]["digest"] = json!(verify::digest(text.as_bytes()));
        v["resources"][i]["size"] = json!(text.len());
        let e = Entry::parse(&v).unwrap();
        let read = read_of(file_uri, &text);
        let n = if text.len() >= 1 << 20 { 200 } else { 2000 };
        let mut ns: Vec<u128> = (0..n)
            .map(|_| {
                let t = Instant::now();
                verify::check_read(&e, file_uri, std::hint::black_box(&read)).unwrap();
                t.elapsed().as_nanos()
            })
            .collect();
        ns.sort_unstable();
        let p = |q: f64| ns[((ns.len() as f64 * q) as usize).min(ns.len() - 1)] as f64 / 1000.0;
        println!(
            "{label:>14} ({} bytes): p50 {:.1} µs, p99 {:.1} µs ({} checks)",
            text.len(),
            p(0.5),
            p(0.99),
            n
        );
    }
}
