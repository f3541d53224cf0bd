//! Who is asking, and may they: credentials from a request (a Bearer
//! token, HTTP Basic with a password or a token, or a session cookie) are
//! checked against the accounts in the metadata database, and every
//! handler that touches files takes a [`Caller`], whose [`Owner`] is the
//! only tree it can reach.
//!
//! With no user in the database and a loopback listener the gateway is
//! open (every caller is [`Caller::Open`]); once a user exists every data
//! request needs credentials. Failures get the same answer whether the
//! user exists or not (an unknown name is checked against a dummy hash, so
//! it costs the same), and are counted per client address ([`throttle`]).
//!
//! - [`secrets`]: password hashing, tokens, share-link signatures.
//! - [`throttle`]: password attempts per client address.
//! - [`proxies`]: which proxies may name the client (`X-Forwarded-For`).
//! - `sites`: what a browser says of where a request comes from.

mod error;
pub mod proxies;
pub mod secrets;
mod sites;
pub mod throttle;

use sites::bears_a_token;
pub use sites::{addressed_to_loopback, from_another_site};

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest as _, Sha256};
use tokio::sync::Semaphore;
use volume::accounts::{User, UserId};
use volume::{Accounts, Owner};

pub use crate::error::AuthError;
use secrets::{ShareSigner, TOKEN_PREFIX};
use throttle::Throttle;

/// The cookie a browser session lives in.
pub const SESSION_COOKIE: &str = "wst_session";
/// The header a cookie-authenticated state-changing request must carry.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a browser session lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a checked name and password are remembered (HTTP Basic sends
/// them with every request; argon2 on each would cost ~20 ms of CPU).
const VERIFIED_FOR: Duration = Duration::from_secs(300);
/// Most remembered name-and-password checks.
const MAX_VERIFIED: usize = 10_000;
/// Longest a password check waits for a hashing slot before it gets 503.
const HASHING_WAIT: Duration = Duration::from_secs(5);
/// How long "users exist" is trusted before it is asked again.
const USERS_EXIST_FOR: Duration = Duration::from_secs(1);

/// Who a request comes from.
#[derive(Debug, Clone)]
pub enum Caller {
    /// A gateway without users, on loopback: the open tree, admin rights.
    Open,
    User {
        user: User,
        via: Via,
    },
    /// Anyone, reading what a bucket policy makes public in `owner`'s
    /// tree (only the S3 API admits it, and only for the reads the policy
    /// allows; `lists`: it lets anyone list the bucket too).
    Public {
        owner: Owner,
        lists: bool,
    },
}

/// How a user proved who they are.
#[derive(Debug, Clone)]
pub enum Via {
    Token,
    Password,
    /// A browser session cookie, with the session's CSRF token.
    Session {
        csrf: String,
    },
}

impl Caller {
    /// The tree this caller's files live in.
    pub fn owner(&self) -> Owner {
        match self {
            Self::Open => Owner::OPEN,
            Self::User { user, .. } => user.owner(),
            Self::Public { owner, .. } => *owner,
        }
    }

    pub fn is_admin(&self) -> bool {
        match self {
            Self::Open => true,
            Self::User { user, .. } => user.admin,
            Self::Public { .. } => false,
        }
    }

    pub fn user(&self) -> Option<&User> {
        match self {
            Self::Open | Self::Public { .. } => None,
            Self::User { user, .. } => Some(user),
        }
    }
}

/// Credentials as a request presents them (nothing checked yet).
#[derive(Debug, PartialEq, Eq)]
pub enum Credentials {
    Token(String),
    Password {
        name: String,
        password: String,
    },
    /// Basic with a token for a password: the token must be `name`'s.
    NamedToken {
        name: String,
        token: String,
    },
    Session(String),
    /// An `Authorization` header that is not a well-formed Bearer or
    /// Basic: a failed attempt.
    Malformed,
}

