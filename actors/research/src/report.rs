//! The research report (S9.6): an immutable, content-addressed Artifact whose
//! structure keeps three parts apart — findings backed by sources (each
//! claim cites evidence ids that resolve to a source read during execution
//! and the hash of its stored text), unverified material, and model
//! knowledge — plus the gaps of a partial report. The parts are separate
//! fields of the JSON document, not sections of prose.
//!
//! [`Report::build`] turns synthesis's [`ReportDraft`] into a report against
//! the task's frozen snapshot and refuses a claim that cites an unknown
//! evidence id; [`publish_report`] checks that every cited text is still
//! stored under its hash, writes the report's canonical JSON (RFC 8785, so
//! the same report always has the same id) through the host's
//! [`ArtifactSink`] (the workspace's Artifacts), and records its reference
//! on the task in the same fenced step that ends synthesis.

use agent_capabilities::{canonical_bytes, sha256_hex};
use agent_kernel::host::{BlobRef, Fence};
use agent_kernel::{MaybeSend, MaybeSync, SessionId};
use serde::{Deserialize, Serialize};

use crate::store::{ResearchError, ResearchStore};
use crate::task::{Event, EvidenceId, Gap, Phase, ReportRef, ResearchTask, SourceSnapshot, TaskId};

/// The layout version of a report.
pub const REPORT_FORMAT: u32 = 1;
/// The MIME type of a report Artifact.
pub const REPORT_MIME: &str = "application/vnd.agentrt.research-report+json";
/// At most this many items per part, and evidence ids per claim.
pub const MAX_ITEMS: usize = 200;
pub const MAX_CITATIONS: usize = 20;
/// The longest claim or statement, and title, in characters.
pub const MAX_STATEMENT_CHARS: usize = 4_000;
pub const MAX_TITLE_CHARS: usize = 300;
/// The largest report document read back, in bytes.
pub const MAX_REPORT_BYTES: usize = 4 * 1024 * 1024;

/// A claim and the evidence it rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    pub claim: String,
    pub evidence: Vec<EvidenceId>,
}

/// A statement that no stored evidence backs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    pub text: String,
}

/// What synthesis produced, before it is checked against the snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportDraft {
    pub title: String,
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// Material from sources that was not verified (for example search
    /// snippets, or a page the claim could not be checked against).
    #[serde(default)]
    pub unverified: Vec<Statement>,
    /// What the model says from its own knowledge.
    #[serde(default)]
    pub model_knowledge: Vec<Statement>,
    /// Questions of the plan the report could not answer.
    #[serde(default)]
    pub unanswered: Vec<String>,
}

impl ReportDraft {
    /// The draft with every finding whose citations do not all resolve to
    /// a source read in `snapshot` (or that cites none) moved to unverified
    /// material, and the gap that says how many and why; `None` when every
    /// finding is backed. A bad citation so ends in a readable partial
    /// report instead of a draft that can never be published (S9.6).
    /// Unverified material keeps its bound: what does not fit is counted
    /// in the gap, not kept.
    pub fn set_aside_unsupported(
        mut self,
        snapshot: &SourceSnapshot,
    ) -> (ReportDraft, Option<Gap>) {
        let mut kept = Vec::with_capacity(self.findings.len());
        let mut moved = 0u32;
        let mut dropped = 0u32;
        let mut first_reason: Option<String> = None;
        for (index, finding) in std::mem::take(&mut self.findings).into_iter().enumerate() {
            let refusal = if finding.evidence.is_empty() {
                Some(ReportError::Uncited { index })
            } else {
                finding
                    .evidence
                    .iter()
                    .find(|id| snapshot.evidence(id).is_none())
                    .map(|id| ReportError::UnknownEvidence {
                        index,
                        id: id.to_string(),
                    })
            };
            let Some(refusal) = refusal else {
                kept.push(finding);
                continue;
            };
            moved += 1;
            first_reason.get_or_insert_with(|| refusal.to_string());
            let cited: Vec<&str> = finding.evidence.iter().map(|e| e.as_str()).collect();
            let note = if cited.is_empty() {
                " (cited no source)".to_owned()
            } else {
                format!(" (cited {}, not all read for this task)", cited.join(", "))
            };
            let room = MAX_STATEMENT_CHARS.saturating_sub(note.chars().count());
            let text: String = finding.claim.chars().take(room).collect::<String>() + &note;
            if self.unverified.len() < MAX_ITEMS {
                self.unverified.push(Statement { text });
            } else {
                dropped += 1;
            }
        }
        self.findings = kept;
        let gap = first_reason.map(|first| {
            let mut reason = first;
            if dropped > 0 {
                reason.push_str(&format!(
                    "; {dropped} of them did not fit in the unverified material and were left out"
                ));
            }
            Gap::UnsupportedClaims {
                count: moved,
                reason,
            }
        });
        (self, gap)
    }
}

