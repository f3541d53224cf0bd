-- Resumable uploads (tus): a file on its way in, a part at a time, which any
-- gateway on this database can take further until it completes, is
-- terminated or expires. Its parts are objects in the blob store under
-- uploads/<id>/, named here; the file appears at `path` only once the last
-- byte is in and it has been hashed like any upload.
CREATE TABLE uploads (
    id           TEXT    NOT NULL PRIMARY KEY, -- random, URL-safe
    owner        BIGINT  NOT NULL,
    path         TEXT COLLATE "C" NOT NULL,
    length       BIGINT,                         -- NULL: not declared yet
    received     BIGINT  NOT NULL,               -- bytes in recorded parts
    content_type TEXT    NOT NULL,           -- '' to sniff one
    create_only  BIGINT  NOT NULL,               -- 1: refuse to replace a file
    metadata     TEXT    NOT NULL,           -- the client's Upload-Metadata, echoed
    created_ms   BIGINT  NOT NULL,
    expires_ms   BIGINT  NOT NULL
);
CREATE INDEX uploads_by_expiry ON uploads (expires_ms);

CREATE TABLE upload_parts (
    upload_id TEXT   NOT NULL,
    offset_at BIGINT NOT NULL, -- where the part starts in the file
    size      BIGINT NOT NULL,
    name      TEXT   NOT NULL, -- its object: uploads/<upload_id>/<name>
    PRIMARY KEY (upload_id, offset_at)
);
