//! The layering check (`cargo xtask layering`, the "dependency direction"
//! step of `cargo xtask test`): DESIGN.md's dependency direction, hosts →
//! actors → kernel → capabilities, as a check that fails the gate.
//!
//! The rules, over normal dependencies (dev-dependencies may cross layers for
//! tests) of every target and every feature:
//!
//! 1. Actor crates do not depend on each other. A crate whose manifest is
//!    under `actors/` is an *actor crate*, except:
//!    - [`KERNEL_CRATE`], the layer below the actors (the protocol they
//!      speak); it may depend on no crate under `actors/` at all;
//!    - *leaf libraries*: crates under `actors/` that depend on no crate of
//!      the workspace (today `agent-readable` and `agent-http`). Any crate may
//!      use them.
//!
//!    Only [`ASSEMBLY_CRATE`], the one place that wires actors together,
//!    may depend on actor crates; hosts are not under `actors/` and may too.
//! 2. [`CORE_CRATES`] (capabilities and kernel) depend, even indirectly, on
//!    none of [`CORE_FORBIDDEN`]: time, spawning and storage come from the
//!    host through traits.
//! 3. [`TEST_SUPPORT_CRATE`], the tokio test host, is a dev-dependency only:
//!    no crate depends on it normally, so it never reaches a build people run.
//! 4. Storage backends are crates under [`STORES_DIR`] (`stores/sqlite`,
//!    `stores/indexeddb`, `stores/postgres`): each depends, among workspace
//!    crates, on [`KERNEL_CRATE`] only (it implements
//!    `agent_kernel::host::Storage`), and only crates outside `actors/` and
//!    `stores/` (the hosts) depend on them: the kernel and the actors see the
//!    `Storage` trait, never a backend, and no backend sees another.
//!
//! Crates are discovered from `cargo tree --workspace`, never listed here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};

/// The layer below the actors: the protocol every actor speaks.
pub const KERNEL_CRATE: &str = "agent-kernel";
/// The one crate allowed to depend on actor crates (it wires them together).
pub const ASSEMBLY_CRATE: &str = "agent-assembly";
/// The test host: crates may use it in their tests only.
pub const TEST_SUPPORT_CRATE: &str = "agent-test-support";
/// The folder whose crates are actor crates.
pub const ACTORS_DIR: &str = "actors";
/// The folder whose crates are storage backends.
pub const STORES_DIR: &str = "stores";
/// The crates that must stay free of any host runtime.
pub const CORE_CRATES: [&str; 2] = ["agent-capabilities", KERNEL_CRATE];
/// Host runtimes the core crates must not depend on, even indirectly.
pub const CORE_FORBIDDEN: [&str; 3] = ["tokio", "rusqlite", "web-sys"];

/// One workspace crate and the workspace crates it depends on directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// Its folder relative to the repository root, `/`-separated.
    pub dir: String,
    /// Direct normal dependencies (any crate; non-members are ignored).
    pub deps: BTreeSet<String>,
}

impl Member {
    fn under_actors(&self) -> bool {
        self.dir.split('/').next() == Some(ACTORS_DIR)
    }

    fn under_stores(&self) -> bool {
        self.dir.split('/').next() == Some(STORES_DIR)
    }
}

/// What kind of crate a member is, for rule 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Not under `actors/` or `stores/` (capabilities, hosts, xtask).
    Outside,
    /// A storage backend, under `stores/`.
    Store,
    Kernel,
    LeafLibrary,
    Assembly,
    Actor,
}

fn kinds(members: &[Member]) -> BTreeMap<&str, Kind> {
    let names: BTreeSet<&str> = members.iter().map(|m| m.name.as_str()).collect();
    members
        .iter()
        .map(|m| {
            let kind = if m.under_stores() {
                Kind::Store
            } else if !m.under_actors() {
                Kind::Outside
            } else if m.name == KERNEL_CRATE {
                Kind::Kernel
            } else if m.name == ASSEMBLY_CRATE {
                Kind::Assembly
            } else if m.deps.iter().all(|d| !names.contains(d.as_str())) {
                Kind::LeafLibrary
            } else {
                Kind::Actor
            };
            (m.name.as_str(), kind)
        })
        .collect()
}

