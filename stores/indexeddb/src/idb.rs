//! IndexedDB storage (S1.1): one object store per `Table`, one for blobs and
//! one for leases. Every `Batch` runs in ONE readwrite transaction that awaits
//! nothing but its own requests, and checks the fence epoch inside it (S3.3).
//!
//! Table keys are stored as binary keys (the UTF-8 bytes of the key), because
//! IndexedDB orders string keys by UTF-16 code units, while `Storage` promises
//! byte order. Values are `Uint8Array`s; lease records are JSON strings.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use agent_kernel::SessionId;
use agent_kernel::host::lease_cas;
use agent_kernel::host::{
    Batch, BlobRef, Condition, LeaseCas, LeaseRecord, Op, Storage, StorageError, Table,
};
use futures::channel::oneshot;
use futures::future::join_all;
use js_sys::{Array, JsString, Uint8Array};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{
    IdbDatabase, IdbFactory, IdbKeyRange, IdbObjectStore, IdbOpenDbRequest, IdbTransaction,
    IdbTransactionDurability, IdbTransactionMode, IdbTransactionOptions,
};

use crate::js::{self, describe};
use crate::key_range;

/// The schema version; bump it with a migration in `upgrade`.
const VERSION: u32 = 1;
const BLOBS: &str = "blobs";
const LEASES: &str = "leases";

/// `Storage` on IndexedDB. Durable across reloads; shared by every tab of the origin.
pub struct IdbStorage {
    db: IdbDatabase,
    name: String,
    /// Point reads not yet issued: see [`PendingReads`].
    pending: Rc<RefCell<Option<PendingReads>>>,
}

/// What a point read answers: the value, or the failed step and its error.
type ReadOutcome = Result<JsValue, (&'static str, JsValue)>;

/// Point reads (`get`, `get_blob`, `current_lease`) gathered until the tasks
/// woken together have run: they are then issued in ONE readonly
/// transaction, and reads of the same key share one request. A round's
/// readers (the subscriptions and the settle waiters woken by one event, the
/// supervisor, the workspace) otherwise open a transaction each, and every
/// readwrite commit over the same store waits for them. A read sees what
/// was committed before it was issued, as before (it is issued later, never
/// earlier, than its caller asked).
#[derive(Default)]
struct PendingReads {
    reads: Vec<PendingRead>,
}

struct PendingRead {
    store: &'static str,
    key: JsValue,
    /// Identity of `key` within `store`, to share a request.
    id: String,
    waiters: Vec<oneshot::Sender<ReadOutcome>>,
}

/// Issue every pending read in one readonly transaction and answer each waiter.
async fn flush_reads(db: IdbDatabase, pending: Rc<RefCell<Option<PendingReads>>>) {
    let Some(batch) = pending.borrow_mut().take() else {
        return;
    };
    let stores: BTreeSet<&'static str> = batch.reads.iter().map(|r| r.store).collect();
    let names: Array = stores.iter().map(|s| JsValue::from_str(s)).collect();
    let tx = match db.transaction_with_str_sequence_and_mode(&names, IdbTransactionMode::Readonly) {
        Ok(tx) => tx,
        Err(e) => {
            for read in batch.reads {
                for waiter in read.waiters {
                    let _ = waiter.send(Err(("transaction", e.clone())));
                }
            }
            return;
        }
    };
    // Every request is issued (its handlers installed) before any await.
    let issued: Vec<(PendingRead, Result<js::EventFuture, JsValue>)> = batch
        .reads
        .into_iter()
        .map(|read| {
            let request = tx
                .object_store(read.store)
                .and_then(|store| store.get(&read.key))
                .map(|req| js::request(&req));
            (read, request)
        })
        .collect();
    for (read, request) in issued {
        let outcome: ReadOutcome = match request {
            Ok(future) => future.await.map_err(|e| ("get", e)),
            Err(e) => Err(("get", e)),
        };
        for waiter in read.waiters {
            // A caller that stopped waiting needs no answer.
            let _ = waiter.send(outcome.clone());
        }
    }
}

impl std::fmt::Debug for IdbStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdbStorage")
            .field("name", &self.name)
            .finish()
    }
}

