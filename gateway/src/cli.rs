//! The command line: `gateway` serves; `gateway user …` and `gateway token
//! …` manage accounts in the same metadata database (so `--data-dir` and
//! `--database-url` mean the same for both).

use std::io::{BufRead as _, IsTerminal as _, Write as _};

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use volume::Accounts;
use volume::accounts::NewUser;

use crate::auth::secrets;
use crate::config::{ByteSize, Config};

#[derive(Debug, Parser)]
#[command(name = "gateway", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub config: Config,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Manage users (the password is read from standard input).
    User {
        #[command(subcommand)]
        action: UserAction,
    },
    /// Manage API tokens (`Authorization: Bearer TOKEN`, or a user's
    /// password in HTTP Basic).
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// Manage S3 access keys (for the S3 API, `--s3-listen`).
    Key {
        #[command(subcommand)]
        action: KeyAction,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyAction {
    /// Print a new access key id and secret for the user, once, as
    /// `ACCESS_KEY_ID SECRET_ACCESS_KEY`. Without a user: a key of the open
    /// tree, which works only while the gateway has no user.
    Create {
        user: Option<String>,
        /// What the key is for (shown by `key list`).
        #[arg(long, default_value = "")]
        label: String,
    },
    /// List a user's access keys (without a user: the open tree's).
    List { user: Option<String> },
    /// Revoke an access key, by its id.
    Revoke { access_key: String },
}

#[derive(Debug, Subcommand)]
pub enum UserAction {
    /// Create a user; the password is the first line of standard input.
    Add {
        name: String,
        /// May use /admin (the pool, the estimator, samples).
        #[arg(long)]
        admin: bool,
        /// Most bytes the user's files may take (suffixes accepted).
        #[arg(long)]
        quota: Option<ByteSize>,
        /// Give this user the files stored while the gateway had no user
        /// (the open tree), which no one can reach once users exist.
        #[arg(long)]
        adopt_open_tree: bool,
    },
    /// List users with their rights, quota and usage.
    List,
    /// Remove a user with their files, tokens, sessions and share links
    /// (the blobs go at the next garbage collection).
    Remove { name: String },
}

#[derive(Debug, Subcommand)]
pub enum TokenAction {
    /// Print a new token for the user, once: only its hash is kept.
    Create {
        name: String,
        /// What the token is for (shown by `token list`).
        #[arg(long, default_value = "")]
        label: String,
    },
    /// List a user's tokens by id.
    List { name: String },
    /// Revoke a token, by its id or the token itself.
    Revoke { token: String },
}

/// A user name: 1 to 64 of letters, digits, `.`, `_`, `-` and `@` (no `:`,
/// which HTTP Basic could not carry).
pub fn check_user_name(name: &str) -> anyhow::Result<()> {
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'));
    if !valid {
        bail!("{name:?} is not a user name: use 1 to 64 letters, digits, '.', '_', '-' or '@'");
    }
    Ok(())
}

/// Passwords shorter than this are refused.
pub const MIN_PASSWORD_LEN: usize = 8;

/// Create a user with a password hashed off the async threads.
pub async fn add_user(
    accounts: &Accounts,
    name: &str,
    password: &str,
    admin: bool,
    quota: Option<u64>,
) -> anyhow::Result<volume::accounts::User> {
    check_user_name(name)?;
    if password.chars().count() < MIN_PASSWORD_LEN {
        bail!("the password must have at least {MIN_PASSWORD_LEN} characters");
    }
    let password = password.to_owned();
    let hash = tokio::task::spawn_blocking(move || secrets::hash_password(&password))
        .await?
        .map_err(|error| anyhow::anyhow!("hashing the password: {error}"))?;
    Ok(accounts
        .add_user(&NewUser {
            name,
            password_hash: &hash,
            admin,
            quota,
        })
        .await?)
}

/// Create a token for `name`; returns the token and its id.
pub async fn create_token(
    accounts: &Accounts,
    name: &str,
    label: &str,
) -> anyhow::Result<(String, String)> {
    let user = accounts
        .user_named(name)
        .await?
        .with_context(|| format!("no user named {name:?}"))?;
    let (token, id) = secrets::new_token();
    accounts
        .add_token(user.id, &id, &secrets::secret_hash(&token), label)
        .await?;
    Ok((token, id))
}

/// Run an account subcommand against the database `config` names.
pub async fn run(config: &Config, command: Command) -> anyhow::Result<()> {
    let database = config.volume_config().database;
    let accounts = Accounts::open(&database)
        .await
        .with_context(|| format!("opening the metadata database {database}"))?;
    let outcome = match command {
        Command::User { action } => user(&accounts, action).await,
        Command::Token { action } => token(&accounts, action).await,
        Command::Key { action } => key(config, &accounts, action).await,
    };
    accounts.close().await;
    outcome
}

async fn user(accounts: &Accounts, action: UserAction) -> anyhow::Result<()> {
    match action {
        UserAction::Add {
            name,
            admin,
            quota,
            adopt_open_tree,
        } => {
            let password = read_password()?;
            let quota = quota.map(|quota| quota.0);
            let user = add_user(accounts, &name, &password, admin, quota).await?;
            eprintln!("user {name} created");
            if adopt_open_tree {
                let moved = accounts.adopt_open_tree(user.id).await?;
                eprintln!("{moved} files of the open tree now belong to {name}");
            }
        }
        UserAction::List => {
            for (user, used) in accounts.users().await? {
                let quota = user
                    .quota
                    .map_or_else(|| "none".to_owned(), |quota| ByteSize(quota).to_string());
                let role = if user.admin { "admin" } else { "user" };
                println!("{} {role} quota={quota} used={used}", user.name);
            }
        }
        UserAction::Remove { name } => {
            if !accounts.remove_user(&name).await? {
                bail!("no user named {name:?}");
            }
            eprintln!("user {name} removed");
        }
    }
    Ok(())
}

async fn token(accounts: &Accounts, action: TokenAction) -> anyhow::Result<()> {
    match action {
        TokenAction::Create { name, label } => {
            let (token, id) = create_token(accounts, &name, &label).await?;
            println!("{token}");
            eprintln!("token {id} created for {name}: it is shown only this once");
        }
        TokenAction::List { name } => {
            let user = accounts
                .user_named(&name)
                .await?
                .with_context(|| format!("no user named {name:?}"))?;
            for token in accounts.tokens(user.id).await? {
                let created = humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH
                        + std::time::Duration::from_millis(
                            u64::try_from(token.created_ms).unwrap_or_default(),
                        ),
                );
                println!("{} created={created} label={}", token.id, token.label);
            }
        }
        TokenAction::Revoke { token } => {
            let hash = secrets::secret_hash(&token);
            if !accounts.revoke_token(&token, &hash).await? {
                bail!("no token with that id");
            }
            eprintln!("token revoked");
        }
    }
    Ok(())
}

