//! Log lines start with journald's `<N>` priority exactly when stderr is the
//! stream `JOURNAL_STREAM` names (systemd's `device:inode`), and not when
//! stderr went elsewhere and only the variable was inherited.

use crate::common;

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{Sealcheck, repo};

/// `sealcheck run` over ten test-pattern frames with stderr into
/// `dir/stderr.log` and `JOURNAL_STREAM` from `stream` (given that file's
/// metadata); returns what it logged.
fn log_of_a_run(dir: &Path, stream: impl FnOnce(&std::fs::Metadata) -> String) -> String {
    let models = repo().join("models");
    let config = dir.join("sealcheck.toml");
    std::fs::write(
        &config,
        format!(
            "[source]\nkind = \"test\"\nframerate = 30\nnum_buffers = 10\n\
             [inference]\nbackend = \"tract\"\n\
             [models.segmentation]\npath = \"{}\"\n[models.classifier]\npath = \"{}\"\n\
             [output]\nresults = \"{}\"\n",
            models.join("seg.onnx").display(),
            models.join("cls.onnx").display(),
            dir.join("results.jsonl").display(),
        ),
    )
    .unwrap();
    let log = dir.join("stderr.log");
    let file = File::create(&log).unwrap();
    let mut cmd = Sealcheck::command(&config);
    cmd.env("JOURNAL_STREAM", stream(&file.metadata().unwrap()))
        .stderr(Stdio::from(file));
    let (code, _, _) = Sealcheck::spawn(cmd).finish(Duration::from_secs(120));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, 0, "{text}");
    text
}

#[test]
fn stderr_that_is_the_journal_stream_gets_priority_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let text = log_of_a_run(dir.path(), |m| format!("{}:{}", m.dev(), m.ino()));
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("level=")).collect();
    assert!(!lines.is_empty(), "no log lines:\n{text}");
    for line in &lines {
        let expected = if line.contains("level=info") {
            "<6>"
        } else if line.contains("level=warn") {
            "<4>"
        } else if line.contains("level=error") {
            "<3>"
        } else {
            "<7>"
        };
        assert!(line.starts_with(expected), "{line}");
    }
}

#[test]
fn stderr_redirected_elsewhere_keeps_plain_lines() {
    let dir = tempfile::tempdir().unwrap();
    let other = File::create(dir.path().join("other"))
        .unwrap()
        .metadata()
        .unwrap();
    let text = log_of_a_run(dir.path(), |_| format!("{}:{}", other.dev(), other.ino()));
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("level=")).collect();
    assert!(!lines.is_empty(), "no log lines:\n{text}");
    for line in &lines {
        assert!(line.starts_with("ts="), "{line}");
    }
}
