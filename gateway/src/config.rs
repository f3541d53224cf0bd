//! Gateway configuration: every flag is also an environment variable, and
//! every default is written down here (and in docs/configuration.md).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::Parser;
use estimator::Warmup;

use volume::{BlobUrl, DatabaseUrl, S3Settings, VolumeConfig};

use crate::pool::Dispatch;
use crate::recycler::{Method, Mode};
use crate::runtime::HandlerKind;

/// wasm-storage gateway: stores files over HTTP, handling every request in a
/// pool of long-lived WebAssembly instances.
#[derive(Debug, Clone, Parser)]
#[command(name = "gateway", version, about)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "WASM_STORAGE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// This gateway's directory: its temp files, and (by default) the
    /// SQLite index and the blobs. Each gateway needs its own.
    #[arg(
        long,
        env = "WASM_STORAGE_DATA_DIR",
        default_value = "./data",
        global = true
    )]
    pub data_dir: PathBuf,

    /// Where the metadata lives: postgres://USER:PASSWORD@HOST:PORT/DB for
    /// PostgreSQL (what several gateways share), or sqlite://PATH. Default:
    /// index.sqlite in --data-dir.
    #[arg(long, env = "WASM_STORAGE_DATABASE_URL", global = true)]
    pub database_url: Option<DatabaseUrl>,

    /// Where blobs live: s3://BUCKET[/PREFIX] for an S3-compatible store
    /// (endpoint and credentials from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ALLOW_HTTP), or a directory.
    /// Default: blobs/ in --data-dir.
    #[arg(long, env = "WASM_STORAGE_BLOB_STORE")]
    pub blob_store: Option<BlobUrl>,

    /// S3 settings that override the `AWS_*` environment variables: for an
    /// embedding program (the tests) that runs gateways on several S3
    /// servers in one process. Not a flag.
    #[arg(skip)]
    pub s3: S3Settings,

    /// A blob in the store that no row records is collected once it is
    /// this old (younger, an upload on some gateway may be about to record
    /// it): orphans left by a crash go within this plus --gc-interval.
    #[arg(long, env = "WASM_STORAGE_ORPHAN_GRACE", default_value = "10m", value_parser = humantime::parse_duration)]
    pub orphan_grace: Duration,

    /// A blob removal still unfinished after this long is taken over by
    /// another gateway (its remover presumably stopped). It must outlast any
    /// one removal (S3 retries give up after 3 minutes), and the gateways'
    /// clocks must agree to well within it.
    #[arg(long, env = "WASM_STORAGE_REMOVAL_LEASE", default_value = "5m", value_parser = humantime::parse_duration)]
    pub removal_lease: Duration,

    /// Keep what a replace or a delete takes, in every tree S3 set no
    /// versioning for (every user's files; buckets made through S3 follow
    /// S3's rules): earlier versions and a trash, restorable until
    /// --trash-retention passes. `--versions=false`: a replace or delete
    /// is final.
    #[arg(long, env = "WASM_STORAGE_VERSIONS", default_value_t = true, action = clap::ArgAction::Set)]
    pub versions: bool,

    /// Pack blobs of up to 64 KiB on a local blob store into segment files,
    /// made durable by one fdatasync per group of writers and compacted as
    /// their records die, rather than a file (two fsyncs and a link) each.
    /// `--pack-small-blobs=false`: every new blob a file of its own (blobs
    /// packed before stay readable either way).
    #[arg(long, env = "WASM_STORAGE_PACK_SMALL_BLOBS", default_value_t = true, action = clap::ArgAction::Set)]
    pub pack_small_blobs: bool,

    /// How long earlier versions and the trash are kept (30 days, as
    /// Nextcloud keeps deleted files); they count against the owner's
    /// quota meanwhile, and an upload that needs room takes it from the
    /// oldest first.
    #[arg(long, env = "WASM_STORAGE_TRASH_RETENTION", default_value = "30days", value_parser = humantime::parse_duration)]
    pub trash_retention: Duration,

    /// FOR TESTS ONLY: how long a day of S3 lifecycle rules lasts (`10s`
    /// makes "expire after 1 day" take ten seconds), as other S3 servers'
    /// debug intervals do. Refused unless every listener is on loopback,
    /// and logged loudly: a production gateway cannot run on it.
    #[arg(long, env = "WASM_STORAGE_LIFECYCLE_TEST_DAY", value_parser = humantime::parse_duration, hide_short_help = true)]
    pub lifecycle_test_day: Option<Duration>,

    /// How often this gateway collects garbage: unreferenced blobs, orphans
    /// past the grace period, removals past their lease.
    #[arg(long, env = "WASM_STORAGE_GC_INTERVAL", default_value = "5m", value_parser = humantime::parse_duration)]
    pub gc_interval: Duration,

    /// Number of long-lived Wasm instances serving requests.
    #[arg(long, env = "WASM_STORAGE_INSTANCES", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub instances: u32,

    /// Most linear memory one instance may grow to (bytes; KiB/MiB/GiB
    /// suffixes accepted). A request that needs more fails with 413 and its
    /// instance is replaced. Default: 2 GiB plus 64 MiB, or twice
    /// --body-window plus 64 MiB if that is more (a file stored before
    /// BLAKE3 trees were kept, up to the 1 GiB limit of those days, is
    /// verified whole), at most the 4 GiB a 32-bit linear memory can address.
    #[arg(long, env = "WASM_STORAGE_INSTANCE_MEMORY_CAP")]
    pub instance_memory_cap: Option<ByteSize>,

    /// Largest accepted upload body (bytes; suffixes accepted). A larger
    /// declared one gets 413 before a byte of it is read; an undeclared one
    /// when it passes the limit, with nothing stored. By default no
    /// practical limit: a file may be as large as the quota and the disk
    /// allow, since an instance holds at most --body-window of it.
    #[arg(long, env = "WASM_STORAGE_MAX_BODY", default_value = "1PiB")]
    pub max_body: ByteSize,

    /// Serve the S3 API on this address too (e.g. 127.0.0.1:9000),
    /// path-style, with keys from `gateway key create`. Off unless given:
    /// a second port is a second thing to secure, so it opens only when
    /// asked for.
    #[arg(long, env = "WASM_STORAGE_S3_LISTEN")]
    pub s3_listen: Option<SocketAddr>,

    /// Also accept virtual-hosted-style S3 requests (`BUCKET.DOMAIN/KEY`)
    /// for this domain (e.g. `s3.example.com`, with a wildcard DNS record);
    /// path-style requests work either way.
    #[arg(long, env = "WASM_STORAGE_S3_DOMAIN")]
    pub s3_domain: Option<String>,

    /// The master key S3 secrets are sealed with at rest (64 hex digits;
    /// made on first use). Every gateway of one store, and `gateway key`,
    /// must read the same file. Default: s3-master.key in --data-dir.
    #[arg(long, env = "WASM_STORAGE_S3_MASTER_KEY_FILE", global = true)]
    pub s3_master_key_file: Option<PathBuf>,

    /// How long an unfinished upload (tus at `/uploads/`, or S3 multipart)
    /// is kept without a byte added; then it is collected and its bytes
    /// freed.
    #[arg(long, env = "WASM_STORAGE_UPLOAD_EXPIRY", default_value = "24h", value_parser = humantime::parse_duration)]
    pub upload_expiry: Duration,

    /// Most body bytes an instance holds at once (bytes; suffixes
    /// accepted). A body up to this size is buffered whole in the instance
    /// (the growth of linear memory the estimator manages); a longer one
    /// streams through a buffer this size, verified 64 KiB at a time. The
    /// default holds every size of the paper's workload and of the
    /// heavy-tailed one (at most 32 MiB) whole.
    #[arg(long, env = "WASM_STORAGE_BODY_WINDOW", default_value = "32MiB")]
    pub body_window: ByteSize,

    /// Most linear memory the whole pool may hold: every instance's memory
    /// plus what admitted requests reserved for their bodies (bytes;
    /// suffixes accepted). A request that does not fit waits, then gets
    /// 503; one that never can gets 413. Default: half the memory this
    /// process may use (the cgroup's memory.max, else MemTotal).
    #[arg(long, env = "WASM_STORAGE_MEMORY_BUDGET")]
    pub memory_budget: Option<ByteSize>,

    /// Which idle instance serves the next request: memory-aware (the
    /// smallest idle instance that already holds the request's body, else
    /// the largest: large requests keep to few instances), mru (most
    /// recently used; traffic stays on few instances), or lru (spread
    /// evenly).
    #[arg(
        long,
        env = "WASM_STORAGE_DISPATCH",
        value_enum,
        default_value = "memory-aware"
    )]
    pub dispatch: Dispatch,

    /// Requests that may wait for a free instance; past this they get 503.
    #[arg(long, env = "WASM_STORAGE_QUEUE_CAPACITY", default_value_t = 1024)]
    pub queue_capacity: usize,

    /// Longest a request waits for a free instance before it gets 503.
    #[arg(long, env = "WASM_STORAGE_QUEUE_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub queue_timeout: Duration,

    /// Longest a request may go without progress: running in its instance
    /// with no body bytes moved, or waiting on a client that sends or reads
    /// nothing. Past it the request fails (500, or the upload with 400) and
    /// a stuck instance is replaced.
    #[arg(long, env = "WASM_STORAGE_REQUEST_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,

    /// Longest a client may take to send a request's head (line and
    /// headers). It also bounds how long a kept-alive connection may sit
    /// idle waiting for its next request. Past it the connection closes.
    #[arg(long, env = "WASM_STORAGE_HEADER_TIMEOUT", default_value = "5s", value_parser = humantime::parse_duration)]
    pub header_timeout: Duration,

    /// Slowest a client may send an upload or read a download, on average,
    /// once a body has had 10 s (bytes per second; suffixes accepted; 0
    /// for no minimum). A slower upload fails with 408, nothing stored.
    #[arg(long, env = "WASM_STORAGE_MIN_BODY_RATE", default_value = "1KiB")]
    pub min_body_rate: ByteSize,

    /// Most connections served at once; further ones wait in the kernel's
    /// accept queue until one closes.
    #[arg(long, env = "WASM_STORAGE_MAX_CONNECTIONS", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// On SIGTERM or Ctrl-C: how long in-flight requests may take to
    /// finish before every connection is closed and the process exits.
    #[arg(long, env = "WASM_STORAGE_SHUTDOWN_GRACE", default_value = "30s", value_parser = humantime::parse_duration)]
    pub shutdown_grace: Duration,

    /// Web origins (comma-separated, `https://app.example.com`; `*`: any)
    /// whose pages may call `/files/` and `/uploads/` (tus) with a token:
    /// CORS for web apps and Uppy on another origin. Off by default; never
    /// with cookies.
    #[arg(long, env = "WASM_STORAGE_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,

    /// Proxies (addresses or CIDR blocks, comma-separated) whose
    /// `X-Forwarded-For` names the client, for counting password attempts
    /// per client rather than per proxy. Empty: trust no one.
    #[arg(long, env = "WASM_STORAGE_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<crate::auth::proxies::Network>,

    /// Create this admin at start when no user exists yet (its password
    /// from --bootstrap-admin-password-file): how a container gets its
    /// first user from a secret.
    #[arg(
        long,
        env = "WASM_STORAGE_BOOTSTRAP_ADMIN",
        requires = "bootstrap_admin_password_file"
    )]
    pub bootstrap_admin: Option<String>,

    /// The file holding --bootstrap-admin's password (its first line).
    #[arg(long, env = "WASM_STORAGE_BOOTSTRAP_ADMIN_PASSWORD_FILE")]
    pub bootstrap_admin_password_file: Option<PathBuf>,

    /// Serve with this component instead of the built-in storage guest. It
    /// must implement the `storage` world of `wit/storage.wit`.
    #[arg(long, env = "WASM_STORAGE_GUEST")]
    pub guest: Option<PathBuf>,

    /// What runs the storage handler: wasm (the component, sandboxed, its
    /// memory managed by the estimator) or native (the same logic compiled
    /// into the gateway, against the same host functions: a measuring
    /// instrument for what Wasm costs, not for serving).
    #[arg(long, env = "WASM_STORAGE_HANDLER", value_enum, default_value = "wasm")]
    pub handler: HandlerKind,

    /// How the restart threshold is kept: monitor (sample only), calibrate
    /// (learn, then freeze a threshold and enforce it), fixed (--threshold),
    /// or rolling (learn, then keep re-estimating as the workload moves).
    #[arg(
        long,
        env = "WASM_STORAGE_ESTIMATOR_MODE",
        value_enum,
        default_value = "rolling"
    )]
    pub estimator_mode: Mode,

    /// Threshold method: restart-budget (the lowest threshold at which at
    /// most --restart-budget of requests restart their instance, learned
    /// from each request's footprint), or, over per-instance medians of
    /// memory samples, ci-mean (the paper), prediction or quantile.
    #[arg(
        long,
        env = "WASM_STORAGE_ESTIMATOR_METHOD",
        value_enum,
        default_value = "restart-budget"
    )]
    pub estimator_method: Method,

    /// The operator's knob for restart-budget: the largest fraction of
    /// requests that may end in replacing their instance.
    #[arg(long, env = "WASM_STORAGE_RESTART_BUDGET", default_value_t = 0.01)]
    pub restart_budget: f64,

    /// Median methods: significance level; the threshold is the upper
    /// alpha/2 point.
    #[arg(long, env = "WASM_STORAGE_ESTIMATOR_ALPHA", default_value_t = 0.05)]
    pub estimator_alpha: f64,

    /// restart-budget: requests observed before a threshold is set.
    #[arg(
        long,
        env = "WASM_STORAGE_ESTIMATOR_MIN_REQUESTS",
        default_value_t = 32
    )]
    pub estimator_min_requests: u64,

    /// restart-budget: the most recent requests it estimates over (how fast
    /// it follows a workload that drifts).
    #[arg(long, env = "WASM_STORAGE_FOOTPRINT_WINDOW", default_value_t = 1000)]
    pub footprint_window: u64,

    /// restart-budget: keep request footprints in the metadata database and
    /// learn from every gateway's there, and from earlier runs on the same
    /// data (a restarted gateway starts from what it knew); `false`: from
    /// this process's requests alone, storing none (benchmarks that start
    /// each arm afresh on the same data).
    #[arg(
        long,
        env = "WASM_STORAGE_SHARE_FOOTPRINTS",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub share_footprints: bool,

    /// The threshold for `fixed` mode (bytes; suffixes accepted).
    #[arg(long, env = "WASM_STORAGE_THRESHOLD")]
    pub threshold: Option<ByteSize>,

    /// How often every instance's memory is sampled.
    #[arg(long, env = "WASM_STORAGE_SAMPLE_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
    pub sample_interval: Duration,

    /// Warm-up samples each instance's median ignores: none, first:N, or
    /// stable:K (everything before the first K equal samples in a row).
    #[arg(long, env = "WASM_STORAGE_WARMUP", default_value = "stable:2")]
    pub warmup: Warmup,

    /// Median methods: instances that must be ready (--calibration-samples
    /// steady samples and --calibration-requests served) before a threshold
    /// is set (at least 2; every ready instance is used).
    #[arg(long, env = "WASM_STORAGE_CALIBRATION_INSTANCES", default_value_t = 2)]
    pub calibration_instances: usize,

    /// Steady (post-warm-up) samples each of those instances needs.
    #[arg(long, env = "WASM_STORAGE_CALIBRATION_SAMPLES", default_value_t = 6)]
    pub calibration_samples: usize,

    /// Requests each of those instances must have served: an instance that
    /// sat idle since it started is steady, but says nothing of the workload.
    #[arg(long, env = "WASM_STORAGE_CALIBRATION_REQUESTS", default_value_t = 20)]
    pub calibration_requests: u64,

    /// Median methods: the window `rolling` mode recomputes over.
    #[arg(long, env = "WASM_STORAGE_ROLLING_WINDOW", default_value = "10m", value_parser = humantime::parse_duration)]
    pub rolling_window: Duration,

    /// The threshold never goes below a fresh instance's memory plus this
    /// (bytes; suffixes accepted), so it cannot restart instances forever.
    #[arg(
        long,
        env = "WASM_STORAGE_THRESHOLD_FLOOR_MARGIN",
        default_value = "256KiB"
    )]
    pub threshold_floor_margin: ByteSize,

    /// Largest fraction of the pool replaced for the threshold at once
    /// (at least one instance).
    #[arg(
        long,
        env = "WASM_STORAGE_MAX_RECYCLING_FRACTION",
        default_value_t = 0.25
    )]
    pub max_recycling_fraction: f64,

    /// Requests an instance must have served before the threshold may
    /// replace it.
    #[arg(
        long,
        env = "WASM_STORAGE_MIN_REQUESTS_BEFORE_RECYCLE",
        default_value_t = 1
    )]
    pub min_requests_before_recycle: u64,

    /// How long samples and footprints are kept in the metadata database.
    #[arg(long, env = "WASM_STORAGE_SAMPLE_RETENTION", default_value = "6h", value_parser = humantime::parse_duration)]
    pub sample_retention: Duration,
}

