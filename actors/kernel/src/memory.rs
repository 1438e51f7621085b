//! In-memory host: storage, blobs and leases in memory (filled in by the kernel work).
