//! wasm-storage gateway: an HTTP file store whose request handlers run as
//! long-lived WebAssembly instances.
//!
//! A request enters through axum ([`app`]), is validated and turned into a
//! typed [`runtime::Call`], and the [`pool::Pool`] runs it on an idle
//! instance of the storage component, which reads and writes through the
//! host's `volume` crate.
//!
//! Layout:
//! - [`config`]: flags and environment variables, with their defaults.
//! - [`runtime`]: the wasmtime engine, the component's bindings, host state,
//!   the memory limiter and the host side of the `volume` interface.
//! - [`pool`]: the instance pool, the dispatcher and its wait queue, and
//!   drain-and-replace (at check-in, above the threshold).
//! - [`recycler`]: the embedded estimator task: samples, modes, threshold.
//! - `routes`: the HTTP interface (`files`, `admin`, `health`, `metrics`, `web`: the
//!   page in `src/web/index.html`).
//! - [`error`]: every client-visible error and its status code.
//! - `procstat`: process RSS and private-dirty bytes from `/proc/self`.

pub mod config;
pub mod error;
pub mod pool;
pub mod procstat;
pub mod recycler;
pub mod runtime;

mod routes;

use std::future::Future;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

use crate::config::Config;
use crate::pool::{Pool, PoolConfig};
use crate::recycler::{EstimatorConfig, Recycler};
use crate::runtime::{BUILTIN_GUEST, Runtime, RuntimeLimits};
use volume::Volume;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    pub pool: Arc<Pool>,
    pub volume: Arc<Volume>,
    pub recycler: Arc<Recycler>,
    /// Largest accepted upload, in bytes.
    pub max_body: u64,
}

/// Open the volume, compile the guest and start the pool.
pub async fn start(config: &Config) -> anyhow::Result<AppState> {
    let (volume, sweep) = Volume::open(&config.data_dir)
        .await
        .with_context(|| format!("opening the data directory {}", config.data_dir.display()))?;
    tracing::info!(data_dir = %config.data_dir.display(), ?sweep, "volume open");
    let volume = Arc::new(volume);

    let guest = match &config.guest {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("reading the guest component {}", path.display()))?,
        None => BUILTIN_GUEST.to_vec(),
    };
    let limits = RuntimeLimits {
        // Room for every serving instance plus as many replacements in flight.
        max_instances: config.instances.saturating_mul(2).saturating_add(2),
        memory_cap: config.instance_memory_cap.0,
        request_timeout: config.request_timeout,
    };
    let runtime = Runtime::new(&guest, volume.clone(), limits).map_err(anyhow::Error::from)?;
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
            mode: config.estimator_mode,
            method: config.estimator_method,
            alpha: config.estimator_alpha,
            fixed_threshold: config.threshold.map(|size| size.0),
            warmup: config.warmup,
            sample_interval: config.sample_interval,
            calibration_instances: config.calibration_instances,
            calibration_samples: config.calibration_samples,
            calibration_requests: config.calibration_requests,
            rolling_window: config.rolling_window,
            floor_margin: config.threshold_floor_margin.0,
            retention: config.sample_retention,
        },
    )
    .map_err(anyhow::Error::msg)?;
    tokio::spawn(recycler.clone().run());
    Ok(AppState {
        pool,
        volume,
        recycler,
        max_body: config.max_body.0,
    })
}

/// The whole HTTP interface.
pub fn app(state: AppState) -> Router {
    Router::new()
        .merge(routes::files::router())
        .merge(routes::admin::router())
        .merge(routes::health::router())
        .merge(routes::metrics::router())
        .merge(routes::web::router())
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Serve on `listener` until `shutdown` resolves, then finish in-flight
/// requests, drop the instances and close the index.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(state.clone()))
        .with_graceful_shutdown(shutdown)
        .await?;
    state.recycler.stop();
    state.pool.close();
    state.volume.close().await;
    Ok(())
}

/// Start everything from `config` and serve until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let state = start(&config).await?;
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(address = %listener.local_addr()?, "listening");
    serve(listener, state, shutdown_signal()).await?;
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
    tracing::info!("shutting down: finishing in-flight requests");
}
