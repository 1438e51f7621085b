//! The invariants of a crash or tab-loss simulation, as a library (issue 17
//! item 2): one [`Checker`] per seed that a simulation feeds (what was
//! dispatched, what the person chose, what a page showed) and asks to check
//! the stored state; each finding is a [`Violation`] naming its seed and step.
//! The crash simulator of this crate and the native `TabSim` both use it,
//! and a test host can call it on its own simulation.
//!
//! The rules, each with its [`Rule`]:
//! - a call that is not safe to repeat (`JournalRecord::retry_is_safe`)
//!   reaches its tool at most once, plus once per "retry anyway" the person
//!   chose for it (S2.3);
//! - nothing is dispatched before its `running` record is durable (DESIGN,
//!   durability order), and never again after `committed`;
//! - after a page load nothing of a run is dispatched before the person acts
//!   on it (resume, decide, approve, respond: S2.5);
//! - a pending request is shown once, not twice (S6.4);
//! - every stored record decodes as its type (S1.1), no record or committed
//!   result is lost, usage never decreases (S4.1);
//! - no raw prompt, argument or answer text is stored outside blobs (S2.2);
//! - a finished simulation leaves each run final or clearly waiting for the
//!   person, with a legal status history and gap-free activities (S1.2, S1.4).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use agent_kernel::host::{BlobRef, Storage, StorageExt, Table};
use agent_kernel::ids::{CallId, RunId};
use agent_kernel::journal::{CallState, JournalRecord};
use agent_kernel::run::{
    Activity, ActivityKind, AgentRun, Checkpoint, Evidence, PendingKind, PendingRequest, RunStatus,
    Usage,
};

/// Which rule a violation breaks (a stable snake_case code in reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Rule {
    /// A call not safe to repeat ran more often than once plus the
    /// person's "retry anyway" choices.
    EffectAtMostOnce,
    /// A call reached its tool before its `running` record was durable, or
    /// after it was `committed`.
    RunningBeforeDispatch,
    /// A run dispatched work after a page load before the person acted.
    ResumeOnlyOnResume,
    /// A pending request was shown twice, or stored twice for one call.
    PendingShownOnce,
    /// A stored record does not decode as its type.
    RecordsDecode,
    /// Raw text (a prompt, an argument, an answer) outside blobs.
    NoRawText,
    /// A stored record or a committed result was lost or changed.
    RecordsKept,
    /// Usage went down.
    UsageMonotonic,
    /// An illegal status transition, activity gap or disagreement.
    RunHistory,
    /// The simulation ended with a run neither final nor waiting for the person.
    Settled,
    /// A Deep Research task broke its rules: it did not end with a report
    /// whose evidence resolves, read a source outside its approved
    /// snapshot or a settled source again, or went on before Resume (S9).
    Research,
    /// The simulation itself could not go on (setup, a missing run).
    Harness,
}

impl Rule {
    /// The stable code of the rule.
    pub fn code(self) -> &'static str {
        match self {
            Rule::EffectAtMostOnce => "effect_at_most_once",
            Rule::RunningBeforeDispatch => "running_before_dispatch",
            Rule::ResumeOnlyOnResume => "resume_only_on_resume",
            Rule::PendingShownOnce => "pending_shown_once",
            Rule::RecordsDecode => "records_decode",
            Rule::NoRawText => "no_raw_text",
            Rule::RecordsKept => "records_kept",
            Rule::UsageMonotonic => "usage_monotonic",
            Rule::RunHistory => "run_history",
            Rule::Settled => "settled",
            Rule::Research => "research",
            Rule::Harness => "harness",
        }
    }
}

/// One broken invariant: the seed and step of the simulation where it was
/// seen, the rule and what exactly happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub seed: u64,
    /// The simulation's step (its count of tab openings and person actions)
    /// when the violation was seen.
    pub step: u64,
    pub rule: Rule,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} step {}: {}: {}",
            self.seed,
            self.step,
            self.rule.code(),
            self.detail
        )
    }
}

