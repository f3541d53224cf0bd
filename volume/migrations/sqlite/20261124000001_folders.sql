-- Folders made on purpose (an empty one exists until deleted); a folder
-- that only holds files needs no row. `path` ends with `/`.
CREATE TABLE folders (
    owner      INTEGER NOT NULL,
    path       TEXT    NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (owner, path)
);
