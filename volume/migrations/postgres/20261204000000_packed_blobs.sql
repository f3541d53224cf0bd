-- Small blobs packed into segment files (issue 36).
--
-- A blob of at most 64 KiB on a local blob store is a record in a segment
-- file (blobs/segments/<segment>), its bytes (content, then outboard)
-- `packed_len` bytes from `segment_offset`; NULL for a blob that is a file
-- or an object of its own.
ALTER TABLE blobs ADD COLUMN segment BIGINT;
ALTER TABLE blobs ADD COLUMN segment_offset BIGINT;
ALTER TABLE blobs ADD COLUMN packed_len BIGINT;
CREATE INDEX blobs_by_segment ON blobs (segment) WHERE segment IS NOT NULL;

-- Segments compacted away: their live records were copied elsewhere and
-- the file removed. A write that packed a blob into one of them finds it
-- here, in the transaction that would record the blob, and writes it again.
-- Kept so that a segment's number is never used twice.
CREATE TABLE retired_segments (
    id         BIGINT NOT NULL PRIMARY KEY,
    retired_ms BIGINT NOT NULL
);
