//! The results file: JSON lines appended, on disk at most a second behind, and
//! rotated by size so that months on a line cannot fill the disk:
//!
//! ```text
//! results.jsonl  (growing) --reaches rotate_mib--> results.jsonl.1 -> .2 -> ... -> .<keep_files> (then gone)
//! ```
//!
//! Rotation happens between lines, so no line is ever split across files.
//!
//! A full disk, a removed file or an I/O error never stops inspection: lines
//! wait in memory (up to `BACKLOG_LIMIT`), beyond that each line is counted as
//! lost; the error is logged once per episode, writing is retried every
//! `RETRY_INTERVAL` (reopening the path if the file was removed or replaced),
//! and the episode's end is logged with the count of lines lost.
//! `ResultsFileStatus` carries the state and the count for metrics and for
//! `run`'s exit status. Lines are written whole or, after a short write, their
//! rest follows into the same file: a file only ever holds whole lines, save a
//! line cut by a file swapped underneath us (counted as lost, not written).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::{OutputConfig, ResultsRotation};

/// Bytes written to the file in one go at most, when not flushing every line.
const WRITE_CHUNK: usize = 64 * 1024;
/// Bytes of lines kept in memory while the file cannot be written (about 20 s
/// at 30 frames/s: a hiccup costs nothing); later lines are counted as lost.
const BACKLOG_LIMIT: usize = 128 * 1024;
/// How often a failing results file is tried again.
const RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// How often the path is checked for a removed or replaced file.
const IDENTITY_CHECK: Duration = Duration::from_secs(1);

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

/// Whether the results file is being written, and how many lines were lost.
/// Cheap to clone (one `Arc`); shared with metrics, the status page and `run`.
#[derive(Debug, Clone, Default)]
pub struct ResultsFileStatus {
    inner: Arc<StatusInner>,
}

#[derive(Debug, Default)]
struct StatusInner {
    /// Set while a write-error episode lasts.
    failing: AtomicBool,
    /// Result lines that never reached the file (only goes up).
    lost_lines: AtomicU64,
    /// Write-error episodes so far (only goes up).
    episodes: AtomicU64,
}

impl ResultsFileStatus {
    /// Lines are reaching the file.
    pub fn is_writable(&self) -> bool {
        !self.inner.failing.load(Ordering::Relaxed)
    }

    /// Result lines that could not be written, over the whole run.
    pub fn lost_lines(&self) -> u64 {
        self.inner.lost_lines.load(Ordering::Relaxed)
    }

    /// Write-error episodes over the whole run.
    pub fn episodes(&self) -> u64 {
        self.inner.episodes.load(Ordering::Relaxed)
    }

    fn lose(&self, lines: u64) {
        self.inner.lost_lines.fetch_add(lines, Ordering::Relaxed);
    }
}

/// One write-error episode.
struct Failure {
    since: Instant,
    /// `lost_lines` when it began.
    lost_before: u64,
    next_retry: Instant,
}

/// The results file, appended to, one JSON object per line.
pub struct ResultSink {
    path: PathBuf,
    /// `None` while the file cannot be opened.
    file: Option<File>,
    /// Device and inode of `file`, to notice the path now names another file.
    identity: Option<(u64, u64)>,
    /// Bytes not yet in the file: whole lines, except that the first may be
    /// the rest of a line partly written (`head_partial`).
    pending: Vec<u8>,
    head_partial: bool,
    flush_each_line: bool,
    last_flush: Instant,
    last_identity_check: Instant,
    rotation: ResultsRotation,
    /// Bytes in the current file: its length when opened plus what was written since.
    bytes: u64,
    failure: Option<Failure>,
    status: ResultsFileStatus,
}

impl ResultSink {
    /// Opens (creates) the results file. Failing here is a start-up error: the
    /// path or its permissions are wrong, which no retry fixes.
    pub fn open(output: &OutputConfig) -> Result<Self, OutputError> {
        Self::open_sharing(output, ResultsFileStatus::default())
    }

