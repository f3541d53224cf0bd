//! S3 access keys: made by `gateway key create`, their secrets sealed at
//! rest, and the two checks every request passes: SigV4 (`s3s` verifies
//! the signature with the secret [`KeyRing`] opens) and who the request
//! acts for (the key's owner, or the open tree).
//!
//! SigV4 needs the secret itself, not a hash of it, so a secret is kept
//! sealed with ChaCha20-Poly1305 under a master key that lives in a file
//! beside the gateway (`--s3-master-key-file`), never in the database: a
//! copy of the database (a backup, a dump, a read-only leak) reveals no
//! secret. Every gateway of one store, and the CLI, read the same file.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chacha20poly1305::aead::{Aead as _, KeyInit as _, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::path::S3Path;
use s3s::{S3Result, s3_error};
use volume::accounts::{Accounts, S3Key, User};
use volume::{Owner, now_ms};

use auth::{Authenticator, Caller, Via, addressed_to_loopback};

/// How long a key looked up is trusted before it is read again: a revoked
/// key stops working within this.
const KEY_CACHE_FOR: Duration = Duration::from_secs(1);

/// Most keys remembered at once (a flood of unknown keys must not grow it
/// without bound).
const KEY_CACHE_ENTRIES: usize = 4096;

/// The key secrets are sealed with.
#[derive(Clone)]
pub struct MasterKey(Key);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

impl MasterKey {
    /// The master key in `path` (64 hex digits), made there (readable by
    /// its owner only) if the file does not exist and no key was sealed
    /// yet: keys sealed under a master key this gateway lacks would all
    /// fail, so a missing file then is an error that says so.
    pub async fn load_checked(path: &Path, accounts: &Accounts) -> anyhow::Result<Self> {
        if !path.exists() && accounts.has_s3_keys().await? {
            anyhow::bail!(
                "the S3 master key file {} is missing, but S3 keys exist, sealed under a master \
                 key: give this gateway the same file as the one that made them \
                 (--s3-master-key-file)",
                path.display()
            );
        }
        Self::load_or_create(path)
    }

    /// The master key in `path`, made there if the file does not exist
    /// (see [`MasterKey::load_checked`]).
    pub fn load_or_create(path: &Path) -> anyhow::Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let bytes = hex::decode(text.trim())
                    .ok()
                    .filter(|bytes| bytes.len() == 32)
                    .with_context(|| {
                        format!(
                            "{} does not hold a master key (64 hex digits)",
                            path.display()
                        )
                    })?;
                Ok(Self(*Key::from_slice(&bytes)))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let bytes: [u8; 32] = rand::random();
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                write_private(path, &hex::encode(bytes))
                    .with_context(|| format!("writing the master key {}", path.display()))?;
                Ok(Self(*Key::from_slice(&bytes)))
            }
            Err(error) => {
                Err(error).with_context(|| format!("reading the master key {}", path.display()))
            }
        }
    }

    /// `secret` sealed for `access_key`: base64 of nonce then ciphertext.
    fn seal(&self, access_key: &str, secret: &str) -> String {
        let nonce: [u8; 12] = rand::random();
        let sealed = ChaCha20Poly1305::new(&self.0)
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: secret.as_bytes(),
                    aad: access_key.as_bytes(),
                },
            )
            .unwrap_or_default();
        STANDARD.encode([nonce.as_slice(), &sealed].concat())
    }

    /// The secret `sealed` holds for `access_key`; `None` if it was sealed
    /// under another master key (or for another key) or is damaged.
    fn open(&self, access_key: &str, sealed: &str) -> Option<String> {
        let bytes = STANDARD.decode(sealed).ok()?;
        if bytes.len() < 12 {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(12);
        let secret = ChaCha20Poly1305::new(&self.0)
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: access_key.as_bytes(),
                },
            )
            .ok()?;
        String::from_utf8(secret).ok()
    }
}

/// Create `path` with `text`, readable and writable by its owner alone.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

/// A new key for `owner`: its id and its secret, which only this returns.
pub async fn create_key(
    accounts: &Accounts,
    master: &MasterKey,
    owner: Owner,
    label: &str,
) -> anyhow::Result<(String, String)> {
    const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let id: String = std::iter::once("WS".to_owned())
        .chain((0..18).map(|_| {
            let index = usize::from(rand::random::<u8>() % 32);
            char::from(BASE32[index]).to_string()
        }))
        .collect();
    let secret = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 30]>());
    accounts
        .add_s3_key(&S3Key {
            access_key: id.clone(),
            owner,
            label: label.to_owned(),
            sealed: master.seal(&id, &secret),
            created_ms: now_ms(),
        })
        .await?;
    Ok((id, secret))
}

/// A key as a request needs it: its row and its user.
#[derive(Debug, Clone)]
struct Known {
    key: S3Key,
    /// The key's user (`None` for the open tree's keys).
    user: Option<User>,
}