/// Every breach of rules 1, 3 and 4, one line each; empty when the
/// layering holds.
pub fn actor_violations(members: &[Member]) -> Vec<String> {
    let kinds = kinds(members);
    let mut violations = Vec::new();
    for member in members {
        let from = kinds[member.name.as_str()];
        for dep in &member.deps {
            if dep == TEST_SUPPORT_CRATE {
                violations.push(format!(
                    "{} ({}) depends on {TEST_SUPPORT_CRATE} outside its tests: the test host \
                     is a dev-dependency only",
                    member.name, member.dir
                ));
                continue;
            }
            let Some(&to) = kinds.get(dep.as_str()) else {
                continue;
            };
            let dep_dir = members
                .iter()
                .find(|m| &m.name == dep)
                .map_or("?", |m| m.dir.as_str());
            let why = match (from, to) {
                (Kind::Actor, Kind::Actor | Kind::Assembly) => {
                    "actor crates do not depend on each other: they exchange agent_kernel::protocol \
                     messages, and only agent-assembly wires them together"
                }
                (Kind::Kernel, Kind::Actor | Kind::Assembly | Kind::LeafLibrary) => {
                    "agent-kernel is the layer below the actors and depends on no crate under actors/"
                }
                (Kind::Store, _) if dep != KERNEL_CRATE => {
                    "a storage backend depends on agent-kernel only, among workspace crates: it \
                     implements agent_kernel::host::Storage and nothing else"
                }
                (Kind::Kernel | Kind::Actor | Kind::Assembly | Kind::LeafLibrary, Kind::Store) => {
                    "only hosts choose a storage backend: the kernel and the actors see \
                     agent_kernel::host::Storage, never a backend"
                }
                _ => continue,
            };
            violations.push(format!(
                "{} ({}) depends on {} ({}): {why}",
                member.name, member.dir, dep, dep_dir
            ));
        }
    }
    violations
}

/// Every breach of rule 2, given the package names in the normal
/// dependency tree of [`CORE_CRATES`].
pub fn core_violations(core_tree: &BTreeSet<String>) -> Vec<String> {
    CORE_FORBIDDEN
        .iter()
        .filter(|f| core_tree.contains(**f))
        .map(|f| {
            format!(
                "agent-capabilities or agent-kernel depends on {f}: the core takes time, \
                 spawning and storage from the host through traits (DESIGN.md)"
            )
        })
        .collect()
}

/// The members and their direct dependencies from the output of
/// `cargo tree --workspace --depth 1 --prefix depth --no-dedupe`: a line
/// `0name vX (/path)` starts a member, the `1name vX ...` lines under it are
/// its dependencies.
pub fn parse_members(tree: &str, root: &Path) -> Result<Vec<Member>, String> {
    let mut members: Vec<Member> = Vec::new();
    for line in tree.lines().filter(|l| !l.trim().is_empty()) {
        let depth_len = line.bytes().take_while(u8::is_ascii_digit).count();
        let (depth, rest) = line.split_at(depth_len);
        let name = rest
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        match depth {
            "0" => {
                let path = rest
                    .split('(')
                    .nth(1)
                    .and_then(|p| p.split(')').next())
                    .ok_or_else(|| format!("no path in `cargo tree` line {line:?}"))?;
                let dir = Path::new(path)
                    .strip_prefix(root)
                    .map_err(|_| format!("{name} at {path} is outside {}", root.display()))?;
                let dir: Vec<String> = dir
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                members.push(Member {
                    name,
                    dir: dir.join("/"),
                    deps: BTreeSet::new(),
                });
            }
            "1" => {
                let member = members
                    .last_mut()
                    .ok_or_else(|| format!("dependency before any crate: {line:?}"))?;
                member.deps.insert(name);
            }
            _ => return Err(format!("unexpected `cargo tree` line {line:?}")),
        }
    }
    if members.is_empty() {
        return Err("`cargo tree --workspace` listed no crate".to_owned());
    }
    Ok(members)
}