fn backend(context: &str, e: &JsValue) -> StorageError {
    StorageError::Backend(format!("IndexedDB {context} failed: {}", describe(e)))
}

fn factory() -> Result<IdbFactory, StorageError> {
    js::global_property("indexedDB")
        .and_then(|v| v.dyn_into::<IdbFactory>().ok())
        .ok_or_else(|| {
            StorageError::Unavailable(
                "this browser context has no IndexedDB (private mode or a sandboxed frame?)".into(),
            )
        })
}

fn key_bytes(key: &str) -> JsValue {
    Uint8Array::from(key.as_bytes()).into()
}

fn bytes_of(value: &JsValue) -> Vec<u8> {
    Uint8Array::new(value).to_vec()
}

fn optional_bytes(value: JsValue) -> Option<Vec<u8>> {
    if value.is_undefined() || value.is_null() {
        None
    } else {
        Some(bytes_of(&value))
    }
}

fn decode_lease(session: &SessionId, value: &JsValue) -> Result<Option<LeaseRecord>, StorageError> {
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    let text = value.as_string().ok_or_else(|| StorageError::Corrupt {
        table: Table::Meta,
        key: format!("lease/{session}"),
        detail: "lease record is not a string".into(),
    })?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| StorageError::Corrupt {
            table: Table::Meta,
            key: format!("lease/{session}"),
            detail: e.to_string(),
        })
}

fn encode_lease(record: &LeaseRecord) -> Result<JsValue, StorageError> {
    serde_json::to_string(record)
        .map(|s| JsValue::from_str(&s))
        .map_err(|e| StorageError::Encode {
            table: Table::Meta,
            detail: e.to_string(),
        })
}

impl IdbStorage {
    /// Open (and on first use create) the database `name`.
    pub async fn open(name: &str) -> Result<IdbStorage, StorageError> {
        let factory = factory()?;
        let req: IdbOpenDbRequest = factory.open_with_u32(name, VERSION).map_err(|e| {
            StorageError::Unavailable(format!("IndexedDB open refused: {}", describe(&e)))
        })?;
        let upgrade = Closure::<dyn FnMut(web_sys::Event)>::new({
            let req = req.clone();
            move |_e: web_sys::Event| {
                if let Ok(result) = req.result()
                    && let Ok(db) = result.dyn_into::<IdbDatabase>()
                {
                    upgrade(&db);
                }
            }
        });
        req.set_onupgradeneeded(Some(upgrade.as_ref().unchecked_ref()));
        let opened = js::request(&req).await;
        req.set_onupgradeneeded(None);
        drop(upgrade);
        let db = opened
            .map_err(|e| {
                StorageError::Unavailable(format!("IndexedDB open failed: {}", describe(&e)))
            })?
            .dyn_into::<IdbDatabase>()
            .map_err(|_| StorageError::Unavailable("IndexedDB open gave no database".into()))?;
        // Another tab upgrading the schema asks us to close; do so rather than block it.
        let on_version_change = Closure::<dyn FnMut(web_sys::Event)>::new({
            let db = db.clone();
            move |_e: web_sys::Event| db.close()
        });
        db.set_onversionchange(Some(on_version_change.as_ref().unchecked_ref()));
        on_version_change.forget();
        Ok(IdbStorage {
            db,
            name: name.to_owned(),
            pending: Rc::default(),
        })
    }

    /// Delete the database `name` (tests use a fresh name each and delete it after).
    pub async fn delete_database(name: &str) -> Result<(), StorageError> {
        let req = factory()?
            .delete_database(name)
            .map_err(|e| backend("deleteDatabase", &e))?;
        js::request(&req)
            .await
            .map(|_| ())
            .map_err(|e| backend("deleteDatabase", &e))
    }

