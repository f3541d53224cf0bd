//! wasm-storage gateway: the binary that wires the layers together. An
//! HTTP file store whose request handlers run as long-lived WebAssembly
//! instances.
//!
//! A request enters through axum ([`app`]) and reaches one protocol
//! adapter (`api-rest`, `api-dav`, `api-admin`, or `api-s3` on its own
//! listener), which takes a caller from `auth` and calls the
//! `file-service`; the service alone leases instances from the
//! `storage-host` pool and talks to the `volume`. See ARCHITECTURE.md for
//! the crate map.
//!
//! This crate:
//! - [`config`]: flags and environment variables, with their defaults;
//!   [`cli`]: the `user` and `token` subcommands.
//! - [`server`]: the listener: connection cap, header timeout, bounded
//!   graceful shutdown.
//! - this file: [`start`] (open the volume, start the pool and the
//!   recycler), [`app`] (the routers merged), [`serve`].
//! - [`fuzzing`]: entry points for the fuzzers of client-input parsers.

pub mod cli;
pub mod config;
pub mod fuzzing;
pub mod server;

pub use api_s3 as s3;
pub use auth;
pub use storage_host::{budget, pool, procstat, recycler, runtime};

use api_common::trace_layer;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use tokio::net::TcpListener;

use api_admin::AdminState;
use api_dav::DavState;
use api_rest::RestState;
use auth::Authenticator;
use file_service::FileService;
use storage_host::budget::MemoryBudget;
use storage_host::pool::{Pool, PoolConfig};
use storage_host::recycler::{EstimatorConfig, Recycler};
use storage_host::runtime::{BUILTIN_GUEST, Runtime, RuntimeLimits};

use crate::config::Config;
use crate::server::ConnectionLimits;
use volume::Volume;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Files, for every protocol.
    pub files: FileService,
    pub pool: Arc<Pool>,
    pub volume: Arc<Volume>,
    pub recycler: Arc<Recycler>,
    pub auth: Arc<Authenticator>,
    /// How the listener treats connections.
    pub connection_limits: ConnectionLimits,
    /// The origins `/files/` and `/uploads/` answer CORS to (`--cors-origins`).
    pub cors_origins: Arc<[String]>,
    /// The recycler's task, awaited at shutdown before the volume closes.
    recycler_task: Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>>,
    /// The garbage collector's task, stopped at shutdown.
    collector_task: Arc<tokio::task::AbortHandle>,
    /// The lifecycle's task, stopped at shutdown.
    lifecycle_task: Arc<tokio::task::AbortHandle>,
    /// What S3 secrets are sealed under, when the S3 API is served.
    s3_master: Option<s3::MasterKey>,
    /// The domain of virtual-hosted-style S3 requests, if any.
    s3_domain: Option<String>,
}

