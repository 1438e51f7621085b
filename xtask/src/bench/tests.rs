//! The bench table's own tests: figure lines parse, aims are met or not
//! against numbers and floors of the same run, the plan builds first.

use super::aims::FLATNESS;
use super::json::Json;
use super::table::{Figure, Meta, Table, number};
use super::*;

fn figure(line: &str) -> Figure {
    Figure::parse(line).expect("a figure")
}

#[test]
fn figure_lines_parse_with_their_details() {
    let f = figure(
        r#"{"bench":"runtime","name":"round_memory_100","label":"memory host, 100 rounds","value":41.5,"unit":"us","rounds":99,"first_tenth":40,"last_tenth":43.25,"note":"a \"quoted\" µ \u00b5 \ud83d\ude00"}"#,
    );
    assert_eq!(f.name, "round_memory_100");
    assert_eq!(f.label, "memory host, 100 rounds");
    assert_eq!(f.value, Some(41.5));
    assert_eq!(f.unit, "us");
    assert_eq!(f.detail("last_tenth"), Some(43.25));
    assert_eq!(
        f.details.iter().find(|(k, _)| k == "note").map(|(_, v)| v),
        Some(&Json::Str("a \"quoted\" µ µ 😀".to_string()))
    );
    let arrays = figure(
        r#"{"name":"demo_ready","value":210.5,"unit":"ms","loads":[200,210.5,-1e3],"x":{"a":null,"b":true}}"#,
    );
    assert_eq!(arrays.label, "demo_ready", "the name when no label");
    assert!(Figure::parse(r#"{"name":"x","unit":"ms"}"#).is_err());
    assert!(Figure::parse(r#"{"name":"x","value":1,"unit":"ms""#).is_err());
    assert!(Figure::parse("[1]").is_err());
    assert_eq!(
        figure(r#"{"name":"x","value":null,"unit":"ms"}"#).value,
        None
    );
}

#[test]
fn the_postgres_round_is_shown_beside_its_bare_commit() {
    let figures: Vec<Figure> = [
        r#"{"name":"floor_postgres_commit","value":200,"unit":"us"}"#,
        r#"{"name":"round_postgres_effectful","value":2500,"unit":"us"}"#,
        r#"{"name":"commits_per_round_postgres","value":2.08,"unit":"commits"}"#,
    ]
    .iter()
    .map(|l| figure(l))
    .collect();
    let table = Table::build(&figures);
    let round = table
        .lines
        .iter()
        .find(|l| l.name == "round_postgres_effectful")
        .expect("a line for the PostgreSQL round");
    assert_eq!(round.floor_ratio, Some(12.5));
    assert_eq!(round.met, None, "no aim yet");
    assert!(
        round.figure.contains("= 12.50 × bare PostgreSQL commit"),
        "{}",
        round.figure
    );
}

#[test]
fn aims_are_met_or_not_against_numbers_and_floors_of_the_same_run() {
    let figures: Vec<Figure> = [
        r#"{"name":"floor_sqlite_commit","value":200,"unit":"us"}"#,
        r#"{"name":"floor_fsync_4k","value":100,"unit":"us"}"#,
        r#"{"name":"round_sqlite_effectful","value":450,"unit":"us"}"#,
        r#"{"name":"round_memory_100","value":12,"unit":"us"}"#,
        r#"{"name":"round_memory_1000","value":9,"unit":"us","first_tenth":9,"last_tenth":9.5}"#,
        r#"{"name":"resume_1000_rounds","value":2.5,"unit":"ms"}"#,
        r#"{"name":"resume_10000_records","value":2.9,"unit":"ms"}"#,
        r#"{"name":"readable_throughput","value":20,"unit":"MB/s"}"#,
        r#"{"name":"something_new","label":"a new figure","value":3,"unit":"ms"}"#,
    ]
    .iter()
    .map(|l| figure(l))
    .collect();
    let table = Table::build(&figures);
    let line = |name: &str| {
        table
            .lines
            .iter()
            .find(|l| l.name == name)
            .unwrap_or_else(|| panic!("no line {name}"))
    };
    assert_eq!(line("round_sqlite_effectful").met, Some(true));
    assert_eq!(line("round_sqlite_effectful").floor_ratio, Some(2.25));
    assert!(
        line("round_sqlite_effectful")
            .figure
            .contains("= 2.25 × bare WAL commit")
    );
    assert!(
        line("round_sqlite_effectful")
            .figure
            .contains("= 4.50 × 4 KiB fsync")
    );
    assert_eq!(line("round_memory_100").met, Some(false));
    assert_eq!(line("round_memory_1000").met, Some(true));
    assert!(
        line("round_memory_1000")
            .figure
            .contains("first tenth 9.00 → last tenth 9.50")
    );
    // 9.5 / 12: flat.
    assert_eq!(line(FLATNESS).met, Some(true));
    assert_eq!(line("resume_1000_rounds").met, Some(false));
    assert_eq!(
        line("resume_10000_records").met,
        Some(true),
        "2.9 ≤ 1.2 × 2.5"
    );
    assert_eq!(line("readable_throughput").met, Some(true));
    assert_eq!(line("floor_sqlite_commit").met, None);
    assert_eq!(line("idle_run_memory").figure, "not measured");
    assert_eq!(line("idle_run_memory").met, None);
    assert_eq!(line("something_new").aim, "—");
    assert_eq!(
        table.lines.last().map(|l| l.name.as_str()),
        Some("something_new")
    );

    let meta = Meta {
        date: "2026-12-05".into(),
        commit: "abc1234".into(),
        quick: true,
        build_seconds: 1.0,
        run_seconds: 2.0,
        load_before: Some(0.5),
        load_after: None,
    };
    let markdown = table.markdown(&meta);
    assert!(markdown.contains("quick run"));
    assert!(markdown.contains("| not met |"));
    assert!(markdown.contains("| — | floor |"));
    assert!(
        table.lines.iter().all(|l| l.name != "resume_100_records"),
        "a figure without an aim that was not measured is left out"
    );
    let json = Json::parse(&table.json(&meta)).expect("the report is JSON");
    let Json::Obj(fields) = json else {
        panic!("an object")
    };
    let Some((_, Json::Arr(rows))) = fields.iter().find(|(k, _)| k == "rows") else {
        panic!("rows")
    };
    assert_eq!(rows.len(), table.lines.len());
}

#[test]
fn the_plan_builds_first_then_runs_every_bench_with_bench_json() {
    let root = Path::new("/repo");
    let lines = root.join(OUT_DIR).join("figures.jsonl");
    let (builds, runs) = bench_steps(root, true, &lines);
    assert_eq!(builds.len(), 6);
    for build in &builds[..5] {
        assert_eq!(build.args[..2], ["bench", "--no-run"]);
    }
    assert_eq!(builds[5].args, ["build.mjs"]);
    let shown: Vec<String> = runs.iter().map(Step::to_string).collect();
    for bench in [
        "runtime",
        "idle_runs",
        "run_javascript",
        "readable",
        "--bench postgres",
        "--bench workers",
        "--bench prompt_caching",
        "bench/idb_bench.mjs",
    ] {
        let step = shown
            .iter()
            .find(|s| s.contains(bench))
            .unwrap_or_else(|| panic!("no step runs {bench}"));
        assert!(
            step.contains("BENCH_JSON=/repo/target/bench/figures.jsonl"),
            "{step}"
        );
        assert!(step.contains("BENCH_QUICK=1"), "{step}");
    }
    assert!(shown.iter().filter(|s| s.ends_with("-- --quick")).count() == 2);
    let (_, full) = bench_steps(root, false, &lines);
    assert!(full.iter().all(|s| !s.to_string().contains("BENCH_QUICK")));
    assert!(full.iter().all(|s| !s.args.iter().any(|a| a == "--quick")));
}

#[test]
fn dates_are_civil_dates() {
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(20_792), (2026, 12, 5));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    assert_eq!(number(1234.4), "1,234");
    assert_eq!(number(12.34), "12.3");
    assert_eq!(number(0.1234), "0.12");
}
