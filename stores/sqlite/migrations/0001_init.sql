-- 0001: the three stores of `agent_kernel::host::Storage`.
-- Keys are BLOBs holding UTF-8 so that SQLite orders them by bytes (memcmp),
-- which is the order the kernel's prefix scans promise.
CREATE TABLE kv (
    tbl   TEXT NOT NULL,
    key   BLOB NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (tbl, key)
) WITHOUT ROWID;

CREATE TABLE blobs (
    hash  TEXT NOT NULL PRIMARY KEY,
    size  INTEGER NOT NULL,
    bytes BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE leases (
    session       TEXT NOT NULL PRIMARY KEY,
    owner         TEXT NOT NULL,
    epoch         INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
