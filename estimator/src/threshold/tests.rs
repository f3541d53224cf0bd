//! Threshold tests: published reference values, worked examples computed
//! independently (SciPy 1.x, values pasted below), properties and edge cases.

use proptest::prelude::*;

use super::*;

fn close(actual: f64, expected: f64, tolerance: f64) -> bool {
    (actual - expected).abs() <= tolerance
}

#[test]
fn student_t_quantiles_match_published_tables() {
    // Two-sided 95 % and 99 % points, as printed in every t table.
    assert!(close(student_t_upper(0.025, 49), 2.0096, 5e-5));
    assert!(close(student_t_upper(0.025, 4), 2.7764, 5e-5));
    assert!(close(student_t_upper(0.005, 9), 3.2498, 5e-5));
    assert!(close(student_t_upper(0.025, 1), 12.7062, 5e-4));
}

#[test]
fn worked_example_of_five() {
    // x = 10, 12, 14, 16, 18: mean 14, u² = 40/4 = 10, t_{0.975}(4) = 2.776445.
    let x = [10.0, 12.0, 14.0, 16.0, 18.0];
    let ci = estimate(&x, Method::CiMean, 0.05, None).expect("estimate");
    assert_eq!(ci.n, 5);
    assert!(close(ci.mean_bytes, 14.0, 1e-12));
    assert!(close(ci.stddev_bytes, 10f64.sqrt(), 1e-12));
    assert!(close(ci.t.expect("t"), 2.776_445_105, 1e-8));
    // SciPy: mean + t·u/√n = 17.926486322955114
    assert!(close(ci.raw_threshold_bytes, 17.926_486_322_955, 1e-9));
    assert_eq!(ci.threshold_bytes, 18);

    // SciPy: mean + t·u·√(1 + 1/n) = 23.61788797325699
    let prediction = estimate(&x, Method::Prediction, 0.05, None).expect("estimate");
    assert!(close(
        prediction.raw_threshold_bytes,
        23.617_887_973_257,
        1e-9
    ));

    // NumPy: quantile(x, 0.975) = 17.8
    let quantile = estimate(&x, Method::Quantile, 0.05, None).expect("estimate");
    assert!(close(quantile.raw_threshold_bytes, 17.8, 1e-12));
    assert_eq!(quantile.t, None);
}

#[test]
fn paper_sized_sample_of_fifty() {
    // Fifty medians drawn around the paper's 6541 KiB (seeded NumPy draw).
    let medians = [
        6698488.0, 6820350.0, 6585697.0, 6333198.0, 6511751.0, 6291806.0, 6722619.0, 7246936.0,
        6496376.0, 6443837.0, 6898623.0, 6844165.0, 6741162.0, 6316864.0, 6686002.0, 6982780.0,
        6147394.0, 6510545.0, 5919243.0, 6169789.0, 5943609.0, 6601691.0, 6178838.0, 6809094.0,
        6762189.0, 6621417.0, 5667119.0, 6477335.0, 6678118.0, 6744395.0, 6071240.0, 6502296.0,
        6297183.0, 6366684.0, 7132528.0, 6367218.0, 6684663.0, 7060230.0, 6458941.0, 6652231.0,
        6743230.0, 6724109.0, 6196201.0, 6729171.0, 7254558.0, 6064274.0, 7049987.0, 6746871.0,
        6435238.0, 7517355.0,
    ];
    let ci = estimate(&medians, Method::CiMean, 0.05, None).expect("estimate");
    // SciPy: 6682183.849481103
    assert!(close(ci.raw_threshold_bytes, 6_682_183.849_481, 1e-3));
    // SciPy: shapiro → W = 0.9897305531512737, p = 0.9396867511180929
    assert!(close(ci.normality_w.expect("w"), 0.989_730_553, 1e-6));
    assert!(close(ci.normality_p.expect("p"), 0.939_686_751, 1e-4));
}

#[test]
fn shapiro_wilk_flags_skewed_data() {
    // SciPy: shapiro([148, …, 236]) → W = 0.7888146948631716, p = 0.006703814061898823
    let skewed = [
        148.0, 154.0, 158.0, 160.0, 161.0, 162.0, 166.0, 170.0, 182.0, 195.0, 236.0,
    ];
    let result = estimate(&skewed, Method::CiMean, 0.05, None).expect("estimate");
    assert!(close(result.normality_w.expect("w"), 0.788_814_695, 1e-6));
    assert!(close(result.normality_p.expect("p"), 0.006_703_814, 1e-5));
}

