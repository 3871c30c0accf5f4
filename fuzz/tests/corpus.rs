//! Every seed in `fuzz/corpus/<target>/` and every kept crash in `fuzz/regressions/<target>/`,
//! run through its target as a normal test: a crash the fuzzer found stays fixed.

use std::path::Path;

/// Run every file under `<kind>/<target>/` through its target; the number run.
fn run_dir(kind: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(kind);
    let mut ran = 0;
    for (name, target) in sluice_fuzz::TARGETS {
        let Ok(entries) = std::fs::read_dir(root.join(name)) else {
            continue;
        };
        let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files.iter().filter(|f| f.is_file()) {
            let data = std::fs::read(f).unwrap();
            let caught = std::panic::catch_unwind(|| target(&data));
            assert!(caught.is_ok(), "{name}: {} panics", f.display());
            ran += 1;
        }
    }
    ran
}

/// One test (the `config` target's scratch tree is one per process).
#[test]
fn seeds_and_kept_crashes_run_clean() {
    let seeds = run_dir("corpus");
    let crashes = run_dir("regressions");
    sluice_fuzz::remove_scratch();
    assert!(
        seeds >= 5 * sluice_fuzz::TARGETS.len(),
        "only {seeds} seeds"
    );
    eprintln!("{seeds} seeds and {crashes} kept crashes ran clean");
}
