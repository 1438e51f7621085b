//! The prerequisites of the gate and the demo: each checked first and
//! installed only when missing (the wasm target, wasm-bindgen-cli, clang,
//! Chromium and ChromeDriver, the rustfmt and clippy components, the npm
//! packages of the e2e suite, of the type check, of the MCP reference
//! server and of the relay's SDK test, PostgreSQL for agent-store-postgres's tests); one that cannot be
//! had fails loudly.

use std::path::{Path, PathBuf};

use crate::book::MDBOOK_VERSION;
use crate::runner::{Result, Runner, Step, loud_prereq_failure};
use crate::workspace::{is_root, locked_version};
use crate::{
    BROWSER_APT_PACKAGES, CHROMEDRIVER, CHROMIUM, CLANG_APT_PACKAGE, E2E_DIR, RUST_COMPONENTS,
    WASM_BINDGEN_VERSION, WASM_TARGET,
};

/// The type check of the browser API (`tsc --strict` over the generated
/// `.d.ts`, values generated from real runs and a typed example embedder).
pub(crate) const TYPECHECK_DIR: &str = "host-browser/typecheck";

/// The MCP reference server (`@modelcontextprotocol/server-everything`,
/// pinned in its package-lock.json) that agent-mcp's interop tests start.
pub(crate) const MCP_REFERENCE_DIR: &str = "actors/mcp/tests/reference";

/// The official provider SDKs (`openai`, `@anthropic-ai/sdk`,
/// `@google/genai`, pinned in its package-lock.json) that host-native's
/// relay test drives through `agentrt serve --relay`.
pub(crate) const RELAY_SDK_DIR: &str = "host-native/tests/sdk";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Prereq {
    WasmTarget,
    WasmBindgen,
    /// Debian's clang, which every wasm build needs (QuickJS's C).
    Clang,
    /// Debian's Chromium and ChromeDriver, for the browser tests and benches.
    Browser,
    RustComponents,
    E2eNodeModules,
    /// `typescript`, pinned in `host-browser/typecheck/package.json`.
    TypecheckNodeModules,
    /// The MCP reference server, for the native tests of agent-mcp.
    McpReferenceNodeModules,
    /// The provider SDKs, for host-native's relay test.
    RelaySdkNodeModules,
    /// mdbook [`MDBOOK_VERSION`], which builds the book in `docs/`.
    Mdbook,
    /// Debian's PostgreSQL server binaries (`initdb`, `pg_ctl`), which
    /// agent-store-postgres's tests run as throwaway clusters on loopback.
    Postgres,
    /// Node >= 22 and the pinned MCP conformance suite
    /// ([`crate::mcp_conformance`]).
    McpConformance,
}

impl Prereq {
    pub(crate) const ALL: [Prereq; 12] = [
        Prereq::WasmTarget,
        Prereq::WasmBindgen,
        Prereq::Clang,
        Prereq::Browser,
        Prereq::RustComponents,
        Prereq::E2eNodeModules,
        Prereq::TypecheckNodeModules,
        Prereq::McpReferenceNodeModules,
        Prereq::RelaySdkNodeModules,
        Prereq::Postgres,
        Prereq::Mdbook,
        Prereq::McpConformance,
    ];
}

pub(crate) fn ensure_prerequisites(runner: &mut Runner, prereqs: &[Prereq]) -> Result<()> {
    if prereqs.is_empty() {
        return Ok(());
    }
    println!(
        "==> prerequisites{}",
        if runner.no_install {
            " (--no-install)"
        } else {
            ""
        }
    );
    for prereq in prereqs {
        match prereq {
            Prereq::WasmTarget => ensure_wasm_target(runner)?,
            Prereq::WasmBindgen => ensure_wasm_bindgen(runner)?,
            Prereq::Clang => ensure_clang(runner)?,
            Prereq::Browser => ensure_browser(runner)?,
            Prereq::RustComponents => ensure_rust_components(runner)?,
            Prereq::E2eNodeModules => ensure_node_modules(runner, E2E_DIR, "e2e")?,
            Prereq::TypecheckNodeModules => {
                ensure_node_modules(runner, TYPECHECK_DIR, "typecheck")?
            }
            Prereq::McpReferenceNodeModules => {
                ensure_node_modules(runner, MCP_REFERENCE_DIR, "MCP reference server")?
            }
            Prereq::RelaySdkNodeModules => {
                ensure_node_modules(runner, RELAY_SDK_DIR, "relay SDK test")?
            }
            Prereq::Postgres => ensure_postgres(runner)?,
            Prereq::Mdbook => ensure_mdbook(runner)?,
            Prereq::McpConformance => crate::mcp_conformance::ensure(runner)?,
        }
    }
    Ok(())
}

