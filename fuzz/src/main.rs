//! The AFL++ harness: runs the target named in `AGENT_FUZZ_TARGET` in AFL's
//! persistent mode. Built only with the `afl` feature, by `cargo afl build`
//! (see `cargo xtask fuzz`).

fn main() {
    let name = std::env::var(agent_fuzz::TARGET_ENV).unwrap_or_default();
    let Some(target) = agent_fuzz::target(&name) else {
        let names: Vec<&str> = agent_fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!(
            "set {}= to one of: {}",
            agent_fuzz::TARGET_ENV,
            names.join(", ")
        );
        std::process::exit(2);
    };
    // `fuzz_nohook`: a panic that the code under test catches on purpose (the
    // PDF reader runs `lopdf` under `catch_unwind`) is its answer, not a
    // crash; a panic that escapes the check still aborts, which AFL records.
    afl::fuzz_nohook!(|data: &[u8]| {
        (target.check)(data);
    });
}
