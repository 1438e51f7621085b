//! Replays every committed seed (`corpus/TARGET/`) and every crash the
//! fuzzers found (`regressions/TARGET/`) through the target's check, under
//! plain `cargo test`: the properties hold on them without AFL.

use std::path::{Path, PathBuf};

use agent_fuzz::TARGETS;

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

fn replay(kind: &str, min_files: usize) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(kind);
    for target in TARGETS {
        let inputs = files(&root.join(target.name));
        assert!(
            inputs.len() >= min_files,
            "{kind}/{} has {} files, expected at least {min_files}",
            target.name,
            inputs.len()
        );
        for input in inputs {
            let data = std::fs::read(&input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            let outcome = std::panic::catch_unwind(|| (target.check)(&data));
            assert!(outcome.is_ok(), "{} failed on {input:?}", target.name);
        }
    }
}

#[test]
fn every_target_holds_on_its_seed_corpus() {
    replay("corpus", 3);
}

#[test]
fn every_crash_found_stays_fixed() {
    replay("regressions", 0);
}

#[test]
fn target_names_are_unique_and_match_their_folders() {
    let mut names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), TARGETS.len());
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for name in names {
        assert!(corpus.join(name).is_dir(), "corpus/{name} is missing");
    }
}

/// Inputs that break a property whose fix is still open
/// (`findings/TARGET/`, see docs/src/development/fuzzing.md): they must
/// still fail, so that the day they pass they move to `regressions/`.
#[test]
fn open_findings_still_fail_until_fixed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("findings");
    for target in TARGETS {
        for input in files(&root.join(target.name)) {
            let data = std::fs::read(&input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            let outcome = std::panic::catch_unwind(|| (target.check)(&data));
            assert!(
                outcome.is_err(),
                "{input:?} now holds for {}: move it to regressions/",
                target.name
            );
        }
    }
}