/// Open the volume, compile the guest and start the pool.
pub async fn start(config: &Config) -> anyhow::Result<AppState> {
    let volume_config = config.volume_config();
    let (volume, sweep) = Volume::open(&volume_config).await.with_context(|| {
        format!(
            "opening the volume (database {}, blobs {}, data dir {})",
            volume_config.database,
            volume_config.blobs,
            config.data_dir.display()
        )
    })?;
    tracing::info!(
        database = %volume_config.database,
        blobs = %volume_config.blobs,
        data_dir = %config.data_dir.display(),
        ?sweep,
        "volume open"
    );
    let volume = Arc::new(volume);
    let auth = Arc::new(open_accounts(config, &volume).await?);

    let guest = match &config.guest {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("reading the guest component {}", path.display()))?,
        None => BUILTIN_GUEST.to_vec(),
    };
    let limits = RuntimeLimits {
        // Room for every serving instance plus as many replacements in flight.
        max_instances: config.instances.saturating_mul(2).saturating_add(2),
        memory_cap: config.instance_memory_cap(),
        request_timeout: config.request_timeout,
        min_body_rate: config.min_body_rate.0,
        handler: config.handler,
    };
    let budget = MemoryBudget::new(config.memory_budget());
    tracing::info!(
        memory_budget_bytes = budget.total(),
        instance_memory_cap_bytes = limits.memory_cap,
        max_body_bytes = config.max_body.0,
        "memory limits"
    );
    let runtime =
        Runtime::new(&guest, volume.clone(), budget, limits).map_err(anyhow::Error::from)?;
    let first_instance_id = volume
        .samples()
        .last_instance()
        .await
        .context("reading the stored samples")?
        .map_or(1, |last| last + 1);
    let pool = Pool::start(
        runtime,
        PoolConfig {
            size: config.instances as usize,
            queue_capacity: config.queue_capacity,
            queue_timeout: config.queue_timeout,
            min_requests_before_recycle: config.min_requests_before_recycle,
            max_recycling: ((config.instances as f64 * config.max_recycling_fraction).floor()
                as usize)
                .max(1),
            dispatch: config.dispatch,
            first_instance_id,
            footprint_window: usize::try_from(config.footprint_window).unwrap_or(usize::MAX),
        },
    )
    .await
    .map_err(anyhow::Error::from)
    .context("starting the instance pool")?;
    tracing::info!(instances = config.instances, "instance pool ready");
    let recycler = Recycler::new(
        pool.clone(),
        volume.clone(),
        EstimatorConfig {
            settings: recycler::Settings {
                mode: config.estimator_mode,
                method: config.estimator_method,
                alpha: config.estimator_alpha,
                restart_budget: config.restart_budget,
                fixed_threshold: config.threshold.map(|size| size.0),
            },
            policy: recycler::PolicyConfig {
                warmup: config.warmup,
                min_requests: config.estimator_min_requests,
                footprint_window: config.footprint_window,
                calibration_instances: config.calibration_instances,
                calibration_samples: config.calibration_samples,
                calibration_requests: config.calibration_requests,
                rolling_window_ms: i64::try_from(config.rolling_window.as_millis())
                    .unwrap_or(i64::MAX),
                floor_margin: config.threshold_floor_margin.0,
            },
            sample_interval: config.sample_interval,
            retention: config.sample_retention,
            share_footprints: config.share_footprints,
        },
    )
    .await
    .map_err(anyhow::Error::from)?;
    if let Some(day) = config.lifecycle_test_day {
        let public = std::iter::once(config.listen)
            .chain(config.s3_listen)
            .find(|address| !address.ip().is_loopback());
        if let Some(address) = public {
            anyhow::bail!(
                "refusing --lifecycle-test-day on {address}: the lifecycle test clock expires \
                 files days early, and only a gateway on loopback addresses may run on it"
            );
        }
        tracing::warn!(
            ?day,
            "lifecycle rules run on the TEST clock: a day lasts {}",
            humantime::format_duration(day)
        );
    }
    let s3_master = match config.s3_listen {
        Some(address) => {
            if !address.ip().is_loopback() && auth.accounts().user_count().await? == 0 {
                anyhow::bail!(
                    "refusing to serve S3 on {address} with no user: create one with \
                     `gateway user add NAME --admin`, or listen on a loopback address"
                );
            }
            if let Some(domain) = &config.s3_domain {
                s3s::host::SingleDomain::new(domain)
                    .with_context(|| format!("--s3-domain {domain:?} is not a domain"))?;
            }
            Some(
                s3::MasterKey::load_checked(&config.s3_master_key_path(), &auth.accounts().clone())
                    .await?,
            )
        }
        None => None,
    };
    let recycler_task = tokio::spawn(recycler.clone().run());
    let collector_task = tokio::spawn(collect_garbage(volume.clone(), config.gc_interval));
    let lifecycle_task = tokio::spawn(run_lifecycle(volume.clone()));
    Ok(AppState {
        files: FileService::new(
            pool.clone(),
            volume.clone(),
            auth.clone(),
            config.max_body.0,
            config.body_window.0,
            config.upload_expiry,
        ),
        pool,
        volume,
        recycler,
        auth,
        connection_limits: ConnectionLimits {
            header_timeout: config.header_timeout,
            max_connections: usize::try_from(config.max_connections).unwrap_or(usize::MAX),
            shutdown_grace: config.shutdown_grace,
        },
        cors_origins: config.cors_origins.clone().into(),
        recycler_task: Arc::new(std::sync::Mutex::new(Some(recycler_task))),
        collector_task: Arc::new(collector_task.abort_handle()),
        lifecycle_task: Arc::new(lifecycle_task.abort_handle()),
        s3_master,
        s3_domain: config.s3_domain.clone(),
    })
}

