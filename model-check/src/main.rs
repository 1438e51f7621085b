//! `agent-model-check`: explore the lease and journal model within a bound
//! and print the state count, the time taken and every violation with its
//! trace (`cargo xtask check-model` runs it).
//!
//! Flags: `--deep` (the deep bound: more time, one more crash), `--depth N` (stop paths
//! at N steps), `--owners N`, `--calls N`, `--time N`, `--crashes N`,
//! `--sabotage NAME` (one faulty rule; expect a counterexample), `--sabotage all`.

use std::process::ExitCode;

use agent_model_check::{Bound, Report, Sabotage, check};

/// The number after `flag`, in the flag's type (out of range is an error).
fn number<T: std::str::FromStr>(flag: &str, value: Option<&String>) -> Result<T, String> {
    value
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{flag} needs a number in range"))
}

fn parse(args: &[String]) -> Result<(Bound, Vec<Option<Sabotage>>), String> {
    let mut bound = Bound::CI;
    let mut sabotages = vec![None];
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--deep" => bound = Bound::DEEP,
            "--depth" => bound.max_depth = Some(number(arg, iter.next())?),
            "--owners" => bound.owners = number(arg, iter.next())?,
            "--calls" => bound.calls = number(arg, iter.next())?,
            "--time" => bound.max_time = number(arg, iter.next())?,
            "--crashes" => bound.max_crashes = number(arg, iter.next())?,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_set_the_bound_and_bad_values_are_errors() {
        let (bound, sabotages) = parse(&args(&[])).expect("default");
        assert_eq!((bound, sabotages), (Bound::CI, vec![None]));
        let (bound, _) = parse(&args(&["--deep", "--depth", "12"])).expect("deep");
        assert_eq!(bound.max_depth, Some(12));
        assert_eq!(bound.max_time, Bound::DEEP.max_time);
        let (bound, _) = parse(&args(&["--owners", "255"])).expect("fits u8");
        assert_eq!(bound.owners, 255);
        assert!(parse(&args(&["--owners", "256"])).is_err(), "above u8");
        assert!(parse(&args(&["--owners"])).is_err(), "missing value");
        assert!(parse(&args(&["--time", "-1"])).is_err());
        assert!(parse(&args(&["--frobnicate"])).is_err());
        assert!(parse(&args(&["--sabotage", "bogus"])).is_err());
        let (_, all) = parse(&args(&["--sabotage", "all"])).expect("all");
        assert_eq!(all.len(), Sabotage::ALL.len());
        let (_, one) = parse(&args(&["--sabotage", "no_fence"])).expect("one");
        assert_eq!(one, vec![Some(Sabotage::NoFence)]);
    }
}