fn ensure_wasm_target(runner: &mut Runner) -> Result<()> {
    let name = "rust target wasm32-unknown-unknown";
    let missing = |runner: &Runner| match runner.query("rustup", &["target", "list", "--installed"])
    {
        None => Some("`rustup target list --installed` failed (is rustup installed?)".to_string()),
        Some(list) if list.lines().any(|l| l.trim() == WASM_TARGET) => None,
        Some(_) => Some(format!("{WASM_TARGET} is not installed")),
    };
    match missing(runner) {
        None => {
            println!("[prereq] {name}: ok");
            Ok(())
        }
        Some(why) => {
            let steps = [Step::new(
                "install wasm32 target",
                "rustup",
                &["target", "add", WASM_TARGET],
            )];
            runner.install(name, &why, &steps, missing)
        }
    }
}

fn ensure_wasm_bindgen(runner: &mut Runner) -> Result<()> {
    let name = "wasm-bindgen-cli";
    // The CLI must equal the library version that Cargo.lock resolved.
    if let Some(locked) = locked_version(&runner.root, "wasm-bindgen")
        && locked != WASM_BINDGEN_VERSION
    {
        return Err(loud_prereq_failure(
            name,
            &format!(
                "Cargo.lock resolves wasm-bindgen {locked} but xtask installs the CLI \
                 {WASM_BINDGEN_VERSION}; they must match. Pin `wasm-bindgen = \"={WASM_BINDGEN_VERSION}\"` \
                 or update WASM_BINDGEN_VERSION in xtask/src/main.rs"
            ),
        ));
    }
    let missing = |runner: &Runner| match runner.query("wasm-bindgen", &["--version"]) {
        None => Some("`wasm-bindgen --version` failed: not installed".to_string()),
        Some(version)
            if version
                .split_whitespace()
                .any(|w| w == WASM_BINDGEN_VERSION) =>
        {
            None
        }
        Some(version) => Some(format!(
            "`wasm-bindgen --version` printed `{}`, expected {WASM_BINDGEN_VERSION}",
            version.trim()
        )),
    };
    match missing(runner) {
        None => {
            println!("[prereq] {name} {WASM_BINDGEN_VERSION}: ok");
            Ok(())
        }
        Some(why) => {
            // No `--locked`: the registry lacks one of its pinned transitive
            // versions. At opt-level 1 the install took 113 s alone on two
            // cores instead of 150 s, and the CLI wrote the same bytes for
            // the demo's bundle in the same time (4.3 s for both modules,
            // 2026-12-06): it is on the path of a cold `cargo xtask demo`.
            let steps = [Step::new(
                "install wasm-bindgen-cli",
                "cargo",
                &[
                    "install",
                    "wasm-bindgen-cli",
                    "--version",
                    WASM_BINDGEN_VERSION,
                    "--config",
                    "profile.release.opt-level=1",
                ],
            )];
            runner.install(name, &why, &steps, missing)
        }
    }
}

fn ensure_clang(runner: &mut Runner) -> Result<()> {
    let missing = |runner: &Runner| {
        runner
            .query("clang", &["--version"])
            .is_none()
            .then(|| "`clang --version` failed: not found".to_string())
    };
    ensure_apt_packages(runner, "clang (apt)", &[CLANG_APT_PACKAGE], missing)
}