/// What a range of seeds found; its `Display` is the one-line summary
/// `crash-sim: <seeds> seeds, <points> crash points, <n> violations`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimSummary {
    pub seeds: u64,
    /// Kills and lifecycle interruptions that actually happened.
    pub crash_points: u64,
    pub violations: Vec<Violation>,
}

impl SimSummary {
    /// Add one seed's findings.
    pub fn add_seed(&mut self, crash_points: u64, violations: Vec<Violation>) {
        self.seeds += 1;
        self.crash_points += crash_points;
        self.violations.extend(violations);
    }
}

impl fmt::Display for SimSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "crash-sim: {} seeds, {} crash points, {} violations",
            self.seeds,
            self.crash_points,
            self.violations.len()
        )
    }
}

/// One call reaching its tool, as a simulation saw it: the journal record
/// that was durable at that moment (`None`: there was none).
#[derive(Debug, Clone)]
pub struct Dispatch {
    pub run: RunId,
    pub call: CallId,
    pub tool: String,
    pub attempt: u32,
    pub record: Option<JournalRecord>,
    /// The step of the simulation at the dispatch.
    pub step: u64,
}

impl Dispatch {
    /// Observe a dispatch: read the call's journal record from `storage`
    /// as it is durable now (call it before the tool performs its effect).
    pub async fn observe(
        storage: &dyn Storage,
        run: &RunId,
        call: &CallId,
        tool: &str,
        attempt: u32,
        step: u64,
    ) -> Dispatch {
        let record = storage
            .get_record::<JournalRecord>(&JournalRecord::key_for(run, call))
            .await
            .ok()
            .flatten();
        Dispatch {
            run: run.clone(),
            call: call.clone(),
            tool: tool.to_owned(),
            attempt,
            record,
            step,
        }
    }

    /// The durability rule for one dispatch (DESIGN, durability order): its
    /// `running` record of this attempt was durable, and the call was not
    /// already `committed`. `None` when the dispatch was in order.
    pub fn durability_violation(&self) -> Option<String> {
        match &self.record {
            None => Some(format!(
                "call {} of run {} ({}) was dispatched with no journal record",
                self.call, self.run, self.tool
            )),
            Some(r) if r.state == CallState::Committed => Some(format!(
                "call {} of run {} executed again after it was committed",
                self.call, self.run
            )),
            Some(r) if r.state != CallState::Running || r.attempt != self.attempt => Some(format!(
                "call {} of run {} ({}) attempt {} was dispatched while its record was {:?} attempt {}",
                self.call, self.run, self.tool, self.attempt, r.state, r.attempt
            )),
            Some(_) => None,
        }
    }
}

/// What the checker remembers between tabs of one seed.
#[derive(Default)]
struct Snapshot {
    keys: BTreeMap<Table, BTreeSet<String>>,
    committed: BTreeMap<String, Option<BlobRef>>,
    usage: BTreeMap<RunId, Usage>,
}

const KEPT_TABLES: [Table; 5] = [
    Table::Runs,
    Table::Journal,
    Table::Checkpoints,
    Table::Activities,
    Table::Evidence,
];

/// The invariants of one seed of a simulation. Feed it what happened
/// ([`Checker::dispatched`], [`Checker::retry_chosen`],
/// [`Checker::page_loaded`], [`Checker::person_acted`], [`Checker::shown`]),
/// call [`Checker::check_stored`] after each tab and
/// [`Checker::check_final`] at the end, then take the violations.
#[derive(Default)]
pub struct Checker {
    seed: u64,
    step: u64,
    snapshot: Snapshot,
    raw_texts: BTreeSet<String>,
    retries: BTreeMap<(RunId, CallId), u32>,
    waiting_for_person: BTreeSet<RunId>,
    dispatches: Vec<Dispatch>,
    shown: BTreeMap<(RunId, String, u64), u64>,
    violations: Vec<Violation>,
}

impl fmt::Debug for Checker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checker")
            .field("seed", &self.seed)
            .field("step", &self.step)
            .field("violations", &self.violations.len())
            .finish_non_exhaustive()
    }
}