/// The 4 GiB a 32-bit linear memory can address.
const WASM32_MEMORY_LIMIT: u64 = 4 << 30;

impl Config {
    /// The defaults, with the data kept in `data_dir` and the listener on
    /// any free loopback port: what tests and embedders start from.
    pub fn for_data_dir(data_dir: impl Into<PathBuf>) -> Self {
        let mut config = Self::parse_from(["gateway"]);
        config.data_dir = data_dir.into();
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        config
    }

    /// The file S3 secrets are sealed under: the flag, or the data dir's.
    pub fn s3_master_key_path(&self) -> PathBuf {
        self.s3_master_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("s3-master.key"))
    }

    /// Where the volume keeps what: the flags, else the data dir.
    pub fn volume_config(&self) -> VolumeConfig {
        let mut volume = VolumeConfig::in_data_dir(&self.data_dir);
        if let Some(database) = &self.database_url {
            volume.database = database.clone();
        }
        if let Some(blobs) = &self.blob_store {
            volume.blobs = blobs.clone();
        }
        volume.s3 = self.s3.clone();
        volume.orphan_grace = self.orphan_grace;
        volume.removal_lease = self.removal_lease;
        volume.pack_small_blobs = self.pack_small_blobs;
        volume.history = volume::HistoryPolicy {
            versions: self.versions,
            retention: self.trash_retention,
        };
        if let Some(day) = self.lifecycle_test_day {
            volume.lifecycle_day = day;
        }
        volume
    }

    /// The per-instance cap in force: the flag, or the default that
    /// follows `--body-window`.
    pub fn instance_memory_cap(&self) -> u64 {
        /// Largest file stored before BLAKE3 trees were kept, which is
        /// verified whole.
        const WHOLE_BEFORE_TREES: u64 = 1 << 30;
        self.instance_memory_cap.map_or_else(
            || {
                self.body_window
                    .0
                    .max(WHOLE_BEFORE_TREES)
                    .saturating_mul(2)
                    .saturating_add(64 << 20)
                    .min(WASM32_MEMORY_LIMIT)
            },
            |cap| cap.0,
        )
    }

    /// The memory budget in force: the flag, or half of what this process
    /// may use.
    pub fn memory_budget(&self) -> u64 {
        self.memory_budget
            .map_or_else(|| crate::procstat::memory_limit() / 2, |budget| budget.0)
    }
}