fn ensure_browser(runner: &mut Runner) -> Result<()> {
    let missing = |_: &Runner| {
        let absent: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
            .into_iter()
            .filter(|path| !Path::new(path).is_file())
            .collect();
        (!absent.is_empty()).then(|| format!("not found: {}", absent.join(", ")))
    };
    ensure_apt_packages(
        runner,
        "chromium, chromedriver (apt)",
        BROWSER_APT_PACKAGES,
        missing,
    )
}

/// Installs Debian's `packages` with apt-get when `missing` says why they
/// are needed; `missing` is asked again afterwards, so a failed install
/// fails loudly.
fn ensure_apt_packages(
    runner: &mut Runner,
    name: &str,
    packages: &[&str],
    missing: impl Fn(&Runner) -> Option<String>,
) -> Result<()> {
    match missing(runner) {
        None => {
            println!("[prereq] {name}: ok");
            Ok(())
        }
        Some(why) => {
            if !is_root() && runner.query("sudo", &["-n", "true"]).is_none() && !runner.dry_run {
                println!("[prereq] note: not root; sudo may ask for a password");
            }
            let install = [&["install", "-y"][..], packages].concat();
            let steps = [
                Step::new("apt-get update", "apt-get", &["update"]).with_sudo(),
                Step::new(
                    format!("apt-get install {}", packages.join(" ")),
                    "apt-get",
                    &install,
                )
                .env("DEBIAN_FRONTEND", "noninteractive")
                .with_sudo(),
            ];
            runner.install(name, &why, &steps, missing)
        }
    }
}

/// Where Debian installs each PostgreSQL version's server binaries.
const POSTGRES_INSTALLS: &str = "/usr/lib/postgresql";

