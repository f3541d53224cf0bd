-- Versions and trash (issue 32): a delete or an overwrite is never final.
--
-- A file's current version stays its row in `files`, which every read
-- looks up; `version_id` names it ('null': S3's null version, what an
-- unversioned tree writes). The versions before it, and delete markers,
-- are rows of `file_versions`, newest last (`seq`): a row with no
-- sha256 is a delete marker. A path's latest version is its `files` row,
-- else (deleted) its newest `file_versions` row, which is then a marker.
ALTER TABLE files ADD COLUMN version_id TEXT NOT NULL DEFAULT 'null';

CREATE TABLE file_versions (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    owner        INTEGER NOT NULL,
    path         TEXT    NOT NULL,
    size         INTEGER NOT NULL CHECK (size >= 0),
    sha256       TEXT    CHECK (sha256 IS NULL OR length(sha256) = 64), -- NULL: a delete marker
    blake3       TEXT,
    content_type TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL,
    modified_ms  INTEGER NOT NULL, -- a marker's: when the delete happened
    s3_info      TEXT,
    version_id   TEXT    NOT NULL,
    archived_ms  INTEGER NOT NULL, -- when it stopped being the latest (a marker: was made)
    retained     INTEGER NOT NULL  -- 1: the operator's retention expires it; 0: kept until deleted (S3)
);
CREATE UNIQUE INDEX file_versions_by_id ON file_versions (owner, path, version_id);
CREATE INDEX file_versions_by_sha256 ON file_versions (sha256);
CREATE INDEX file_versions_by_age ON file_versions (owner, retained, archived_ms);

-- A bucket's versioning as S3 set it (a top-level folder's, by `path`:
-- its name and '/'); a folder with no row follows the operator's default.
CREATE TABLE versioning (
    owner INTEGER NOT NULL,
    path  TEXT    NOT NULL,
    state TEXT    NOT NULL CHECK (state IN ('unversioned', 'enabled', 'suspended')),
    PRIMARY KEY (owner, path)
);