/// One piece of evidence as the report carries it: the source read and
/// the hash of its stored text (a blob).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    pub id: EvidenceId,
    pub url: String,
    pub final_url: String,
    pub content: BlobRef,
    pub fetched_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
}

/// The report document stored as an Artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub v: u32,
    pub task: TaskId,
    pub title: String,
    /// Source-backed findings: every evidence id is in `evidence`.
    pub findings: Vec<Finding>,
    pub unverified: Vec<Statement>,
    pub model_knowledge: Vec<Statement>,
    /// The evidence the findings cite, from the frozen snapshot.
    pub evidence: Vec<Evidence>,
    /// Empty for a complete report; a partial one lists what it lacks.
    pub gaps: Vec<Gap>,
}

/// A report was refused. Each variant says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    #[error(
        "finding {index} cites evidence {id:?}, which is not a source read for this task; cite only ids of read sources or move the claim to unverified material"
    )]
    UnknownEvidence { index: usize, id: String },
    #[error(
        "finding {index} cites no evidence; cite at least one, or move it to unverified material"
    )]
    Uncited { index: usize },
    #[error("the report's {what} has {count} items, more than the {max} allowed")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error("a {what} is empty or longer than {max} characters")]
    BadText { what: &'static str, max: usize },
    #[error("the task has no frozen source snapshot; a report needs an approved plan")]
    NoSnapshot,
    #[error("the report layout version {found} is not {REPORT_FORMAT}")]
    Format { found: u32 },
    #[error("the report document is not a report ({0})")]
    Malformed(String),
    #[error(
        "evidence {id} names text {hash} that is no longer stored under that hash; the report cannot be published"
    )]
    EvidenceMissing { id: String, hash: String },
    #[error("the Artifact store answered id {got}, not the report's hash {expected}")]
    WrongArtifactId { expected: String, got: String },
    #[error("the report could not be stored as an Artifact: {0}")]
    Publish(String),
}

fn check_text(what: &'static str, text: &str, max: usize) -> Result<(), ReportError> {
    if text.trim().is_empty() || text.chars().count() > max {
        return Err(ReportError::BadText { what, max });
    }
    Ok(())
}

fn check_count(what: &'static str, count: usize) -> Result<(), ReportError> {
    if count > MAX_ITEMS {
        return Err(ReportError::TooMany {
            what,
            count,
            max: MAX_ITEMS,
        });
    }
    Ok(())
}

impl Report {
    /// Build the report of `task` from `draft`: bounds checked, every cited
    /// evidence id resolved in the task's snapshot, the cited evidence
    /// copied in, the task's gaps plus the unanswered questions as gaps.
    pub fn build(task: &ResearchTask, draft: ReportDraft) -> Result<Report, ReportError> {
        Report::build_with_gaps(task, draft, Vec::new())
    }

    /// [`Report::build`] with `extra` gaps of synthesis's own (after the
    /// task's) that the task does not hold yet.
    pub fn build_with_gaps(
        task: &ResearchTask,
        draft: ReportDraft,
        extra: Vec<Gap>,
    ) -> Result<Report, ReportError> {
        let snapshot = task.snapshot.as_ref().ok_or(ReportError::NoSnapshot)?;
        check_text("title", &draft.title, MAX_TITLE_CHARS)?;
        let mut gaps = task.gaps.clone();
        gaps.extend(extra);
        for question in &draft.unanswered {
            check_text("unanswered question", question, MAX_STATEMENT_CHARS)?;
            gaps.push(Gap::Unanswered {
                question: question.clone(),
            });
        }
        let mut evidence: Vec<Evidence> = Vec::new();
        for finding in &draft.findings {
            for id in &finding.evidence {
                if evidence.iter().any(|e| &e.id == id) {
                    continue;
                }
                if let Some((url, read)) = snapshot.evidence(id) {
                    evidence.push(Evidence {
                        id: id.clone(),
                        url: url.to_owned(),
                        final_url: read.final_url.clone(),
                        content: read.content.clone(),
                        fetched_at_ms: read.fetched_at_ms,
                        published: read.published.clone(),
                    });
                }
            }
        }
        evidence.sort_by(|a, b| a.id.cmp(&b.id));
        let report = Report {
            v: REPORT_FORMAT,
            task: task.id.clone(),
            title: draft.title,
            findings: draft.findings,
            unverified: draft.unverified,
            model_knowledge: draft.model_knowledge,
            evidence,
            gaps,
        };
        report.validate(Some(snapshot))?;
        Ok(report)
    }

