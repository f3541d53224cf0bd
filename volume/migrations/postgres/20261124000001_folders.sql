-- Folders made on purpose (an empty one exists until deleted); a folder
-- that only holds files needs no row. `path` ends with `/`.
CREATE TABLE folders (
    owner      BIGINT NOT NULL,
    path       TEXT   COLLATE "C" NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (owner, path)
);
