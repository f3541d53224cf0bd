//! The restart threshold over the per-instance medians.
//!
//! With n medians, mean x̄ and unbiased variance u²:
//! - `ci-mean` (the paper): the upper end of the t confidence interval of the
//!   mean, `x̄ + t_{1-α/2}(n−1)·sqrt(u²/n)`;
//! - `prediction`: the upper end of the prediction interval for one more
//!   instance, `x̄ + t_{1-α/2}(n−1)·u·sqrt(1 + 1/n)`;
//! - `quantile`: distribution-free, the empirical `1 − α/2` quantile of the
//!   medians (linear interpolation between order statistics).
//!
//! The result never goes below a floor (the fresh-instance baseline plus a
//! margin): a threshold under what a fresh instance holds would restart
//! every instance forever.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// How the threshold is computed from the medians.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Upper end of the t confidence interval of the mean (the paper).
    CiMean,
    /// Upper end of the t prediction interval for one more instance.
    Prediction,
    /// The empirical upper quantile of the medians.
    Quantile,
}

impl FromStr for Method {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "ci-mean" => Ok(Self::CiMean),
            "prediction" => Ok(Self::Prediction),
            "quantile" => Ok(Self::Quantile),
            other => Err(format!(
                "unknown method {other:?}: use ci-mean, prediction or quantile"
            )),
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::CiMean => "ci-mean",
            Self::Prediction => "prediction",
            Self::Quantile => "quantile",
        })
    }
}

/// The result of one estimate, with everything needed to judge it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    pub method: Method,
    pub alpha: f64,
    /// Number of per-instance medians used.
    pub n: usize,
    pub mean_bytes: f64,
    /// `u`, the square root of the unbiased variance.
    pub stddev_bytes: f64,
    /// The Student t quantile used (none for `quantile`).
    pub t: Option<f64>,
    /// What the method gave, before the floor.
    pub raw_threshold_bytes: f64,
    /// The floor in force, if any.
    pub floor_bytes: Option<u64>,
    /// The threshold: the raw one, raised to the floor, in whole bytes.
    pub threshold_bytes: u64,
    /// Shapiro–Wilk test of the medians against a normal distribution
    /// (`None` below 3 medians or when they are all equal). A small p-value
    /// says the normality that `ci-mean` and `prediction` assume is doubtful.
    pub normality_w: Option<f64>,
    pub normality_p: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EstimateError {
    #[error("{n} instance median(s); at least 2 are needed for a threshold")]
    TooFewInstances { n: usize },
    #[error("alpha must lie strictly between 0 and 1, got {0}")]
    InvalidAlpha(f64),
}

/// Compute the threshold over `medians` (bytes, one per instance).
pub fn estimate(
    medians: &[f64],
    method: Method,
    alpha: f64,
    floor_bytes: Option<u64>,
) -> Result<Estimate, EstimateError> {
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(EstimateError::InvalidAlpha(alpha));
    }
    let n = medians.len();
    if n < 2 {
        return Err(EstimateError::TooFewInstances { n });
    }
    let count = n as f64;
    let mean = medians.iter().sum::<f64>() / count;
    let variance = medians.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (count - 1.0);
    let stddev = variance.sqrt();

    let (t, raw) = match method {
        Method::CiMean => {
            let t = student_t_upper(alpha / 2.0, n - 1);
            (Some(t), mean + t * (variance / count).sqrt())
        }
        Method::Prediction => {
            let t = student_t_upper(alpha / 2.0, n - 1);
            (Some(t), mean + t * stddev * (1.0 + 1.0 / count).sqrt())
        }
        Method::Quantile => (None, quantile(medians, 1.0 - alpha / 2.0)),
    };
    let floored = floor_bytes.map_or(raw, |floor| raw.max(floor as f64));
    let normality = shapiro_wilk(medians);
    Ok(Estimate {
        method,
        alpha,
        n,
        mean_bytes: mean,
        stddev_bytes: stddev,
        t,
        raw_threshold_bytes: raw,
        floor_bytes,
        threshold_bytes: floored.ceil() as u64,
        normality_w: normality.map(|(w, _)| w),
        normality_p: normality.map(|(_, p)| p),
    })
}

/// The upper `tail` point of Student's t with `df` degrees of freedom.
pub fn student_t_upper(tail: f64, df: usize) -> f64 {
    match StudentsT::new(0.0, 1.0, df as f64) {
        Ok(distribution) => distribution.inverse_cdf(1.0 - tail),
        // df ≥ 1 always here; an invalid distribution cannot arise.
        Err(_) => f64::NAN,
    }
}

/// The `level` quantile of `values` by linear interpolation between order
/// statistics (Hyndman and Fan's type 7, the default of R and NumPy).
pub fn quantile(values: &[f64], level: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let position = level.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = position.ceil() as usize;
    sorted[below] + (sorted[above] - sorted[below]) * (position - below as f64)
}

fn shapiro_wilk(values: &[f64]) -> Option<(f64, f64)> {
    crate::normality::shapiro_wilk(values).map(|test| (test.w, test.p_value))
}

#[cfg(test)]
mod tests;