/// Keys looked up, by id: what was found (`None`: no such key) and when.
type KeyCache = HashMap<String, (Option<Known>, Instant)>;

/// The keys, looked up by id (and remembered for [`KEY_CACHE_FOR`]), and
/// the two checks `s3s` asks of every request.
#[derive(Debug, Clone)]
pub(crate) struct KeyRing {
    auth: Arc<Authenticator>,
    /// What anonymous reads a bucket's policy allows.
    files: file_service::FileService,
    /// The S3 listener is on loopback: only then may it serve openly.
    loopback: bool,
    master: MasterKey,
    cache: Arc<Mutex<KeyCache>>,
}

impl KeyRing {
    pub(crate) fn new(
        auth: Arc<Authenticator>,
        files: file_service::FileService,
        master: MasterKey,
        loopback: bool,
    ) -> Self {
        Self {
            auth,
            files,
            loopback,
            master,
            cache: Arc::default(),
        }
    }

    /// Whether this listener serves the open tree now: on loopback, with
    /// no user.
    async fn serves_openly(&self) -> S3Result<bool> {
        Ok(self.loopback
            && self
                .auth
                .is_open()
                .await
                .map_err(|error| s3_error!(InternalError, "{error}"))?)
    }

    /// Who a request signed with `access_key` acts for (its signature
    /// checked): the key's user, or the open tree while it is open.
    async fn caller_known(&self, access_key: &str, open: bool) -> S3Result<Caller> {
        let known = self
            .find(access_key)
            .await?
            .ok_or_else(|| s3_error!(InvalidAccessKeyId, "The access key was revoked."))?;
        match known.user {
            Some(user) => Ok(Caller::User {
                user,
                via: Via::Token,
            }),
            // The open tree's keys work only while it is open.
            None if open => Ok(Caller::Open),
            None => Err(s3_error!(
                InvalidAccessKeyId,
                "This key belongs to the open tree, which is served only while \
                 the gateway has no user: create a key for a user."
            )),
        }
    }

    /// Who a form upload signed with `access_key` acts for (its policy's
    /// signature checked), as [`S3Access`] decides it for a request.
    pub(crate) async fn caller_of_key(&self, access_key: &str) -> S3Result<Caller> {
        let open = self.serves_openly().await?;
        self.caller_known(access_key, open).await
    }

    /// The tree a request signed with `access_key` acts on, if the key
    /// exists (what CORS rules apply to a request before it is checked).
    pub(crate) async fn owner_of_key(&self, access_key: &str) -> Option<Owner> {
        let known = self.find(access_key).await.ok()??;
        Some(known.user.map_or(Owner::OPEN, |user| user.owner()))
    }

    /// The key `access_key`, if it exists and its user still does.
    async fn find(&self, access_key: &str) -> S3Result<Option<Known>> {
        {
            let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((known, at)) = cache.get(access_key)
                && at.elapsed() < KEY_CACHE_FOR
            {
                return Ok(known.clone());
            }
        }
        // A lookup counts from when it began: one that answers late (a busy
        // machine) must not make what it read seem fresh.
        let began = Instant::now();
        let accounts = self.auth.accounts();
        let key = accounts
            .s3_key(access_key)
            .await
            .map_err(|error| s3_error!(InternalError, "{error}"))?;
        let known = match key {
            None => None,
            Some(key) if key.owner == Owner::OPEN => Some(Known { key, user: None }),
            Some(key) => {
                let user = match key.owner.user_id() {
                    Some(id) => accounts
                        .user(id)
                        .await
                        .map_err(|error| s3_error!(InternalError, "{error}"))?,
                    None => None,
                };
                user.map(|user| Known {
                    key,
                    user: Some(user),
                })
            }
        };
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= KEY_CACHE_ENTRIES {
            cache.retain(|_, (_, at)| at.elapsed() < KEY_CACHE_FOR);
            if cache.len() >= KEY_CACHE_ENTRIES {
                cache.clear();
            }
        }
        let newer = cache.get(access_key).is_some_and(|(_, at)| *at > began);
        if !newer {
            cache.insert(access_key.to_owned(), (known.clone(), began));
        }
        Ok(known)
    }
}

#[async_trait::async_trait]
impl S3Auth for KeyRing {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        let known = self.find(access_key).await?.ok_or_else(|| {
            s3_error!(
                InvalidAccessKeyId,
                "The AWS Access Key Id you provided does not exist in our records."
            )
        })?;
        let secret = self
            .master
            .open(access_key, &known.key.sealed)
            .ok_or_else(|| {
                tracing::warn!(
                    access_key,
                    "an S3 key's secret does not open with this gateway's master key \
                     (--s3-master-key-file): is it the same file on every gateway?"
                );
                s3_error!(
                    InternalError,
                    "the key's secret cannot be read on this gateway"
                )
            })?;
        Ok(SecretKey::from(secret))
    }
}

