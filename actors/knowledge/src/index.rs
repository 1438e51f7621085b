//! The open knowledge bases: every base's chunks in a BM25 index (the
//! `bm25` crate), built from storage on open and after each change, and
//! ranked search that returns bounded passages with provenance (base,
//! document, byte offset, the chunk's SHA-256) that resolves back to the
//! stored text.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use bm25::{DefaultTokenizer, Document, Language, SearchEngine, SearchEngineBuilder, Tokenizer};
use serde::Serialize;

use crate::chunk::ChunkSpan;
use crate::store::{
    BaseRecord, DocumentRecord, KnowledgeError, KnowledgeStore, LoadedDocument, NewDocument,
    SourceRef, check_name,
};

/// Most passages one search returns.
pub const MAX_PASSAGES: usize = 10;
/// The most text one passage carries, in bytes.
pub const MAX_PASSAGE_BYTES: usize = 4000;
/// The longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 512;
/// Most bases one search names.
pub const MAX_BASES_PER_SEARCH: usize = 16;

/// How much a search returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchLimits {
    /// Passages, at most [`MAX_PASSAGES`].
    pub max_passages: usize,
    /// Bytes of text per passage, at most [`MAX_PASSAGE_BYTES`]; a longer
    /// chunk is cut on a char boundary and marked `truncated`.
    pub max_bytes: usize,
}

impl Default for SearchLimits {
    fn default() -> Self {
        SearchLimits {
            max_passages: 5,
            max_bytes: 1500,
        }
    }
}

/// One search result: a chunk's text (bounded) and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Passage {
    pub base: String,
    pub document: String,
    pub title: String,
    pub source: SourceRef,
    /// Byte offset of the chunk in the document's stored text.
    pub offset: u64,
    /// The chunk's length in bytes (of the whole chunk, even when `text` is cut).
    pub len: u64,
    /// SHA-256 of the whole chunk's bytes.
    pub text_hash: String,
    pub text: String,
    pub truncated: bool,
    pub score: f32,
}

struct IndexedChunk {
    doc: usize,
    span: ChunkSpan,
}

/// The crate's English tokenizer, tokenizing each chunk once: building an
/// engine from a corpus tokenizes every chunk twice (once to fit the
/// average length, once to index), so the fit pass remembers each chunk's
/// tokens and the index pass takes them back. After the build the memory
/// is empty and queries go straight to the tokenizer.
struct OnceTokenizer {
    inner: DefaultTokenizer,
    fitting: Arc<AtomicBool>,
    memo: Arc<Mutex<HashMap<String, Vec<Vec<String>>>>>,
}

impl Tokenizer for OnceTokenizer {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        let fitting = self.fitting.load(Ordering::Relaxed);
        if !fitting
            && let Ok(mut memo) = self.memo.lock()
            && let Some(list) = memo.get_mut(input_text)
            && let Some(tokens) = list.pop()
        {
            if list.is_empty() {
                memo.remove(input_text);
            }
            return tokens;
        }
        let tokens = self.inner.tokenize(input_text);
        if fitting && let Ok(mut memo) = self.memo.lock() {
            memo.entry(input_text.to_owned())
                .or_default()
                .push(tokens.clone());
        }
        tokens
    }
}

type Engine = SearchEngine<u32, u32, OnceTokenizer>;

/// A BM25 engine over `corpus`, each chunk tokenized once.
fn engine(corpus: Vec<Document<u32>>) -> Engine {
    let fitting = Arc::new(AtomicBool::new(true));
    let memo = Arc::new(Mutex::new(HashMap::new()));
    let tokenizer = OnceTokenizer {
        inner: DefaultTokenizer::new(Language::English),
        fitting: fitting.clone(),
        memo: memo.clone(),
    };
    let builder = SearchEngineBuilder::<u32, u32, OnceTokenizer>::with_tokenizer_and_documents(
        tokenizer, corpus,
    );
    fitting.store(false, Ordering::Relaxed);
    let engine = builder.build();
    if let Ok(mut memo) = memo.lock() {
        memo.clear();
        memo.shrink_to_fit();
    }
    engine
}

/// One base's index: its documents, their chunks and the BM25 engine over them.
struct BaseIndex {
    revision: u64,
    documents: Vec<LoadedDocument>,
    chunks: Vec<IndexedChunk>,
    engine: Engine,
}

