-- A second digest of each file's content, BLAKE3 in lowercase hex, which
-- downloads are verified against (several times faster to compute inside
-- an instance than SHA-256, which stays the content's address and ETag).
-- Rows written before it have none and are verified by SHA-256.
ALTER TABLE files ADD COLUMN blake3 TEXT;
