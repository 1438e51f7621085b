//! `cargo xtask demo`: what it needs installed and its steps (build the
//! wasm bundle for the demo, serve it with `agentrt serve`).
//!
//! Both builds favour time to the first page over speed at run time (issue
//! 18 item 7): the bundle and `agentrt` in the workspace's dev profile, the
//! builds `cargo xtask test` makes (`build.mjs --demo`), so a demo after the
//! tests builds little more. The demo's work (a scripted model, a few tool
//! calls) does not feel the difference; the bundle is several times larger.
//! `agentrt` compiles while wasm-bindgen-cli installs, when it must.

use crate::E2E_DIR;
use crate::prerequisites::{Prereq, ensure_prerequisites};
use crate::runner::{Result, Runner, Step};
use crate::workspace::warn_about_rustflags;

/// What the demo needs before anything compiles: the bundle builds for
/// wasm32, and QuickJS's C compiles there with clang. `wasm-bindgen-cli`
/// is installed while `agentrt` builds.
pub(crate) const DEMO_PREREQUISITES: &[Prereq] = &[Prereq::WasmTarget, Prereq::Clang];

pub(crate) fn demo(runner: &mut Runner, args: &[String]) -> Result<()> {
    warn_about_rustflags();
    ensure_prerequisites(runner, DEMO_PREREQUISITES)?;
    // On a fresh machine `cargo install wasm-bindgen-cli` takes two to five
    // minutes (113 s alone, 309 s beside `agentrt` on two cores): `agentrt`
    // compiles meanwhile (the install has a target
    // directory of its own, so neither waits for the other's lock).
    let agentrt = runner.start_step(&build_agentrt())?;
    let bindgen = ensure_prerequisites(runner, &[Prereq::WasmBindgen]);
    let built = runner.finish_step(agentrt);
    bindgen?;
    built?;
    for step in demo_steps(args) {
        runner.run_step(&step)?;
    }
    Ok(())
}

/// The build of what [`demo_steps`] runs (`agentrt`, dev profile): the same
/// package, binary and profile, so that `cargo run` finds it fresh.
fn build_agentrt() -> Step {
    Step::cargo(
        "demo: build agentrt",
        &["build", "-p", "agent-host-native", "--bin", "agentrt"],
    )
}

/// The steps of `cargo xtask demo`, in order: build the bundle (the script
/// runs cargo and wasm-bindgen and prints the raw and gzipped wasm size),
/// then serve it with `agentrt serve` (dev profile), which serves the page,
/// the bundle and the fetch gateway on one origin and prints the page URL
/// with the gateway token. `args` go to `agentrt serve`; a lone number is
/// the port.
fn demo_steps(args: &[String]) -> Vec<Step> {
    let build = Step::new(
        "demo: build the wasm bundle (quick build)",
        "node",
        &["build.mjs", "--demo"],
    )
    .in_dir(E2E_DIR);
    let mut serve = Step::cargo(
        "demo: agentrt serve on 127.0.0.1",
        &[
            "run",
            "-p",
            "agent-host-native",
            "--bin",
            "agentrt",
            "--",
            "serve",
            "--www",
            "host-browser/www",
            "--pkg",
            "host-browser/pkg",
        ],
    );
    match args {
        [port] if port.parse::<u16>().is_ok() => serve = serve.arg("--port").arg(port.clone()),
        _ => {
            for arg in args {
                serve = serve.arg(arg.clone());
            }
        }
    }
    vec![build, serve]
}

#[cfg(test)]
mod demo_tests {
    use super::*;

    #[test]
    fn the_agentrt_built_beside_the_install_is_the_one_served() {
        let build = build_agentrt().args;
        let serve = &demo_steps(&[])[1].args;
        let (served, _) = serve.split_at(serve.iter().position(|a| a == "--").unwrap());
        assert_eq!(build[0], "build");
        assert_eq!(served[0], "run");
        assert_eq!(build[1..], served[1..], "same package, binary and profile");
    }

    #[test]
    fn demo_builds_the_bundle_then_runs_agentrt_serve() {
        let steps = demo_steps(&[]);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].program, "node");
        assert_eq!(steps[0].args, ["build.mjs", "--demo"]);
        assert_eq!(steps[1].program, "cargo");
        let serve = steps[1].args.join(" ");
        assert_eq!(
            serve,
            "run -p agent-host-native --bin agentrt -- serve \
             --www host-browser/www --pkg host-browser/pkg"
        );
        assert!(
            steps
                .iter()
                .all(|s| !s.args.iter().any(|a| a.contains("serve.mjs")))
        );
    }

    #[test]
    fn demo_forwards_the_port_and_other_serve_arguments() {
        let port = demo_steps(&["9000".to_string()]);
        assert!(
            port[1]
                .args
                .ends_with(&["--port".to_string(), "9000".to_string()])
        );
        let given: Vec<String> = ["--port", "0"].iter().map(|s| s.to_string()).collect();
        assert!(demo_steps(&given)[1].args.ends_with(&given));
    }
}
