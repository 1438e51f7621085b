//! A test-only pause at a named journal boundary, so that a test can SIGKILL
//! `agentrt` at an exact point (issue 8 item 6). Enabled only by the hidden
//! environment variable `AGENTRT_TEST_PAUSE=<when>:<state>:<tool>`, where
//! `when` is `before` or `after` (the commit), `state` a journal state
//! (`prepared`, `running`, `committed`, ...) and `tool` the tool name. At that
//! boundary the process prints `agentrt-test-paused <when>:<state>:<tool>`
//! to stderr and sleeps until it is killed. Nothing else reads it.
//!
//! Compiled only with the feature `test-hooks`, which the crate's own tests
//! turn on: a release `agentrt` has no such variable, and `cargo xtask test`
//! checks that its binary does not contain [`PAUSE_VAR`].

use std::sync::Arc;
use std::time::Duration;

use agent_kernel::host::{Batch, Op, Table};
use agent_kernel::journal::JournalRecord;

use crate::sqlite::{CommitHook, SqliteStorage};

/// The hidden variable's name.
pub const PAUSE_VAR: &str = "AGENTRT_TEST_PAUSE";

#[derive(Debug, Clone, PartialEq, Eq)]
struct Boundary {
    after: bool,
    state: String,
    tool: String,
}

fn parse(spec: &str) -> Option<Boundary> {
    let mut parts = spec.splitn(3, ':');
    let after = match parts.next()? {
        "before" => false,
        "after" => true,
        _ => return None,
    };
    Some(Boundary {
        after,
        state: parts.next()?.to_owned(),
        tool: parts.next()?.to_owned(),
    })
}

fn matches(boundary: &Boundary, batch: &Batch) -> bool {
    batch.ops().iter().any(|op| match op {
        Op::Put {
            table: Table::Journal,
            value,
            ..
        } => serde_json::from_slice::<JournalRecord>(value).is_ok_and(|rec| {
            rec.tool == boundary.tool
                && serde_json::to_value(rec.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .is_some_and(|s| s == boundary.state)
        }),
        _ => false,
    })
}

fn pause_forever(spec: &str) -> ! {
    eprintln!("agentrt-test-paused {spec}");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Install the pause hooks on `storage` when the hidden variable is set.
pub fn install_from_env(storage: &SqliteStorage) {
    let Ok(spec) = std::env::var(PAUSE_VAR) else {
        return;
    };
    let Some(boundary) = parse(&spec) else {
        eprintln!("agentrt: ignoring {PAUSE_VAR}={spec:?} (expected before|after:<state>:<tool>)");
        return;
    };
    let after = boundary.after;
    let hook: CommitHook = Arc::new(move |batch: &Batch| {
        if matches(&boundary, batch) {
            pause_forever(&spec);
        }
        Ok(())
    });
    if after {
        storage.set_after_commit_hook(Some(hook));
    } else {
        storage.set_commit_hook(Some(hook));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(
            parse("after:running:send_ticket"),
            Some(Boundary {
                after: true,
                state: "running".into(),
                tool: "send_ticket".into()
            })
        );
        assert_eq!(parse("during:running:x"), None);
        assert_eq!(parse("after:running"), None);
    }
}