/// Create the bootstrap admin if asked and no user exists; refuse to
/// serve openly anywhere but on loopback.
async fn open_accounts(config: &Config, volume: &Volume) -> anyhow::Result<Authenticator> {
    let accounts = volume.accounts();
    if let (Some(name), Some(file)) = (
        &config.bootstrap_admin,
        &config.bootstrap_admin_password_file,
    ) && accounts.user_count().await? == 0
    {
        let password = cli::read_password_file(file)?;
        match cli::add_user(&accounts, name, &password, true, None).await {
            Ok(_) => tracing::info!(name, "created the bootstrap admin"),
            // Another gateway on this database created it first.
            Err(error)
                if matches!(
                    error.downcast_ref::<volume::VolumeError>(),
                    Some(volume::VolumeError::AlreadyExists(_))
                ) => {}
            Err(error) => {
                return Err(error.context(format!("creating the bootstrap admin {name:?}")));
            }
        }
    }
    let loopback = config.listen.ip().is_loopback();
    if accounts.user_count().await? == 0 {
        if !loopback {
            anyhow::bail!(
                "refusing to serve {} with no user: anyone who reaches it could read and \
                 delete every file. Create one with `gateway user add NAME --admin` (same \
                 --data-dir / --database-url), or listen on a loopback address",
                config.listen
            );
        }
        tracing::warn!(
            listen = %config.listen,
            "no user exists: serving openly on loopback (every request is allowed); \
             `gateway user add NAME --admin` turns authentication on"
        );
    }
    Ok(
        Authenticator::new(accounts, loopback, config.trusted_proxies.clone())
            .await?
            .with_cors_origins(config.cors_origins.clone()),
    )
}

/// The whole HTTP interface.
pub fn app(state: AppState) -> Router {
    let rest = RestState {
        files: state.files.clone(),
        auth: state.auth.clone(),
    };
    let dav = DavState {
        files: state.files.clone(),
        auth: state.auth.clone(),
    };
    let admin = AdminState {
        files: state.files,
        pool: state.pool,
        recycler: state.recycler,
        auth: state.auth,
        volume: state.volume,
    };
    Router::new()
        .merge(api_rest::router(rest, &state.cors_origins))
        .merge(api_dav::router(dav))
        .merge(api_admin::router(admin))
        .layer(axum::middleware::from_fn(one_host))
        .layer(trace_layer())
}

/// The log filter for `RUST_LOG` (`info` when unset). `s3s` logs every
/// client's mistake at ERROR, a malformed XML body whole among them (a
/// client could fill the disk with them, and bodies are user data), so
/// its own events are off unless `RUST_LOG` names it: the S3 adapter logs
/// a bounded summary of each failure itself.
pub fn log_filter(rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
    let spec = rust_log
        .filter(|spec| !spec.trim().is_empty())
        .unwrap_or("info");
    let filter = tracing_subscriber::EnvFilter::try_new(spec)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    if spec.contains("s3s") {
        return filter;
    }
    match "s3s=off".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// RFC 9112 3.2: an HTTP/1.1 request without a `Host` header, or with more
/// than one, gets 400 (share links and the origin checks rely on it). Every
/// answer is `Cache-Control: private` unless its route says otherwise.
async fn one_host(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let hosts = request
        .headers()
        .get_all(axum::http::header::HOST)
        .iter()
        .count();
    if request.version() == axum::http::Version::HTTP_11 && hosts != 1 {
        return api_common::ApiError::BadRequest(
            "an HTTP/1.1 request needs exactly one Host header".into(),
        )
        .into_response();
    }
    let mut response = next.run(request).await;
    // Answers depend on who asks: no shared cache may keep them.
    response
        .headers_mut()
        .entry(axum::http::header::CACHE_CONTROL)
        .or_insert(axum::http::HeaderValue::from_static("private"));
    response
}

/// Serve on `listener` until `shutdown` resolves, then finish in-flight
/// requests (for at most the shutdown grace), stop the recycler and wait for it, drop the instances and close
/// the index: nothing that uses the volume outlives it.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_s3(listener, None, state, shutdown).await
}

