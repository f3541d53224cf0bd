//! What the operator chooses for the threshold (flags at start, or
//! `PUT /admin/estimator` at run time): the mode, the method, α, the
//! restart budget, a fixed threshold; how a change applies, and why
//! settings are refused.

use std::fmt;

use estimator::EstimateError;
use serde::{Deserialize, Serialize};

/// Settings that cannot be put in force: the operator's mistake (a flag at
/// start, or `PUT /admin/estimator`, which answers 400 with the message).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    #[error("alpha must lie strictly between 0 and 1, got {0}")]
    Alpha(f64),
    #[error("the restart budget must lie strictly between 0 and 1, got {0}")]
    RestartBudget(f64),
    #[error("fixed mode needs a threshold in bytes (--threshold, or \"threshold\" in the request)")]
    FixedWithoutThreshold,
    /// A new method or α over the frozen calibration's samples gives no
    /// estimate (too few distinct medians, say).
    #[error("cannot re-estimate from the calibration samples: {0}")]
    Reestimate(#[source] EstimateError),
}

/// How the threshold is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Sample only, never replace.
    Monitor,
    /// Learn until there is enough evidence, then freeze the threshold and
    /// enforce it (the paper's procedure).
    Calibrate,
    /// The operator's threshold.
    Fixed,
    /// Learn, then keep re-estimating as the workload moves.
    Rolling,
}

/// How the threshold is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The lowest threshold at which at most `restart_budget` of requests
    /// restart their instance, from the footprints of recent requests.
    RestartBudget,
    /// Upper end of the t confidence interval of the mean of per-instance
    /// medians (the paper).
    CiMean,
    /// Upper end of the t prediction interval for one more instance.
    Prediction,
    /// The empirical upper quantile of the per-instance medians.
    Quantile,
}

impl Method {
    /// The statistic over per-instance medians, for the paper's methods.
    pub fn over_medians(self) -> Option<estimator::Method> {
        match self {
            Self::RestartBudget => None,
            Self::CiMean => Some(estimator::Method::CiMean),
            Self::Prediction => Some(estimator::Method::Prediction),
            Self::Quantile => Some(estimator::Method::Quantile),
        }
    }
}

macro_rules! display_as_value {
    ($($kind:ty),*) => {$(
        impl fmt::Display for $kind {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                use clap::ValueEnum as _;
                match self.to_possible_value() {
                    Some(value) => f.write_str(value.get_name()),
                    None => write!(f, "{self:?}"),
                }
            }
        }
    )*};
}
display_as_value!(Mode, Method);

/// What the operator chose (flags, or `PUT /admin/estimator`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub mode: Mode,
    pub method: Method,
    /// For the median methods: the threshold is the upper α/2 point.
    pub alpha: f64,
    /// For `restart-budget`: the largest fraction of requests that may end
    /// in a restart.
    pub restart_budget: f64,
    /// For `fixed` mode, in bytes.
    pub fixed_threshold: Option<u64>,
}

impl Settings {
    pub fn validate(&self) -> Result<(), SettingsError> {
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(SettingsError::Alpha(self.alpha));
        }
        if !(self.restart_budget > 0.0 && self.restart_budget < 1.0) {
            return Err(SettingsError::RestartBudget(self.restart_budget));
        }
        if self.mode == Mode::Fixed && self.fixed_threshold.is_none_or(|t| t == 0) {
            return Err(SettingsError::FixedWithoutThreshold);
        }
        Ok(())
    }

    /// These settings with `change` applied, if the result is valid.
    pub fn apply(&self, change: &SettingsChange) -> Result<Self, SettingsError> {
        let mut settings = *self;
        if let Some(mode) = change.mode {
            settings.mode = mode;
        }
        if let Some(method) = change.method {
            settings.method = method;
        }
        if let Some(alpha) = change.alpha {
            settings.alpha = alpha;
        }
        if let Some(budget) = change.restart_budget {
            settings.restart_budget = budget;
        }
        if let Some(threshold) = change.threshold {
            settings.fixed_threshold = Some(threshold);
            // A threshold alone means "use this number".
            if change.mode.is_none() {
                settings.mode = Mode::Fixed;
            }
        }
        settings.validate()?;
        Ok(settings)
    }
}

/// A change asked for through `PUT /admin/estimator`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsChange {
    pub mode: Option<Mode>,
    pub method: Option<Method>,
    pub alpha: Option<f64>,
    pub restart_budget: Option<f64>,
    /// Bytes; for `fixed` mode.
    pub threshold: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rolling() -> Settings {
        Settings {
            mode: Mode::Rolling,
            method: Method::RestartBudget,
            alpha: 0.05,
            restart_budget: 0.01,
            fixed_threshold: None,
        }
    }

    #[test]
    fn a_threshold_alone_means_fixed_mode() {
        let change = SettingsChange {
            threshold: Some(8 << 20),
            ..SettingsChange::default()
        };
        let fixed = rolling().apply(&change);
        assert_eq!(
            fixed.map(|s| (s.mode, s.fixed_threshold)),
            Ok((Mode::Fixed, Some(8 << 20)))
        );
        // With a mode named, the mode named holds.
        let change = SettingsChange {
            mode: Some(Mode::Monitor),
            threshold: Some(8 << 20),
            ..SettingsChange::default()
        };
        assert_eq!(rolling().apply(&change).map(|s| s.mode), Ok(Mode::Monitor));
    }

    #[test]
    fn invalid_settings_are_refused_with_their_reason() {
        let cases = [
            (Some(0.0), None, None, SettingsError::Alpha(0.0)),
            (Some(1.0), None, None, SettingsError::Alpha(1.0)),
            (None, Some(0.0), None, SettingsError::RestartBudget(0.0)),
            (None, Some(1.5), None, SettingsError::RestartBudget(1.5)),
            (
                None,
                None,
                Some(Mode::Fixed),
                SettingsError::FixedWithoutThreshold,
            ),
        ];
        for (alpha, restart_budget, mode, error) in cases {
            let change = SettingsChange {
                alpha,
                restart_budget,
                mode,
                ..SettingsChange::default()
            };
            assert_eq!(rolling().apply(&change), Err(error));
        }
        let zero = SettingsChange {
            mode: Some(Mode::Fixed),
            threshold: Some(0),
            ..SettingsChange::default()
        };
        assert_eq!(
            rolling().apply(&zero),
            Err(SettingsError::FixedWithoutThreshold)
        );
        assert_eq!(rolling().validate(), Ok(()));
    }
}
