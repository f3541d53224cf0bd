-- Memory samples taken by the gateway's estimator: every instance's linear
-- memory, and the process's RSS and private-dirty bytes, per sampling round.
-- Kept for a bounded time (the gateway prunes older rows).
CREATE TABLE memory_samples (
    timestamp_ms INTEGER NOT NULL,
    instance     INTEGER NOT NULL,
    bytes        INTEGER NOT NULL
);

CREATE INDEX memory_samples_by_time ON memory_samples (timestamp_ms);

CREATE TABLE process_samples (
    timestamp_ms        INTEGER NOT NULL,
    rss_bytes           INTEGER NOT NULL,
    private_dirty_bytes INTEGER NOT NULL
);

CREATE INDEX process_samples_by_time ON process_samples (timestamp_ms);
