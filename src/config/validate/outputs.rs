//! Where verdicts and frames are kept: `[output]` (the results file and its
//! rotation), `[status]` (the HTTP server) and `[archive]` (frames on disk).

use super::files::{Files, looked_for};
use crate::config::raw::Section;
use crate::config::types::{
    ArchiveConfig, ArchiveKeep, ImageFormat, OutputConfig, ResultsRotation, StatusConfig,
};

pub(super) fn read_output(s: &Section, files: &Files) -> Option<OutputConfig> {
    let results = s.str_required("results", "the JSON-lines results file to append to");
    let flush_each_line = s.bool_or("flush_each_line", false);
    let log_verdicts = s.bool_or("log_verdicts", true);
    let max_mib = s.int_in("rotate_mib", 0..=1_048_576, Some(256));
    let keep_files = s.int_in("keep_files", 1..=1000, Some(8));
    s.finish();
    let results = files.resolve(&results?);
    match results.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => {
            s.problem(
                "results",
                format!(
                    "folder {} does not exist; create it or choose another path",
                    looked_for(dir).display()
                ),
            );
            None
        }
        _ => Some(OutputConfig {
            results,
            flush_each_line,
            log_verdicts,
            rotation: ResultsRotation {
                max_mib: max_mib? as u64,
                keep_files: keep_files? as u32,
            },
        }),
    }
}

/// `[status]` (read only when the file has it: absent = off).
pub(super) fn read_status(s: &Section) -> Option<StatusConfig> {
    let listen = s.str_required(
        "listen",
        "the address and port to serve on, e.g. \"127.0.0.1:9750\" (loopback only)",
    );
    s.finish();
    let listen = listen?;
    match listen.parse::<std::net::SocketAddr>() {
        Ok(listen) => Some(StatusConfig { listen }),
        Err(_) => {
            s.problem(
                "listen",
                format!(
                    "\"{listen}\" is not an address and port; use e.g. \"127.0.0.1:9750\" \
                     (or \"0.0.0.0:9750\" to be reachable from the network)"
                ),
            );
            None
        }
    }
}

/// `[archive]` (read only when the file has it: absent = off).
pub(super) fn read_archive(s: &Section, files: &Files) -> Option<ArchiveConfig> {
    let dir = s.str_required("dir", "the folder archived frames are written under");
    let keep = s
        .choice("keep", &["fail", "all", "none"], Some(0))
        .map(|i| [ArchiveKeep::Fail, ArchiveKeep::All, ArchiveKeep::None][i]);
    let format = s
        .choice("format", &["jpeg", "png"], Some(0))
        .map(|i| [ImageFormat::Jpeg, ImageFormat::Png][i]);
    let max_mib = s.int_in("max_mib", 1..=16_777_216, Some(10_240));
    let min_free_mib = s.int_in("min_free_mib", 0..=16_777_216, Some(1024));
    s.finish();
    let dir = files.resolve(&dir?);
    if let Some(parent) = dir.parent()
        && !parent.as_os_str().is_empty()
        && !parent.is_dir()
    {
        s.problem(
            "dir",
            format!(
                "folder {} does not exist; create it or choose another path",
                looked_for(parent).display()
            ),
        );
        return None;
    }
    Some(ArchiveConfig {
        dir,
        keep: keep?,
        format: format?,
        max_mib: max_mib? as u64,
        min_free_mib: min_free_mib? as u64,
    })
}