    /// The database name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Close the connection (pending transactions still finish).
    pub fn close(&self) {
        self.db.close();
    }

    fn tx(
        &self,
        stores: &[&str],
        mode: IdbTransactionMode,
    ) -> Result<IdbTransaction, StorageError> {
        let names: Vec<JsString> = stores.iter().map(|s| JsString::from(*s)).collect();
        let options = IdbTransactionOptions::new();
        // "strict": complete only once the data is flushed (S2 durability order).
        options.set_durability(IdbTransactionDurability::Strict);
        self.db
            .transaction_with_str_sequence_and_mode_and_options(&names, mode, &options)
            .map_err(|e| backend("transaction", &e))
    }

    fn store(tx: &IdbTransaction, name: &str) -> Result<IdbObjectStore, StorageError> {
        tx.object_store(name)
            .map_err(|e| backend("objectStore", &e))
    }

    /// One point read, issued with the other reads of this turn (see
    /// [`PendingReads`]); `id` identifies `key` within `store`.
    async fn read_one(
        &self,
        store: &'static str,
        key: JsValue,
        id: String,
    ) -> Result<JsValue, StorageError> {
        let (waiter, answer) = oneshot::channel();
        let first = {
            let mut pending = self.pending.borrow_mut();
            let first = pending.is_none();
            let batch = pending.get_or_insert_with(PendingReads::default);
            match batch
                .reads
                .iter_mut()
                .find(|r| r.store == store && r.id == id)
            {
                Some(read) => read.waiters.push(waiter),
                None => batch.reads.push(PendingRead {
                    store,
                    key,
                    id,
                    waiters: vec![waiter],
                }),
            }
            first
        };
        if first {
            // A task of its own runs after the tasks already woken, so their
            // reads join this batch.
            wasm_bindgen_futures::spawn_local(flush_reads(self.db.clone(), self.pending.clone()));
        }
        match answer.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err((step, e))) => Err(backend(step, &e)),
            Err(_) => Err(StorageError::Backend(
                "IndexedDB read was dropped before it was answered".into(),
            )),
        }
    }
}

/// Create the object stores of `VERSION` (called inside `upgradeneeded`).
fn upgrade(db: &IdbDatabase) {
    let existing = db.object_store_names();
    for name in Table::ALL.iter().map(|t| t.as_str()).chain([BLOBS, LEASES]) {
        if !existing.contains(name) {
            // A failure here aborts the upgrade, and `open` reports it.
            let _ = db.create_object_store(name);
        }
    }
}

