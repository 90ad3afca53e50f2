//! The config parser under random damage: the shipped template and the demo
//! config, mutated line by line and byte by byte (lines dropped, doubled or
//! swapped, values replaced with every TOML type, keys misspelt, stray
//! characters, text cut short), never make it panic or hang, and every file it
//! rejects gets a message that names a place in the file (`file:line:col`).
//! A few of the mutants also go through `sealcheck check-config`: exit 0 or 78.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError};
use sealcheck::config::{self, ConfigError};

/// Longest one parse may take; far above the microseconds it needs.
const PARSE_LIMIT: Duration = Duration::from_secs(5);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Values of every TOML type and some that are no TOML at all.
const VALUES: &[&str] = &[
    "0",
    "-1",
    "99999999999999999999",
    "1e308",
    "nan",
    "-inf",
    "0.5",
    "true",
    "\"\"",
    "\"x\"",
    "\"rtsp://\"",
    "[]",
    "[1, 2]",
    "[0.1, 0.2, 0.3]",
    "{}",
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
    "'literal'",
    "\"\"\"multi\nline\"\"\"",
    "=",
    "[[",
    "\"unterminated",
    "é",
];

/// Stray text dropped somewhere: brackets, quotes, equals, newlines, multi-byte characters.
const STRAY: &[&str] = &[
    "[",
    "]",
    "\"",
    "'",
    "=",
    "\n",
    "#",
    ".",
    ",",
    "{",
    "}",
    "\\",
    "\u{0}",
    "é",
    "🦀",
    "\t",
    "[[x]]\n",
    "[source]\n",
    "a.b.c = 1\n",
];

#[derive(Debug, Clone)]
enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    ReplaceValue(usize, usize),
    MisspellKey(usize),
    Insert(usize, usize),
    DeleteChar(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let any_index = any::<usize>();
    prop_oneof![
        any_index.prop_map(Mutation::DeleteLine),
        any_index.prop_map(Mutation::DuplicateLine),
        (any_index, any_index).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (any_index, 0..VALUES.len()).prop_map(|(l, v)| Mutation::ReplaceValue(l, v)),
        any_index.prop_map(Mutation::MisspellKey),
        (any_index, 0..STRAY.len()).prop_map(|(at, s)| Mutation::Insert(at, s)),
        any_index.prop_map(Mutation::DeleteChar),
        any_index.prop_map(Mutation::Truncate),
    ]
}

/// The byte offset of the `n`-th char boundary (modulo the text's length).
fn boundary(text: &str, n: usize) -> usize {
    let count = text.chars().count() + 1;
    text.char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .nth(n % count)
        .unwrap_or(text.len())
}

fn apply(text: &str, mutation: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let n = lines.len();
    match *mutation {
        Mutation::DeleteLine(l) => {
            lines.remove(l % n);
        }
        Mutation::DuplicateLine(l) => {
            let line = lines[l % n].clone();
            lines.insert(l % n, line);
        }
        Mutation::SwapLines(a, b) => lines.swap(a % n, b % n),
        Mutation::ReplaceValue(l, v) => {
            // The n-th `key = value` line (comments and headers skipped).
            let assignments: Vec<usize> = (0..n)
                .filter(|&i| !lines[i].trim_start().starts_with('#') && lines[i].contains('='))
                .collect();
            if let Some(&i) = assignments.get(l % assignments.len().max(1)) {
                let key = lines[i].split('=').next().unwrap_or_default().to_string();
                lines[i] = format!("{key}= {}", VALUES[v]);
            }
        }
        Mutation::MisspellKey(l) => {
            let i = l % n;
            if let Some(eq) = lines[i].find('=') {
                lines[i].insert(eq.saturating_sub(1), 'x');
            }
        }
        Mutation::Insert(at, s) => {
            let mut joined = lines.join("\n");
            joined.insert_str(boundary(&joined, at), STRAY[s]);
            return joined;
        }
        Mutation::DeleteChar(at) => {
            let mut joined = lines.join("\n");
            let i = boundary(&joined, at);
            if i < joined.len() {
                joined.remove(i);
            }
            return joined;
        }
        Mutation::Truncate(at) => {
            let joined = lines.join("\n");
            return joined[..boundary(&joined, at)].to_string();
        }
    }
    lines.join("\n") + "\n"
}

