//! `cargo xtask pack`: the npm package of the browser runtime for
//! embedders: build the wasm bundle (as the demo does), then assemble and
//! `npm pack` it (`host-browser/npm/pack.mjs`) into `target/npm/`.

use crate::E2E_DIR;
use crate::prerequisites::{Prereq, ensure_prerequisites};
use crate::runner::{Result, Runner, Step};
use crate::workspace::warn_about_rustflags;

/// What the package needs installed: what the bundle's build needs.
pub(crate) const PACK_PREREQUISITES: &[Prereq] =
    &[Prereq::WasmTarget, Prereq::WasmBindgen, Prereq::Clang];

pub(crate) fn pack(runner: &mut Runner) -> Result<()> {
    warn_about_rustflags();
    ensure_prerequisites(runner, PACK_PREREQUISITES)?;
    for step in pack_steps() {
        runner.run_step(&step)?;
    }
    Ok(())
}

/// Build the bundle into `host-browser/pkg`, then pack it.
fn pack_steps() -> Vec<Step> {
    vec![
        Step::new("pack: build the wasm bundle", "node", &["build.mjs"]).in_dir(E2E_DIR),
        Step::new(
            "pack: the npm tarball in target/npm",
            "node",
            &["host-browser/npm/pack.mjs"],
        ),
    ]
}

#[cfg(test)]
mod pack_tests {
    use super::*;

    #[test]
    fn the_bundle_is_built_before_it_is_packed() {
        let steps = pack_steps();
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].args, ["build.mjs"]);
        assert_eq!(steps[1].args, ["host-browser/npm/pack.mjs"]);
    }
}
