//! The `estimator threshold` command on a real CSV file.

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn run(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_estimator"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn prints_the_threshold_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("samples.csv");
    // Five instances; each grows for one sample, then holds still. Steady
    // medians: 10, 12, 14, 16, 18 (the worked example of the unit tests).
    let mut text = String::from("timestamp,instance,bytes\n");
    for (instance, steady) in [(1, 10), (2, 12), (3, 14), (4, 16), (5, 18)] {
        text += &format!(
            "0,{instance},1\n10000,{instance},{steady}\n20000,{instance},{steady}\n30000,{instance},{steady}\n"
        );
    }
    std::fs::write(&csv, text).unwrap();
    let path = csv.to_str().unwrap();

    let (ok, stdout, stderr) = run(&["threshold", "--csv", path]);
    assert!(ok, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["method"], "ci-mean");
    assert_eq!(report["alpha"], 0.05);
    assert_eq!(report["n"], 5);
    assert_eq!(report["mean_bytes"], 14.0);
    assert_eq!(report["threshold_bytes"], 18);
    assert_eq!(report["warmup"], "stable:2");
    assert!((report["t"].as_f64().unwrap() - 2.776_445).abs() < 1e-5);
    assert!((report["stddev_bytes"].as_f64().unwrap() - 10f64.sqrt()).abs() < 1e-9);
    assert!(report["normality_p"].as_f64().unwrap() > 0.5);

    let (ok, stdout, _) = run(&[
        "threshold",
        "--csv",
        path,
        "--method",
        "prediction",
        "--alpha",
        "0.1",
    ]);
    assert!(ok);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["method"], "prediction");
    assert_eq!(report["alpha"], 0.1);

    // Keeping the warm-up samples pulls every median down to the steady value
    // anyway here (three of four), but the floor is honoured.
    let (ok, stdout, _) = run(&[
        "threshold",
        "--csv",
        path,
        "--warmup",
        "none",
        "--floor",
        "100",
    ]);
    assert!(ok);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["threshold_bytes"], 100);
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("bad.csv");
    std::fs::write(&csv, "timestamp,instance,bytes\n1,2,three\n").unwrap();
    let (ok, _, stderr) = run(&["threshold", "--csv", csv.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        stderr.contains("line 2: bytes is not a non-negative integer"),
        "{stderr}"
    );

    std::fs::write(&csv, "1,1,10\n").unwrap();
    let (ok, _, stderr) = run(&["threshold", "--csv", csv.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains("at least 2 are needed"), "{stderr}");

    let (ok, _, stderr) = run(&["threshold", "--csv", "/nonexistent/samples.csv"]);
    assert!(!ok);
    assert!(
        stderr.contains("opening /nonexistent/samples.csv"),
        "{stderr}"
    );
}