impl Credentials {
    /// What `headers` present: `Authorization` first, then the session
    /// cookie; `None` when neither is there.
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        if let Some(value) = headers.get(header::AUTHORIZATION) {
            return Some(
                value
                    .to_str()
                    .ok()
                    .and_then(Self::parse_authorization)
                    .unwrap_or(Self::Malformed),
            );
        }
        session_cookie(headers).map(|cookie| Self::Session(cookie.to_owned()))
    }

    /// `Bearer TOKEN` or `Basic BASE64(NAME:SECRET)`.
    pub fn parse_authorization(value: &str) -> Option<Self> {
        let (scheme, rest) = value.trim().split_once(' ')?;
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return (!rest.is_empty() && rest.len() <= 512).then(|| Self::Token(rest.to_owned()));
        }
        if !scheme.eq_ignore_ascii_case("basic") || rest.len() > 2048 {
            return None;
        }
        let decoded = String::from_utf8(STANDARD.decode(rest).ok()?).ok()?;
        let (name, secret) = decoded.split_once(':')?;
        if name.is_empty() {
            return None;
        }
        let (name, secret) = (name.to_owned(), secret.to_owned());
        Some(if secret.starts_with(TOKEN_PREFIX) {
            Self::NamedToken {
                name,
                token: secret,
            }
        } else {
            Self::Password {
                name,
                password: secret,
            }
        })
    }
}

/// The value of the session cookie, if the request carries one.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == SESSION_COOKIE && !value.is_empty()).then_some(value)
        })
}

/// Checks credentials against the accounts; shared by every request.
pub struct Authenticator {
    accounts: Accounts,
    /// The listener is on loopback: with no user, the gateway is open.
    open_allowed: bool,
    /// When users were last seen to exist.
    users_exist: Mutex<Option<Instant>>,
    throttle: Throttle,
    /// Password checks at once (each takes argon2's 19 MiB and ~20 ms).
    hashing: Semaphore,
    /// Checked against when the name is unknown, so that costs the same.
    dummy_hash: String,
    verified: Mutex<HashMap<[u8; 32], (UserId, Instant)>>,
    signer: ShareSigner,
    /// Proxies whose `X-Forwarded-For` names the client.
    trusted_proxies: Vec<proxies::Network>,
    /// Web origins whose pages may write with a bearer token
    /// (`--cors-origins`; `*`: any).
    cors_origins: Vec<String>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("open_allowed", &self.open_allowed)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// `open_allowed`: whether a gateway without users may serve openly
    /// (its listener is on loopback). Loads the share-link key every
    /// gateway on this database shares, creating it on first use.
    pub async fn new(
        accounts: Accounts,
        open_allowed: bool,
        trusted_proxies: Vec<proxies::Network>,
    ) -> anyhow::Result<Self> {
        let key = accounts
            .secret("share-link-key", &secrets::random_secret())
            .await?;
        let dummy_hash =
            tokio::task::spawn_blocking(|| secrets::hash_password(&secrets::random_secret()))
                .await?
                .map_err(|error| anyhow::anyhow!("hashing the dummy password: {error}"))?;
        Ok(Self {
            accounts,
            open_allowed,
            users_exist: Mutex::new(None),
            throttle: Throttle::default(),
            hashing: Semaphore::new(
                std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
            ),
            dummy_hash,
            verified: Mutex::new(HashMap::new()),
            signer: ShareSigner::new(key.as_bytes()),
            trusted_proxies,
            cors_origins: Vec::new(),
        })
    }

    /// Let pages on `origins` (`--cors-origins`) write with a bearer token
    /// they hold: web apps the operator allows.
    #[must_use]
    pub fn with_cors_origins(mut self, origins: Vec<String>) -> Self {
        self.cors_origins = origins
            .into_iter()
            .map(|origin| origin.trim_end_matches('/').to_owned())
            .collect();
        self
    }

    /// Whether `headers` come from a page the operator lets write with a
    /// bearer token: an allowed origin's, holding one (never ambient).
    fn allowed_web_app(&self, headers: &HeaderMap) -> bool {
        let origin = headers
            .get(header::ORIGIN)
            .and_then(|value| value.to_str().ok())
            .map(|origin| origin.trim_end_matches('/'));
        bears_a_token(headers)
            && origin.is_some_and(|origin| {
                self.cors_origins
                    .iter()
                    .any(|allowed| allowed == "*" || allowed == origin)
            })
    }

    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    pub fn signer(&self) -> &ShareSigner {
        &self.signer
    }