impl BaseIndex {
    fn build(revision: u64, documents: Vec<LoadedDocument>) -> BaseIndex {
        let mut chunks = Vec::new();
        let mut corpus = Vec::new();
        for (i, doc) in documents.iter().enumerate() {
            for span in &doc.record.chunks {
                let (s, e) = (span.offset as usize, (span.offset + span.len) as usize);
                // Spans were checked against the text when it was loaded.
                let text = doc.text.get(s..e).unwrap_or_default();
                corpus.push(Document::new(chunks.len() as u32, text));
                chunks.push(IndexedChunk {
                    doc: i,
                    span: span.clone(),
                });
            }
        }
        let engine = engine(corpus);
        BaseIndex {
            revision,
            documents,
            chunks,
            engine,
        }
    }
}

/// The allowlist of bases one run may search (a profile's knowledge
/// allowlist, S10.1). Empty allows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KnowledgeAllowlist {
    pub bases: BTreeSet<String>,
}

impl KnowledgeAllowlist {
    pub fn of<'a>(bases: impl IntoIterator<Item = &'a str>) -> KnowledgeAllowlist {
        KnowledgeAllowlist {
            bases: bases.into_iter().map(str::to_owned).collect(),
        }
    }

    /// Refuse, naming it, the first base not on the list.
    pub fn check(&self, bases: &[String]) -> Result<(), KnowledgeError> {
        match bases.iter().find(|b| !self.bases.contains(*b)) {
            None => Ok(()),
            Some(base) => Err(KnowledgeError::NotAllowed {
                base: base.chars().take(100).collect(),
                allowed: if self.bases.is_empty() {
                    "none".to_owned()
                } else {
                    self.bases.iter().cloned().collect::<Vec<_>>().join(", ")
                },
            }),
        }
    }
}

/// Every knowledge base of a host, indexed. Clone it freely: clones share
/// the indexes.
#[derive(Clone)]
pub struct KnowledgeBases {
    store: KnowledgeStore,
    indexes: Arc<RwLock<BTreeMap<String, Arc<BaseIndex>>>>,
    /// Whether every stored base was indexed ([`KnowledgeBases::load`]).
    loaded: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for KnowledgeBases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeBases").finish_non_exhaustive()
    }
}

impl KnowledgeBases {
    /// Load every stored base and build its index (after a restart too).
    pub async fn open(store: KnowledgeStore) -> Result<KnowledgeBases, KnowledgeError> {
        let bases = KnowledgeBases::unloaded(store);
        bases.load().await?;
        Ok(bases)
    }

    /// The bases of `store` without reading them yet (a host that wires
    /// its tools without awaiting); [`KnowledgeBases::load`] indexes them.
    pub fn unloaded(store: KnowledgeStore) -> KnowledgeBases {
        KnowledgeBases {
            store,
            indexes: Arc::default(),
            loaded: Arc::default(),
        }
    }