    /// Check the report's bounds and that every finding cites at least one
    /// evidence id that resolves: to an entry of the report's own evidence
    /// and, when `snapshot` is given, to the same read in the snapshot
    /// (same URL and text hash).
    pub fn validate(&self, snapshot: Option<&SourceSnapshot>) -> Result<(), ReportError> {
        if self.v != REPORT_FORMAT {
            return Err(ReportError::Format { found: self.v });
        }
        check_text("title", &self.title, MAX_TITLE_CHARS)?;
        check_count("findings", self.findings.len())?;
        check_count("unverified material", self.unverified.len())?;
        check_count("model knowledge", self.model_knowledge.len())?;
        check_count("gaps", self.gaps.len())?;
        for s in self.unverified.iter().chain(&self.model_knowledge) {
            check_text("statement", &s.text, MAX_STATEMENT_CHARS)?;
        }
        for (index, finding) in self.findings.iter().enumerate() {
            check_text("claim", &finding.claim, MAX_STATEMENT_CHARS)?;
            if finding.evidence.is_empty() {
                return Err(ReportError::Uncited { index });
            }
            if finding.evidence.len() > MAX_CITATIONS {
                return Err(ReportError::TooMany {
                    what: "citations of one finding",
                    count: finding.evidence.len(),
                    max: MAX_CITATIONS,
                });
            }
            for id in &finding.evidence {
                let unknown = || ReportError::UnknownEvidence {
                    index,
                    id: id.to_string(),
                };
                let entry = self
                    .evidence
                    .iter()
                    .find(|e| &e.id == id)
                    .ok_or_else(unknown)?;
                if let Some(snapshot) = snapshot {
                    let (url, read) = snapshot.evidence(id).ok_or_else(unknown)?;
                    if url != entry.url || read.content != entry.content {
                        return Err(unknown());
                    }
                }
            }
        }
        Ok(())
    }

    /// The report's stored form: canonical JSON (RFC 8785).
    pub fn to_bytes(&self) -> Result<Vec<u8>, ReportError> {
        canonical_bytes(self).map_err(|e| ReportError::Malformed(e.to_string()))
    }

    /// Read a stored report back: bounded, strict, and validated.
    pub fn from_bytes(bytes: &[u8]) -> Result<Report, ReportError> {
        if bytes.len() > MAX_REPORT_BYTES {
            return Err(ReportError::TooMany {
                what: "bytes",
                count: bytes.len(),
                max: MAX_REPORT_BYTES,
            });
        }
        let report: Report =
            serde_json::from_slice(bytes).map_err(|e| ReportError::Malformed(e.to_string()))?;
        report.validate(None)?;
        Ok(report)
    }

    /// True when the report lists gaps.
    pub fn is_partial(&self) -> bool {
        !self.gaps.is_empty()
    }

    /// The report as Markdown for people (a CLI, a page), its parts under
    /// their own headings, in a fixed order: findings with their citations,
    /// unverified material, model knowledge, gaps, then the evidence each
    /// citation resolves to (URL and text hash). Text from the report is
    /// put on one line each and Markdown's active characters at the start
    /// of a line are escaped, so a claim cannot make a heading of its own.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("# {}\n\n", inline(&self.title));
        if self.is_partial() {
            out.push_str("_Partial report: see Gaps._\n\n");
        }
        out.push_str("## Findings from sources\n\n");
        if self.findings.is_empty() {
            out.push_str("(none)\n");
        }
        for finding in &self.findings {
            let cites: Vec<String> = finding.evidence.iter().map(|e| format!("[{e}]")).collect();
            out.push_str(&format!(
                "- {} {}\n",
                inline(&finding.claim),
                cites.join(" ")
            ));
        }
        for (heading, items) in [
            ("Unverified material", &self.unverified),
            ("Model knowledge (not from sources)", &self.model_knowledge),
        ] {
            out.push_str(&format!("\n## {heading}\n\n"));
            if items.is_empty() {
                out.push_str("(none)\n");
            }
            for item in items {
                out.push_str(&format!("- {}\n", inline(&item.text)));
            }
        }
        if self.is_partial() {
            out.push_str("\n## Gaps\n\n");
            for gap in &self.gaps {
                let text = match gap {
                    Gap::SourceFailed { url, reason } => {
                        format!(
                            "source {} could not be read: {}",
                            inline(url),
                            inline(reason)
                        )
                    }
                    Gap::BudgetExhausted { dimension } => {
                        format!("the {} budget ran out", inline(dimension))
                    }
                    Gap::Stopped => "research was stopped".to_owned(),
                    Gap::Unanswered { question } => format!("unanswered: {}", inline(question)),
                    Gap::UnsupportedClaims { count, reason } => format!(
                        "{count} claim(s) cited no source read for this task and were moved to unverified material: {}",
                        inline(reason)
                    ),
                };
                out.push_str(&format!("- {text}\n"));
            }
        }
        out.push_str("\n## Evidence\n\n");
        if self.evidence.is_empty() {
            out.push_str("(none)\n");
        }
        for e in &self.evidence {
            out.push_str(&format!(
                "- [{}] {} (sha256 {})\n",
                e.id,
                inline(&e.final_url),
                e.content.hash
            ));
        }
        out
    }
}

