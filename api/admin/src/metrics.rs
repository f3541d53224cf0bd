//! `GET /metrics`: the pool and the estimator in Prometheus text format.

use std::fmt::Write as _;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::AdminState;
use storage_host::procstat::ProcessMemory;

pub(crate) fn router() -> Router<AdminState> {
    Router::new().route("/metrics", get(metrics))
}

/// Prometheus text exposition, one metric family at a time.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: u64) {
        let _ = writeln!(self.0, "{name}{labels} {value}");
    }

    fn gauge(&mut self, name: &str, help: &str, value: u64) {
        self.family(name, "gauge", help);
        self.sample(name, "", value);
    }
}

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    let instances = state.pool.instances();
    let process = ProcessMemory::read();
    let mut out = Exposition::default();

    let name = "wasm_storage_instance_memory_bytes";
    out.family(name, "gauge", "Linear memory of each live instance.");
    for instance in &instances {
        let state = serde_json::to_value(instance.state).unwrap_or_default();
        let labels = format!("{{instance=\"{}\",state={state}}}", instance.id);
        out.sample(name, &labels, instance.memory_bytes);
    }
    out.gauge(
        "wasm_storage_instances",
        "Live instances.",
        instances.len() as u64,
    );
    out.gauge(
        "wasm_storage_pool_memory_bytes",
        "Sum of every live instance's linear memory.",
        instances.iter().map(|i| i.memory_bytes).sum(),
    );
    out.gauge(
        "wasm_storage_process_rss_bytes",
        "Resident set size of the gateway.",
        process.rss_bytes,
    );
    out.gauge(
        "wasm_storage_process_private_dirty_bytes",
        "Private dirty bytes of the gateway.",
        process.private_dirty_bytes,
    );
    out.gauge(
        "wasm_storage_threshold_bytes",
        "Restart threshold in force (0: none).",
        state.pool.threshold().unwrap_or(0),
    );
    out.gauge(
        "wasm_storage_memory_budget_bytes",
        "The memory budget: most linear memory the pool may hold.",
        state.pool.budget().total(),
    );
    out.gauge(
        "wasm_storage_memory_budget_used_bytes",
        "Instance memory plus reserved bytes, counted against the budget.",
        state.pool.budget().used(),
    );
    out.gauge(
        "wasm_storage_memory_budget_reserved_bytes",
        "Bytes admitted requests reserved and have not grown into yet.",
        state.pool.budget().reserved(),
    );
    out.gauge(
        "wasm_storage_queue_waiting",
        "Requests waiting for memory or an idle instance.",
        state.pool.waiting() as u64,
    );

    let name = "wasm_storage_integrity_failures_total";
    out.family(
        name,
        "counter",
        "Reads refused (500 integrity_error) or cut short because stored content failed verification.",
    );
    out.sample(name, "", state.files.integrity_failures());

    let name = "wasm_storage_versions_evicted_total";
    out.family(
        name,
        "counter",
        "Earlier versions and trashed files removed before their retention to make room for an upload within its owner's quota.",
    );
    out.sample(name, "", volume::versions_evicted());

    let name = "wasm_storage_lifecycle_actions_total";
    out.family(
        name,
        "counter",
        "What S3 lifecycle rules did, by action; `held`: versions a rule reached that object lock kept.",
    );
    let done = volume::lifecycle_totals();
    for (action, count) in [
        ("expired", done.expired),
        ("noncurrent_removed", done.noncurrent_removed),
        ("delete_markers_removed", done.markers_removed),
        ("uploads_aborted", done.uploads_aborted),
        ("held", done.held),
    ] {
        out.sample(name, &format!("{{action=\"{action}\"}}"), count);
    }

    out.gauge(
        "wasm_storage_uploads_in_progress",
        "Unfinished resumable uploads (every gateway of this store).",
        state.files.uploads_in_progress().await,
    );

    let name = "wasm_storage_replacements_total";
    out.family(
        name,
        "counter",
        "Instances replaced since start, by reason.",
    );
    for (reason, count) in state.pool.replacements() {
        let reason = serde_json::to_value(reason).unwrap_or_default();
        out.sample(name, &format!("{{reason={reason}}}"), count);
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out.0,
    )
}
