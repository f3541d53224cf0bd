-- WebDAV: dead properties and locks, in the database so that every gateway
-- on it sees the same. A resource is named by its key: a file's path, or a
-- folder's prefix ending with `/` (the root folder is the empty key).
CREATE TABLE dav_properties (
    owner     BIGINT NOT NULL,
    path      TEXT   COLLATE "C" NOT NULL,
    namespace TEXT   NOT NULL, -- '' for a property in no namespace
    name      TEXT   NOT NULL,
    value     TEXT   NOT NULL, -- an XML fragment, every element's namespace declared
    PRIMARY KEY (owner, path, namespace, name)
);

CREATE TABLE dav_locks (
    token      TEXT   NOT NULL PRIMARY KEY, -- urn:wst:…
    owner      BIGINT NOT NULL,
    path       TEXT   COLLATE "C" NOT NULL, -- the lock's root
    infinite   BIGINT NOT NULL,             -- 1: Depth infinity; 0: Depth 0
    exclusive  BIGINT NOT NULL,             -- 1: exclusive; 0: shared
    holder     TEXT   NOT NULL,             -- the client's DAV:owner, an XML fragment
    timeout_s  BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
CREATE INDEX dav_locks_by_owner ON dav_locks (owner, path);
