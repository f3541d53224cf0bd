-- One row per stored file. Blobs are content-addressed files on disk; a
-- blob's reference count is the number of rows naming its digest (kept exact
-- by the index below, so no separate counter can drift).
CREATE TABLE files (
    path         TEXT    NOT NULL PRIMARY KEY,
    size         INTEGER NOT NULL CHECK (size >= 0),
    sha256       TEXT    NOT NULL CHECK (length(sha256) = 64),
    content_type TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL,
    modified_ms  INTEGER NOT NULL
);

CREATE INDEX files_by_sha256 ON files (sha256);