/// Parses `text` as if it were the file at `path`, on its own thread, bounded in time.
fn parse_bounded(text: String, path: PathBuf) -> Result<Result<(), ConfigError>, TestCaseError> {
    let (tx, rx) = mpsc::channel();
    let shown = text.clone();
    std::thread::spawn(move || {
        let _ = tx.send(config::parse(&text, &path).map(|_| ()));
    });
    match rx.recv_timeout(PARSE_LIMIT) {
        Ok(result) => Ok(result),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(TestCaseError::fail(format!(
            "parse took longer than {PARSE_LIMIT:?} on:\n{shown}"
        ))),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(TestCaseError::fail(format!("parse panicked on:\n{shown}")))
        }
    }
}

/// Accepted, or rejected with every problem placed at a line and column of
/// the file and named so in the message.
fn check(original: &str, path: &Path, mutations: &[Mutation]) -> Result<(), TestCaseError> {
    let text = mutations
        .iter()
        .fold(original.to_string(), |t, m| apply(&t, m));
    match parse_bounded(text.clone(), path.to_path_buf())? {
        Ok(()) => Ok(()),
        Err(ConfigError::Invalid { problems, .. }) => {
            prop_assert!(!problems.is_empty(), "rejected without a problem:\n{text}");
            let message = ConfigError::Invalid {
                path: path.to_path_buf(),
                problems: problems.clone(),
            }
            .to_string();
            for p in &problems {
                prop_assert!(
                    p.line > 0 && p.column > 0,
                    "problem without a place {p:?}:\n{text}"
                );
                let place = format!("{}:{}:{}: ", path.display(), p.line, p.column);
                prop_assert!(message.contains(&place), "{message}");
            }
            Ok(())
        }
        Err(other) => Err(TestCaseError::fail(format!("{other}"))),
    }
}

fn shipped(name: &str) -> (String, PathBuf) {
    let path = repo().join("config").join(name);
    (std::fs::read_to_string(&path).unwrap(), path)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn mutated_template_never_panics_and_every_problem_has_a_place(
        mutations in prop::collection::vec(mutation(), 1..5)
    ) {
        let (text, path) = shipped("sealcheck.toml");
        check(&text, &path, &mutations)?;
    }

    #[test]
    fn mutated_demo_config_never_panics_and_every_problem_has_a_place(
        mutations in prop::collection::vec(mutation(), 1..5)
    ) {
        let (text, path) = shipped("demo.toml");
        check(&text, &path, &mutations)?;
    }
}

proptest! {
    // Each case starts the binary: a few are enough to tie exit codes to the parser.
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn check_config_exits_0_or_78_naming_a_place(
        mutations in prop::collection::vec(mutation(), 1..4)
    ) {
        let (text, _) = shipped("demo.toml");
        let text = mutations.iter().fold(text, |t, m| apply(&t, m));
        // A copy of the repository's layout, so the demo's relative paths resolve.
        let dir = tempfile::tempdir().unwrap();
        for folder in ["models", "samples", "results"] {
            std::os::unix::fs::symlink(repo().join(folder), dir.path().join(folder)).unwrap();
        }
        std::fs::create_dir(dir.path().join("config")).unwrap();
        let path = dir.path().join("config/demo.toml");
        std::fs::write(&path, &text).unwrap();
        let out = Command::new(crate::common::sealcheck_bin())
            .arg("check-config")
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => {}
            Some(78) => prop_assert!(
                stderr.contains(&format!("{}:", path.display()))
                    && stderr.lines().skip(1).all(|l| l.trim_start().starts_with(&format!("{}:", path.display()))),
                "exit 78 without a place:\n{stderr}\n{text}"
            ),
            other => prop_assert!(false, "exit {other:?}:\n{stderr}\n{text}"),
        }
    }
}

#[test]
fn a_missing_section_is_placed_at_the_end_of_the_file() {
    let (text, path) = shipped("demo.toml");
    let without_output: String = {
        let start = text.find("[output]").unwrap();
        let end = text[start + 1..]
            .find("\n[")
            .map_or(text.len(), |i| start + 1 + i + 1);
        format!("{}{}", &text[..start], &text[end..])
    };
    let Err(ConfigError::Invalid { problems, .. }) = config::parse(&without_output, &path) else {
        panic!("[output] is required");
    };
    let results = problems
        .iter()
        .find(|p| p.key == "output.results")
        .expect("output.results is reported");
    assert_eq!(
        results.line,
        without_output.lines().count() + 1,
        "{results:?}"
    );
}
