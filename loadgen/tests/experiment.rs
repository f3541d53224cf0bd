//! A tiny version of the paper's experiment, end to end through the real
//! `loadgen` binary (which starts a gateway process per arm).

#![allow(clippy::unwrap_used)]

use std::process::Command;

use estimator::{Method, Warmup};

#[test]
fn a_tiny_experiment_reports_every_arm_and_the_paper_threshold_matches_the_estimator() {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("results.json");
    let status = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args([
            "experiment",
            "--quick",
            "--instances",
            "4",
            "--files",
            "12",
            "--reads-per-instance",
            "8",
        ])
        .args([
            "--tick",
            "100ms",
            "--file-mean",
            "200000",
            "--file-stddev",
            "60000",
        ])
        .arg("--out")
        .arg(out.path())
        .arg("--json")
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .env("RUST_LOG", "warn")
        .status()
        .unwrap();
    assert!(status.success());

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let arms = report["arms"].as_array().unwrap();
    let names: Vec<&str> = arms
        .iter()
        .map(|arm| arm["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "monitor",
            "paper",
            "ci-mean-a0.5",
            "prediction-a0.05",
            "quantile-a0.5",
            "mru",
            "memory-aware",
            "memory-aware-paper",
            "memory-aware-calibrated",
            "fresh-per-request"
        ]
    );
    for arm in arms {
        let name = arm["name"].as_str().unwrap();
        assert_eq!(arm["requests"], 32, "{name}: 4 instances × 8 reads");
        assert_eq!(arm["failed_requests"], 0, "{name}");
        assert!(arm["mean_memory_bytes"].as_f64().unwrap() > 0.0, "{name}");
        assert!(arm["mean_rss_bytes"].as_f64().unwrap() > 0.0, "{name}");
        assert!(arm["latency_p99_ms"].as_f64().unwrap() >= arm["latency_p50_ms"].as_f64().unwrap());
        for field in ["reduction_percent", "restarts", "restarts_per_request"] {
            assert!(!arm[field].is_null(), "{name}: {field}");
        }
        assert!(
            std::path::Path::new(arm["samples_csv"].as_str().unwrap()).exists(),
            "{name}"
        );
    }
    // Each arm's samples are its own: their time ranges do not overlap,
    // and no instance's memory ever falls within one arm's series.
    let mut previous_end = i64::MIN;
    for arm in arms {
        let csv = std::fs::read(arm["samples_csv"].as_str().unwrap()).unwrap();
        let samples = estimator::read_csv(&csv[..]).unwrap();
        let start = samples.iter().map(|s| s.timestamp_ms).min().unwrap();
        assert!(
            start > previous_end,
            "{} overlaps the arm before it",
            arm["name"]
        );
        previous_end = samples.iter().map(|s| s.timestamp_ms).max().unwrap();
        let mut last = std::collections::BTreeMap::new();
        for sample in &samples {
            let before = last.insert(sample.instance, sample.bytes).unwrap_or(0);
            assert!(
                sample.bytes >= before,
                "{}: instance {} shrank",
                arm["name"],
                sample.instance
            );
        }
    }
    // Reads are spread (lru) in the monitor arm: every instance served some,
    // so every instance grew past a fresh one's memory.
    let monitor =
        estimator::read_csv(&std::fs::read(out.path().join("monitor.csv")).unwrap()[..]).unwrap();
    let mut first_and_last = std::collections::BTreeMap::new();
    for sample in &monitor {
        first_and_last
            .entry(sample.instance)
            .or_insert((sample.bytes, 0))
            .1 = sample.bytes;
    }
    assert_eq!(first_and_last.len(), 4);
    for (instance, (first, last)) in first_and_last {
        assert!(
            last > first,
            "instance {instance} never served a read ({first} -> {last})"
        );
    }
    assert_eq!(arms[0]["reduction_percent"], 0.0);
    assert_eq!(arms[0]["restarts"], 0);
    // One replacement per read when every instance is fresh for each request.
    assert_eq!(arms[9]["restarts"], 32);
    assert_eq!(
        arms[7]["threshold_bytes"], arms[1]["threshold_bytes"],
        "both from the monitor arm"
    );
    assert_eq!(arms[5]["restarts"], 0, "mru alone never restarts");
    assert_eq!(arms[6]["restarts"], 0, "memory-aware alone never restarts");

    // The paper arm's threshold is what the estimator computes from the
    // exported monitor CSV with its defaults (ci-mean, α = 0.05, stable:2).
    // The figures are there, as PNG and SVG.
    for figure in [
        "mean-memory",
        "tradeoff",
        "memory-monitor",
        "memory-paper",
        "medians-monitor",
        "medians-paper",
    ] {
        for extension in ["png", "svg"] {
            let path = out.path().join(format!("{figure}.{extension}"));
            assert!(
                std::fs::metadata(&path).unwrap().len() > 1000,
                "{}",
                path.display()
            );
        }
    }

    let csv = std::fs::read(out.path().join("monitor.csv")).unwrap();
    let samples = estimator::read_csv(&csv[..]).unwrap();
    let expected =
        estimator::threshold_from_samples(&samples, Warmup::default(), Method::CiMean, 0.05, None)
            .unwrap();
    assert_eq!(arms[1]["threshold_bytes"], expected.threshold_bytes);
}
