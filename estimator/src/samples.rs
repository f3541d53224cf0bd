//! Memory samples and their CSV form, `timestamp,instance,bytes`: one line
//! per instance per sampling round, as the paper's monitor wrote them.

use std::io::{self, BufRead, Write};

/// One reading of one instance's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Sample {
    /// When it was taken, in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// Which instance (any stable integer id: a pool id, a PID).
    pub instance: u64,
    /// The instance's memory, in bytes.
    pub bytes: u64,
}

/// The header line of the CSV form.
pub const CSV_HEADER: &str = "timestamp,instance,bytes";

#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("reading samples: {0}")]
    Io(#[from] io::Error),
    #[error("line {line}: {problem} (expected `{CSV_HEADER}`)")]
    Malformed { line: usize, problem: String },
}

/// Parse samples from CSV. The header line is optional; blank lines are
/// skipped; anything else malformed is an error naming its line.
pub fn read_csv(reader: impl BufRead) -> Result<Vec<Sample>, CsvError> {
    let mut samples = Vec::new();
    for (index, line) in reader.lines().enumerate() {
        let line = line?;
        let number = index + 1;
        let text = line.trim();
        if text.is_empty() || (number == 1 && text.replace(' ', "") == CSV_HEADER) {
            continue;
        }
        let malformed = |problem: &str| CsvError::Malformed {
            line: number,
            problem: problem.to_owned(),
        };
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        let [timestamp, instance, bytes] = fields[..] else {
            return Err(malformed(&format!("{} fields instead of 3", fields.len())));
        };
        samples.push(Sample {
            timestamp_ms: timestamp
                .parse()
                .map_err(|_| malformed("the timestamp is not an integer"))?,
            instance: instance
                .parse()
                .map_err(|_| malformed("the instance is not an integer"))?,
            bytes: bytes
                .parse()
                .map_err(|_| malformed("bytes is not a non-negative integer"))?,
        });
    }
    Ok(samples)
}

/// Write samples as CSV, header first.
pub fn write_csv(mut writer: impl Write, samples: &[Sample]) -> io::Result<()> {
    writeln!(writer, "{CSV_HEADER}")?;
    for sample in samples {
        writeln!(
            writer,
            "{},{},{}",
            sample.timestamp_ms, sample.instance, sample.bytes
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let samples = vec![
            Sample {
                timestamp_ms: 1000,
                instance: 1,
                bytes: 65536,
            },
            Sample {
                timestamp_ms: 11000,
                instance: 2,
                bytes: 131072,
            },
        ];
        let mut csv = Vec::new();
        write_csv(&mut csv, &samples).expect("writes to memory");
        assert!(csv.starts_with(b"timestamp,instance,bytes\n"));
        assert_eq!(read_csv(&csv[..]).expect("parses"), samples);
    }

    #[test]
    fn header_is_optional_and_errors_name_the_line() {
        assert_eq!(
            read_csv(&b"5,1,10\n\n6,1,20\n"[..]).expect("parses").len(),
            2
        );
        let error =
            read_csv(&b"timestamp,instance,bytes\n5,1,10\n6,x,20\n"[..]).expect_err("bad id");
        assert_eq!(
            error.to_string(),
            "line 3: the instance is not an integer (expected `timestamp,instance,bytes`)"
        );
        assert!(read_csv(&b"5,1\n"[..]).is_err());
        assert!(read_csv(&b"5,1,-3\n"[..]).is_err());
    }
}
