//! The durable record of the discoverable tools each run loaded with
//! `load_tools` (S5.2): `Table::Meta`, key `tools/loaded/<run>`, so a page
//! reload or process restart does not forget them. Writes merge by name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use agent_capabilities::Fingerprint;
use agent_kernel::host::{Batch, Storage, StorageError, Table};
use agent_kernel::ids::RunId;

/// The key prefix of loaded-tool records in `Table::Meta`.
pub const KEY_PREFIX: &str = "tools/loaded/";

/// How many times a merge re-reads the record when another writer changed
/// it between the read and the conditional write.
pub const MAX_MERGE_ATTEMPTS: u32 = 8;

/// The record's format version.
const VERSION: u32 = 1;

/// The key of `run`'s record in `Table::Meta`.
pub fn key(run: &RunId) -> String {
    format!("{KEY_PREFIX}{run}")
}

/// Reading or writing a run's loaded tools failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadedToolsError {
    #[error(
        "the loaded-tools record of run {run} (Meta table, key {KEY_PREFIX}{run}) is corrupt ({detail}); it was left untouched: remove it to start the run's loaded tools afresh"
    )]
    Corrupt { run: RunId, detail: String },
    #[error("could not read or write the loaded tools of run {run}: {source}")]
    Storage {
        run: RunId,
        #[source]
        source: StorageError,
    },
    #[error(
        "the loaded tools of run {run} were not saved: the record changed under {attempts} attempts in a row (another writer); call load_tools again"
    )]
    Contended { run: RunId, attempts: u32 },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    version: u32,
    tools: Vec<Entry>,
}

/// One loaded tool and the fingerprint of its definition when it was loaded,
/// so a definition changed since is refused as `definition_changed` after a
/// restart too.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    fingerprint: Fingerprint,
}

fn decode(run: &RunId, bytes: &[u8]) -> Result<BTreeMap<String, Fingerprint>, LoadedToolsError> {
    let corrupt = |detail: String| LoadedToolsError::Corrupt {
        run: run.clone(),
        detail,
    };
    let stored: Stored = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if stored.version != VERSION {
        return Err(corrupt(format!(
            "format version {} is not the supported {VERSION}",
            stored.version
        )));
    }
    let mut tools = BTreeMap::new();
    for entry in stored.tools {
        if entry.name.is_empty() {
            return Err(corrupt("a tool name is empty".into()));
        }
        if tools
            .insert(entry.name.clone(), entry.fingerprint)
            .is_some()
        {
            return Err(corrupt(format!("tool {:?} is listed twice", entry.name)));
        }
    }
    Ok(tools)
}

fn encode(run: &RunId, tools: &BTreeMap<String, Fingerprint>) -> Result<Vec<u8>, LoadedToolsError> {
    let stored = Stored {
        version: VERSION,
        tools: tools
            .iter()
            .map(|(name, fingerprint)| Entry {
                name: name.clone(),
                fingerprint: fingerprint.clone(),
            })
            .collect(),
    };
    serde_json::to_vec(&stored).map_err(|e| LoadedToolsError::Storage {
        run: run.clone(),
        source: StorageError::Encode {
            table: Table::Meta,
            detail: e.to_string(),
        },
    })
}

/// The tools `run` loaded, with their fingerprints at load time; `None` when
/// it loaded none (or nothing was ever saved for it).
pub async fn read(
    storage: &dyn Storage,
    run: &RunId,
) -> Result<Option<BTreeMap<String, Fingerprint>>, LoadedToolsError> {
    let bytes = storage
        .get(Table::Meta, &key(run))
        .await
        .map_err(|source| LoadedToolsError::Storage {
            run: run.clone(),
            source,
        })?;
    bytes.map(|b| decode(run, &b)).transpose()
}

