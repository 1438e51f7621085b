//! The figures the benches emit and the table made of them: one figure per
//! JSON line, each line of the table beside its aim and floor, printed as
//! Markdown and written as JSON.

use std::fmt::Write as _;

use super::aims::{Aim, FLATNESS, ROWS, short_name};
use super::json::Json;

/// One figure a bench emitted.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Figure {
    pub(super) name: String,
    pub(super) label: String,
    pub(super) value: Option<f64>,
    pub(super) unit: String,
    /// Every other field of the line (counts, tenths, notes).
    pub(super) details: Vec<(String, Json)>,
}

impl Figure {
    pub(super) fn parse(line: &str) -> Result<Figure, String> {
        let Json::Obj(fields) = Json::parse(line)? else {
            return Err("a figure line is not a JSON object".to_string());
        };
        let text = |key: &str| match fields.iter().find(|(k, _)| k == key) {
            Some((_, Json::Str(s))) => Ok(s.clone()),
            _ => Err(format!("a figure line without a string `{key}`")),
        };
        let name = text("name")?;
        let unit = text("unit")?;
        let label = text("label").unwrap_or_else(|_| name.clone());
        let value = match fields.iter().find(|(k, _)| k == "value") {
            Some((_, Json::Num(v))) => Some(*v),
            Some((_, Json::Null)) => None,
            _ => return Err(format!("figure `{name}` has no numeric `value`")),
        };
        let details = fields
            .into_iter()
            .filter(|(k, _)| !matches!(k.as_str(), "name" | "label" | "value" | "unit"))
            .collect();
        Ok(Figure {
            name,
            label,
            value,
            unit,
            details,
        })
    }

    pub(super) fn detail(&self, key: &str) -> Option<f64> {
        match self.details.iter().find(|(k, _)| k == key) {
            Some((_, Json::Num(v))) => Some(*v),
            _ => None,
        }
    }
}

/// One line of the table.
#[derive(Debug)]
pub(super) struct Line {
    pub(super) name: String,
    pub(super) label: String,
    pub(super) value: Option<f64>,
    pub(super) unit: String,
    /// The figure as printed (value, unit, ratio, tenths).
    pub(super) figure: String,
    pub(super) aim: String,
    /// `Some(true)` met, `Some(false)` not met, `None` no aim (or not measured).
    pub(super) met: Option<bool>,
    /// A floor of the machine (its mark says so).
    pub(super) floor_of_machine: bool,
    pub(super) floor: Option<String>,
    pub(super) floor_ratio: Option<f64>,
    pub(super) details: Vec<(String, Json)>,
}

pub(super) struct Table {
    pub(super) lines: Vec<Line>,
}

pub(super) struct Meta {
    pub(super) date: String,
    pub(super) commit: String,
    pub(super) quick: bool,
    pub(super) build_seconds: f64,
    pub(super) run_seconds: f64,
    pub(super) load_before: Option<f64>,
    pub(super) load_after: Option<f64>,
}

impl Table {
    pub(super) fn build(figures: &[Figure]) -> Table {
        // The last figure of a name wins (a bench run twice into one file).
        let find = |name: &str| figures.iter().rev().find(|f| f.name == name);
        let value_of = |name: &str| find(name).and_then(|f| f.value);
        let flatness = flatness(
            find("round_memory_100"),
            find("round_memory_1000"),
            find("call_memory_10000"),
        );
        let mut lines = Vec::new();
        for row in ROWS {
            let figure = if row.name == FLATNESS {
                flatness.clone()
            } else {
                find(row.name).cloned()
            };
            let Some(figure) = figure else {
                // A figure without an aim that this run did not measure
                // (the full run measures more) is left out.
                if row.aim == Aim::None {
                    continue;
                }
                lines.push(Line {
                    name: row.name.to_string(),
                    label: row.name.to_string(),
                    value: None,
                    unit: String::new(),
                    figure: "not measured".to_string(),
                    aim: row.aim_text.to_string(),
                    met: None,
                    floor_of_machine: row.aim == Aim::Floor,
                    floor: row.ratio_to.map(str::to_string),
                    floor_ratio: None,
                    details: Vec::new(),
                });
                continue;
            };
            lines.push(line_of(
                &figure,
                row.aim,
                row.aim_text,
                row.ratio_to,
                &value_of,
            ));
        }
        let mut seen: Vec<&str> = ROWS.iter().map(|r| r.name).collect();
        for figure in figures.iter().rev() {
            if seen.contains(&figure.name.as_str()) {
                continue;
            }
            seen.push(&figure.name);
            lines.push(line_of(figure, Aim::None, "—", None, &value_of));
        }
        Table { lines }
    }

