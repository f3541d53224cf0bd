-- Request footprints (issue 25): what the restart-budget estimator learns
-- from, kept so that a restarted gateway starts from what it knew and the
-- gateways on one database learn from each other's traffic.
--
-- One row per request: the gateway process that recorded it (a random id
-- per process start), its number in that process (1, 2, …), when, and what
-- it showed: `grew` (the request grew its instance to `bytes`, its exact
-- footprint) or `within` (it fit in the instance's `bytes`, an upper
-- bound). Kept bounded: the newest window per gateway, a few windows in
-- all, and nothing older than the samples' retention (the gateways prune).
CREATE TABLE footprints (
    gateway      TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    kind         TEXT    NOT NULL CHECK (kind IN ('grew', 'within')),
    bytes        INTEGER NOT NULL,
    PRIMARY KEY (gateway, seq)
);

-- The most recent first, across gateways: the order they are read and
-- pruned in.
CREATE INDEX footprints_by_time ON footprints (timestamp_ms, gateway, seq);