/// One line of report text, with Markdown's block-starting characters
/// escaped at its start.
fn inline(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.chars().next() {
        Some('#' | '>' | '-' | '*' | '+' | '|' | '`' | '=' | '_' | '[') => format!("\\{line}"),
        _ => line,
    }
}

/// Stores a report as an immutable, content-addressed Artifact of a session
/// and answers its id (the SHA-256 of the bytes). The workspace crate's
/// Artifacts implement it in the host, so that actors never reach into
/// each other (as `ResultSpill` does for tool results).
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait ArtifactSink: MaybeSend + MaybeSync {
    async fn publish(
        &self,
        session: &SessionId,
        task: &TaskId,
        bytes: Vec<u8>,
        name: &str,
        mime: &str,
    ) -> Result<String, String>;
}

/// Publishing a report failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Research(#[from] ResearchError),
}

/// Build, check and publish the report of task `id` (which must be
/// `Synthesizing`), then record its reference: `Reported`, or `Partial`
/// when it lists gaps. The Artifact exists before the task names it.
pub async fn publish_report(
    store: &ResearchStore,
    sink: &dyn ArtifactSink,
    fence: &Fence,
    id: &TaskId,
    draft: ReportDraft,
) -> Result<(ResearchTask, Report), PublishError> {
    publish_with_gaps(store, sink, fence, id, draft, Vec::new()).await
}

/// Synthesis's way to publish: the draft's unsupported findings set aside
/// as unverified material with their gap
/// ([`ReportDraft::set_aside_unsupported`]), then [`publish_report`]. A
/// draft that cites evidence never read so ends in a partial report with
/// the reason in its gaps, never in a task that cannot finish (S9.6).
pub async fn publish_draft(
    store: &ResearchStore,
    sink: &dyn ArtifactSink,
    fence: &Fence,
    id: &TaskId,
    draft: ReportDraft,
) -> Result<(ResearchTask, Report), PublishError> {
    let task = store.load(&fence.session, id).await?;
    let snapshot = task.snapshot.as_ref().ok_or(ReportError::NoSnapshot)?;
    let (draft, gap) = draft.set_aside_unsupported(snapshot);
    publish_with_gaps(store, sink, fence, id, draft, gap.into_iter().collect()).await
}