    /// Whether requests without credentials are served (no user exists and
    /// the listener is on loopback).
    pub async fn is_open(&self) -> Result<bool, AuthError> {
        if !self.open_allowed {
            return Ok(false);
        }
        // Only "users exist" is remembered: the moment the first user is
        // created (by `gateway user add`, from another process) the gateway
        // must stop serving openly, so "none" is asked again every time.
        let remembered = *self
            .users_exist
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if remembered.is_some_and(|at| at.elapsed() < USERS_EXIST_FOR) {
            return Ok(false);
        }
        let exist = self
            .accounts
            .users_exist()
            .await
            .map_err(|error| AuthError::Internal(error.to_string()))?;
        if exist {
            *self
                .users_exist
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
        }
        Ok(!exist)
    }

    /// The caller `parts` come from, or why not.
    pub async fn caller(&self, parts: &Parts) -> Result<Caller, AuthError> {
        // Browsers send ambient credentials (a cached Basic login, a
        // session cookie, or none at all on an open gateway) with another
        // site's form posts too. A bearer token is never ambient: a page on
        // an origin the operator's `--cors-origins` allows that sends one
        // holds it, so it is checked like any other.
        let cross_site = !is_safe(&parts.method) && from_another_site(&parts.headers);
        let refused = || {
            AuthError::Forbidden(
                "a state-changing request from another site's page is refused".into(),
            )
        };
        if cross_site && !self.allowed_web_app(&parts.headers) {
            return Err(refused());
        }
        if self.is_open().await? {
            // An open gateway checks no token: none lets a page in.
            if cross_site {
                return Err(refused());
            }
            // Another site's page could reach a loopback gateway through a
            // name of its own that resolves to 127.0.0.1 (DNS rebinding).
            if !addressed_to_loopback(&parts.headers) {
                return Err(AuthError::Forbidden(
                    "a gateway without users answers only requests addressed to localhost or \
                     a loopback address"
                        .into(),
                ));
            }
            return Ok(Caller::Open);
        }
        let Some(credentials) = Credentials::from_headers(&parts.headers) else {
            return Err(AuthError::unauthorized(&parts.headers));
        };
        match self.check(credentials, self.client_address(parts)).await? {
            Some(caller) => {
                if let Caller::User {
                    via: Via::Session { csrf },
                    ..
                } = &caller
                    && !is_safe(&parts.method)
                    && !csrf_matches(&parts.headers, csrf)
                {
                    return Err(AuthError::Csrf);
                }
                Ok(caller)
            }
            None => Err(AuthError::unauthorized(&parts.headers)),
        }
    }

    /// A sign-in with a name and password (the web page's form).
    pub async fn sign_in(
        &self,
        address: IpAddr,
        name: &str,
        password: &str,
    ) -> Result<User, AuthError> {
        self.password_user(address, name, password)
            .await?
            .ok_or(AuthError::Unauthorized { basic: false })
    }

    async fn check(
        &self,
        credentials: Credentials,
        address: IpAddr,
    ) -> Result<Option<Caller>, AuthError> {
        let internal = |error: volume::VolumeError| AuthError::Internal(error.to_string());
        let user = |user: Option<User>, via: Via| user.map(|user| Caller::User { user, via });
        Ok(match credentials {
            Credentials::Token(token) => user(self.token_user(&token).await?, Via::Token),
            Credentials::NamedToken { name, token } => user(
                self.token_user(&token)
                    .await?
                    .filter(|user| user.name == name),
                Via::Token,
            ),
            Credentials::Password { name, password } => user(
                self.password_user(address, &name, &password).await?,
                Via::Password,
            ),
            Credentials::Session(cookie) => self
                .accounts
                .session(&secrets::secret_hash(&cookie))
                .await
                .map_err(internal)?
                .map(|(user, csrf)| Caller::User {
                    user,
                    via: Via::Session { csrf },
                }),
            Credentials::Malformed => None,
        })
    }