/// A number of bytes, written plainly or with a suffix: `65536`, `64KiB`,
/// `256MiB`, `1GiB`, `2TiB`, `1PiB` (also `K`/`KB`, `M`/`MB`, `G`/`GB`, …,
/// all powers of 1024).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        let number: u64 = digits.parse().map_err(|_| {
            format!("{text:?} is not a size: expected digits with an optional unit like MiB")
        })?;
        let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            "t" | "tb" | "tib" => 1 << 40,
            "p" | "pb" | "pib" => 1 << 50,
            other => {
                return Err(format!(
                    "unknown size unit {other:?}: use B, KiB, MiB, GiB, TiB or PiB"
                ));
            }
        };
        number
            .checked_mul(multiplier)
            .map(ByteSize)
            .ok_or_else(|| format!("{text:?} is too large"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 5] = [
            (1 << 50, "PiB"),
            (1 << 40, "TiB"),
            (1 << 30, "GiB"),
            (1 << 20, "MiB"),
            (1 << 10, "KiB"),
        ];
        for (size, unit) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{unit}", self.0 / size);
            }
        }
        write!(f, "{}B", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes() {
        assert_eq!("65536".parse(), Ok(ByteSize(65536)));
        assert_eq!("64KiB".parse(), Ok(ByteSize(65536)));
        assert_eq!("256MiB".parse(), Ok(ByteSize(256 << 20)));
        assert_eq!("1 G".parse(), Ok(ByteSize(1 << 30)));
        assert!("12XB".parse::<ByteSize>().is_err());
        assert!("MiB".parse::<ByteSize>().is_err());
        assert!("99999999999999GiB".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(256 << 20).to_string(), "256MiB");
        assert_eq!("2TiB".parse(), Ok(ByteSize(2 << 40)));
        assert_eq!(ByteSize(1000).to_string(), "1000B");
        assert_eq!(ByteSize(1 << 50).to_string(), "1PiB");
    }

    #[test]
    fn defaults_parse() {
        let config = Config::parse_from(["gateway"]);
        assert_eq!(config.instances, 16);
        assert_eq!(config.max_body, ByteSize(1 << 50));
        assert_eq!(config.body_window, ByteSize(32 << 20));
        assert_eq!(config.instance_memory_cap(), (2 << 30) + (64 << 20));
        assert!(config.memory_budget() > 0);
        assert!(config.share_footprints);
        let alone = Config::parse_from(["gateway", "--share-footprints", "false"]);
        assert!(!alone.share_footprints);
        let mut large = config.clone();
        large.body_window = ByteSize(3 << 30);
        assert_eq!(large.instance_memory_cap(), 4 << 30);
    }
}
