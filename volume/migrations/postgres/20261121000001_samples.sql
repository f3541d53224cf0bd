-- Memory samples taken by the gateways' estimators: every instance's linear
-- memory, and the process's RSS and private-dirty bytes, per sampling round.
-- Kept for a bounded time (the gateway prunes older rows).
CREATE TABLE memory_samples (
    timestamp_ms BIGINT NOT NULL,
    instance     BIGINT NOT NULL,
    bytes        BIGINT NOT NULL
);

CREATE INDEX memory_samples_by_time ON memory_samples (timestamp_ms);

CREATE TABLE process_samples (
    timestamp_ms        BIGINT NOT NULL,
    rss_bytes           BIGINT NOT NULL,
    private_dirty_bytes BIGINT NOT NULL
);

CREATE INDEX process_samples_by_time ON process_samples (timestamp_ms);
