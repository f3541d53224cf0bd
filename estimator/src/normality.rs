//! The Shapiro–Wilk test of normality, by Royston's algorithm AS R94 (1995),
//! the one behind R's `shapiro.test` and SciPy's `shapiro`, for 3 ≤ n ≤ 5000.
//!
//! Written here because the maintained Rust crate that offers it needs
//! libclang and a C++ toolchain at build time; this is tested against SciPy's
//! results on every branch of the algorithm (n = 3, n ≤ 5, n ≤ 11, n ≥ 12).

use statrs::distribution::{ContinuousCDF, Normal};

/// A test result: the statistic W (1 for perfectly normal-looking data) and
/// the p-value of the null hypothesis that the data are normal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShapiroWilk {
    pub w: f64,
    pub p_value: f64,
}

/// Largest sample the algorithm's approximations cover.
pub const MAX_N: usize = 5000;

/// Test `values`; `None` for fewer than 3 or more than [`MAX_N`] values, or
/// values without spread (or with non-finite entries).
pub fn shapiro_wilk(values: &[f64]) -> Option<ShapiroWilk> {
    let n = values.len();
    if !(3..=MAX_N).contains(&n) || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut x = values.to_vec();
    x.sort_by(f64::total_cmp);
    let range = x[n - 1] - x[0];
    if range <= f64::EPSILON * x[n - 1].abs().max(1.0) {
        return None;
    }

    let a = coefficients(n)?;
    let mean = x.iter().sum::<f64>() / n as f64;
    let squares: f64 = x.iter().map(|v| ((v - mean) / range).powi(2)).sum();
    let numerator: f64 = a
        .iter()
        .enumerate()
        .map(|(i, ai)| ai * (x[n - 1 - i] - x[i]) / range)
        .sum();
    let w = (numerator * numerator / squares).min(1.0);
    Some(ShapiroWilk {
        w,
        p_value: p_value(w, n)?,
    })
}

/// The coefficients a_1 … a_{n/2} (for the largest-minus-smallest pairs).
fn coefficients(n: usize) -> Option<Vec<f64>> {
    const C1: [f64; 6] = [0.0, 0.221157, -0.147981, -2.071190, 4.434685, -2.706056];
    const C2: [f64; 6] = [0.0, 0.042981, -0.293762, -1.752461, 5.682633, -3.582633];
    let half = n / 2;
    if n == 3 {
        return Some(vec![std::f64::consts::FRAC_1_SQRT_2]);
    }
    let standard = Normal::new(0.0, 1.0).ok()?;
    let an = n as f64;
    // Expected normal order statistics (Blom's approximation), lower half:
    // negative numbers.
    let m: Vec<f64> = (1..=half)
        .map(|i| standard.inverse_cdf((i as f64 - 0.375) / (an + 0.25)))
        .collect();
    let summ2 = 2.0 * m.iter().map(|mi| mi * mi).sum::<f64>();
    let ssumm2 = summ2.sqrt();
    let rsn = 1.0 / an.sqrt();
    let a1 = poly(&C1, rsn) - m[0] / ssumm2;

    let mut a = vec![0.0; half];
    a[0] = a1;
    let (first_plain, fac) = if n > 5 {
        let a2 = -m[1] / ssumm2 + poly(&C2, rsn);
        a[1] = a2;
        let fac = ((summ2 - 2.0 * m[0] * m[0] - 2.0 * m[1] * m[1])
            / (1.0 - 2.0 * a1 * a1 - 2.0 * a2 * a2))
            .sqrt();
        (2, fac)
    } else {
        (
            1,
            ((summ2 - 2.0 * m[0] * m[0]) / (1.0 - 2.0 * a1 * a1)).sqrt(),
        )
    };
    for i in first_plain..half {
        a[i] = -m[i] / fac;
    }
    Some(a)
}

fn p_value(w: f64, n: usize) -> Option<f64> {
    const G: [f64; 2] = [-2.273, 0.459];
    const C3: [f64; 4] = [0.544, -0.39978, 0.025054, -6.714e-4];
    const C4: [f64; 4] = [1.3822, -0.77857, 0.062767, -0.0020322];
    const C5: [f64; 4] = [-1.5861, -0.31082, -0.083751, 0.0038915];
    const C6: [f64; 3] = [-0.4803, -0.082676, 0.0030302];
    if n == 3 {
        // Exact for n = 3.
        let pi6 = 6.0 / std::f64::consts::PI;
        let stqr = std::f64::consts::FRAC_PI_3;
        return Some((pi6 * (w.sqrt().asin() - stqr)).max(0.0));
    }
    let an = n as f64;
    let mut y = (1.0 - w).ln();
    let (mean, sd) = if n <= 11 {
        let gamma = poly(&G, an);
        if y >= gamma {
            return Some(1e-99);
        }
        y = -(gamma - y).ln();
        (poly(&C3, an), poly(&C4, an).exp())
    } else {
        let log_n = an.ln();
        (poly(&C5, log_n), poly(&C6, log_n).exp())
    };
    let tail = Normal::new(mean, sd).ok()?.sf(y);
    tail.is_finite().then_some(tail)
}

/// `c[0] + c[1]·x + c[2]·x² + …`
fn poly(c: &[f64], x: f64) -> f64 {
    c.iter()
        .rev()
        .fold(0.0, |sum, coefficient| sum * x + coefficient)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(data, W, p)` as SciPy's `stats.shapiro` gives them.
    const SCIPY: &[(&[f64], f64, f64)] = &[
        (&[1.0, 2.0, 4.0], 0.9642857142857142, 0.6368868450289689),
        (
            &[3.1, 2.2, 5.0, 4.4],
            0.9570906158590564,
            0.7605999985095677,
        ),
        (
            &[1.0, 2.0, 3.0, 4.0, 10.0],
            0.8357883166461942,
            0.1536125843490888,
        ),
        (
            &[2.5, 3.1, 2.9, 4.0, 3.3, 3.8, 2.2],
            0.969597825028033,
            0.8955369297552053,
        ),
        (
            &[
                148.0, 154.0, 158.0, 160.0, 161.0, 162.0, 166.0, 170.0, 182.0, 195.0, 236.0,
            ],
            0.7888146948631716,
            0.006703814061898823,
        ),
        (
            &[2.1, 3.4, 1.9, 5.6, 4.4, 3.3, 2.8, 3.9, 4.1, 3.0, 2.7, 3.6],
            0.970297651346606,
            0.913897744585765,
        ),
    ];

    #[test]
    fn matches_scipy_on_every_branch() {
        for &(data, w, p) in SCIPY {
            let test = shapiro_wilk(data).expect("testable");
            assert!(
                (test.w - w).abs() < 1e-6,
                "n = {}: W {} vs {w}",
                data.len(),
                test.w
            );
            assert!(
                (test.p_value - p).abs() < 1e-4,
                "n = {}: p {} vs {p}",
                data.len(),
                test.p_value
            );
        }
    }

    #[test]
    fn untestable_inputs() {
        assert_eq!(shapiro_wilk(&[1.0, 2.0]), None);
        assert_eq!(shapiro_wilk(&[5.0; 10]), None);
        assert_eq!(shapiro_wilk(&[1.0, f64::NAN, 3.0]), None);
    }

    #[test]
    fn order_does_not_matter() {
        let data = [2.1, 3.4, 1.9, 5.6, 4.4, 3.3, 2.8, 3.9, 4.1, 3.0, 2.7, 3.6];
        let mut reversed = data;
        reversed.reverse();
        assert_eq!(shapiro_wilk(&data), shapiro_wilk(&reversed));
    }
}
