//! The secrets of accounts: argon2id password hashes, random API tokens,
//! session cookies and CSRF tokens (stored only as SHA-256 hashes: they
//! are 256 random bits, so a fast hash is enough), and share-link
//! signatures (HMAC-SHA256 under a key every gateway shares).

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher as _, PasswordVerifier as _, SaltString};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac as _};
use rand::RngCore as _;
use sha2::{Digest as _, Sha256};

/// What every API token starts with, so a token pasted where a password
/// goes is recognised (and secret scanners can find leaked ones).
pub const TOKEN_PREFIX: &str = "wst_";

/// 256 random bits from a CSPRNG (`rand`'s thread generator: ChaCha12,
/// seeded from the operating system), base64url.
pub fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Lowercase hex SHA-256 of a high-entropy secret: what the database keeps.
pub fn secret_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// A new API token and its public id (the first 12 hex digits of its hash).
pub fn new_token() -> (String, String) {
    let token = format!("{TOKEN_PREFIX}{}", random_secret());
    let id = token_id(&token);
    (token, id)
}

/// The public id of a token.
pub fn token_id(token: &str) -> String {
    secret_hash(token)[..12].to_owned()
}

/// An argon2id PHC string for `password` (the crate's defaults: 19 MiB,
/// two passes, OWASP's recommendation). Slow on purpose: call it off the
/// async threads.
pub fn hash_password(password: &str) -> Result<String, argon2::password_hash::Error> {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt)?;
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)?
        .to_string())
}

/// Whether `password` matches the PHC string `hash` (constant time in the
/// password; a malformed hash never matches).
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

type HmacSha256 = Hmac<Sha256>;

/// Signs and checks share links with one key.
#[derive(Clone)]
pub struct ShareSigner {
    key: Vec<u8>,
}

impl std::fmt::Debug for ShareSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShareSigner(..)")
    }
}

/// A share link's token, as it appears in `/share/{token}`: the link's id
/// and expiry, and the signature over both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareToken {
    pub id: String,
    /// Milliseconds since the Unix epoch; `None` never expires.
    pub expires_ms: Option<i64>,
}

impl ShareSigner {
    pub fn new(key: &[u8]) -> Self {
        Self { key: key.to_vec() }
    }

    fn mac(&self, id: &str, expires: &str) -> HmacSha256 {
        // An HMAC key may have any length: `new_from_slice` cannot fail.
        let mut mac = HmacSha256::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(b"wasm-storage share\0");
        mac.update(id.as_bytes());
        mac.update(b"\0");
        mac.update(expires.as_bytes());
        mac
    }

    /// `ID.EXPIRES.SIGNATURE` (EXPIRES is `0` for never).
    pub fn sign(&self, token: &ShareToken) -> String {
        let expires = token.expires_ms.unwrap_or(0).to_string();
        let signature =
            URL_SAFE_NO_PAD.encode(self.mac(&token.id, &expires).finalize().into_bytes());
        format!("{}.{expires}.{signature}", token.id)
    }

    /// The token `text` carries if its signature verifies (in constant
    /// time); `None` for anything tampered with or malformed.
    pub fn verify(&self, text: &str) -> Option<ShareToken> {
        let mut parts = text.split('.');
        let (id, expires, signature) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || id.is_empty() || id.len() > 64 {
            return None;
        }
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        self.mac(id, expires).verify_slice(&signature).ok()?;
        let expires_ms: i64 = expires.parse().ok()?;
        Some(ShareToken {
            id: id.to_owned(),
            expires_ms: (expires_ms != 0).then_some(expires_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_verify_only_themselves() {
        let hash = hash_password("correct horse").unwrap_or_default();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("correct horsf", &hash));
        assert!(!verify_password("correct horse", "not a hash"));
    }

    #[test]
    fn tokens_are_random_and_identified_by_their_hash() {
        let (one, id) = new_token();
        let (two, _) = new_token();
        assert_ne!(one, two);
        assert!(one.starts_with(TOKEN_PREFIX));
        assert_eq!(id, token_id(&one));
        assert_eq!(secret_hash(&one).len(), 64);
    }

    #[test]
    fn share_tokens_resist_tampering() {
        let signer = ShareSigner::new(b"key");
        let token = ShareToken {
            id: "abc".into(),
            expires_ms: Some(1_900_000_000_000),
        };
        let signed = signer.sign(&token);
        assert_eq!(signer.verify(&signed), Some(token));
        let forever = ShareToken {
            id: "abc".into(),
            expires_ms: None,
        };
        assert_eq!(signer.verify(&signer.sign(&forever)), Some(forever));
        // Another expiry, another id, another key, or junk: refused.
        assert_eq!(signer.verify(&signed.replace(".1900", ".1901")), None);
        assert_eq!(signer.verify(&signed.replacen("abc", "abd", 1)), None);
        assert_eq!(ShareSigner::new(b"other").verify(&signed), None);
        for junk in ["", "a", "a.b", "a.b.c", "a.b.c.d", "..", "abc.0.!!"] {
            assert_eq!(signer.verify(junk), None, "{junk:?}");
        }
    }
}
