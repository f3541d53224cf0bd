//! `loadgen policy`: the suite behind the estimator's defaults. Three
//! workloads (the paper's normal sizes, heavy-tailed sizes, sizes that
//! drift up) at concurrency 1, 8 and 32, each cell run as an experiment
//! ([`crate::experiment::run`]) with the arms that compare the policies.

use std::path::Path;
use std::time::Duration;

use estimator::Method;
use serde::{Deserialize, Serialize};

use crate::corpus::{Shape, SizeDistribution};
use crate::experiment::{Arm, Plan, Policy, Report, run};

/// The workloads of the policy suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SuiteWorkload {
    /// The paper's: normal sizes, N(2 MiB, 0.5 MiB).
    Normal,
    /// Log-normal sizes, median 512 KiB, σ = 1.2: rare files 20–50× the
    /// median.
    HeavyTailed,
    /// The paper's sizes, read so they creep up over the run.
    Drift,
}

impl std::fmt::Display for SuiteWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Normal => "normal",
            Self::HeavyTailed => "heavy-tailed",
            Self::Drift => "drift",
        })
    }
}

/// One cell of the policy suite: a workload at one concurrency, its arms.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub workload: SuiteWorkload,
    pub plan: Plan,
    pub arms: Vec<Arm>,
}

/// The results of the suite's cells ([`run_cell`] each).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteReport {
    pub cells: Vec<CellReport>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellReport {
    pub workload: SuiteWorkload,
    pub concurrency: usize,
    pub report: Report,
}

/// The plan of one suite cell: 16 instances, 256 files, closed-loop
/// readers, memory sampled every 100 ms.
pub fn suite_plan(workload: SuiteWorkload, concurrency: usize, quick: bool) -> Plan {
    const MIB: f64 = 1048576.0;
    let sizes = match workload {
        SuiteWorkload::Normal | SuiteWorkload::Drift => SizeDistribution {
            mean: 2.0 * MIB,
            stddev: 0.5 * MIB,
            min: 64 * 1024,
            max: 8 << 20,
            shape: Shape::Normal,
        },
        SuiteWorkload::HeavyTailed => SizeDistribution {
            mean: 0.0,
            stddev: 0.0,
            min: 16 * 1024,
            max: 32 << 20,
            shape: Shape::LogNormal {
                median: 0.5 * MIB,
                sigma: 1.2,
            },
        },
    };
    Plan {
        instances: 16,
        files: 256,
        sizes,
        reads_per_instance: if quick { 25 } else { 100 },
        tick: Duration::from_millis(100),
        concurrency,
        seed: 1,
        paced: false,
        drift: workload == SuiteWorkload::Drift,
    }
}

/// The restart rates of the frontier's fixed thresholds (left out with
/// `--no-sweep`).
pub const SWEEP_RATES: [f64; 6] = [0.0, 0.005, 0.02, 0.05, 0.1, 0.3];

/// The policy suite: every workload at concurrency 1, 8 and 32, with the
/// arms `monitor` (lru, no restarts), `paper` (its ci-mean threshold from
/// the monitor arm), `default` (no estimator flag), `oracle` (the lowest
/// fixed threshold at the default's restart rate, from the files' true
/// footprints), the restart budget of 1 % under `lru` and under `mru`;
/// and, on the paper's workload at 32, the trade-off curve (budgets of 5,
/// 10 and 30 %, and a fresh instance per request). With `sweep`, every
/// cell also runs the frontier: fixed thresholds at [`SWEEP_RATES`], under
/// the default's dispatch.
pub fn policy_suite(quick: bool, sweep: bool) -> Vec<Cell> {
    let arm = |name: &str, policy, dispatch: Option<&str>| Arm {
        name: name.into(),
        policy,
        dispatch: dispatch.map(str::to_owned),
    };
    let budget = |budget| Policy::RestartBudget { budget };
    let mut cells = Vec::new();
    for workload in [
        SuiteWorkload::Normal,
        SuiteWorkload::HeavyTailed,
        SuiteWorkload::Drift,
    ] {
        for concurrency in [1, 8, 32] {
            let mut arms = vec![
                arm("monitor", Policy::Monitor, Some("lru")),
                arm(
                    "paper",
                    Policy::Estimated {
                        method: Method::CiMean,
                        alpha: 0.05,
                        from: "monitor".into(),
                    },
                    Some("lru"),
                ),
                arm("default", Policy::Default, None),
                arm(
                    "oracle",
                    Policy::Oracle {
                        of: "default".into(),
                    },
                    None,
                ),
                arm("budget-1%-lru", budget(0.01), Some("lru")),
                arm("budget-1%-mru", budget(0.01), Some("mru")),
            ];
            if sweep {
                for rate in SWEEP_RATES {
                    let name = format!("fixed-{}%", rate * 100.0);
                    arms.push(arm(&name, Policy::FixedAtRate { rate }, None));
                }
            }
            if workload == SuiteWorkload::Normal && concurrency == 32 {
                for share in [0.05, 0.1, 0.3] {
                    let name = format!("budget-{}%", share * 100.0);
                    arms.push(arm(&name, budget(share), None));
                }
                arms.push(arm("fresh-per-request", Policy::FreshPerRequest, None));
            }
            cells.push(Cell {
                workload,
                plan: suite_plan(workload, concurrency, quick),
                arms,
            });
        }
    }
    cells
}

/// Run one cell of the suite in a directory of its own under `out`.
pub async fn run_cell(loadgen_exe: &Path, cell: &Cell, out: &Path) -> anyhow::Result<CellReport> {
    let dir = out.join(format!("{}-c{}", cell.workload, cell.plan.concurrency));
    tracing::info!(workload = %cell.workload, concurrency = cell.plan.concurrency, "starting cell");
    let report = run(loadgen_exe, &cell.plan, &cell.arms, &dir).await?;
    Ok(CellReport {
        workload: cell.workload,
        concurrency: cell.plan.concurrency,
        report,
    })
}
