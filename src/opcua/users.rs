//! Who may log in: `[opcua] users_file`, one `NAME:PASSWORD` a line (`#`
//! starts a comment; the password is everything after the first colon),
//! read once at start. A password is never logged and never printed by
//! `Debug`: only its SHA-256 is kept, and a login compares digests in
//! constant time. The server's `AuthManager` is `access::Access`.

use std::fmt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A password's SHA-256.
#[derive(Clone, PartialEq, Eq)]
struct Digested([u8; 32]);

impl Digested {
    fn of(password: &str) -> Digested {
        Digested(Sha256::digest(password.as_bytes()).into())
    }

    /// Equal, in time that does not depend on where they differ.
    fn matches(&self, other: &Digested) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
    }
}

impl fmt::Debug for Digested {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

/// Why `users_file` cannot be used (the service does not start).
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    #[error("[opcua] users_file = \"{}\": cannot read it: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "[opcua] users_file = \"{}\", line {line}: {what}; each line is NAME:PASSWORD \
         (# starts a comment)",
        path.display()
    )]
    Line {
        path: PathBuf,
        line: usize,
        what: &'static str,
    },
}

/// The users of `users_file`; none without one.
#[derive(Debug, Clone, Default)]
pub struct Users {
    users: Vec<(String, Digested)>,
}

impl Users {
    /// Reads `path`; warns when others may read it.
    pub fn read(path: &Path) -> Result<Users, UsersError> {
        let text = std::fs::read_to_string(path).map_err(|source| UsersError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        warn_if_others_read(path);
        Users::parse(&text).map_err(|(line, what)| UsersError::Line {
            path: path.to_path_buf(),
            line,
            what,
        })
    }

    /// The file's text; `Err((line, what))` names the first bad line
    /// (never its text: it may hold a password).
    pub fn parse(text: &str) -> Result<Users, (usize, &'static str)> {
        let mut users: Vec<(String, Digested)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line_no = index + 1;
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let Some((name, password)) = trimmed.split_once(':') else {
                return Err((line_no, "no colon between the name and the password"));
            };
            let name = name.trim();
            if name.is_empty() {
                return Err((line_no, "the name is empty"));
            }
            if password.is_empty() {
                return Err((line_no, "the password is empty"));
            }
            if users.iter().any(|(known, _)| known == name) {
                return Err((line_no, "this name is on an earlier line too"));
            }
            users.push((name.to_string(), Digested::of(password)));
        }
        Ok(Users { users })
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether `name` logs in with `password`. Every user's digest is
    /// compared, so the time says nothing about which names exist.
    pub fn check(&self, name: &str, password: &str) -> bool {
        let given = Digested::of(password);
        let mut found = false;
        for (known, digest) in &self.users {
            let matches = digest.matches(&given);
            found |= known == name && matches;
        }
        found
    }
}

/// A password file others may read is worth a word at start.
fn warn_if_others_read(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        log::warn!(target: "sealcheck::opcua", file = path.display().to_string().as_str();
            "[opcua] users_file {} may be read by other users of this machine (mode {:o}): make it readable by the service only (chmod 600)",
            path.display(), mode & 0o777);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_logs_in_with_their_password_only() {
        let users =
            Users::parse("# the line's PLCs\nplc1:s3cret:with:colons\n\n  mes : pw\n").unwrap();
        assert_eq!(users.len(), 2);
        assert!(users.check("plc1", "s3cret:with:colons"));
        assert!(!users.check("plc1", "s3cret"));
        assert!(
            !users.check("mes", "s3cret:with:colons"),
            "another's password"
        );
        assert!(
            users.check("mes", " pw"),
            "the password is taken as written"
        );
        assert!(!users.check("nobody", "pw"));
    }

    #[test]
    fn a_bad_line_is_named_by_number_and_its_text_never_shown() {
        assert_eq!(
            Users::parse("a:1\nhunter2\n").unwrap_err(),
            (2, "no colon between the name and the password")
        );
        assert_eq!(Users::parse(":pw").unwrap_err().1, "the name is empty");
        assert_eq!(Users::parse("a:").unwrap_err().1, "the password is empty");
        assert_eq!(
            Users::parse("a:1\na:2").unwrap_err(),
            (2, "this name is on an earlier line too")
        );
        let users = Users::parse("plc:hunter2").unwrap();
        assert!(!format!("{users:?}").contains("hunter2"));
    }
}
