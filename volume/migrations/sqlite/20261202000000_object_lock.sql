-- Object lock and lifecycle (issue 33).
--
-- A bucket's object lock rides on its versioning row (lock needs
-- versioning on, and every write reads that row already): NULL, no lock;
-- '' enabled without a default; 'GOVERNANCE 30d' or 'COMPLIANCE 1y', the
-- default retention every new version of the bucket gets.
ALTER TABLE versioning ADD COLUMN object_lock TEXT;

-- A version's retention and legal hold, by the version's identity (a
-- path's current file in `files` and its earlier versions in
-- `file_versions` keep their version ids when they move between the
-- two). A version is locked while retain_until_ms is in the future or its
-- legal hold is on; nothing removes a locked version's row.
CREATE TABLE object_locks (
    owner           INTEGER NOT NULL,
    path            TEXT    NOT NULL,
    version_id      TEXT    NOT NULL,
    mode            TEXT    CHECK (mode IS NULL OR mode IN ('GOVERNANCE', 'COMPLIANCE')),
    retain_until_ms INTEGER,
    legal_hold      INTEGER, -- NULL: never set; 0: off; 1: on
    CHECK ((mode IS NULL) = (retain_until_ms IS NULL)),
    PRIMARY KEY (owner, path, version_id)
);

-- A bucket's configurations that S3 sets as one document each
-- (`kind`: 'lifecycle'), as their JSON, by the bucket's folder (`name/`).
CREATE TABLE bucket_configs (
    owner INTEGER NOT NULL,
    path  TEXT    NOT NULL,
    kind  TEXT    NOT NULL,
    body  TEXT    NOT NULL,
    PRIMARY KEY (owner, path, kind)
);

-- A bucket's CORS rules and public policy answer requests that carry no
-- credentials (a browser's preflight, an anonymous read), which name a
-- bucket but not its owner: the name is then one owner's, as S3's bucket
-- names are everyone's.
CREATE UNIQUE INDEX bucket_configs_claimed ON bucket_configs (path, kind)
    WHERE kind IN ('cors', 'policy');
