//! `agent-model-check`: explore the lease and journal model within a bound
//! and print the state count, the time taken and every violation with its
//! trace (`cargo xtask check-model` runs it).
//!
//! Flags: `--deep` (three owners, the deep bound), `--depth N` (stop paths
//! at N steps), `--owners N`, `--calls N`, `--time N`, `--crashes N`,
//! `--sabotage NAME` (one faulty rule; expect a counterexample), `--sabotage all`.

use std::process::ExitCode;

use agent_model_check::{Bound, Report, Sabotage, check};

fn parse(args: &[String]) -> Result<(Bound, Vec<Option<Sabotage>>), String> {
    let mut bound = Bound::CI;
    let mut sabotages = vec![None];
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            iter.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match arg.as_str() {
            "--deep" => bound = Bound::DEEP,
            "--depth" => bound.max_depth = Some(value("--depth")? as usize),
            "--owners" => bound.owners = value("--owners")? as u8,
            "--calls" => bound.calls = value("--calls")? as u8,
            "--time" => bound.max_time = value("--time")?,
            "--crashes" => bound.max_crashes = value("--crashes")? as u8,
            "--sabotage" => {
                let name = iter.next().ok_or("--sabotage needs a name")?;
                sabotages = if name == "all" {
                    Sabotage::ALL.into_iter().map(Some).collect()
                } else {
                    vec![Some(Sabotage::parse(name).ok_or_else(|| {
                        let names: Vec<&str> = Sabotage::ALL.iter().map(|s| s.name()).collect();
                        format!("unknown sabotage `{name}`: one of {}", names.join(", "))
                    })?)]
                };
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok((bound, sabotages))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (bound, sabotages) = match parse(&args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("check-model: {e}");
            return ExitCode::from(2);
        }
    };
    let mut ok = true;
    for sabotage in sabotages {
        let report = match check(bound, sabotage) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("check-model: {e}");
                return ExitCode::from(2);
            }
        };
        let label = sabotage.map_or("honest model".to_owned(), |s| {
            format!("sabotage {}", s.name())
        });
        println!(
            "check-model ({label}): {}: {} states, depth {}, {:.1?}, {} violation(s)",
            report.bound,
            report.unique_states,
            report.max_depth,
            report.elapsed,
            report.violations.len()
        );
        for ce in &report.violations {
            println!("{}", Report::trace_text(ce));
        }
        for name in &report.unwitnessed {
            println!("never witnessed: \"{name}\"");
        }
        ok &= match sabotage {
            None => report.violations.is_empty() && report.unwitnessed.is_empty(),
            Some(s) => report.violations.iter().any(|v| v.property == s.breaks()),
        };
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