    /// As `open`, counting into an existing status (a reload's new file).
    pub fn open_sharing(
        output: &OutputConfig,
        status: ResultsFileStatus,
    ) -> Result<Self, OutputError> {
        let path = output.results.clone();
        let (file, bytes) = open_append(&path)?;
        let identity = file.metadata().ok().map(|m| (m.dev(), m.ino()));
        Ok(ResultSink {
            path,
            file: Some(file),
            identity,
            pending: Vec::with_capacity(WRITE_CHUNK + 4096),
            head_partial: false,
            flush_each_line: output.flush_each_line,
            last_flush: Instant::now(),
            last_identity_check: Instant::now(),
            rotation: output.rotation,
            bytes,
            failure: None,
            status,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The shared state: writable or not, lines lost.
    pub fn status(&self) -> ResultsFileStatus {
        self.status.clone()
    }

    /// New rotation settings (a reload); they apply from the next line.
    pub fn set_rotation(&mut self, rotation: ResultsRotation) {
        self.rotation = rotation;
    }

    /// Appends a line. A write error does not come back from here: the line
    /// waits in memory or is counted as lost (see the module notes), so the
    /// `Result` is only for callers written before that.
    pub fn write_line(&mut self, line: &str) -> Result<(), OutputError> {
        // A failing file is tried again first, so a line after the fix is not lost.
        self.retry_if_due();
        if self.pending.len() + line.len() + 1 > BACKLOG_LIMIT {
            self.status.lose(1);
        } else {
            self.pending.extend_from_slice(line.as_bytes());
            self.pending.push(b'\n');
            self.bytes += line.len() as u64 + 1;
        }
        if self.failure.is_some() {
            return Ok(());
        }
        if self.rotation.max_mib > 0 && self.bytes >= self.rotation.max_mib << 20 {
            self.rotate();
            return Ok(());
        }
        // A line on the factory floor wants results on disk promptly even when
        // not flushing every line: at most a second behind.
        if self.flush_each_line
            || self.pending.len() >= WRITE_CHUNK
            || self.last_flush.elapsed() >= Duration::from_secs(1)
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes what waits. Never fails: an error starts (or continues) an episode.
    pub fn flush(&mut self) -> Result<(), OutputError> {
        self.last_flush = Instant::now();
        if self.failure.is_some() {
            self.retry_if_due();
            return Ok(());
        }
        if self.last_identity_check.elapsed() >= IDENTITY_CHECK {
            self.last_identity_check = Instant::now();
            if !self.path_names_our_file() {
                log::warn!(target: "sealcheck::output", results = self.path.display().to_string().as_str();
                    "the results file was removed or replaced; writing to a new file at its path");
                self.reopen();
            }
        }
        if let Err(e) = self.write_pending() {
            self.begin_failure(&e);
        }
        Ok(())
    }

    /// The end of the run: a last try to write what waits; whatever cannot be
    /// written is counted as lost. Returns the lines lost over the whole run.
    pub fn close(&mut self) -> u64 {
        if self.failure.is_some() {
            if let Some(failure) = &mut self.failure {
                failure.next_retry = Instant::now();
            }
            self.retry_if_due();
        } else if let Err(e) = self.write_pending() {
            self.begin_failure(&e);
        }
        if let Some(failure) = self.failure.take() {
            let stranded = self.pending_lines();
            self.status.lose(stranded);
            self.pending.clear();
            let lost = self.status.lost_lines() - failure.lost_before;
            log::error!(target: "sealcheck::output", results = self.path.display().to_string().as_str(),
                lost_lines = lost, failing_s = failure.since.elapsed().as_secs_f64();
                "the results file could still not be written at the end: {lost} result lines were lost");
        }
        self.status.lost_lines()
    }

    /// Complete lines waiting (a partly written head line counts as one).
    fn pending_lines(&self) -> u64 {
        self.pending.iter().filter(|b| **b == b'\n').count() as u64
    }

    /// Writes `pending` out; on an error keeps what was not written.
    fn write_pending(&mut self) -> std::io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the results file is not open",
            ));
        };
        let mut written = 0;
        let result = loop {
            if written == self.pending.len() {
                break Ok(());
            }
            match file.write(&self.pending[written..]) {
                Ok(0) => break Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        if written > 0 {
            self.head_partial = self.pending[written - 1] != b'\n';
            self.pending.drain(..written);
        }
        result
    }

    fn begin_failure(&mut self, error: &std::io::Error) {
        let now = Instant::now();
        if self.failure.is_none() {
            self.status.inner.failing.store(true, Ordering::Relaxed);
            self.status.inner.episodes.fetch_add(1, Ordering::Relaxed);
            log::error!(target: "sealcheck::output", results = self.path.display().to_string().as_str(), error = error.to_string().as_str();
                "cannot write the results file: {error}; inspection goes on (verdicts still go to the log), \
                 lines wait in memory up to {} KiB and are then counted as lost; retrying every {} s \
                 (disk full? `df -h {}`)",
                BACKLOG_LIMIT >> 10, RETRY_INTERVAL.as_secs(),
                self.path.parent().unwrap_or(Path::new("/")).display());
            self.failure = Some(Failure {
                since: now,
                lost_before: self.status.lost_lines(),
                next_retry: now + RETRY_INTERVAL,
            });
        } else if let Some(failure) = &mut self.failure {
            failure.next_retry = now + RETRY_INTERVAL;
        }
    }

    /// During an episode: at most every `RETRY_INTERVAL`, reopen the path if it
    /// names another file (or none), then write what waits.
    fn retry_if_due(&mut self) {
        let Some(failure) = &self.failure else {
            return;
        };
        if Instant::now() < failure.next_retry {
            return;
        }
        if self.file.is_none() || !self.path_names_our_file() {
            self.reopen();
        }
        match self.write_pending() {
            Ok(()) => {
                if let Some(failure) = self.failure.take() {
                    self.status.inner.failing.store(false, Ordering::Relaxed);
                    let lost = self.status.lost_lines() - failure.lost_before;
                    log::info!(target: "sealcheck::output", results = self.path.display().to_string().as_str(),
                        lost_lines = lost, failing_s = failure.since.elapsed().as_secs_f64();
                        "the results file is written again after {:.1} s; {lost} result lines were lost",
                        failure.since.elapsed().as_secs_f64());
                }
                self.last_flush = Instant::now();
            }
            Err(e) => self.begin_failure(&e),
        }
    }

    /// Opens the path anew (created if missing). A line cut short in the old
    /// file cannot be finished in the new one: its rest is dropped and counted.
    fn reopen(&mut self) {
        match open_append(&self.path) {
            Ok((file, bytes)) => {
                self.identity = file.metadata().ok().map(|m| (m.dev(), m.ino()));
                self.file = Some(file);
                if self.head_partial {
                    let cut = self
                        .pending
                        .iter()
                        .position(|b| *b == b'\n')
                        .map_or(self.pending.len(), |i| i + 1);
                    self.pending.drain(..cut);
                    self.head_partial = false;
                    self.status.lose(1);
                }
                self.bytes = bytes + self.pending.len() as u64;
            }
            Err(_) => {
                self.file = None;
                self.identity = None;
            }
        }
    }

    /// Whether `path` still names the open file (not removed, not replaced).
    /// Allocates nothing on the frame path (tests/steady_state_alloc.rs): std
    /// builds the C string of a path shorter than 384 bytes on the stack.
    fn path_names_our_file(&self) -> bool {
        let Some((dev, ino)) = self.identity else {
            return true;
        };
        std::fs::metadata(&self.path).is_ok_and(|m| m.dev() == dev && m.ino() == ino)
    }

    /// Closes the full file as `<results>.1` (shifting older ones up) and
    /// starts an empty one. If the renames fail, results keep going into the
    /// current file (nothing is lost) and the next try comes after another
    /// `max_mib`.
    fn rotate(&mut self) {
        if let Err(e) = self.write_pending() {
            self.begin_failure(&e);
            return;
        }
        if let Err(e) = shift_rotated(&self.path, self.rotation.keep_files) {
            log::error!(target: "sealcheck::output", results = self.path.display().to_string().as_str(), error = e.to_string().as_str();
                "cannot rotate the results file; still appending to it: check that the service may rename files in its folder");
            self.bytes = 0;
            return;
        }
        // The old file is complete on disk (written above); replacing the handle closes it.
        self.reopen();
        if self.file.is_none() {
            self.begin_failure(&std::io::Error::other(
                "cannot create a new results file after rotation",
            ));
            return;
        }
        self.last_identity_check = Instant::now();
        log::info!(target: "sealcheck::output", results = self.path.display().to_string().as_str(),
            keep_files = self.rotation.keep_files; "results file rotated");
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
    fn a_full_disk_costs_lines_not_the_run_and_writing_resumes_by_itself() {
        let dir = tempfile::tempdir().unwrap();
        let config = output(dir.path(), 0, 3);
        let mut sink = ResultSink::open(&config).unwrap();
        let status = sink.status();
        sink.write_line("before").unwrap();
        sink.flush().unwrap();
        // The disk fills up: the path now leads to /dev/full (ENOSPC on every write).
        std::fs::rename(&config.results, dir.path().join("before.jsonl")).unwrap();
        std::os::unix::fs::symlink("/dev/full", &config.results).unwrap();
        sink.last_identity_check = Instant::now() - IDENTITY_CHECK;
        let line = |i: usize| format!("{i:0>1023}");
        for i in 0..200 {
            sink.write_line(&line(i)).unwrap();
            sink.flush().unwrap();
        }
        assert!(!status.is_writable());
        assert_eq!(status.episodes(), 1, "one episode, however many lines");
        let kept = BACKLOG_LIMIT / 1024;
        assert_eq!(
            status.lost_lines(),
            200 - kept as u64,
            "the backlog is bounded"
        );
        // Space again (the symlink goes): the next retry creates the file anew.
        std::fs::remove_file(&config.results).unwrap();
        if let Some(failure) = &mut sink.failure {
            failure.next_retry = Instant::now();
        }
        sink.write_line(&line(200)).unwrap();
        assert!(status.is_writable(), "writing resumed by itself");
        assert_eq!(sink.close(), 200 - kept as u64);
        let written = lines_of(&config.results);
        let expected: Vec<String> = (0..kept).chain([200]).map(line).collect();
        assert_eq!(
            written, expected,
            "whole lines, in order, the backlog first"
        );
        assert_eq!(lines_of(&dir.path().join("before.jsonl")), ["before"]);
    }

    #[test]
    fn a_line_cut_short_by_a_removed_file_is_counted_not_half_written() {
        let dir = tempfile::tempdir().unwrap();
        let config = output(dir.path(), 0, 3);
        let mut sink = ResultSink::open(&config).unwrap();
        // As after a short write: the first 3 bytes of "abcdef" reached the old file.
        sink.pending.extend_from_slice(b"def\nnext\n");
        sink.head_partial = true;
        std::fs::remove_file(&config.results).unwrap();
        sink.begin_failure(&std::io::Error::other("test"));
        sink.failure.as_mut().unwrap().next_retry = Instant::now();
        sink.retry_if_due();
        assert_eq!(lines_of(&config.results), ["next"]);
        assert_eq!(sink.close(), 1);
    }

    #[test]
    fn a_file_replaced_in_its_folder_is_noticed_and_written_anew() {
        let dir = tempfile::tempdir().unwrap();
        let config = output(dir.path(), 0, 3);
        let mut sink = ResultSink::open(&config).unwrap();
        sink.write_line("before").unwrap();
        sink.flush().unwrap();
        // logrotate's `create`: the file moved aside, an empty one in its place
        // (same device, another inode).
        let moved = dir.path().join("moved.jsonl");
        std::fs::rename(&config.results, &moved).unwrap();
        std::fs::write(&config.results, "").unwrap();
        sink.last_identity_check = Instant::now() - IDENTITY_CHECK;
        sink.write_line("after").unwrap();
        sink.flush().unwrap();
        assert_eq!(lines_of(&config.results), ["after"]);
        assert_eq!(lines_of(&moved), ["before"]);
        assert_eq!(sink.close(), 0);
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
