//! The Prometheus alerting rules shipped in `prometheus/`: Prometheus's own
//! `promtool` (Debian's `prometheus`) checks them and runs their unit tests,
//! and every `sealcheck_*` series they name must be one that a running
//! sealcheck really exposes, so that a renamed metric cannot leave an alert
//! that never fires.
//!
//! ```text
//! promtool check rules / test rules  <-- prometheus/sealcheck-alerts{,.test}.yml
//! sealcheck run ([status], [mqtt], [archive]) --/metrics--> test <-- names in the rules
//! ```

use crate::common;

use common::http::get;
use common::{Sealcheck, repo};

use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const RULES: &str = "prometheus/sealcheck-alerts.yml";
const RULE_TESTS: &str = "prometheus/sealcheck-alerts.test.yml";

/// `promtool ARGS` in `prometheus/`, bounded in time.
fn promtool(args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("60")
        .arg("promtool")
        .args(args)
        .current_dir(repo().join("prometheus"))
        .output()
        .expect("timeout (coreutils)")
}

fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what}: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn promtool_accepts_the_rules_and_their_unit_tests_pass() {
    let out = promtool(&["check", "rules", "sealcheck-alerts.yml"]);
    if out.status.code() == Some(127) {
        panic!("promtool not found: `make deps` installs it (package prometheus)");
    }
    assert_success("promtool check rules", &out);
    let out = promtool(&["test", "rules", "sealcheck-alerts.test.yml"]);
    assert_success("promtool test rules", &out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("SUCCESS"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The `sealcheck_*` names in `text`, as far as a name goes.
fn sealcheck_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("sealcheck_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.insert(name);
    }
    names
}

/// The names in the rules' expressions: every line but comments and the
/// annotations' prose.
fn names_in_expressions(rules: &str) -> BTreeSet<String> {
    rules
        .lines()
        .map(str::trim_start)
        .filter(|l| {
            !["#", "summary:", "description:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .flat_map(sealcheck_names)
        .collect()
}

/// The series names of a /metrics text, with each histogram's own name
/// beside its `_bucket`, `_sum` and `_count`.
fn exposed_names(metrics: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        for part in ["_bucket", "_sum", "_count"] {
            if let Some(family) = name.strip_suffix(part) {
                names.insert(family.to_string());
            }
        }
        names.insert(name.to_string());
    }
    names
}

#[test]
fn every_series_the_rules_name_is_one_sealcheck_exposes() {
    let rules = std::fs::read_to_string(repo().join(RULES)).unwrap();
    // Prose names count too: an operator told to look at a series must find it.
    let named = sealcheck_names(&rules);
    let in_expressions = names_in_expressions(&rules);
    assert!(
        in_expressions.len() >= 8,
        "the rules use too few series: {in_expressions:?}"
    );
    let tests = std::fs::read_to_string(repo().join(RULE_TESTS)).unwrap();
    let tested: BTreeSet<String> = sealcheck_names(&tests);
    let untested: Vec<_> = in_expressions.difference(&tested).collect();
    assert!(
        untested.is_empty(),
        "series the unit tests never feed: {untested:?}"
    );

    // A live run with every part that adds series: MQTT (to a port where no
    // broker listens), the archive, a deadline and a cavity layout (the
    // per-cavity counters; its cycles in one batch of the batch models).
    let dir = tempfile::tempdir().unwrap();
    let closed_port = common::free_port();
    let config = dir.path().join("sealcheck.toml");
    std::fs::write(
        &config,
        format!(
            "[source]\nkind = \"test\"\nframerate = 10\nnum_buffers = 0\nwidth = 1920\nheight = 720\n\
             [source.layout]\nrows = 2\ncols = 3\nfirst = [320, 180]\npitch = [640, 360]\nsize = [600, 340]\n\
             [inference]\nbackend = \"tract\"\nmax_batch = 6\n\
             [models.segmentation]\npath = \"{models}/seg_batch.onnx\"\n\
             [models.classifier]\npath = \"{models}/cls_batch.onnx\"\n\
             [decision]\ndeadline_ms = 500\n\
             [output]\nresults = \"results.jsonl\"\nlog_verdicts = false\n\
             [status]\nlisten = \"127.0.0.1:0\"\n\
             [archive]\ndir = \"archive\"\nkeep = \"fail\"\n\
             [mqtt]\nurl = \"mqtt://127.0.0.1:{closed_port}\"\n",
            models = repo().join("models").display()
        ),
    )
    .unwrap();
    let mut cmd = Sealcheck::command(&config);
    cmd.env("RUST_LOG", "info").current_dir(dir.path());
    let mut service = Sealcheck::spawn(cmd);
    let addr = service.status_addr();
    // Wait for the first frame's result, so every family has its samples.
    let deadline = Instant::now() + Duration::from_secs(180);
    let metrics = loop {
        let reply = get(addr, "/metrics");
        assert_eq!(reply.status, 200, "{}", reply.text());
        let text = reply.text();
        if !text.contains("sealcheck_frames_total 0") {
            break text;
        }
        assert!(
            Instant::now() < deadline && service.is_running(),
            "no result within 180 s:\n{}",
            service.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    service.terminate(Duration::from_secs(60));

    let exposed = exposed_names(&metrics);
    let missing: Vec<_> = named.difference(&exposed).collect();
    assert!(
        missing.is_empty(),
        "{RULES} names series sealcheck does not expose: {missing:?}\nexposed: {exposed:?}"
    );
}
