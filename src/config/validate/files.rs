//! Paths in a config file: resolved against the file's folder, and inputs
//! checked to exist.

use std::path::{Component, Path, PathBuf};

use crate::config::raw::Section;

/// Resolves paths against the config's folder and checks that inputs exist.
pub(super) struct Files<'a> {
    pub(super) base: &'a Path,
}

impl Files<'_> {
    pub(super) fn resolve(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base.join(p)
        }
    }

    /// A file that must exist at start.
    pub(super) fn existing(&self, s: &Section, key: &str, what: &str) -> Option<PathBuf> {
        let given = s.str_required(key, what)?;
        let path = self.resolve(&given);
        if path.is_file() {
            Some(path)
        } else {
            let what = if path.is_dir() {
                "is a folder, not a file"
            } else {
                "does not exist"
            };
            s.problem(
                key,
                format!(
                    "file {} {what}{}",
                    looked_for(&path).display(),
                    self.how_resolved(&given)
                ),
            );
            None
        }
    }

    /// For a message about a path as written in the file: how a relative one
    /// was resolved (nothing for an absolute one).
    pub(super) fn how_resolved(&self, given: &str) -> String {
        if Path::new(given).is_absolute() {
            String::new()
        } else {
            format!(
                " (\"{given}\" is relative: it resolves against the config file's folder, {})",
                looked_for(self.base).display()
            )
        }
    }
}

/// The path as it was looked for: absolute, without `.` and `..`
/// (`config/../models/seg.onnx` is `/srv/sealcheck/models/seg.onnx`).
pub(super) fn looked_for(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut clean = PathBuf::new();
    for part in absolute.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_looked_for_is_absolute_and_clean() {
        assert_eq!(
            looked_for(Path::new("/etc/sealcheck/../models/./seg.onnx")),
            Path::new("/etc/models/seg.onnx")
        );
        let relative = looked_for(Path::new("config/../models/seg.onnx"));
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(relative, cwd.join("models/seg.onnx"));
    }
}