    pub(super) fn markdown(&self, meta: &Meta) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Benchmarks of {} on {}{} (builds {:.0} s, benches {:.0} s; 1-minute load average {} before, {} after):\n",
            meta.commit,
            meta.date,
            if meta.quick { ", quick run" } else { "" },
            meta.build_seconds,
            meta.run_seconds,
            meta.load_before
                .map_or("?".to_string(), |l| format!("{l:.2}")),
            meta.load_after
                .map_or("?".to_string(), |l| format!("{l:.2}")),
        );
        let _ = writeln!(out, "| measure | figure | aim | |");
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for line in &self.lines {
            let mark = match line.met {
                Some(true) => "met",
                Some(false) => "not met",
                None if line.floor_of_machine => "floor",
                None => "—",
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {mark} |",
                line.label.replace('|', "/"),
                line.figure,
                line.aim
            );
        }
        out
    }

    pub(super) fn json(&self, meta: &Meta) -> String {
        let num = |v: Option<f64>| v.map_or(Json::Null, Json::Num);
        let rows = self
            .lines
            .iter()
            .map(|l| {
                Json::Obj(vec![
                    ("name".into(), Json::Str(l.name.clone())),
                    ("label".into(), Json::Str(l.label.clone())),
                    ("value".into(), num(l.value)),
                    ("unit".into(), Json::Str(l.unit.clone())),
                    ("aim".into(), Json::Str(l.aim.clone())),
                    ("met".into(), l.met.map_or(Json::Null, Json::Bool)),
                    ("is_floor".into(), Json::Bool(l.floor_of_machine)),
                    (
                        "floor".into(),
                        l.floor.clone().map_or(Json::Null, Json::Str),
                    ),
                    ("floor_ratio".into(), num(l.floor_ratio)),
                    ("details".into(), Json::Obj(l.details.clone())),
                ])
            })
            .collect();
        let report = Json::Obj(vec![
            ("date".into(), Json::Str(meta.date.clone())),
            ("commit".into(), Json::Str(meta.commit.clone())),
            ("quick".into(), Json::Bool(meta.quick)),
            ("build_seconds".into(), Json::Num(meta.build_seconds)),
            ("run_seconds".into(), Json::Num(meta.run_seconds)),
            ("load_before".into(), num(meta.load_before)),
            ("load_after".into(), num(meta.load_after)),
            ("rows".into(), Json::Arr(rows)),
        ]);
        let mut text = String::new();
        report.write_pretty(&mut text, 0);
        text.push('\n');
        text
    }
}

/// The flatness of the per-round cost on the memory host: the larger of
/// (last tenth of the 1,000-round run ÷ median of the 100-round run) and
/// (last tenth ÷ first tenth of the 10,000-call run). A run cannot have
/// 10,000 rounds (the budget caps it at 1,000 rounds and 10,000 calls).
pub(super) fn flatness(
    r100: Option<&Figure>,
    r1000: Option<&Figure>,
    c10000: Option<&Figure>,
) -> Option<Figure> {
    let rounds = r100
        .and_then(|f| f.value)
        .zip(r1000.and_then(|f| f.detail("last_tenth")))
        .map(|(start, end)| end / start);
    let calls = c10000.and_then(|f| Some(f.detail("last_tenth")? / f.detail("first_tenth")?));
    let value = match (rounds, calls) {
        (Some(a), Some(b)) => a.max(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => return None,
    };
    let mut details = Vec::new();
    if let Some(r) = rounds {
        details.push(("rounds_1000_vs_100".to_string(), Json::Num(r)));
    }
    if let Some(c) = calls {
        details.push(("calls_10000_last_vs_first_tenth".to_string(), Json::Num(c)));
    }
    Some(Figure {
        name: FLATNESS.to_string(),
        label: "per-round cost, memory host: end of the longest runs ÷ start (last tenth of 1,000 rounds ÷ 100-round median; last ÷ first tenth of 10,000 calls)".to_string(),
        value: Some(value),
        unit: "x".to_string(),
        details,
    })
}

pub(super) fn line_of(
    figure: &Figure,
    aim: Aim,
    aim_text: &str,
    ratio_to: Option<&str>,
    value_of: &dyn Fn(&str) -> Option<f64>,
) -> Line {
    let value = figure.value;
    let met = match (aim, value) {
        (_, None) | (Aim::None | Aim::Floor, _) => None,
        (Aim::AtMost(limit), Some(v)) => Some(v <= limit),
        (Aim::AtLeast(limit), Some(v)) => Some(v >= limit),
        (Aim::TimesAtMost { of, factor }, Some(v)) => value_of(of).map(|base| v <= factor * base),
    };
    let floor_ratio = ratio_to
        .and_then(value_of)
        .zip(value)
        .map(|(base, v)| v / base);
    let mut text = match value {
        Some(v) => format!("{} {}", number(v), unit_text(&figure.unit)),
        None => "not measured".to_string(),
    };
    if let (Some(ratio), Some(floor)) = (floor_ratio, ratio_to) {
        let _ = write!(text, " = {ratio:.2} × {}", short_name(floor));
    }
    if figure.name == "round_sqlite_effectful"
        && let (Some(v), Some(fsync)) = (value, value_of("floor_fsync_4k"))
    {
        let _ = write!(text, " = {:.2} × 4 KiB fsync", v / fsync);
    }
    if let (Some(first), Some(last)) = (figure.detail("first_tenth"), figure.detail("last_tenth")) {
        let _ = write!(
            text,
            " (first tenth {} → last tenth {})",
            number(first),
            number(last)
        );
    }
    if figure.name == FLATNESS {
        let parts: Vec<String> = figure
            .details
            .iter()
            .filter_map(|(k, v)| match v {
                Json::Num(n) => Some(format!("{}: {n:.2}", k.replace('_', " "))),
                _ => None,
            })
            .collect();
        let _ = write!(text, " ({})", parts.join("; "));
    }
    Line {
        name: figure.name.clone(),
        label: figure.label.clone(),
        value,
        unit: figure.unit.clone(),
        figure: text,
        aim: aim_text.to_string(),
        met,
        floor_of_machine: aim == Aim::Floor,
        floor: ratio_to.map(str::to_string),
        floor_ratio,
        details: figure.details.clone(),
    }
}

/// Three significant digits or so.
pub(super) fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        let whole = format!("{v:.0}");
        // Thousands separated by commas, as the book's Benchmarks chapter writes them.
        let (sign, digits) = whole.split_at(usize::from(whole.starts_with('-')));
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        format!("{sign}{grouped}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub(super) fn unit_text(unit: &str) -> &str {
    match unit {
        "us" => "µs",
        "x" => "×",
        other => other,
    }
}
