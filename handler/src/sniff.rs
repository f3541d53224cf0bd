//! A content type from the first bytes of the content, for uploads that came
//! without a `Content-Type`.

/// Signatures checked in order; the first whose bytes open the content wins.
const SIGNATURES: &[(&[u8], &str)] = &[
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"BZh", "application/x-bzip2"),
    (b"\xfd7zXZ\x00", "application/x-xz"),
    (b"\x28\xb5\x2f\xfd", "application/zstd"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"\x00asm", "application/wasm"),
    (b"\x7fELF", "application/x-executable"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"fLaC", "audio/flac"),
    (b"\x1a\x45\xdf\xa3", "video/webm"),
    (b"<?xml", "application/xml"),
    (b"<!DOCTYPE html", "text/html"),
    (b"<!doctype html", "text/html"),
    (b"<html", "text/html"),
];

/// How much of the content is looked at to tell text from binary.
const TEXT_PROBE_BYTES: usize = 1024;

/// The content type of `content` judged from its bytes alone.
pub fn content_type(content: &[u8]) -> &'static str {
    if let Some((_, kind)) = SIGNATURES
        .iter()
        .find(|(magic, _)| content.starts_with(magic))
    {
        return kind;
    }
    if content.len() >= 12 && &content[..4] == b"RIFF" {
        match &content[8..12] {
            b"WEBP" => return "image/webp",
            b"WAVE" => return "audio/wav",
            _ => {}
        }
    }
    if content.len() >= 12 && &content[4..8] == b"ftyp" {
        return "video/mp4";
    }
    let probe = &content[..content.len().min(TEXT_PROBE_BYTES)];
    let trimmed = probe.trim_ascii_start();
    if !content.is_empty() && looks_like_text(probe) {
        if trimmed.starts_with(b"{") || trimmed.starts_with(b"[") {
            return "application/json";
        }
        return "text/plain; charset=utf-8";
    }
    "application/octet-stream"
}

fn looks_like_text(probe: &[u8]) -> bool {
    let valid_utf8 = match std::str::from_utf8(probe) {
        Ok(_) => true,
        // A multi-byte character cut by the probe's end is still text.
        Err(error) => error.error_len().is_none(),
    };
    valid_utf8
        && !probe
            .iter()
            .any(|&byte| byte < 0x20 && !matches!(byte, b'\n' | b'\r' | b'\t' | 0x0c))
}

#[cfg(test)]
mod tests {
    use super::content_type;

    #[test]
    fn magic_bytes() {
        assert_eq!(content_type(b"\x89PNG\r\n\x1a\n...."), "image/png");
        assert_eq!(content_type(b"%PDF-1.7\n"), "application/pdf");
        assert_eq!(content_type(b"RIFF\0\0\0\0WEBPVP8 "), "image/webp");
        assert_eq!(content_type(b"\0\0\0\x18ftypmp42"), "video/mp4");
    }

    #[test]
    fn text_and_binary() {
        assert_eq!(content_type(b"hello\n"), "text/plain; charset=utf-8");
        assert_eq!(content_type(b"  {\"a\": 1}"), "application/json");
        assert_eq!(
            content_type("héllo".as_bytes()),
            "text/plain; charset=utf-8"
        );
        assert_eq!(content_type(b"\x00\x01\x02"), "application/octet-stream");
        assert_eq!(content_type(b""), "application/octet-stream");
    }
}