    async fn token_user(&self, token: &str) -> Result<Option<User>, AuthError> {
        if !token.starts_with(TOKEN_PREFIX) {
            return Ok(None);
        }
        self.accounts
            .token_user(&secrets::secret_hash(token))
            .await
            .map_err(|error| AuthError::Internal(error.to_string()))
    }

    /// The user `name` if `password` is theirs: an attempt counted against
    /// `address` (429 once it has used them up), given back if it succeeds.
    async fn password_user(
        &self,
        address: IpAddr,
        name: &str,
        password: &str,
    ) -> Result<Option<User>, AuthError> {
        let attempt = self
            .throttle
            .begin(address)
            .map_err(|wait| AuthError::TooManyAttempts {
                retry_after: wait.as_secs().max(1),
            })?;
        let user = self.verify_password(name, password).await?;
        if user.is_some() {
            self.throttle.succeeded(attempt);
        }
        Ok(user)
    }

    /// The user `name` if `password` is theirs. Costs one argon2 check
    /// whether or not the user exists, unless the same pair passed lately.
    async fn verify_password(&self, name: &str, password: &str) -> Result<Option<User>, AuthError> {
        let internal = |error: volume::VolumeError| AuthError::Internal(error.to_string());
        let key: [u8; 32] = Sha256::new()
            .chain_update(name.as_bytes())
            .chain_update([0])
            .chain_update(password.as_bytes())
            .finalize()
            .into();
        let remembered = self
            .verified_lock()
            .get(&key)
            .filter(|(_, at)| at.elapsed() < VERIFIED_FOR)
            .map(|(id, _)| *id);
        if let Some(id) = remembered {
            return self.accounts.user(id).await.map_err(internal);
        }
        let user = self.accounts.user_named(name).await.map_err(internal)?;
        let hash = user.as_ref().map_or_else(
            || self.dummy_hash.clone(),
            |user| user.password_hash.clone(),
        );
        let password = password.to_owned();
        let matches = {
            let _permit = tokio::time::timeout(HASHING_WAIT, self.hashing.acquire())
                .await
                .map_err(|_| AuthError::Unavailable("too many password checks at once".into()))?
                .map_err(|error| AuthError::Internal(error.to_string()))?;
            tokio::task::spawn_blocking(move || secrets::verify_password(&password, &hash))
                .await
                .map_err(|error| AuthError::Internal(error.to_string()))?
        };
        let Some(user) = user.filter(|_| matches) else {
            return Ok(None);
        };
        let mut verified = self.verified_lock();
        if verified.len() >= MAX_VERIFIED {
            verified.clear();
        }
        verified.insert(key, (user.id, Instant::now()));
        Ok(Some(user))
    }

    fn verified_lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (UserId, Instant)>> {
        self.verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Authenticator {
    /// The client's address: the connection's peer, or behind a trusted
    /// proxy the address it names (see [`proxies`]).
    pub fn client_address(&self, parts: &Parts) -> IpAddr {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |info| info.0.ip());
        proxies::client(peer, &parts.headers, &self.trusted_proxies)
    }
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether the request carries the session's CSRF token (compared in
/// constant time).
fn csrf_matches(headers: &HeaderMap, csrf: &str) -> bool {
    headers
        .get(CSRF_HEADER)
        .is_some_and(|sent| constant_time_eq(sent.as_bytes(), csrf.as_bytes()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Any adapter whose state holds the [`Authenticator`] takes a [`Caller`]
/// as an argument of its handlers.
impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Arc<Authenticator>: FromRef<S>,
{
    type Rejection = AuthError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AuthError> {
        Arc::<Authenticator>::from_ref(state).caller(parts).await
    }
}

/// A caller with admin rights (any caller of an open gateway).
#[derive(Debug, Clone)]
pub struct Admin(pub Caller);

impl<S> FromRequestParts<S> for Admin
where
    S: Send + Sync,
    Arc<Authenticator>: FromRef<S>,
{
    type Rejection = AuthError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AuthError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        if caller.is_admin() {
            Ok(Self(caller))
        } else {
            Err(AuthError::Forbidden("this needs an admin".into()))
        }
    }
}

#[cfg(test)]
mod tests;