/// Add `tools` to `run`'s record. A compare-and-set on the record's bytes:
/// when another writer changed it meanwhile, re-read and merge again, so
/// concurrent loads never lose a name. A corrupt record is never overwritten.
///
/// Not fenced by the session lease: the record is derived, additive state.
/// A stale writer can only add a name the run was allowed to load anyway
/// (loading grants nothing; every call is still validated, judged by the
/// policy and capability-checked), and the actor that owns the session never
/// has a name taken away by it.
pub async fn merge(
    storage: &dyn Storage,
    run: &RunId,
    tools: &BTreeMap<String, Fingerprint>,
) -> Result<(), LoadedToolsError> {
    let key = key(run);
    let failed = |source| LoadedToolsError::Storage {
        run: run.clone(),
        source,
    };
    for _ in 0..MAX_MERGE_ATTEMPTS {
        let current = storage.get(Table::Meta, &key).await.map_err(failed)?;
        let mut merged = match &current {
            Some(bytes) => decode(run, bytes)?,
            None => BTreeMap::new(),
        };
        let before = merged.len();
        let mut changed = false;
        for (name, fingerprint) in tools {
            changed |=
                merged.insert(name.clone(), fingerprint.clone()).as_ref() != Some(fingerprint);
        }
        if current.is_some() && !changed && merged.len() == before {
            return Ok(());
        }
        let bytes = encode(run, &merged)?;
        let batch = match current {
            Some(old) => Batch::new().expect_value(Table::Meta, key.clone(), old),
            None => Batch::new().expect_absent(Table::Meta, key.clone()),
        }
        .put(Table::Meta, key.clone(), bytes);
        match storage.commit(batch).await {
            Ok(()) => return Ok(()),
            Err(StorageError::ConditionFailed { .. }) => continue,
            Err(source) => return Err(failed(source)),
        }
    }
    Err(LoadedToolsError::Contended {
        run: run.clone(),
        attempts: MAX_MERGE_ATTEMPTS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_kernel::memory::MemoryStorage;

    fn fp(c: char) -> Fingerprint {
        Fingerprint::from_hex(&c.to_string().repeat(64)).unwrap()
    }

    fn run() -> RunId {
        RunId::new("run-1").unwrap()
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        futures::executor::block_on(f)
    }

    #[test]
    fn merge_unions_names_and_read_returns_them() {
        let s = MemoryStorage::new();
        block_on(async {
            assert_eq!(read(&s, &run()).await.unwrap(), None);
            merge(&s, &run(), &BTreeMap::from([("a".into(), fp('a'))]))
                .await
                .unwrap();
            merge(&s, &run(), &BTreeMap::from([("b".into(), fp('b'))]))
                .await
                .unwrap();
            let got = read(&s, &run()).await.unwrap().unwrap();
            assert_eq!(
                got,
                BTreeMap::from([("a".into(), fp('a')), ("b".into(), fp('b'))])
            );
        });
    }

    #[test]
    fn corrupt_record_is_a_typed_error_and_is_left_untouched() {
        let s = MemoryStorage::new();
        block_on(async {
            for bad in [
                &b"not json"[..],
                br#"{"version":2,"tools":[]}"#,
                br#"{"version":1,"tools":[{"name":"a","fingerprint":"zz"}]}"#,
            ] {
                s.commit(Batch::new().put(Table::Meta, key(&run()), bad.to_vec()))
                    .await
                    .unwrap();
                assert!(matches!(
                    read(&s, &run()).await,
                    Err(LoadedToolsError::Corrupt { .. })
                ));
                let err = merge(&s, &run(), &BTreeMap::from([("a".into(), fp('a'))]))
                    .await
                    .unwrap_err();
                assert!(matches!(err, LoadedToolsError::Corrupt { .. }), "{err}");
                assert!(err.to_string().contains("tools/loaded/run-1"), "{err}");
                assert_eq!(
                    s.get(Table::Meta, &key(&run())).await.unwrap().as_deref(),
                    Some(bad)
                );
            }
        });
    }
}