#[async_trait::async_trait]
impl S3Access for KeyRing {
    /// Who the request acts for, into its extensions as a [`Caller`]: a
    /// signed request (its signature checked already) acts for its key's
    /// owner; an anonymous one is served only by an open gateway, as the
    /// open tree, like every other protocol.
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let open = self.serves_openly().await?;
        let caller = match cx.credentials() {
            Some(credentials) => self.caller_known(&credentials.access_key, open).await?,
            None if open => {
                // Any page the viewer opens could send an unsigned request
                // here (a form's POST needs no preflight): an open gateway
                // serves unsigned requests to programs only. Browsers mark
                // what a page sends (`Sec-Fetch-Site`, `Origin`); an address
                // typed by the viewer is `Sec-Fetch-Site: none`.
                if sent_by_a_page(cx.headers()) {
                    return Err(s3_error!(
                        AccessDenied,
                        "A gateway without users serves unsigned S3 requests to programs, not to \
                         web pages: sign the request with the open tree's key (gateway key create)."
                    ));
                }
                if !addressed_to_loopback(cx.headers()) {
                    return Err(s3_error!(
                        AccessDenied,
                        "A gateway without users answers only requests addressed to \
                         localhost or a loopback address."
                    ));
                }
                Caller::Open
            }
            None => {
                // What a bucket's policy makes public, read-only.
                let (bucket, key) = match cx.s3_path() {
                    S3Path::Bucket { bucket } => (bucket.as_ref(), None),
                    S3Path::Object { bucket, key } => (bucket.as_ref(), Some(key.as_ref())),
                    S3Path::Root => return Err(s3_error!(AccessDenied, "Access Denied")),
                };
                let op = cx.s3_op().name();
                // An earlier version is S3's `s3:GetObjectVersion`, which
                // no policy here grants.
                let by_version = cx
                    .uri()
                    .query()
                    .is_some_and(|query| query.split('&').any(|p| p.starts_with("versionId=")));
                if by_version {
                    return Err(s3_error!(AccessDenied, "Access Denied"));
                }
                match crate::policy::public_reader(&self.files, bucket, key, op).await? {
                    Some((owner, lists)) => Caller::Public { owner, lists },
                    None => return Err(s3_error!(AccessDenied, "Access Denied")),
                }
            }
        };
        cx.extensions_mut().insert(caller);
        Ok(())
    }
}

/// Whether a browser says a page sent the request: `Sec-Fetch-Site` other
/// than `none` (the viewer's own navigation), or, from browsers that send
/// no `Sec-Fetch-*`, any `Origin`. Programs send neither.
fn sent_by_a_page(headers: &axum::http::HeaderMap) -> bool {
    match headers.get("sec-fetch-site") {
        Some(site) => site != "none",
        None => headers.contains_key(axum::http::header::ORIGIN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_told_from_programs_and_the_viewer() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = axum::http::HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, axum::http::HeaderValue::from_static(value));
            }
            map
        };
        assert!(!sent_by_a_page(&headers(&[])));
        assert!(!sent_by_a_page(&headers(&[("sec-fetch-site", "none")])));
        assert!(sent_by_a_page(&headers(&[(
            "sec-fetch-site",
            "same-origin"
        )])));
        assert!(sent_by_a_page(&headers(&[(
            "sec-fetch-site",
            "cross-site"
        )])));
        assert!(sent_by_a_page(&headers(&[("origin", "null")])));
        assert!(sent_by_a_page(&headers(&[(
            "origin",
            "http://127.0.0.1:9000"
        )])));
    }

    #[test]
    fn a_sealed_secret_opens_only_with_its_master_key_and_key_id() {
        let master = MasterKey(*Key::from_slice(&[7; 32]));
        let other = MasterKey(*Key::from_slice(&[8; 32]));
        let sealed = master.seal("WSKEY", "the secret");
        assert!(!sealed.contains("the secret"));
        assert_eq!(master.open("WSKEY", &sealed).as_deref(), Some("the secret"));
        assert_eq!(other.open("WSKEY", &sealed), None);
        assert_eq!(master.open("WSOTHER", &sealed), None);
        assert_eq!(master.open("WSKEY", "garbage"), None);
    }

    #[test]
    fn the_master_key_file_is_made_once_and_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let path = dir.path().join("master.key");
        let made = MasterKey::load_or_create(&path).unwrap_or_else(|error| panic!("{error}"));
        let mode = std::fs::metadata(&path)
            .unwrap_or_else(|error| panic!("{error}"))
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = MasterKey::load_or_create(&path).unwrap_or_else(|error| panic!("{error}"));
        let sealed = made.seal("WSKEY", "x");
        assert_eq!(again.open("WSKEY", &sealed).as_deref(), Some("x"));
    }
}
