//! Writes the browser API's TypeScript declarations generated from the Rust
//! types (`agent_assembly::typescript`), or with `--check` fails when the
//! file differs from what the Rust types give (`cargo xtask test`'s type
//! check runs it so, before it builds the wasm bundle that includes the
//! file).
//!
//! Run: `cargo run -p agent-assembly --features ts --example ts_types --
//! [--check] host-browser/src/api/generated.d.ts`

use std::process::ExitCode;

use agent_assembly::typescript;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (check, out) = match args.as_slice() {
        [flag, out] if flag == "--check" => (true, out),
        [out] if !out.starts_with("--") => (false, out),
        _ => {
            eprintln!("usage: ts_types [--check] OUT.d.ts");
            return ExitCode::from(2);
        }
    };
    if check {
        let committed = std::fs::read_to_string(out).unwrap_or_default();
        return match typescript::check(out, &committed) {
            Ok(()) => {
                println!("ts_types: {out} matches the Rust types");
                ExitCode::SUCCESS
            }
            Err(drift) => {
                eprintln!("ts_types: {drift}");
                ExitCode::FAILURE
            }
        };
    }
    if let Err(e) = std::fs::write(out, typescript::declarations()) {
        eprintln!("ts_types: cannot write {out}: {e}");
        return ExitCode::FAILURE;
    }
    println!("ts_types: wrote {out}");
    ExitCode::SUCCESS
}