#[async_trait::async_trait(?Send)]
impl Storage for IdbStorage {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(optional_bytes(
            self.read_one(table.as_str(), key_bytes(key), key.to_owned())
                .await?,
        ))
    }

    async fn scan_prefix(
        &self,
        table: Table,
        prefix: &str,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        let name = table.as_str();
        let tx = self.tx(&[name], IdbTransactionMode::Readonly)?;
        let store = Self::store(&tx, name)?;
        let lower = key_bytes(prefix);
        let range = match key_range::prefix_upper_bound(prefix.as_bytes()) {
            Some(upper) => IdbKeyRange::bound_with_lower_open_and_upper_open(
                &lower,
                &Uint8Array::from(upper.as_slice()).into(),
                false,
                true,
            ),
            None => IdbKeyRange::lower_bound(&lower),
        }
        .map_err(|e| backend("key range", &e))?;
        let keys_req = store
            .get_all_keys_with_key(&range)
            .map_err(|e| backend("getAllKeys", &e))?;
        let values_req = store
            .get_all_with_key(&range)
            .map_err(|e| backend("getAll", &e))?;
        let (keys, values) = futures::join!(js::request(&keys_req), js::request(&values_req));
        let keys = Array::from(&keys.map_err(|e| backend("getAllKeys", &e))?);
        let values = Array::from(&values.map_err(|e| backend("getAll", &e))?);
        let mut out = Vec::with_capacity(keys.length() as usize);
        for (k, v) in keys.iter().zip(values.iter()) {
            let key = String::from_utf8(bytes_of(&k)).map_err(|e| StorageError::Corrupt {
                table,
                key: format!("{:?}", e.as_bytes()),
                detail: "stored key is not UTF-8".into(),
            })?;
            out.push((key, bytes_of(&v)));
        }
        Ok(out)
    }

    async fn commit(&self, batch: Batch) -> Result<(), StorageError> {
        let mut stores: BTreeSet<&'static str> = BTreeSet::new();
        if batch.fence.is_some() {
            stores.insert(LEASES);
        }
        for c in &batch.conditions {
            let (Condition::Absent { table, .. }
            | Condition::Present { table, .. }
            | Condition::Equals { table, .. }) = c;
            stores.insert(table.as_str());
        }
        batch.check_blobs()?;
        for op in batch.ops() {
            stores.insert(match op {
                Op::Put { table, .. } | Op::Delete { table, .. } => table.as_str(),
                Op::PutBlob { .. } => BLOBS,
            });
        }
        if stores.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = stores.into_iter().collect();
        let tx = self.tx(&names, IdbTransactionMode::Readwrite)?;
        let done = js::transaction(&tx);

        // Phase 1: every read the checks need, issued together, awaited together.
        let fence_read = match &batch.fence {
            Some(fence) => {
                let req = Self::store(&tx, LEASES)?
                    .get(&JsValue::from_str(fence.session.as_str()))
                    .map_err(|e| backend("get lease", &e))?;
                Some(js::request(&req))
            }
            None => None,
        };
        let mut condition_reads = Vec::with_capacity(batch.conditions.len());
        for c in &batch.conditions {
            let (Condition::Absent { table, key }
            | Condition::Present { table, key }
            | Condition::Equals { table, key, .. }) = c;
            let req = Self::store(&tx, table.as_str())?
                .get(&key_bytes(key))
                .map_err(|e| backend("get", &e))?;
            condition_reads.push(js::request(&req));
        }
        let fence_value = match fence_read {
            Some(f) => Some(f.await),
            None => None,
        };
        let condition_values = join_all(condition_reads).await;

        // Phase 2: check, inside the same transaction.
        let checked = check(&batch, fence_value, condition_values);
        if let Err(e) = checked {
            let _ = tx.abort();
            let _ = done.await;
            return Err(e);
        }

        // Phase 3: every write, issued synchronously; then wait for the commit.
        for op in batch.into_ops() {
            let result = match op {
                Op::Put { table, key, value } => Self::store(&tx, table.as_str())?
                    .put_with_key(&Uint8Array::from(value.as_slice()).into(), &key_bytes(&key))
                    .map(|_| ()),
                Op::Delete { table, key } => Self::store(&tx, table.as_str())?
                    .delete(&key_bytes(&key))
                    .map(|_| ()),
                // Blobs are content-addressed: putting the same bytes again
                // rewrites one copy.
                Op::PutBlob { hash, bytes } => Self::store(&tx, BLOBS)?
                    .put_with_key(
                        &Uint8Array::from(bytes.as_slice()).into(),
                        &JsValue::from_str(&hash),
                    )
                    .map(|_| ()),
            };
            if let Err(e) = result {
                let _ = tx.abort();
                let _ = done.await;
                return Err(backend("write", &e));
            }
        }
        done.await.map_err(|e| backend("commit", &e))?;
        Ok(())
    }

    async fn put_blob(&self, hash: &str, bytes: Vec<u8>) -> Result<BlobRef, StorageError> {
        let blob = BlobRef::claimed(hash, &bytes)?;
        let tx = self.tx(&[BLOBS], IdbTransactionMode::Readwrite)?;
        let done = js::transaction(&tx);
        Self::store(&tx, BLOBS)?
            .put_with_key(
                &Uint8Array::from(bytes.as_slice()).into(),
                &JsValue::from_str(&blob.hash),
            )
            .map_err(|e| backend("put blob", &e))?;
        done.await.map_err(|e| backend("put blob", &e))?;
        Ok(blob)
    }

    async fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(optional_bytes(
            self.read_one(BLOBS, JsValue::from_str(hash), hash.to_owned())
                .await?,
        ))
    }

    async fn delete_blob(&self, hash: &str) -> Result<bool, StorageError> {
        let tx = self.tx(&[BLOBS], IdbTransactionMode::Readwrite)?;
        let done = js::transaction(&tx);
        let store = Self::store(&tx, BLOBS)?;
        let key = JsValue::from_str(hash);
        let count = store
            .count_with_key(&key)
            .map_err(|e| backend("count blob", &e))?;
        let existed = js::request(&count)
            .await
            .map_err(|e| backend("count blob", &e))?
            .as_f64()
            .unwrap_or(0.0)
            > 0.0;
        if existed {
            store.delete(&key).map_err(|e| backend("delete blob", &e))?;
        }
        done.await.map_err(|e| backend("delete blob", &e))?;
        Ok(existed)
    }

    async fn list_blobs(&self) -> Result<Vec<String>, StorageError> {
        let tx = self.tx(&[BLOBS], IdbTransactionMode::Readonly)?;
        let req = Self::store(&tx, BLOBS)?
            .get_all_keys()
            .map_err(|e| backend("list blobs", &e))?;
        let keys = js::request(&req)
            .await
            .map_err(|e| backend("list blobs", &e))?;
        Ok(Array::from(&keys)
            .iter()
            .filter_map(|k| k.as_string())
            .collect())
    }

    /// One readwrite transaction: read the session's record, compare it,
    /// write the new one only if it is the expected one.
    async fn lease_cas(
        &self,
        expected: Option<&LeaseRecord>,
        new: &LeaseRecord,
    ) -> Result<LeaseCas, StorageError> {
        let tx = self.tx(&[LEASES], IdbTransactionMode::Readwrite)?;
        let done = js::transaction(&tx);
        let store = Self::store(&tx, LEASES)?;
        let key = JsValue::from_str(new.session.as_str());
        let req = store.get(&key).map_err(|e| backend("get lease", &e))?;
        let stored = js::request(&req)
            .await
            .map_err(|e| backend("get lease", &e))
            .and_then(|value| decode_lease(&new.session, &value));
        let stored = match stored {
            Ok(stored) => stored,
            Err(e) => {
                let _ = tx.abort();
                let _ = done.await;
                return Err(e);
            }
        };
        if !lease_cas::is_expected(expected, stored.as_ref()) {
            // Nothing was written: the transaction commits empty.
            done.await.map_err(|e| backend("lease transaction", &e))?;
            return Ok(LeaseCas::Refused { current: stored });
        }
        store
            .put_with_key(&encode_lease(new)?, &key)
            .map_err(|e| backend("put lease", &e))?;
        done.await.map_err(|e| backend("lease transaction", &e))?;
        Ok(LeaseCas::Swapped)
    }

    async fn current_lease(
        &self,
        session: &SessionId,
    ) -> Result<Option<LeaseRecord>, StorageError> {
        let value = self
            .read_one(
                LEASES,
                JsValue::from_str(session.as_str()),
                session.as_str().to_owned(),
            )
            .await?;
        decode_lease(session, &value)
    }
}

/// Check the fence and then each condition, in order, as the memory backend does.
fn check(
    batch: &Batch,
    fence_value: Option<Result<JsValue, JsValue>>,
    condition_values: Vec<Result<JsValue, JsValue>>,
) -> Result<(), StorageError> {
    if let (Some(fence), Some(value)) = (&batch.fence, fence_value) {
        let value = value.map_err(|e| backend("get lease", &e))?;
        fence.check(decode_lease(&fence.session, &value)?.map(|l| l.epoch))?;
    }
    for (condition, value) in batch.conditions.iter().zip(condition_values) {
        let stored = optional_bytes(value.map_err(|e| backend("get", &e))?);
        condition.check(stored.as_deref())?;
    }
    Ok(())
}