/// [`serve`], and the S3 API on `s3` (when given, and the gateway was
/// started with `--s3-listen`) until the same `shutdown`.
pub async fn serve_with_s3(
    listener: TcpListener,
    s3: Option<TcpListener>,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });
    let until_stopped = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|stopped| *stopped).await;
        }
    };
    let s3_app = match (&state.s3_master, s3) {
        (Some(master), Some(listener)) => {
            let loopback = listener.local_addr()?.ip().is_loopback();
            let router = s3::router(
                state.files.clone(),
                state.auth.clone(),
                master.clone(),
                state.s3_domain.as_deref(),
                loopback,
            )
            .map_err(std::io::Error::other)?;
            Some((listener, router))
        }
        (None, Some(_)) => {
            return Err(std::io::Error::other(
                "an S3 listener needs a gateway started with --s3-listen",
            ));
        }
        _ => None,
    };
    let s3_server = async {
        if let Some((listener, app)) = s3_app {
            server::serve(listener, app, state.connection_limits, until_stopped()).await;
        }
    };
    tokio::join!(
        server::serve(
            listener,
            app(state.clone()),
            state.connection_limits,
            until_stopped(),
        ),
        s3_server
    );
    state.recycler.stop();
    let recycler_task = state
        .recycler_task
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    if let Some(task) = recycler_task
        && let Err(error) = task.await
    {
        tracing::error!(%error, "the recycler task failed");
    }
    state.collector_task.abort();
    state.lifecycle_task.abort();
    state.pool.close();
    state.volume.close().await;
    Ok(())
}

/// Collect the volume's garbage every `interval` (every gateway does; the
/// volume's ledger makes that safe), and compact packed blobs' segments
/// each time one is closed.
async fn collect_garbage(volume: Arc<Volume>, interval: Duration) {
    let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(100)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                if let Err(error) = volume.collect_garbage().await {
                    tracing::warn!(%error, "garbage collection failed; trying again next interval");
                }
            }
            // Small writes fill segments at their own pace: compact as
            // each is closed, so dead records never outgrow live ones.
            () = volume.segment_closed() => {
                if let Err(error) = volume.compact_segments().await {
                    tracing::warn!(%error, "compacting segments failed; trying again later");
                }
            }
        }
    }
}

/// Carry out buckets' lifecycle rules 24 times a lifecycle day (hourly;
/// more often under the test clock), each pass bounded (every gateway
/// does; each removal re-checks what it read, so each happens once).
async fn run_lifecycle(volume: Arc<Volume>) {
    let day = Duration::from_millis(u64::try_from(volume.lifecycle_day_ms()).unwrap_or(1));
    let interval = (day / 24).clamp(Duration::from_millis(200), Duration::from_secs(3600));
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(error) = volume.run_lifecycle().await {
            tracing::warn!(%error, "a lifecycle pass failed; trying again next interval");
        }
    }
}

/// Start everything from `config` and serve until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let state = start(&config).await?;
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(address = %listener.local_addr()?, "listening");
    let s3 = match config.s3_listen {
        Some(address) => {
            let listener = TcpListener::bind(address)
                .await
                .with_context(|| format!("binding {address} for S3"))?;
            tracing::info!(address = %listener.local_addr()?, "serving the S3 API");
            Some(listener)
        }
        None => None,
    };
    serve_with_s3(listener, s3, state, shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down");
}