/// The `<version>/bin` folder under `installs` that holds `initdb` and
/// `pg_ctl`, if any (what agent-store-postgres's test clusters look for).
fn postgres_bin(installs: &Path) -> Option<std::path::PathBuf> {
    std::fs::read_dir(installs)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin"))
        .find(|bin| bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
}

fn ensure_postgres(runner: &mut Runner) -> Result<()> {
    let missing = |_: &Runner| {
        postgres_bin(Path::new(POSTGRES_INSTALLS))
            .is_none()
            .then(|| format!("no {POSTGRES_INSTALLS}/*/bin/initdb and pg_ctl"))
    };
    // The tests start their own clusters; the package's own `main` cluster,
    // if the install starts one, is left alone.
    ensure_apt_packages(runner, "postgresql (apt)", &["postgresql"], missing)
}

fn ensure_mdbook(runner: &mut Runner) -> Result<()> {
    let name = "mdbook";
    // `mdbook --version` prints `mdbook v0.5.4`.
    let missing = |runner: &Runner| match runner.query("mdbook", &["--version"]) {
        None => Some("`mdbook --version` failed: not installed".to_string()),
        Some(version)
            if version
                .split_whitespace()
                .any(|w| w.trim_start_matches('v') == MDBOOK_VERSION) =>
        {
            None
        }
        Some(version) => Some(format!(
            "`mdbook --version` printed `{}`, expected {MDBOOK_VERSION}",
            version.trim()
        )),
    };
    match missing(runner) {
        None => {
            println!("[prereq] {name} {MDBOOK_VERSION}: ok");
            Ok(())
        }
        Some(why) => {
            // `--locked` installs the dependency versions mdbook was
            // released with; only the `search` feature is needed (not
            // `serve` nor `watch`), which halves the build.
            let steps = [Step::new(
                "install mdbook",
                "cargo",
                &[
                    "install",
                    "mdbook",
                    "--version",
                    MDBOOK_VERSION,
                    "--locked",
                    "--no-default-features",
                    "--features",
                    "search",
                ],
            )];
            runner.install(name, &why, &steps, missing)
        }
    }
}

fn ensure_rust_components(runner: &mut Runner) -> Result<()> {
    let name = "rustup components rustfmt, clippy";
    let missing =
        |runner: &Runner| match runner.query("rustup", &["component", "list", "--installed"]) {
            None => Some(
                "`rustup component list --installed` failed (is rustup installed?)".to_string(),
            ),
            Some(list) => {
                let absent: Vec<&str> = RUST_COMPONENTS
                    .iter()
                    .copied()
                    .filter(|c| {
                        !list
                            .lines()
                            .any(|l| l.trim() == *c || l.starts_with(&format!("{c}-")))
                    })
                    .collect();
                (!absent.is_empty()).then(|| format!("not installed: {}", absent.join(", ")))
            }
        };
    match missing(runner) {
        None => {
            println!("[prereq] {name}: ok");
            Ok(())
        }
        Some(why) => {
            let args = [&["component", "add"][..], RUST_COMPONENTS].concat();
            let steps = [Step::new("install rustfmt, clippy", "rustup", &args)];
            runner.install(name, &why, &steps, missing)
        }
    }
}

/// The npm packages of `dir` (`npm ci` when it has a lock file), installed
/// when its `node_modules` is missing; `what` names it in messages.
fn ensure_node_modules(runner: &mut Runner, dir: &'static str, what: &str) -> Result<()> {
    let path = runner.root.join(dir);
    if !path.join("package.json").is_file() {
        println!(
            "[prereq] {what} npm packages: {dir}/package.json does not exist yet, nothing to install"
        );
        return Ok(());
    }
    if runner.query("npm", &["--version"]).is_none() {
        return Err(loud_prereq_failure(
            "npm (Node.js)",
            &format!("`npm --version` failed; {dir} needs Node.js and npm"),
        ));
    }
    let name = format!("{what} npm packages");
    let missing = move |runner: &Runner| node_modules_out_of_date(&runner.root.join(dir), dir);
    match missing(runner) {
        None => {
            println!("[prereq] {name}: ok");
            Ok(())
        }
        Some(why) => {
            let args: &[&str] = if path.join("package-lock.json").is_file() {
                &["ci"]
            } else {
                &["install"]
            };
            let steps = [Step::new(format!("npm install ({what})"), "npm", args).in_dir(dir)];
            runner.install(&name, &why, &steps, missing)
        }
    }
}

/// Why the packages of `path` (shown as `dir`) must be installed again, if
/// they must: no `node_modules`, or one older than the lock file (a merge or
/// a checkout that changed `package-lock.json` leaves the old packages
/// behind, and a test would then fail on a missing one). npm writes
/// `node_modules/.package-lock.json` on every install.
fn node_modules_out_of_date(path: &Path, dir: &str) -> Option<String> {
    let modules = path.join("node_modules");
    if !modules.is_dir() {
        return Some(format!("{dir}/node_modules does not exist"));
    }
    let modified = |file: PathBuf| std::fs::metadata(file).and_then(|m| m.modified()).ok();
    let lock = modified(path.join("package-lock.json"))?;
    match modified(modules.join(".package-lock.json")) {
        None => Some(format!(
            "{dir}/node_modules was not installed by npm (no .package-lock.json)"
        )),
        Some(installed) if installed < lock => Some(format!(
            "{dir}/package-lock.json changed after the last install"
        )),
        Some(_) => None,
    }
}

/// The free disk a whole cold `cargo xtask test` needs where the repository
/// is: measured at about 15 GiB (the native, wasm and fuzz builds, the
/// release `agentrt`, the browser profiles), with a margin.
pub(crate) const DISK_NEEDED_FOR_ALL_GROUPS_GIB: u64 = 18;

/// Fails loudly when the file system of the repository has less than
/// `needed_gib` free: a full disk otherwise shows up half an hour later as a
/// linker's bus error.
pub(crate) fn ensure_free_disk(runner: &Runner, needed_gib: u64) -> Result<()> {
    if runner.dry_run {
        return Ok(());
    }
    let root = runner.root.display().to_string();
    let Some(df) = runner.query("df", &["-Pk", &root]) else {
        return Err(loud_prereq_failure(
            "free disk",
            "`df -Pk` could not tell the free space",
        ));
    };
    let available_kib = df
        .lines()
        .nth(1)
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|field| field.parse::<u64>().ok());
    let Some(available_kib) = available_kib else {
        return Err(loud_prereq_failure(
            "free disk",
            &format!("unreadable `df -Pk` output: {df}"),
        ));
    };
    let available_gib = available_kib / (1024 * 1024);
    println!("==> free disk at {root}: {available_gib} GiB (needs {needed_gib})");
    if available_gib < needed_gib {
        return Err(loud_prereq_failure(
            "free disk",
            &format!(
                "{available_gib} GiB free at {root}, a whole run needs about {needed_gib} GiB"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_is_found_only_with_both_initdb_and_pg_ctl() {
        let root = std::env::temp_dir().join(format!("xtask-pg-{}", std::process::id()));
        let bin = root.join("15").join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        assert_eq!(postgres_bin(&root), None, "empty bin");
        std::fs::write(bin.join("initdb"), b"").expect("touch");
        assert_eq!(postgres_bin(&root), None, "no pg_ctl");
        std::fs::write(bin.join("pg_ctl"), b"").expect("touch");
        assert_eq!(postgres_bin(&root), Some(bin));
        assert_eq!(postgres_bin(&root.join("absent")), None);
        std::fs::remove_dir_all(&root).expect("clean up");
    }

    #[test]
    fn node_modules_are_installed_again_when_missing_or_older_than_the_lock_file() {
        use std::time::{Duration, SystemTime};
        let root = std::env::temp_dir().join(format!("xtask-npm-{}", std::process::id()));
        let modules = root.join("node_modules");
        std::fs::create_dir_all(&root).expect("mkdir");
        let set_time = |file: &Path, at: SystemTime| {
            std::fs::File::options()
                .write(true)
                .open(file)
                .and_then(|f| f.set_modified(at))
                .expect("set mtime");
        };
        let now = SystemTime::now();
        std::fs::write(root.join("package-lock.json"), b"{}").expect("lock");
        set_time(&root.join("package-lock.json"), now);
        assert!(
            node_modules_out_of_date(&root, "d")
                .unwrap()
                .contains("does not exist")
        );
        std::fs::create_dir_all(&modules).expect("mkdir");
        assert!(
            node_modules_out_of_date(&root, "d")
                .unwrap()
                .contains("not installed by npm")
        );
        let installed = modules.join(".package-lock.json");
        std::fs::write(&installed, b"{}").expect("hidden lock");
        set_time(&installed, now + Duration::from_secs(5));
        assert_eq!(
            node_modules_out_of_date(&root, "d"),
            None,
            "installed after the lock"
        );
        set_time(
            &root.join("package-lock.json"),
            now + Duration::from_secs(10),
        );
        assert!(
            node_modules_out_of_date(&root, "d")
                .unwrap()
                .contains("changed after")
        );
        std::fs::remove_dir_all(&root).expect("clean up");
    }

    #[test]
    fn the_native_tests_and_install_need_postgres() {
        assert!(Prereq::ALL.contains(&Prereq::Postgres));
        assert!(
            crate::test_plan::Group::Native
                .prerequisites()
                .contains(&Prereq::Postgres)
        );
    }

    /// A fresh machine has no clang, and QuickJS's C in every wasm build
    /// needs it: a demo on such a machine failed at the bundle once.
    #[test]
    fn every_command_that_builds_wasm_installs_clang() {
        use crate::test_plan::Group;
        let wasm_builders: [(&str, &[Prereq]); 6] = [
            ("demo", crate::demo::DEMO_PREREQUISITES),
            ("pack", crate::pack::PACK_PREREQUISITES),
            ("bench", crate::bench::BENCH_PREREQUISITES),
            ("lint", Group::Lint.prerequisites()),
            ("wasm", Group::Wasm.prerequisites()),
            ("e2e", Group::E2e.prerequisites()),
        ];
        for (command, prereqs) in wasm_builders {
            assert!(prereqs.contains(&Prereq::Clang), "{command} lacks clang");
        }
        assert!(Prereq::ALL.contains(&Prereq::Clang));
        for group in [Group::Wasm, Group::E2e] {
            assert!(group.prerequisites().contains(&Prereq::Browser));
        }
    }
}
