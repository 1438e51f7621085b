//! Indexing a 10 MB document set natively (issue 20: "adding a 10 MB
//! document set indexes in under a few seconds"): 100 generated documents
//! of about 100 KB each added to a new base in one call, through the whole
//! path (chunking, hashing, one storage batch on the kernel's memory
//! storage, the BM25 index build). Prints the median of the samples and
//! criterion's own estimate.
//! Run: `cargo bench -p agent-knowledge --bench index` (`-- --quick` is
//! criterion's quick mode).

#![cfg_attr(target_arch = "wasm32", allow(dead_code, unused_imports))]

#[cfg(target_arch = "wasm32")]
fn main() {} // criterion is a native dev-dependency; the bench runs natively.

#[cfg(not(target_arch = "wasm32"))]
use std::sync::Arc;
#[cfg(not(target_arch = "wasm32"))]
use std::time::{Duration, Instant};

#[cfg(not(target_arch = "wasm32"))]
use criterion::{Criterion, Throughput, criterion_group};

/// A small deterministic generator (SplitMix64), so every run sees the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

const DOCS: usize = 100;
const DOC_BYTES: usize = 100 * 1024;

/// About 10 MB of English-like text over a vocabulary of 5,000 words.
fn corpus() -> Vec<(String, String)> {
    let mut rng = Rng(20);
    let vocab: Vec<String> = (0..5000)
        .map(|i| {
            let len = 3 + (rng.next() % 8) as usize;
            (0..len)
                .map(|j| (b'a' + ((rng.next() as usize + i + j) % 26) as u8) as char)
                .collect()
        })
        .collect();
    (0..DOCS)
        .map(|d| {
            let mut text = String::with_capacity(DOC_BYTES + 64);
            while text.len() < DOC_BYTES {
                // Zipf-ish: frequent words much more often than rare ones.
                let r = rng.next();
                let idx = ((r % 5000) * (r % 5000)) / 5000;
                text.push_str(&vocab[idx as usize]);
                text.push(if r.is_multiple_of(17) { '.' } else { ' ' });
            }
            (format!("doc-{d:03}"), text)
        })
        .collect()
}

#[cfg(not(target_arch = "wasm32"))]
fn index_once(rt: &tokio::runtime::Runtime, corpus: &[(String, String)]) -> Duration {
    use agent_kernel::host::{ManualClock, Storage};
    use agent_kernel::memory::MemoryStorage;
    use agent_knowledge::{KnowledgeBases, KnowledgeStore, NewDocument, SourceRef};
    let docs: Vec<NewDocument> = corpus
        .iter()
        .map(|(id, text)| NewDocument {
            id: id.clone(),
            title: id.clone(),
            source: SourceRef::Other {
                label: "bench".into(),
            },
            text: text.clone(),
        })
        .collect();
    rt.block_on(async move {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let store = KnowledgeStore::new(storage, Arc::new(ManualClock::new(0)));
        let bases = KnowledgeBases::open(store).await.expect("open");
        bases.create_base("bench").await.expect("create");
        let start = Instant::now();
        bases.add_documents("bench", docs).await.expect("add");
        start.elapsed()
    })
}

#[cfg(not(target_arch = "wasm32"))]
fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let corpus = corpus();
    let bytes: usize = corpus.iter().map(|(_, t)| t.len()).sum();
    let mut samples: Vec<Duration> = (0..5).map(|_| index_once(&rt, &corpus)).collect();
    samples.sort();
    let median = samples[samples.len() / 2];
    println!(
        "knowledge index: {:.1} MB in {} documents indexed in {:.2} s (median of {}; {:.1} MB/s)",
        bytes as f64 / 1e6,
        corpus.len(),
        median.as_secs_f64(),
        samples.len(),
        bytes as f64 / 1e6 / median.as_secs_f64()
    );
    let mut group = c.benchmark_group("knowledge");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("index_10mb", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| index_once(&rt, &corpus)).sum())
    });
    group.finish();
}

#[cfg(not(target_arch = "wasm32"))]
criterion_group!(benches, bench);

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