async fn publish_with_gaps(
    store: &ResearchStore,
    sink: &dyn ArtifactSink,
    fence: &Fence,
    id: &TaskId,
    draft: ReportDraft,
    extra: Vec<Gap>,
) -> Result<(ResearchTask, Report), PublishError> {
    let task = store.load(&fence.session, id).await?;
    if task.phase != Phase::Synthesizing {
        return Err(
            ResearchError::Transition(crate::task::TransitionError::Illegal {
                phase: task.phase.name(),
                event: "report",
            })
            .into(),
        );
    }
    let report = Report::build_with_gaps(&task, draft, extra)?;
    for evidence in &report.evidence {
        if store.blob("evidence", &evidence.content).await.is_err() {
            return Err(ReportError::EvidenceMissing {
                id: evidence.id.to_string(),
                hash: evidence.content.hash.clone(),
            }
            .into());
        }
    }
    let bytes = report.to_bytes()?;
    let expected = sha256_hex(&bytes);
    let size = bytes.len() as u64;
    let name: String = report.title.chars().take(120).collect();
    let got = sink
        .publish(&task.session, &task.id, bytes, &name, REPORT_MIME)
        .await
        .map_err(ReportError::Publish)?;
    if got != expected {
        return Err(ReportError::WrongArtifactId { expected, got }.into());
    }
    let task = store
        .apply(
            fence,
            id,
            Event::Report {
                report: ReportRef {
                    artifact: expected,
                    size,
                },
                gaps: report.gaps.clone(),
            },
        )
        .await?;
    Ok((task, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{MessageId, SnapshotSource, SourceRead};

    fn ev(n: u32) -> EvidenceId {
        EvidenceId::new(format!("ev-{n}")).unwrap()
    }

    fn task() -> ResearchTask {
        let mut t = ResearchTask::new(
            TaskId::new("t").unwrap(),
            SessionId::new("s").unwrap(),
            MessageId::new("m").unwrap(),
            BlobRef::of(b"topic"),
            1,
        );
        t.phase = Phase::Synthesizing;
        t.snapshot = Some(SourceSnapshot {
            frozen_at_ms: 1,
            sources: vec![
                SnapshotSource {
                    url: "https://a.example.org/".into(),
                    read: Some(SourceRead {
                        evidence: ev(1),
                        final_url: "https://a.example.org/".into(),
                        content: BlobRef::of(b"text a"),
                        fetched_at_ms: 2,
                        published: None,
                    }),
                    failed: None,
                },
                SnapshotSource {
                    url: "https://b.example.org/".into(),
                    read: None,
                    failed: Some("HTTP 503".into()),
                },
            ],
        });
        t.gaps = vec![Gap::SourceFailed {
            url: "https://b.example.org/".into(),
            reason: "HTTP 503".into(),
        }];
        t
    }

    fn draft(evidence: Vec<EvidenceId>) -> ReportDraft {
        ReportDraft {
            title: "X in 2025".into(),
            findings: vec![Finding {
                claim: "A says X.".into(),
                evidence,
            }],
            unverified: vec![Statement {
                text: "A snippet suggests Y.".into(),
            }],
            model_knowledge: vec![Statement {
                text: "X was first released in 2019.".into(),
            }],
            unanswered: vec!["Who maintains X?".into()],
        }
    }

    #[test]
    fn a_report_keeps_its_parts_and_evidence_apart() {
        let report = Report::build(&task(), draft(vec![ev(1)])).unwrap();
        assert_eq!(report.evidence.len(), 1);
        assert_eq!(report.evidence[0].content, BlobRef::of(b"text a"));
        assert_eq!(report.gaps.len(), 2);
        assert!(report.is_partial());
        let bytes = report.to_bytes().unwrap();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        for part in [
            "findings",
            "unverified",
            "model_knowledge",
            "evidence",
            "gaps",
        ] {
            assert!(value[part].is_array(), "{part}");
        }
        assert_eq!(Report::from_bytes(&bytes).unwrap(), report);
        // Same report, same bytes, same id.
        assert_eq!(report.to_bytes().unwrap(), bytes);
    }

    #[test]
    fn unknown_or_missing_citations_are_refused() {
        assert_eq!(
            Report::build(&task(), draft(vec![ev(1), ev(9)])),
            Err(ReportError::UnknownEvidence {
                index: 0,
                id: "ev-9".into()
            })
        );
        assert_eq!(
            Report::build(&task(), draft(vec![])),
            Err(ReportError::Uncited { index: 0 })
        );
        let mut no_snapshot = task();
        no_snapshot.snapshot = None;
        assert_eq!(
            Report::build(&no_snapshot, draft(vec![ev(1)])),
            Err(ReportError::NoSnapshot)
        );
    }

    #[test]
    fn unsupported_findings_are_set_aside_with_their_gap_within_the_bound() {
        let snapshot = task().snapshot.unwrap();
        // Every finding backed: nothing moves, no gap.
        let (same, gap) = draft(vec![ev(1)]).set_aside_unsupported(&snapshot);
        assert_eq!(same, draft(vec![ev(1)]));
        assert_eq!(gap, None);
        // One backed, one citing ev-9, one citing nothing.
        let mut d = draft(vec![ev(1)]);
        d.findings.push(Finding {
            claim: "Unbacked.".into(),
            evidence: vec![ev(1), ev(9)],
        });
        d.findings.push(Finding {
            claim: "Uncited.".into(),
            evidence: vec![],
        });
        let (d, gap) = d.set_aside_unsupported(&snapshot);
        assert_eq!(d.findings.len(), 1);
        assert_eq!(d.unverified.len(), 3);
        assert!(
            d.unverified[1]
                .text
                .starts_with("Unbacked. (cited ev-1, ev-9")
        );
        assert_eq!(d.unverified[2].text, "Uncited. (cited no source)");
        match gap {
            Some(Gap::UnsupportedClaims { count: 2, reason }) => {
                assert!(reason.contains("ev-9"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert!(Report::build(&task(), d).is_ok());
        // Unverified material keeps its bound: at MAX_ITEMS - 1 one more
        // fits, at MAX_ITEMS none does and the gap counts it.
        for (already, kept, dropped) in [
            (MAX_ITEMS - 1, MAX_ITEMS, false),
            (MAX_ITEMS, MAX_ITEMS, true),
        ] {
            let mut d = draft(vec![ev(9)]);
            d.unverified = vec![Statement { text: "x".into() }; already];
            let (d, gap) = d.set_aside_unsupported(&snapshot);
            assert_eq!(d.unverified.len(), kept);
            let Some(Gap::UnsupportedClaims { count: 1, reason }) = gap else {
                panic!("{gap:?}")
            };
            assert_eq!(reason.contains("left out"), dropped, "{reason}");
            assert!(Report::build(&task(), d).is_ok());
        }
        // A claim at the longest length still fits once annotated.
        let mut d = draft(vec![ev(9)]);
        d.findings[0].claim = "c".repeat(MAX_STATEMENT_CHARS);
        let (d, _) = d.set_aside_unsupported(&snapshot);
        assert_eq!(d.unverified[1].text.chars().count(), MAX_STATEMENT_CHARS);
        assert!(Report::build(&task(), d).is_ok());
    }

    #[test]
    fn a_stored_report_whose_claim_cites_unknown_evidence_is_refused() {
        let mut report = Report::build(&task(), draft(vec![ev(1)])).unwrap();
        report.findings[0].evidence.push(ev(2));
        let bytes = report.to_bytes().unwrap();
        assert!(matches!(
            Report::from_bytes(&bytes),
            Err(ReportError::UnknownEvidence { .. })
        ));
        // Evidence whose hash differs from the snapshot's is unknown too.
        let mut forged = Report::build(&task(), draft(vec![ev(1)])).unwrap();
        forged.evidence[0].content = BlobRef::of(b"other text");
        assert!(matches!(
            forged.validate(task().snapshot.as_ref()),
            Err(ReportError::UnknownEvidence { .. })
        ));
    }

    #[test]
    fn the_markdown_keeps_the_parts_apart_in_a_fixed_order() {
        let mut d = draft(vec![ev(1)]);
        d.model_knowledge.push(Statement {
            text: "# Injected heading\nand a second line".into(),
        });
        let md = Report::build(&task(), d).unwrap().to_markdown();
        let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s} missing in {md}"));
        assert!(at("## Findings from sources") < at("## Unverified material"));
        assert!(at("## Unverified material") < at("## Model knowledge"));
        assert!(at("## Model knowledge") < at("## Gaps"));
        assert!(at("## Gaps") < at("## Evidence"));
        assert!(md.contains("- A says X. [ev-1]"));
        assert!(md.contains("[ev-1] https://a.example.org/ (sha256 "));
        assert!(md.contains("unanswered: Who maintains X?"));
        // Report text cannot start a heading of its own.
        assert!(md.contains("- \\# Injected heading and a second line"));
        assert_eq!(md.matches("\n## ").count(), 5);
    }

    #[test]
    fn bad_documents_are_typed_errors() {
        assert!(matches!(
            Report::from_bytes(b"{}"),
            Err(ReportError::Malformed(_))
        ));
        assert!(matches!(
            Report::from_bytes(b"not json"),
            Err(ReportError::Malformed(_))
        ));
        let mut report = Report::build(&task(), draft(vec![ev(1)])).unwrap();
        report.v = 2;
        assert_eq!(
            Report::from_bytes(&serde_json::to_vec(&report).unwrap()),
            Err(ReportError::Format { found: 2 })
        );
        let big = vec![b' '; MAX_REPORT_BYTES + 1];
        assert!(matches!(
            Report::from_bytes(&big),
            Err(ReportError::TooMany { .. })
        ));
        let mut d = draft(vec![ev(1)]);
        d.title = " ".into();
        assert!(matches!(
            Report::build(&task(), d),
            Err(ReportError::BadText { .. })
        ));
    }
}
