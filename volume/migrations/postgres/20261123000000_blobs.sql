-- The blob ledger: one row per blob the store holds. A transaction that makes
-- a file name a digest first locks the digest's row (SELECT ... FOR UPDATE)
-- and finds it 'stored'; a blob is removed only after a transaction holding
-- the same row lock saw no file naming it and marked it 'deleting'. That is
-- what keeps reference counting safe when several gateways share one
-- database and one blob store.
CREATE TABLE blobs (
    sha256     TEXT   NOT NULL PRIMARY KEY CHECK (length(sha256) = 64),
    state      TEXT   NOT NULL CHECK (state IN ('stored', 'deleting')),
    changed_ms BIGINT NOT NULL
);
