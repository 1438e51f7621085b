//! The aims of the bench table (issue 18 and the book's Benchmarks
//! chapter): which figure is held to what, and against which floor of the
//! machine measured in the same run.

/// What a figure is held to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Aim {
    /// No aim: listed for reference.
    None,
    /// A floor of the machine, measured in the same run.
    Floor,
    AtMost(f64),
    AtLeast(f64),
    /// At most `factor` times the figure named `of` (a floor, or another
    /// figure of the same run).
    TimesAtMost {
        of: &'static str,
        factor: f64,
    },
}

/// One known figure: its name (as the bench emits it), its aim, and the
/// floor it is shown against (its ratio to it), if any.
pub(super) struct Row {
    pub(super) name: &'static str,
    pub(super) aim: Aim,
    /// What the aim says, as the table prints it.
    pub(super) aim_text: &'static str,
    /// Shown as "= N × &lt;that floor&gt;" beside the figure.
    pub(super) ratio_to: Option<&'static str>,
}

pub(super) const fn row(name: &'static str, aim: Aim, aim_text: &'static str) -> Row {
    Row {
        name,
        aim,
        aim_text,
        ratio_to: None,
    }
}

pub(super) const fn against(
    name: &'static str,
    aim: Aim,
    aim_text: &'static str,
    floor: &'static str,
) -> Row {
    Row {
        name,
        aim,
        aim_text,
        ratio_to: Some(floor),
    }
}

/// The derived flatness figure (computed here from the round figures).
pub(super) const FLATNESS: &str = "round_memory_flatness";

/// The table's rows in order, with their aims (issue 18, and the
/// earlier aims for `run_javascript`, readable text, commits and bytes).
/// Figures a bench emits that are not listed here follow, without an aim.
pub(super) const ROWS: &[Row] = &[
    row("floor_fsync_4k", Aim::Floor, "—"),
    row("floor_sqlite_commit", Aim::Floor, "—"),
    row("floor_postgres_commit", Aim::Floor, "—"),
    row("floor_idb_transaction", Aim::Floor, "—"),
    row(
        "round_memory_100",
        Aim::AtMost(10.0),
        "≤ 10 µs (idle machine)",
    ),
    row(
        "round_memory_1000",
        Aim::AtMost(10.0),
        "≤ 10 µs (idle machine)",
    ),
    row("call_memory_10000", Aim::None, "—"),
    row(
        FLATNESS,
        Aim::AtMost(1.2),
        "flat 100 → 10,000 rounds (≤ 1.2×)",
    ),
    row("round_sqlite_100", Aim::None, "—"),
    row("round_sqlite_1000", Aim::None, "—"),
    against(
        "round_sqlite_effectful",
        Aim::TimesAtMost {
            of: "floor_sqlite_commit",
            factor: 2.5,
        },
        "≤ 2.5 × bare WAL commit",
        "floor_sqlite_commit",
    ),
    // No aim yet: the first figures of issue 21, beside their floor.
    Row {
        name: "round_postgres_effectful",
        aim: Aim::None,
        aim_text: "—",
        ratio_to: Some("floor_postgres_commit"),
    },
    row("commits_per_round_postgres", Aim::None, "—"),
    row("workers_runs_per_s_1", Aim::None, "—"),
    row("workers_runs_per_s_2", Aim::None, "—"),
    row("workers_runs_per_s_4", Aim::None, "—"),
    row(
        "commits_per_effectful_round",
        Aim::AtMost(2.0),
        "≤ 2 commits",
    ),
    row("bytes_per_round", Aim::AtMost(2000.0), "≤ 2 KB"),
    // Measured in the full run only; the aim is held by `bytes_per_round`.
    row("bytes_per_round_marginal", Aim::None, "—"),
    row("resume_10_records", Aim::None, "—"),
    row("resume_100_records", Aim::None, "—"),
    row("resume_1000_records", Aim::None, "—"),
    row(
        "resume_1000_rounds",
        Aim::AtMost(1.0),
        "≤ 1 ms (idle machine)",
    ),
    against(
        "resume_10000_records",
        Aim::TimesAtMost {
            of: "resume_1000_rounds",
            factor: 1.2,
        },
        "≤ 1.2 × the 1,000-round resume",
        "resume_1000_rounds",
    ),
    row("takeover_0", Aim::None, "—"),
    against(
        "takeover_1000",
        Aim::TimesAtMost {
            of: "takeover_0",
            factor: 1.2,
        },
        "flat: ≤ 1.2 × with 0 other runs",
        "takeover_0",
    ),
    against(
        "takeover_10000",
        Aim::TimesAtMost {
            of: "takeover_0",
            factor: 1.2,
        },
        "flat: ≤ 1.2 × with 0 other runs",
        "takeover_0",
    ),
    row("idle_run_memory", Aim::AtMost(64.0), "≤ 64 KiB"),
    row("idle_runs_start", Aim::None, "—"),
    row("idle_runs_waiting", Aim::None, "—"),
    row("run_javascript_fresh_context", Aim::AtMost(0.3), "≤ 0.3 ms"),
    row("run_javascript_sum_1e7", Aim::None, "—"),
    row("readable_throughput", Aim::AtLeast(2.0), "≥ 2 MB/s"),
    against(
        "round_idb_effectful",
        Aim::TimesAtMost {
            of: "floor_idb_transaction",
            factor: 2.5,
        },
        "≤ 2.5 × bare readwrite transaction",
        "floor_idb_transaction",
    ),
    row("wasm_first_module_gzip", Aim::AtMost(1.2), "≤ 1.2 MiB gzip"),
    row("wasm_worker_module_gzip", Aim::None, "—"),
    row("demo_ready", Aim::AtMost(300.0), "≤ 300 ms"),
    // Issue 34: a 20-round run against a loopback server that bills as
    // the Anthropic API does; the uncached figure is the reference.
    row("prompt_billed_input_per_round_uncached", Aim::None, "—"),
    against(
        "prompt_billed_input_per_round_cached",
        Aim::TimesAtMost {
            of: "prompt_billed_input_per_round_uncached",
            factor: 0.5,
        },
        "≤ 0.5 × without caching",
        "prompt_billed_input_per_round_uncached",
    ),
];

/// How a floor or reference figure is named beside a ratio.
pub(super) fn short_name(name: &str) -> &str {
    match name {
        "floor_fsync_4k" => "4 KiB fsync",
        "floor_sqlite_commit" => "bare WAL commit",
        "floor_postgres_commit" => "bare PostgreSQL commit",
        "floor_idb_transaction" => "bare transaction",
        "resume_1000_rounds" => "the 1,000-round resume",
        "takeover_0" => "with 0 other runs",
        "prompt_billed_input_per_round_uncached" => "without caching",
        other => other,
    }
}