    /// Index every stored base, once; later calls return at once.
    pub async fn load(&self) -> Result<(), KnowledgeError> {
        use std::sync::atomic::Ordering;
        if self.loaded.load(Ordering::SeqCst) {
            return Ok(());
        }
        for base in self.store.bases().await? {
            self.reload(&base).await?;
        }
        self.loaded.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The store underneath.
    pub fn store(&self) -> &KnowledgeStore {
        &self.store
    }

    async fn reload(&self, base: &BaseRecord) -> Result<(), KnowledgeError> {
        let documents = self.store.load_documents(base).await?;
        self.install(&base.name, BaseIndex::build(base.revision, documents));
        Ok(())
    }

    /// Put `index` in place unless a newer one is there already.
    fn install(&self, base: &str, index: BaseIndex) {
        if let Ok(mut map) = self.indexes.write() {
            let newer = map.get(base).is_some_and(|i| i.revision > index.revision);
            if !newer {
                map.insert(base.to_owned(), Arc::new(index));
            }
        }
    }

    fn index(&self, base: &str) -> Option<Arc<BaseIndex>> {
        self.indexes.read().ok()?.get(base).cloned()
    }

    /// Names of the open bases.
    pub fn names(&self) -> Vec<String> {
        self.indexes
            .read()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Create an empty base.
    pub async fn create_base(&self, base: &str) -> Result<BaseRecord, KnowledgeError> {
        let record = self.store.create_base(base).await?;
        self.install(base, BaseIndex::build(record.revision, Vec::new()));
        Ok(record)
    }

    /// Add documents (text and a source reference each) to a base: stored
    /// in one batch, then the base's index is rebuilt with them.
    pub async fn add_documents(
        &self,
        base: &str,
        documents: Vec<NewDocument>,
    ) -> Result<Vec<DocumentRecord>, KnowledgeError> {
        let texts: Vec<Arc<str>> = documents
            .iter()
            .map(|d| Arc::from(d.text.as_str()))
            .collect();
        let (record, added) = self.store.add_documents(base, documents).await?;
        match self.index(base) {
            // Nobody else changed the base in between: extend what we have.
            Some(old) if old.revision + 1 == record.revision => {
                let mut docs = old.documents.clone();
                docs.extend(
                    added
                        .iter()
                        .cloned()
                        .zip(texts)
                        .map(|(record, text)| LoadedDocument { record, text }),
                );
                self.install(base, BaseIndex::build(record.revision, docs));
            }
            _ => self.reload(&record).await?,
        }
        Ok(added)
    }

    /// Remove a document and rebuild the base's index.
    pub async fn remove_document(&self, base: &str, document: &str) -> Result<(), KnowledgeError> {
        let record = self.store.remove_document(base, document).await?;
        match self.index(base) {
            Some(old) if old.revision + 1 == record.revision => {
                let docs = old
                    .documents
                    .iter()
                    .filter(|d| d.record.id != document)
                    .cloned()
                    .collect();
                self.install(base, BaseIndex::build(record.revision, docs));
            }
            _ => self.reload(&record).await?,
        }
        Ok(())
    }

    /// Delete a base.
    pub async fn delete_base(&self, base: &str) -> Result<(), KnowledgeError> {
        self.store.delete_base(base).await?;
        if let Ok(mut map) = self.indexes.write() {
            map.remove(base);
        }
        Ok(())
    }

    /// The best passages for `query` in `bases`, best first, bounded by
    /// `limits`. Unknown bases are `NoBase`; the caller checks the
    /// allowlist first ([`KnowledgeAllowlist::check`]).
    pub fn search(
        &self,
        bases: &[String],
        query: &str,
        limits: SearchLimits,
    ) -> Result<Vec<Passage>, KnowledgeError> {
        let query = query.trim();
        if query.is_empty() || query.len() > MAX_QUERY_BYTES {
            return Err(KnowledgeError::BadQuery {
                max: MAX_QUERY_BYTES,
            });
        }
        let max_passages = limits.max_passages.clamp(1, MAX_PASSAGES);
        let max_bytes = limits.max_bytes.clamp(1, MAX_PASSAGE_BYTES);
        let names: BTreeSet<&String> = bases.iter().collect();
        let mut scored: Vec<(f32, &str, u32, Arc<BaseIndex>)> = Vec::new();
        let mut found = Vec::new();
        for name in names {
            check_name("knowledge base name", name)?;
            let index = self
                .index(name)
                .ok_or_else(|| KnowledgeError::NoBase { base: name.clone() })?;
            found.push((name.as_str(), index));
        }
        for (name, index) in &found {
            for hit in index.engine.search(query, None) {
                scored.push((hit.score, name, hit.document.id, index.clone()));
            }
        }
        // Best first; ties by base and chunk order, so results are stable.
        scored.sort_by(|a, b| {
            b.0.partial_cmp(&a.0)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.1.cmp(b.1))
                .then(a.2.cmp(&b.2))
        });
        scored.truncate(max_passages);
        Ok(scored
            .into_iter()
            .filter_map(|(score, _, id, index)| passage(&index, id, score, max_bytes))
            .collect())
    }

    /// The exact stored text a passage points at, read again from storage
    /// and checked: the chunk's bytes must hash to `text_hash`.
    pub async fn resolve(&self, passage: &Passage) -> Result<String, KnowledgeError> {
        let record = self
            .store
            .document(&passage.base, &passage.document)
            .await?;
        let text = self.store.text(&record).await?;
        let missing = || KnowledgeError::MissingText {
            base: passage.base.clone(),
            document: passage.document.clone(),
        };
        let end = passage
            .offset
            .checked_add(passage.len)
            .ok_or_else(missing)?;
        let chunk = text
            .get(passage.offset as usize..end as usize)
            .ok_or_else(missing)?;
        if agent_capabilities::sha256_hex(chunk.as_bytes()) != passage.text_hash {
            return Err(missing());
        }
        Ok(chunk.to_owned())
    }
}

fn passage(index: &BaseIndex, id: u32, score: f32, max_bytes: usize) -> Option<Passage> {
    let chunk = index.chunks.get(id as usize)?;
    let doc = index.documents.get(chunk.doc)?;
    let (s, e) = (
        chunk.span.offset as usize,
        (chunk.span.offset + chunk.span.len) as usize,
    );
    let full = doc.text.get(s..e)?;
    let mut cut = max_bytes.min(full.len());
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(Passage {
        base: doc.record.base.clone(),
        document: doc.record.id.clone(),
        title: doc.record.title.clone(),
        source: doc.record.source.clone(),
        offset: chunk.span.offset,
        len: chunk.span.len,
        text_hash: chunk.span.hash.clone(),
        text: full[..cut].to_owned(),
        truncated: cut < full.len(),
        score,
    })
}