#[test]
fn edge_cases() {
    assert_eq!(
        estimate(&[], Method::CiMean, 0.05, None),
        Err(EstimateError::TooFewInstances { n: 0 })
    );
    assert_eq!(
        estimate(&[5.0], Method::Prediction, 0.05, None),
        Err(EstimateError::TooFewInstances { n: 1 })
    );
    for alpha in [0.0, 1.0, -0.1, f64::NAN] {
        assert!(matches!(
            estimate(&[1.0, 2.0], Method::CiMean, alpha, None),
            Err(EstimateError::InvalidAlpha(_))
        ));
    }
    // All equal: no spread, the threshold is the value itself, no NaN anywhere.
    for method in [Method::CiMean, Method::Prediction, Method::Quantile] {
        let flat = estimate(&[4096.0; 10], method, 0.05, None).expect("estimate");
        assert_eq!(flat.threshold_bytes, 4096, "{method}");
        assert_eq!(flat.stddev_bytes, 0.0);
        assert_eq!(flat.normality_p, None);
    }
    // Two medians: defined, with t on one degree of freedom.
    let two = estimate(&[100.0, 200.0], Method::CiMean, 0.05, None).expect("estimate");
    assert!(two.raw_threshold_bytes.is_finite() && two.raw_threshold_bytes > 150.0);
    assert_eq!(two.normality_p, None);
    // One huge outlier pulls the mean-based bounds up, the quantile less so.
    let mut skewed = vec![1000.0; 49];
    skewed.push(1_000_000.0);
    let ci = estimate(&skewed, Method::CiMean, 0.05, None).expect("estimate");
    let quantile = estimate(&skewed, Method::Quantile, 0.05, None).expect("estimate");
    assert!(ci.threshold_bytes > 20_000);
    assert_eq!(quantile.threshold_bytes, 1000);
    assert!(ci.normality_p.expect("p") < 1e-6);
}

#[test]
fn the_floor_holds_the_threshold_up() {
    let low = [100.0, 110.0, 120.0];
    let floored = estimate(&low, Method::CiMean, 0.05, Some(1000)).expect("estimate");
    assert_eq!(floored.threshold_bytes, 1000);
    assert!(floored.raw_threshold_bytes < 1000.0);
    let above = estimate(&low, Method::CiMean, 0.05, Some(10)).expect("estimate");
    assert_eq!(
        above.threshold_bytes,
        above.raw_threshold_bytes.ceil() as u64
    );
}

fn medians_strategy() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(1_000_000.0..10_000_000.0f64, 2..80)
}

fn method_strategy() -> impl Strategy<Value = Method> {
    prop_oneof![
        Just(Method::CiMean),
        Just(Method::Prediction),
        Just(Method::Quantile)
    ]
}

proptest! {
    #[test]
    fn mean_based_bounds_lie_above_the_mean(medians in medians_strategy(), alpha in 0.001..0.5f64) {
        for method in [Method::CiMean, Method::Prediction] {
            let e = estimate(&medians, method, alpha, None).expect("estimate");
            prop_assert!(e.raw_threshold_bytes >= e.mean_bytes);
            prop_assert!(e.raw_threshold_bytes.is_finite());
        }
    }

    #[test]
    fn prediction_is_never_below_the_confidence_bound(medians in medians_strategy(), alpha in 0.001..0.5f64) {
        let ci = estimate(&medians, Method::CiMean, alpha, None).expect("estimate");
        let prediction = estimate(&medians, Method::Prediction, alpha, None).expect("estimate");
        prop_assert!(prediction.raw_threshold_bytes >= ci.raw_threshold_bytes);
    }

    #[test]
    fn the_bound_is_invariant_to_sample_order(
        medians in medians_strategy(),
        method in method_strategy(),
        seed in any::<u64>(),
    ) {
        let mut shuffled = medians.clone();
        // A deterministic Fisher–Yates from the seed.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            shuffled.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let a = estimate(&medians, method, 0.05, None).expect("estimate");
        let b = estimate(&shuffled, method, 0.05, None).expect("estimate");
        prop_assert!((a.raw_threshold_bytes - b.raw_threshold_bytes).abs() <= 1e-6 * a.raw_threshold_bytes);
    }

    #[test]
    fn the_confidence_bound_shrinks_as_n_grows_for_the_same_spread(
        pattern in prop::collection::vec(1_000_000.0..10_000_000.0f64, 2..20),
        copies in 1usize..6,
    ) {
        prop_assume!(pattern.iter().any(|&v| v != pattern[0]));
        let fewer: Vec<f64> = pattern.iter().copied().cycle().take(pattern.len() * copies).collect();
        let more: Vec<f64> = pattern.iter().copied().cycle().take(pattern.len() * (copies + 1)).collect();
        let fewer = estimate(&fewer, Method::CiMean, 0.05, None).expect("estimate");
        let more = estimate(&more, Method::CiMean, 0.05, None).expect("estimate");
        prop_assert!(more.raw_threshold_bytes < fewer.raw_threshold_bytes);
    }

    #[test]
    fn the_floor_is_respected(medians in medians_strategy(), floor in 0u64..20_000_000, method in method_strategy()) {
        let e = estimate(&medians, method, 0.05, Some(floor)).expect("estimate");
        prop_assert!(e.threshold_bytes >= floor);
        prop_assert!(e.threshold_bytes as f64 >= e.raw_threshold_bytes);
    }
}
