-- One row per stored file. Blobs are content-addressed objects; a blob's
-- reference count is the number of rows naming its digest (kept exact by the
-- index below, so no separate counter can drift). Paths compare byte by byte
-- (COLLATE "C"), as the listing's ranges and pages assume.
CREATE TABLE files (
    path         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    size         BIGINT NOT NULL CHECK (size >= 0),
    sha256       TEXT   NOT NULL CHECK (length(sha256) = 64),
    content_type TEXT   NOT NULL,
    created_ms   BIGINT NOT NULL,
    modified_ms  BIGINT NOT NULL
);

CREATE INDEX files_by_sha256 ON files (sha256);
