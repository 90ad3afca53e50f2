//! What can go wrong with a config file: it cannot be read, or it has
//! problems, each located by line and column; and the exit status they end in.

use std::fmt;
use std::path::PathBuf;

/// One thing wrong in a config file, located precisely enough for an operator
/// to find it: `file:line:column: key: message`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigProblem {
    /// 1-based; 0 when the problem has no place in the file (a missing section).
    pub line: usize,
    pub column: usize,
    /// Dotted key, e.g. `decision.defect_threshold`.
    pub key: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

/// Exit status for configuration errors (sysexits EX_CONFIG); systemd's
/// `RestartPreventExitStatus=78` keeps a config typo from restart-looping.
pub const EXIT_CONFIG: i32 = 78;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The io error is said in the message, not chained as a source: a
    /// chain printed whole (`{:#}`) would say it twice.
    #[error("cannot read config file {}: {error} — check the path given with --config FILE", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}", render(path, problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<ConfigProblem>,
    },
}

impl ConfigError {
    pub fn problems(&self) -> &[ConfigProblem] {
        match self {
            ConfigError::Read { .. } => &[],
            ConfigError::Invalid { problems, .. } => problems,
        }
    }
}

fn render(path: &std::path::Path, problems: &[ConfigProblem]) -> String {
    let mut text = format!(
        "config file {} has {} problem{}:",
        path.display(),
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for p in problems {
        text.push_str(&format!("\n  {}", Located { path, problem: p }));
    }
    text
}

struct Located<'a> {
    path: &'a std::path::Path,
    problem: &'a ConfigProblem,
}

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.problem;
        if p.line > 0 {
            write!(f, "{}:{}:{}: ", self.path.display(), p.line, p.column)?;
        } else {
            write!(f, "{}: ", self.path.display())?;
        }
        // One problem, one line: a value quoted from the file may hold line
        // breaks (a multi-line string), which would split it.
        let message = one_line(&p.message);
        if p.key.is_empty() {
            write!(f, "{message}")
        } else {
            write!(f, "`{}`: {message}", one_line(&p.key))
        }
    }
}

fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains(['\n', '\r']) {
        text.replace('\n', "\\n").replace('\r', "\\r").into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_with_line_breaks_keeps_each_problem_on_its_own_line() {
        let problems = [
            ConfigProblem {
                line: 31,
                column: 10,
                key: "logging.format".into(),
                message: "\"multi\nline\r\" is not allowed; use one of \"logfmt\", \"json\"".into(),
            },
            ConfigProblem {
                line: 0,
                column: 0,
                key: String::new(),
                message: "section [output] is missing".into(),
            },
        ];
        let text = render(
            std::path::Path::new("/etc/sealcheck/sealcheck.toml"),
            &problems,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[1].ends_with(
                r#"`logging.format`: "multi\nline\r" is not allowed; use one of "logfmt", "json""#
            ),
            "{text}"
        );
    }
}