fn cargo_tree(root: &Path, args: &[&str]) -> Result<String, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(&cargo)
        .arg("tree")
        .args(["-e", "normal", "--target", "all", "--all-features"])
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not start `{cargo} tree`: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`cargo tree {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Run both rules on the workspace at `root`; `Err` lists every breach.
pub fn check(root: &Path) -> Result<(), String> {
    let tree = cargo_tree(
        root,
        &[
            "--workspace",
            "--depth",
            "1",
            "--prefix",
            "depth",
            "--no-dedupe",
        ],
    )?;
    let members = parse_members(&tree, root)?;
    let mut core_args = vec!["--prefix", "none"];
    for c in CORE_CRATES {
        core_args.extend(["-p", c]);
    }
    let core_tree: BTreeSet<String> = cargo_tree(root, &core_args)?
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    let mut violations = actor_violations(&members);
    violations.extend(core_violations(&core_tree));
    if violations.is_empty() {
        let kinds = kinds(&members);
        let list = |kind: Kind| -> String {
            let names: Vec<&str> = kinds
                .iter()
                .filter(|(_, k)| **k == kind)
                .map(|(n, _)| *n)
                .collect();
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        println!(
            "layering holds: actor crates ({}) depend on no other actor crate; leaf libraries: {}; \
             storage backends ({}) depend on agent-kernel only and only hosts depend on them; \
             no tokio, rusqlite or web-sys under agent-capabilities and agent-kernel",
            list(Kind::Actor),
            list(Kind::LeafLibrary),
            list(Kind::Store)
        );
        Ok(())
    } else {
        Err(violations.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, dir: &str, deps: &[&str]) -> Member {
        Member {
            name: name.to_owned(),
            dir: dir.to_owned(),
            deps: deps.iter().map(|d| (*d).to_owned()).collect(),
        }
    }

    /// Today's workspace, as `cargo tree` reports it.
    fn workspace() -> Vec<Member> {
        vec![
            member("agent-capabilities", "capabilities", &["serde", "sha2"]),
            member(
                "agent-kernel",
                "actors/kernel",
                &["agent-capabilities", "futures"],
            ),
            member("agent-readable", "actors/readable", &["dom_smoothie"]),
            member(
                "agent-tools",
                "actors/tools",
                &["agent-capabilities", "agent-kernel", "agent-readable"],
            ),
            member(
                "agent-workspace",
                "actors/workspace",
                &["agent-capabilities", "agent-kernel"],
            ),
            member(
                "agent-fetch",
                "actors/fetch",
                &["agent-kernel", "agent-readable", "reqwest"],
            ),
            member(
                "agent-host-native",
                "host-native",
                &[
                    "agent-kernel",
                    "agent-tools",
                    "agent-workspace",
                    "agent-store-sqlite",
                    "agent-store-postgres",
                    "tokio",
                ],
            ),
            member(
                "agent-store-sqlite",
                "stores/sqlite",
                &["agent-kernel", "rusqlite"],
            ),
            member(
                "agent-store-postgres",
                "stores/postgres",
                &["agent-kernel", "tokio-postgres"],
            ),
        ]
    }

    fn position(members: &[Member], name: &str) -> usize {
        members
            .iter()
            .position(|m| m.name == name)
            .unwrap_or_else(|| panic!("{name} is in the fixture"))
    }

    #[test]
    fn todays_layering_holds() {
        assert_eq!(actor_violations(&workspace()), Vec::<String>::new());
    }

    #[test]
    fn an_actor_to_actor_edge_fails() {
        let mut members = workspace();
        members[3].deps.insert("agent-workspace".to_owned());
        let violations = actor_violations(&members);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0].starts_with(
                "agent-tools (actors/tools) depends on agent-workspace (actors/workspace)"
            ),
            "{violations:?}"
        );
    }

    #[test]
    fn the_test_host_is_refused_as_a_normal_dependency() {
        let mut members = workspace();
        members.push(member(
            TEST_SUPPORT_CRATE,
            "test-support",
            &["agent-kernel"],
        ));
        assert_eq!(actor_violations(&members), Vec::<String>::new());
        members[0].deps.insert(TEST_SUPPORT_CRATE.to_owned());
        let violations = actor_violations(&members);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0].contains("depends on agent-test-support outside its tests"),
            "{violations:?}"
        );
    }

    #[test]
    fn an_actor_crate_found_by_folder_not_by_name_is_checked() {
        // A new crate under actors/ is an actor crate without being listed.
        let mut members = workspace();
        members.push(member(
            "agent-research",
            "actors/research",
            &["agent-kernel", "agent-fetch"],
        ));
        let violations = actor_violations(&members);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0].starts_with("agent-research (actors/research) depends on agent-fetch")
        );
    }

    #[test]
    fn the_assembly_hosts_and_leaf_libraries_are_allowed() {
        let mut members = workspace();
        members.push(member(
            ASSEMBLY_CRATE,
            "actors/assembly",
            &[
                "agent-kernel",
                "agent-tools",
                "agent-workspace",
                "agent-fetch",
            ],
        ));
        members.push(member(
            "agent-host-browser",
            "host-browser",
            &[ASSEMBLY_CRATE],
        ));
        assert_eq!(actor_violations(&members), Vec::<String>::new());
        // But an actor crate may not depend on the assembly.
        members[4].deps.insert(ASSEMBLY_CRATE.to_owned());
        assert_eq!(actor_violations(&members).len(), 1);
    }

    #[test]
    fn a_library_that_gains_a_workspace_dependency_is_no_longer_a_leaf() {
        let mut members = workspace();
        members[2].deps.insert("agent-kernel".to_owned());
        // agent-readable is now an actor crate: tools and fetch both breach.
        assert_eq!(actor_violations(&members).len(), 2);
    }

    #[test]
    fn the_kernel_depends_on_no_crate_under_actors() {
        let mut members = workspace();
        members[1].deps.insert("agent-readable".to_owned());
        let violations = actor_violations(&members);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(
            violations[0].starts_with("agent-kernel (actors/kernel) depends on agent-readable")
        );
    }

    #[test]
    fn a_store_depends_on_the_kernel_only() {
        for dep in [
            "agent-capabilities",
            "agent-readable",
            "agent-tools",
            "agent-host-native",
            "agent-store-postgres",
        ] {
            let mut members = workspace();
            let sqlite = position(&members, "agent-store-sqlite");
            members[sqlite].deps.insert(dep.to_owned());
            let violations = actor_violations(&members);
            assert_eq!(violations.len(), 1, "{dep}: {violations:?}");
            assert!(
                violations[0].starts_with(&format!(
                    "agent-store-sqlite (stores/sqlite) depends on {dep}"
                )) && violations[0].contains("depends on agent-kernel only"),
                "{violations:?}"
            );
        }
    }

    #[test]
    fn only_hosts_depend_on_a_store() {
        // The host's edges to both stores are in the fixture and hold.
        assert_eq!(actor_violations(&workspace()), Vec::<String>::new());
        for from in ["agent-kernel", "agent-tools", "agent-readable"] {
            let mut members = workspace();
            let at = position(&members, from);
            members[at].deps.insert("agent-store-sqlite".to_owned());
            let violations = actor_violations(&members);
            assert!(
                violations
                    .iter()
                    .any(|v| v.starts_with(&format!("{from} ("))
                        && v.contains("depends on agent-store-sqlite (stores/sqlite)")
                        && v.contains("only hosts choose a storage backend")),
                "{from}: {violations:?}"
            );
        }
        let mut members = workspace();
        members.push(member(ASSEMBLY_CRATE, "actors/assembly", &["agent-kernel"]));
        let assembly = position(&members, ASSEMBLY_CRATE);
        members[assembly]
            .deps
            .insert("agent-store-postgres".to_owned());
        assert_eq!(actor_violations(&members).len(), 1);
    }

    #[test]
    fn core_crates_must_not_reach_a_host_runtime() {
        let clean: BTreeSet<String> = ["serde", "futures", "tokio-util-free"]
            .map(str::to_owned)
            .into();
        assert!(core_violations(&clean).is_empty());
        for forbidden in CORE_FORBIDDEN {
            let mut tree = clean.clone();
            tree.insert(forbidden.to_owned());
            let violations = core_violations(&tree);
            assert_eq!(violations.len(), 1);
            assert!(violations[0].contains(forbidden));
        }
    }

    #[test]
    fn cargo_tree_output_is_parsed_into_members() {
        let root = Path::new("/repo");
        let tree = "\
0agent-capabilities v0.1.0 (/repo/capabilities)
1serde v1.0.229

0agent-tools v0.1.0 (/repo/actors/tools)
1agent-capabilities v0.1.0 (/repo/capabilities)
1agent-workspace v0.1.0 (/repo/actors/workspace)
1async-trait v0.1.92 (proc-macro)

0agent-workspace v0.1.0 (/repo/actors/workspace)
1agent-kernel v0.1.0 (/repo/actors/kernel)
";
        let members = parse_members(tree, root).unwrap();
        assert_eq!(
            members[1],
            member(
                "agent-tools",
                "actors/tools",
                &["agent-capabilities", "agent-workspace", "async-trait"]
            )
        );
        assert_eq!(members[2].dir, "actors/workspace");
        assert!(parse_members("", root).is_err());
        assert!(parse_members("1serde v1\n", root).is_err());
        assert!(parse_members("0x v1 (/elsewhere/x)\n", root).is_err());
        assert!(parse_members("2deep v1\n", root).is_err());
    }
}
