-- The S3 API (issue 22).
--
-- Access keys: SigV4 needs the secret itself to check a signature, so it is
-- kept sealed (ChaCha20-Poly1305 under the gateways' master key, a file
-- outside the database); the database alone never reveals one.
CREATE TABLE s3_keys (
    access_key TEXT    NOT NULL PRIMARY KEY,
    owner      BIGINT  NOT NULL, -- a user's id, or 0: the open tree (usable only while no user exists)
    label      TEXT    NOT NULL,
    sealed     TEXT    NOT NULL, -- base64 of nonce || ciphertext of the secret
    created_ms BIGINT  NOT NULL
);
CREATE INDEX s3_keys_by_owner ON s3_keys (owner);

-- What S3 keeps of an object beside its content (its MD5 ETag, x-amz-meta-*,
-- checksums), as JSON; NULL for files stored through another protocol, and
-- reset whenever the content is replaced.
ALTER TABLE files ADD COLUMN s3_info TEXT;

-- Uploads are tus uploads (parts at offsets) or S3 multipart uploads
-- (numbered parts, chosen at completion).
ALTER TABLE uploads ADD COLUMN kind TEXT NOT NULL DEFAULT 'tus';

CREATE TABLE multipart_parts (
    upload_id   TEXT    NOT NULL,
    part_number BIGINT  NOT NULL, -- 1 to 10000
    size        BIGINT  NOT NULL,
    etag        TEXT    NOT NULL, -- hex MD5 of the part
    checksum    TEXT    NOT NULL, -- 'ALGORITHM:base64', or '' when none was sent
    name        TEXT    NOT NULL, -- its object: uploads/<upload_id>/<name>
    created_ms  BIGINT  NOT NULL,
    PRIMARY KEY (upload_id, part_number)
);
