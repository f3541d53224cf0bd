//! A corpus of files whose sizes follow a normal distribution, as in the
//! paper (1024 files made with numpy and dd), or a heavy-tailed log-normal
//! one, plus a manifest of their SHA-256 so every download can be checked.

use std::path::Path;

use anyhow::Context as _;
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};
use rand_distr::{Distribution, LogNormal, Normal};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How sizes are drawn, clipped to `[min, max]`: Normal(mean, stddev), or
/// with `shape` log-normal.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SizeDistribution {
    pub mean: f64,
    pub stddev: f64,
    pub min: u64,
    pub max: u64,
    #[serde(default)]
    pub shape: Shape,
}

/// The family of a [`SizeDistribution`].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "family")]
pub enum Shape {
    /// Normal(mean, stddev), as in the paper.
    #[default]
    Normal,
    /// Log-normal with the given median (the distribution's `mean` and
    /// `stddev` are then unused) and σ of the logarithm: heavy-tailed,
    /// rare files many times the median.
    LogNormal { median: f64, sigma: f64 },
}

impl SizeDistribution {
    pub fn sampler(&self) -> anyhow::Result<impl Fn(&mut StdRng) -> usize + use<>> {
        anyhow::ensure!(
            self.min <= self.max,
            "the minimum size is above the maximum"
        );
        let (min, max) = (self.min as f64, self.max as f64);
        let draw: Box<dyn Fn(&mut StdRng) -> f64 + Send + Sync> = match self.shape {
            Shape::Normal => {
                let normal = Normal::new(self.mean, self.stddev.max(0.0))
                    .context("invalid size distribution")?;
                Box::new(move |rng| normal.sample(rng))
            }
            Shape::LogNormal { median, sigma } => {
                let log_normal = LogNormal::new(median.max(1.0).ln(), sigma.max(0.0))
                    .context("invalid size distribution")?;
                Box::new(move |rng| log_normal.sample(rng))
            }
        };
        Ok(move |rng: &mut StdRng| draw(rng).clamp(min, max).round() as usize)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusFile {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

/// `manifest.json` of a corpus directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub sizes: SizeDistribution,
    pub seed: u64,
    pub files: Vec<CorpusFile>,
}

pub const MANIFEST: &str = "manifest.json";

/// Write `count` files of random bytes with normally distributed sizes into
/// `dir`, and their manifest. The same seed gives the same corpus.
pub fn generate(
    dir: &Path,
    count: usize,
    sizes: SizeDistribution,
    seed: u64,
) -> anyhow::Result<Manifest> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let sample = sizes.sampler()?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut files = Vec::with_capacity(count);
    for index in 0..count {
        let size = sample(&mut rng);
        let mut content = vec![0; size];
        rng.fill_bytes(&mut content);
        let name = format!("file-{index:05}.bin");
        std::fs::write(dir.join(&name), &content).with_context(|| format!("writing {name}"))?;
        files.push(CorpusFile {
            name,
            size: size as u64,
            sha256: sha256_hex(&content),
        });
    }
    let manifest = Manifest { sizes, seed, files };
    std::fs::write(dir.join(MANIFEST), serde_json::to_vec_pretty(&manifest)?)?;
    Ok(manifest)
}

pub fn load(dir: &Path) -> anyhow::Result<Manifest> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("parsing {}", path.display()))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_is_reproducible_and_sized_by_the_distribution() {
        let sizes = SizeDistribution {
            mean: 10_000.0,
            stddev: 2_000.0,
            min: 1_000,
            max: 14_000,
            shape: Shape::Normal,
        };
        let (a, b) = (
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
        );
        let first = generate(a.path(), 200, sizes, 7).expect("corpus");
        let second = generate(b.path(), 200, sizes, 7).expect("corpus");
        assert_eq!(first, second);
        assert_eq!(load(a.path()).expect("manifest"), first);
        let mean = first.files.iter().map(|f| f.size as f64).sum::<f64>() / 200.0;
        assert!((mean - 10_000.0).abs() < 600.0, "mean {mean}");
        assert!(
            first
                .files
                .iter()
                .all(|f| (1_000..=14_000).contains(&f.size))
        );
        let on_disk = std::fs::read(a.path().join(&first.files[3].name)).expect("file");
        assert_eq!(sha256_hex(&on_disk), first.files[3].sha256);
    }
}