impl Checker {
    pub fn new(seed: u64) -> Checker {
        Checker {
            seed,
            ..Checker::default()
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The current step.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Move on to the next step (a tab opening, a person's action).
    pub fn next_step(&mut self) -> u64 {
        self.step += 1;
        self.step
    }

    /// Report a violation at the current step.
    pub fn violation(&mut self, rule: Rule, detail: impl Into<String>) {
        let step = self.step;
        self.violation_at(step, rule, detail);
    }

    fn violation_at(&mut self, step: u64, rule: Rule, detail: impl Into<String>) {
        self.violations.push(Violation {
            seed: self.seed,
            step,
            rule,
            detail: detail.into(),
        });
    }

    /// Text that may be stored only in blobs (a prompt, an argument value,
    /// a person's answer): [`Checker::check_stored`] refuses it in any
    /// record. Texts under 8 characters are ignored (they match by chance).
    pub fn forbid_raw_text(&mut self, text: &str) {
        if text.chars().count() >= 8 {
            self.raw_texts.insert(text.to_owned());
        }
    }

    /// The person chose "retry anyway" for `call` of `run`: one more
    /// execution of it is allowed.
    pub fn retry_chosen(&mut self, run: &RunId, call: &CallId) {
        *self.retries.entry((run.clone(), call.clone())).or_default() += 1;
    }

    /// A page load: from now on, nothing of `runs` may be dispatched until
    /// the person acts on it.
    pub fn page_loaded<'a>(&mut self, runs: impl IntoIterator<Item = &'a RunId>) {
        self.waiting_for_person.extend(runs.into_iter().cloned());
    }

    /// The person acted on `run` (resume, decide, approve, respond, start).
    pub fn person_acted(&mut self, run: &RunId) {
        self.waiting_for_person.remove(run);
    }

    /// A call reached its tool: the durability rule is checked at once, the
    /// at-most-once rule at [`Checker::check_final`].
    pub fn dispatched(&mut self, dispatch: Dispatch) {
        if let Some(v) = dispatch.durability_violation() {
            self.violation_at(dispatch.step, Rule::RunningBeforeDispatch, v);
        }
        if self.waiting_for_person.contains(&dispatch.run) {
            self.violation_at(
                dispatch.step,
                Rule::ResumeOnlyOnResume,
                format!(
                    "call {} of run {} was dispatched after a page load before the person acted",
                    dispatch.call, dispatch.run
                ),
            );
        }
        self.dispatches.push(dispatch);
    }

    /// A page showed these pending requests (`Runtime::present_pending`):
    /// each may be shown once.
    pub fn shown(&mut self, run: &RunId, requests: &[PendingRequest]) {
        for p in requests {
            // A request asked again later (the same call undecided again
            // after a retry) is a new request: its own creation time.
            let n = self
                .shown
                .entry((run.clone(), p.id.to_string(), p.created_at_ms))
                .or_default();
            *n += 1;
            if *n == 2 {
                let detail = format!("pending request {} of run {run} was shown twice", p.id);
                self.violation(Rule::PendingShownOnce, detail);
            }
        }
    }

    /// The dispatches seen so far.
    pub fn dispatches(&self) -> &[Dispatch] {
        &self.dispatches
    }

    /// The violations found so far.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Take the violations found.
    pub fn into_violations(self) -> Vec<Violation> {
        self.violations
    }

    /// The state every tab leaves behind: every record decodes, none was
    /// lost, a committed call stays committed with the same result, usage
    /// never decreases, no raw text outside blobs, one pending request per
    /// call and kind.
    pub async fn check_stored(&mut self, storage: &dyn Storage) {
        for table in Table::ALL {
            let rows = match storage.scan_prefix(table, "").await {
                Ok(rows) => rows,
                Err(e) => {
                    let detail = format!("table {} cannot be read: {e}", table.as_str());
                    self.violation(Rule::RecordsDecode, detail);
                    continue;
                }
            };
            for (key, bytes) in &rows {
                if let Err(e) = decode(table, key, bytes) {
                    let detail = format!("record {key} of table {}: {e}", table.as_str());
                    self.violation(Rule::RecordsDecode, detail);
                }
                let text = String::from_utf8_lossy(bytes);
                let found: Vec<String> = self
                    .raw_texts
                    .iter()
                    .filter(|raw| text.contains(raw.as_str()))
                    .cloned()
                    .collect();
                for raw in found {
                    let detail = format!(
                        "record {key} of table {} holds the raw text {raw:?}",
                        table.as_str()
                    );
                    self.violation(Rule::NoRawText, detail);
                }
            }
            if KEPT_TABLES.contains(&table) {
                let now: BTreeSet<String> = rows.into_iter().map(|(k, _)| k).collect();
                let lost: Vec<String> = self
                    .snapshot
                    .keys
                    .get(&table)
                    .map(|before| before.difference(&now).cloned().collect())
                    .unwrap_or_default();
                for key in lost {
                    let detail = format!("record {key} of table {} was lost", table.as_str());
                    self.violation(Rule::RecordsKept, detail);
                }
                self.snapshot.keys.insert(table, now);
            }
        }
        let journal: Vec<JournalRecord> = storage.scan_records("").await.unwrap_or_default();
        for rec in &journal {
            let key = JournalRecord::key_for(&rec.run, &rec.call_id);
            if let Some(result) = self.snapshot.committed.get(&key)
                && (rec.state != CallState::Committed || &rec.result != result)
            {
                let detail = format!("committed call {key} changed to {:?}", rec.state);
                self.violation(Rule::RecordsKept, detail);
            }
            if rec.state == CallState::Committed {
                self.snapshot.committed.insert(key, rec.result.clone());
            }
        }
        let runs: Vec<AgentRun> = storage.scan_records("").await.unwrap_or_default();
        for run in runs {
            if let Some(before) = self.snapshot.usage.get(&run.id)
                && !run.usage.dominates(before)
            {
                let detail = format!(
                    "usage of run {} decreased from {before:?} to {:?}",
                    run.id, run.usage
                );
                self.violation(Rule::UsageMonotonic, detail);
            }
            self.snapshot.usage.insert(run.id.clone(), run.usage);
        }
        let pending: Vec<PendingRequest> = storage.scan_records("").await.unwrap_or_default();
        let mut per_call: BTreeMap<(RunId, String, &'static str), u32> = BTreeMap::new();
        for p in &pending {
            let (call, kind) = match &p.kind {
                PendingKind::Approval { call_id, .. } => (call_id, "approval"),
                PendingKind::Input { call_id, .. } => (call_id, "input"),
                PendingKind::Decision { call_id, .. } => (call_id, "decision"),
                PendingKind::Elicitation { call_id, .. } => (call_id, "elicitation"),
            };
            let n = per_call
                .entry((p.run.clone(), call.to_string(), kind))
                .or_default();
            *n += 1;
            if *n == 2 {
                let detail = format!(
                    "two pending {kind} requests for call {call} of run {}",
                    p.run
                );
                self.violation(Rule::PendingShownOnce, detail);
            }
        }
    }

    /// At the end of a seed: every call not safe to repeat ran at most once
    /// plus the person's retries; `run` is final or clearly waiting for the
    /// person; no call is still `running` in a final run; its status history
    /// is legal and agrees with its gap-free, monotonic activities.
    pub async fn check_final(&mut self, storage: &dyn Storage, run: &RunId) {
        self.check_effects_of(run);
        let (record, _) = match crate::store::load_run(storage, run).await {
            Ok(r) => r,
            Err(e) => {
                let detail = format!("the record of run {run} is missing: {e}");
                self.violation(Rule::RecordsKept, detail);
                return;
            }
        };
        let pending: Vec<PendingRequest> = crate::store::pending_of(storage, run)
            .await
            .unwrap_or_default();
        let blocked = match record.status {
            RunStatus::AwaitingApproval | RunStatus::AwaitingInput => !pending.is_empty(),
            RunStatus::Interrupted => pending
                .iter()
                .any(|p| matches!(p.kind, PendingKind::Decision { .. })),
            _ => false,
        };
        if !record.status.is_final() && !blocked {
            let detail = format!(
                "run {run} ended {} and is not clearly blocked",
                record.status
            );
            self.violation(Rule::Settled, detail);
        }
        let journal: Vec<JournalRecord> = crate::store::journal_of(storage, run)
            .await
            .unwrap_or_default();
        for rec in &journal {
            if rec.state == CallState::Running && record.status.is_final() {
                let detail = format!(
                    "call {} is still running in the final run {run}",
                    rec.call_id
                );
                self.violation(Rule::RunHistory, detail);
            }
        }
        for pair in record.status_history.windows(2) {
            if !pair[0].can_transition_to(pair[1]) {
                let detail = format!("run {run}: illegal transition {} -> {}", pair[0], pair[1]);
                self.violation(Rule::RunHistory, detail);
            }
        }
        let activities: Vec<Activity> = storage
            .scan_records(&format!("{run}/"))
            .await
            .unwrap_or_default();
        let mut last_at = 0;
        let mut statuses = vec![RunStatus::Running];
        for (i, a) in activities.iter().enumerate() {
            if a.seq != i as u64 {
                let detail = format!("run {run}: activity gap at {i} (found {})", a.seq);
                self.violation(Rule::RunHistory, detail);
                break;
            }
            if a.at_ms < last_at {
                let detail = format!("run {run}: activity {i} goes back in time");
                self.violation(Rule::RunHistory, detail);
            }
            last_at = a.at_ms;
            if let ActivityKind::StatusChanged { to, .. } = &a.kind {
                statuses.push(*to);
            }
        }
        if activities.len() as u64 != record.next_activity {
            let detail = format!("run {run}: next_activity does not match the activities");
            self.violation(Rule::RunHistory, detail);
        }
        if statuses != record.status_history {
            let detail = format!("run {run}: status history and status activities disagree");
            self.violation(Rule::RunHistory, detail);
        }
    }

    /// The at-most-once rule for the calls of `run` dispatched so far.
    fn check_effects_of(&mut self, run: &RunId) {
        let mut counts: BTreeMap<&CallId, (u32, u64, &str)> = BTreeMap::new();
        for d in self.dispatches.iter().filter(|d| &d.run == run) {
            // Unknown records are judged unsafe: the durability rule reports them too.
            if d.record.as_ref().is_some_and(JournalRecord::retry_is_safe) {
                continue;
            }
            let entry = counts.entry(&d.call).or_insert((0, d.step, &d.tool));
            entry.0 += 1;
            entry.1 = d.step;
        }
        let found: Vec<(u64, String)> = counts
            .into_iter()
            .filter_map(|(call, (n, step, tool))| {
                let allowed = 1 + self
                    .retries
                    .get(&(run.clone(), call.clone()))
                    .copied()
                    .unwrap_or(0);
                (n > allowed).then(|| {
                    (
                        step,
                        format!(
                            "non-idempotent call {call} ({tool}) of run {run} ran {n} times, \
                             {allowed} allowed"
                        ),
                    )
                })
            })
            .collect();
        for (step, detail) in found {
            self.violation_at(step, Rule::EffectAtMostOnce, detail);
        }
    }
}

/// Decode one stored record as the type its table holds. Tables whose
/// types live in other crates (workspace manifests, trash, Artifacts, other
/// meta) must at least be JSON.
fn decode(table: Table, key: &str, bytes: &[u8]) -> Result<(), String> {
    fn as_type<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<(), String> {
        serde_json::from_slice::<T>(bytes)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    match table {
        Table::Runs => as_type::<AgentRun>(bytes),
        Table::Journal => as_type::<JournalRecord>(bytes),
        Table::Checkpoints => as_type::<Checkpoint>(bytes),
        Table::Activities => as_type::<Activity>(bytes),
        Table::Evidence => as_type::<Evidence>(bytes),
        Table::Pending => as_type::<PendingRequest>(bytes),
        Table::Meta if key.starts_with("run_config/") => as_type::<crate::store::RunMeta>(bytes),
        _ => as_type::<serde_json::Value>(bytes),
    }
}
