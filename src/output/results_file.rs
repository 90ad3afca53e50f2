//! The results file: JSON lines appended, on disk at most a second behind, and
//! rotated by size so that months on a line cannot fill the disk:
//!
//! ```text
//! results.jsonl  (growing) --reaches rotate_mib--> results.jsonl.1 -> .2 -> ... -> .<keep_files> (then gone)
//! ```
//!
//! Rotation happens between lines, so no line is ever split across files.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::config::{OutputConfig, ResultsRotation};

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot open results file {}: {source} — check the `results` path in [output] and that the service may write there", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write results file {}: {source} — is the disk full?", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The results file, appended to, one JSON object per line.
pub struct ResultSink {
    path: PathBuf,
    file: BufWriter<File>,
    flush_each_line: bool,
    last_flush: Instant,
    rotation: ResultsRotation,
    /// Bytes in the current file: its length when opened plus what was written since.
    bytes: u64,
}

impl ResultSink {
    pub fn open(output: &OutputConfig) -> Result<Self, OutputError> {
        let path = output.results.clone();
        let (file, bytes) = open_append(&path)?;
        Ok(ResultSink {
            path,
            file: BufWriter::with_capacity(64 * 1024, file),
            flush_each_line: output.flush_each_line,
            last_flush: Instant::now(),
            rotation: output.rotation,
            bytes,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// New rotation settings (a reload); they apply from the next line.
    pub fn set_rotation(&mut self, rotation: ResultsRotation) {
        self.rotation = rotation;
    }

    pub fn write_line(&mut self, line: &str) -> Result<(), OutputError> {
        let result = self
            .file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.write_all(b"\n"));
        result.map_err(|source| OutputError::Write {
            path: self.path.clone(),
            source,
        })?;
        self.bytes += line.len() as u64 + 1;
        if self.rotation.max_mib > 0 && self.bytes >= self.rotation.max_mib << 20 {
            return self.rotate();
        }
        // A line on the factory floor wants results on disk promptly even when
        // not flushing every line: at most a second behind.
        if self.flush_each_line || self.last_flush.elapsed() >= Duration::from_secs(1) {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<(), OutputError> {
        self.last_flush = Instant::now();
        self.file.flush().map_err(|source| OutputError::Write {
            path: self.path.clone(),
            source,
        })
    }

    /// Closes the full file as `<results>.1` (shifting older ones up) and
    /// starts an empty one. If the renames fail, results keep going into the
    /// current file (nothing is lost) and the next try comes after another
    /// `max_mib`.
    fn rotate(&mut self) -> Result<(), OutputError> {
        self.flush()?;
        if let Err(e) = shift_rotated(&self.path, self.rotation.keep_files) {
            log::error!(target: "sealcheck::output", results = self.path.display().to_string().as_str(), error = e.to_string().as_str();
                "cannot rotate the results file; still appending to it: check that the service may rename files in its folder");
            self.bytes = 0;
            return Ok(());
        }
        let (file, bytes) = open_append(&self.path)?;
        // The old file is complete on disk (flushed above); dropping its writer closes it.
        self.file = BufWriter::with_capacity(64 * 1024, file);
        self.bytes = bytes;
        log::info!(target: "sealcheck::output", results = self.path.display().to_string().as_str(),
            keep_files = self.rotation.keep_files; "results file rotated");
        Ok(())
    }
}

fn open_append(path: &Path) -> Result<(File, u64), OutputError> {
    let open_error = |source| OutputError::Open {
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(open_error)?;
    let bytes = file.metadata().map_err(open_error)?.len();
    Ok((file, bytes))
}

/// `<path>.<n>` for rotated file `n` (1 is the newest).
fn rotated(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// `<path>.<keep-1>` -> `<path>.<keep>` (replacing the oldest), ..., `<path>` -> `<path>.1`.
fn shift_rotated(path: &Path, keep: u32) -> std::io::Result<()> {
    for n in (1..keep).rev() {
        match std::fs::rename(rotated(path, n), rotated(path, n + 1)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    std::fs::rename(path, rotated(path, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(dir: &Path, max_mib: u64, keep_files: u32) -> OutputConfig {
        OutputConfig {
            results: dir.join("results.jsonl"),
            flush_each_line: false,
            log_verdicts: false,
            rotation: ResultsRotation {
                max_mib,
                keep_files,
            },
        }
    }

    fn lines_of(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn rotates_between_lines_keeping_the_newest_files_and_every_line_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let config = output(dir.path(), 1, 2);
        let mut sink = ResultSink::open(&config).unwrap();
        // 1 MiB holds 2048 lines of 511 bytes + newline: 5000 lines fill 2 files and part of a third.
        let line = |i: usize| format!("{i:0>511}");
        let total = 5000;
        for i in 0..total {
            sink.write_line(&line(i)).unwrap();
        }
        sink.flush().unwrap();

        let current = lines_of(&config.results);
        let newest = lines_of(&rotated(&config.results, 1));
        let oldest = lines_of(&rotated(&config.results, 2));
        assert!(!rotated(&config.results, 3).exists(), "keep_files = 2");
        assert_eq!(
            (oldest.len(), newest.len(), current.len()),
            (2048, 2048, 904)
        );
        let all: Vec<String> = oldest.into_iter().chain(newest).chain(current).collect();
        let expected: Vec<String> = (0..total).map(line).collect();
        assert_eq!(all, expected, "no line lost, split or reordered");
    }

    #[test]
    fn the_oldest_file_is_dropped_once_keep_files_are_full() {
        let dir = tempfile::tempdir().unwrap();
        let config = output(dir.path(), 1, 1);
        let mut sink = ResultSink::open(&config).unwrap();
        let line = "x".repeat(1023);
        for _ in 0..(3 * 1024 + 1) {
            sink.write_line(&line).unwrap();
        }
        sink.flush().unwrap();
        assert_eq!(lines_of(&rotated(&config.results, 1)).len(), 1024);
        assert_eq!(lines_of(&config.results).len(), 1);
        assert!(!rotated(&config.results, 2).exists());
    }

    #[test]
    fn reopening_counts_what_the_file_already_holds() {
        let dir = tempfile::tempdir().unwrap();
        let config = output(dir.path(), 1, 3);
        std::fs::write(&config.results, "y".repeat((1 << 20) - 10) + "\n").unwrap();
        let mut sink = ResultSink::open(&config).unwrap();
        sink.write_line("first line after a restart").unwrap();
        sink.flush().unwrap();
        assert_eq!(lines_of(&rotated(&config.results, 1)).len(), 2);
        assert_eq!(std::fs::metadata(&config.results).unwrap().len(), 0);
    }

    #[test]
    fn zero_never_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let config = output(dir.path(), 0, 3);
        let mut sink = ResultSink::open(&config).unwrap();
        let line = "z".repeat(1023);
        for _ in 0..2048 {
            sink.write_line(&line).unwrap();
        }
        sink.flush().unwrap();
        assert_eq!(lines_of(&config.results).len(), 2048);
        assert!(!rotated(&config.results, 1).exists());
    }
}
