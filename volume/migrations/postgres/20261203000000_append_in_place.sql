-- tus uploads appended in place (issue 35).
--
-- Where an upload's hashes stand: the SHA-256 state and the BLAKE3 tree's
-- stack after its first whole groups of 64 KiB (`groups:sha256:stack`,
-- hex), recorded with `received` at every checkpoint; '' is the start (an
-- upload recorded before this, whose bytes are hashed again from 0).
ALTER TABLE uploads ADD COLUMN hashed TEXT NOT NULL DEFAULT '';

-- On an object store a tus upload's bytes are kept as parts, each its
-- content (`size` bytes) then the outboard written while it arrived
-- (`outboard` bytes); a blob is made of the contents, then the outboards.
ALTER TABLE upload_parts ADD COLUMN outboard BIGINT NOT NULL DEFAULT 0;
