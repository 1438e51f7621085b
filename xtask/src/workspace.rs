//! The repository and its workspace as xtask sees them: the root, the
//! members (from `cargo metadata`), the versions `Cargo.lock` resolves, and
//! whether we run as root or with a `RUSTFLAGS` that would override the
//! repository's own.

use std::collections::BTreeSet;
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::runner::Runner;

/// The repository root: the parent of this crate's directory.
pub(crate) fn repo_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

pub(crate) fn warn_about_rustflags() {
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS"] {
        if env::var_os(var).is_some() {
            eprintln!(
                "[warning] {var} is set: it replaces the rustflags of .cargo/config.toml \
                 (--cfg=web_sys_unstable_apis, getrandom_backend) and wasm32 builds will likely fail"
            );
        }
    }
}

/// The names of the workspace members, from `cargo metadata --no-deps`.
/// Empty if cargo metadata fails (then every crate of the list is tried).
pub(crate) fn workspace_members(runner: &Runner) -> BTreeSet<String> {
    let Some(json) = runner.query("cargo", &["metadata", "--no-deps", "--format-version", "1"])
    else {
        println!("[note] `cargo metadata` failed; trying every crate of WASM_TEST_CRATES");
        return BTreeSet::new();
    };
    let Some(start) = json.find("\"workspace_members\":[") else {
        return BTreeSet::new();
    };
    let list = &json[start + "\"workspace_members\":[".len()..];
    let list = &list[..list.find(']').unwrap_or(list.len())];
    list.split(',')
        .map(|id| id.trim().trim_matches('"'))
        .filter(|id| !id.is_empty())
        .map(package_name_from_id)
        .collect()
}

/// The package name of a cargo package id: `path+file:///a/b#name@0.1.0`,
/// `path+file:///a/name#0.1.0`, or the old `name 0.1.0 (path+file:///...)`.
fn package_name_from_id(id: &str) -> String {
    if let Some((name, _)) = id.split_once(' ') {
        return name.to_string();
    }
    match id.rsplit_once('#') {
        Some((_, fragment)) if fragment.contains('@') => {
            fragment.split('@').next().unwrap_or(fragment).to_string()
        }
        Some((url, _)) => url.rsplit('/').next().unwrap_or(url).to_string(),
        None => id.to_string(),
    }
}

/// The version `Cargo.lock` resolves for `package` (the first one listed).
pub(crate) fn locked_version(root: &Path, package: &str) -> Option<String> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).ok()?;
    let needle = format!("name = \"{package}\"\nversion = \"");
    let start = lock.find(&needle)? + needle.len();
    let rest = &lock[start..];
    Some(rest[..rest.find('"')?].to_string())
}
