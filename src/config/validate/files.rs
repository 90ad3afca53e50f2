//! Paths in a config file: resolved against the file's folder, and inputs
//! checked to exist.

use std::path::{Path, PathBuf};

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
        let path = self.resolve(&s.str_required(key, what)?);
        if path.is_file() {
            Some(path)
        } else {
            s.problem(key, format!("file {} does not exist (relative paths resolve against the config file's folder)", path.display()));
            None
        }
    }
}
