-- 0001: the three stores of `agent_kernel::host::Storage`.
-- Keys are BYTEA holding UTF-8: PostgreSQL compares bytea byte by byte
-- (memcmp), which is the order the kernel's prefix scans promise, whatever
-- the database's collation.
CREATE TABLE agentrt_kv (
    tbl   TEXT  NOT NULL,
    key   BYTEA NOT NULL,
    value BYTEA NOT NULL,
    PRIMARY KEY (tbl, key)
);

-- Content-addressed: the hash is the SHA-256 of the bytes (lowercase hex).
CREATE TABLE agentrt_blobs (
    hash  TEXT   NOT NULL PRIMARY KEY,
    size  BIGINT NOT NULL,
    bytes BYTEA  NOT NULL
);

-- One row per session ever leased; a release expires the row and keeps
-- its epoch, so the next tenure's epoch is higher.
CREATE TABLE agentrt_leases (
    session       TEXT   NOT NULL PRIMARY KEY,
    owner         TEXT   NOT NULL,
    epoch         BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