/// Whose tree a key is for: `user`'s, or the open tree's.
async fn key_owner(accounts: &Accounts, user: Option<&str>) -> anyhow::Result<volume::Owner> {
    match user {
        None => Ok(volume::Owner::OPEN),
        Some(name) => Ok(accounts
            .user_named(name)
            .await?
            .with_context(|| format!("no user named {name:?}"))?
            .owner()),
    }
}

async fn key(config: &Config, accounts: &Accounts, action: KeyAction) -> anyhow::Result<()> {
    match action {
        KeyAction::Create { user, label } => {
            let owner = key_owner(accounts, user.as_deref()).await?;
            let master =
                crate::s3::MasterKey::load_checked(&config.s3_master_key_path(), accounts).await?;
            let (id, secret) =
                crate::s3::keys::create_key(accounts, &master, owner, &label).await?;
            println!("{id} {secret}");
            let whose = user.unwrap_or_else(|| "the open tree".to_owned());
            eprintln!("key {id} created for {whose}: the secret is shown only this once");
        }
        KeyAction::List { user } => {
            let owner = key_owner(accounts, user.as_deref()).await?;
            for key in accounts.s3_keys(owner).await? {
                let created = humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH
                        + std::time::Duration::from_millis(
                            u64::try_from(key.created_ms).unwrap_or_default(),
                        ),
                );
                println!("{} created={created} label={}", key.access_key, key.label);
            }
        }
        KeyAction::Revoke { access_key } => {
            if !accounts.revoke_s3_key(&access_key).await? {
                bail!("no access key {access_key:?}");
            }
            eprintln!("key {access_key} revoked");
        }
    }
    Ok(())
}

/// The first line of standard input (typed without echo on a terminal).
fn read_password() -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    let line = if stdin.is_terminal() {
        eprint!("password: ");
        std::io::stderr().flush()?;
        rpassword::read_password()?
    } else {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        line
    };
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

/// The bootstrap admin's password: the first line of `path`.
pub fn read_password_file(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the password file {}", path.display()))?;
    Ok(text.lines().next().unwrap_or_default().to_owned())
}
