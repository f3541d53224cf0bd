-- Accounts: every file belongs to a tree, its owner's (0 is the open tree,
-- used while no user exists); users with their password hashes, API tokens
-- and browser sessions (only hashes of the secrets are kept), share links,
-- and the server secrets every gateway on this database shares.
CREATE TABLE files_by_owner (
    owner        INTEGER NOT NULL DEFAULT 0,
    path         TEXT    NOT NULL,
    size         INTEGER NOT NULL CHECK (size >= 0),
    sha256       TEXT    NOT NULL CHECK (length(sha256) = 64),
    content_type TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL,
    modified_ms  INTEGER NOT NULL,
    PRIMARY KEY (owner, path)
);
INSERT INTO files_by_owner (owner, path, size, sha256, content_type, created_ms, modified_ms)
    SELECT 0, path, size, sha256, content_type, created_ms, modified_ms FROM files;
DROP TABLE files;
ALTER TABLE files_by_owner RENAME TO files;
CREATE INDEX files_by_sha256 ON files (sha256);

CREATE TABLE users (
    id            INTEGER PRIMARY KEY AUTOINCREMENT CHECK (id > 0),
    name          TEXT    NOT NULL UNIQUE,
    password_hash TEXT    NOT NULL,
    admin         INTEGER NOT NULL DEFAULT 0,
    quota_bytes   INTEGER CHECK (quota_bytes >= 0),
    created_ms    INTEGER NOT NULL
);

CREATE TABLE tokens (
    id         TEXT    NOT NULL PRIMARY KEY,
    hash       TEXT    NOT NULL UNIQUE,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    label      TEXT    NOT NULL,
    created_ms INTEGER NOT NULL
);

CREATE TABLE sessions (
    hash       TEXT    NOT NULL PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf       TEXT    NOT NULL,
    expires_ms INTEGER NOT NULL
);

CREATE TABLE shares (
    id         TEXT    NOT NULL PRIMARY KEY,
    owner      INTEGER NOT NULL,
    path       TEXT    NOT NULL,
    -- The shared file's creation time: a file deleted and made again at
    -- the same path is another file, which the link does not reach.
    file_created_ms INTEGER NOT NULL,
    expires_ms INTEGER,
    created_ms INTEGER NOT NULL
);

CREATE INDEX tokens_by_user ON tokens (user_id);
CREATE INDEX sessions_by_user ON sessions (user_id);
CREATE INDEX sessions_by_expiry ON sessions (expires_ms);
CREATE INDEX shares_by_owner ON shares (owner, path);

CREATE TABLE secrets (
    name  TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);
