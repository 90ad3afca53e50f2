//! The archive folder on disk:
//!
//! ```text
//! dir/
//!   2026-11-23/                 one folder per UTC day
//!     manifest.jsonl            per file: SHA-256, the previous line's SHA-256, the result line
//!     07/                       one folder per UTC hour
//!       20261123T071530.123Z_42_defect.jpg        the frame, untouched
//!       20261123T071530.123Z_42_defect_mask.png   the seal mask, frame-sized, 255 = seal
//!   top/                        with [cameras.NAME]: one folder per camera,
//!     2026-11-23/               holding the same day/hour tree and its own manifest
//!       manifest.jsonl
//!       07/...
//!   shadow/                     the shadow's disagreements (shadow::archive, a store of its own)
//! ```
//!
//! Limits: before a frame is written, the oldest hours of every camera
//! (never an hour being written: the current hour of any camera) are deleted
//! until the folder stays within `max_mib` and the disk keeps `min_free_mib`
//! free; a day goes (manifest included) with its last hour. If the frame
//! still does not fit, it is dropped and counted.
//!
//! The manifest is a hash chain: each line carries the SHA-256 of the line
//! before it, so a line removed or edited later shows. Each camera's day has
//! its own chain, so cameras never wait on or interleave into each other's.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::counters::ArchiveDrop;
use crate::config::ArchiveConfig;
// Kept public here: `archive::sha256_hex` is how callers name the manifest's digest.
pub use crate::model_id::sha256_hex;

const MANIFEST: &str = "manifest.jsonl";

/// Folders inside the archive folder that belong to another store: the
/// shadow's disagreements (`shadow::archive`). Never a camera's, so this
/// store neither prunes them nor takes them for a camera's tree.
pub const RESERVED_FOLDERS: [&str; 1] = crate::config::RESERVED_CAMERA_NAMES;

/// Whether `name` can be a camera's folder: what the config allows for a
/// camera name (`config::camera_name_problem`: not a day, not reserved).
/// Checked again here because the name becomes a path: nothing else may.
pub fn is_camera_folder(name: &str) -> bool {
    crate::config::camera_name_problem(name).is_none()
}

/// Where one frame goes: `[camera/]day/hour/stem.ext`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveName {
    /// The camera's folder with `[cameras.NAME]`; `None` for `[source]`
    /// (and the shadow's store), whose days lie in the archive folder itself.
    pub camera: Option<String>,
    /// `YYYY-MM-DD`
    pub day: String,
    /// `HH`
    pub hour: String,
    /// `<UTC time>_<seq>_<reason>`, e.g. `20261123T071530.123Z_42_defect`.
    pub stem: String,
}

impl ArchiveName {
    pub fn new(captured_at: SystemTime, seq: u64, reason: &str) -> Self {
        let t = time::OffsetDateTime::from(captured_at);
        let (y, mo, d) = (t.year(), u8::from(t.month()), t.day());
        ArchiveName {
            camera: None,
            day: format!("{y:04}-{mo:02}-{d:02}"),
            hour: format!("{:02}", t.hour()),
            stem: format!(
                "{y:04}{mo:02}{d:02}T{:02}{:02}{:02}.{:03}Z_{seq}_{reason}",
                t.hour(),
                t.minute(),
                t.second(),
                t.millisecond()
            ),
        }
    }

    /// The same frame in `camera`'s folder (`None`: the archive folder
    /// itself, as for `[source]`). The caller checks the name
    /// (`is_camera_folder`); `ArchiveStore::write` refuses any other.
    pub fn in_camera(mut self, camera: Option<&str>) -> Self {
        self.camera = camera.map(str::to_string);
        self
    }

    /// The day's folder relative to the archive folder: `[camera/]day`.
    pub fn day_folder(&self) -> String {
        match &self.camera {
            Some(camera) => format!("{camera}/{}", self.day),
            None => self.day.clone(),
        }
    }

    /// The frame's path relative to the archive folder (also its URL under `/archive/`).
    pub fn frame(&self, ext: &str) -> String {
        format!("{}/{}/{}.{ext}", self.day_folder(), self.hour, self.stem)
    }

    pub fn mask(&self) -> String {
        format!("{}/{}/{}_mask.png", self.day_folder(), self.hour, self.stem)
    }

    pub fn shadow_mask(&self) -> String {
        format!(
            "{}/{}/{}_shadow_mask.png",
            self.day_folder(),
            self.hour,
            self.stem
        )
    }
}

/// Is `name` a `YYYY-MM-DD` day folder? (Pruning and the status server's
/// `/archive/` route both go by it.)
pub fn is_day(name: &str) -> bool {
    crate::config::looks_like_a_day(name)
}

/// Is `name` an `HH` hour folder?
pub fn is_hour(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|c| c.is_ascii_digit())
}

/// Apparent size of everything under `path`.
pub fn tree_size(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    fs::read_dir(path)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| tree_size(&e.path()))
                .sum()
        })
        .unwrap_or(0)
}

/// Bytes free for an unprivileged writer on the file system holding `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the
    // call, and `stat` points to writable memory of the right type; statvfs
    // writes it fully when it returns 0, and only then is it read.
    let stat = unsafe {
        if libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) != 0 {
            return None;
        }
        stat.assume_init()
    };
    // u32 on 32-bit targets, u64 here: the conversion is for the former.
    #[allow(clippy::useless_conversion)]
    Some(u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize)))
}

/// The archive folder: writes frames, keeps the manifest chain and the limits.
pub struct ArchiveStore {
    config: ArchiveConfig,
    /// Bytes under `config.dir`: scanned at open, then kept up to date.
    used: u64,
    /// Per camera folder ("" for the archive folder itself): the day of the
    /// manifest `prev` belongs to, and the SHA-256 of its last line. One
    /// entry per camera, so cameras taking turns never re-read a manifest.
    chains: HashMap<String, (String, String)>,
}

/// What one archived frame needs written.
pub struct ArchiveWrite<'a> {
    pub name: &'a ArchiveName,
    pub ext: &'a str,
    pub frame: &'a [u8],
    /// `None` when the frame failed before its mask was made.
    pub mask: Option<&'a [u8]>,
    pub result_line: &'a str,
    /// A shadow disagreement's second mask (the shadow's), written beside
    /// production's as `<stem>_shadow_mask.png`.
    pub shadow_mask: Option<&'a [u8]>,
}

impl ArchiveStore {
    pub fn open(config: ArchiveConfig) -> Self {
        if let Err(e) = fs::create_dir_all(&config.dir) {
            log::error!(target: "sealcheck::archive", dir = config.dir.display().to_string().as_str(), error = e.to_string().as_str();
                "cannot create the archive folder: check [archive] dir and that the service may write there");
        }
        let used = tree_size(&config.dir);
        log::info!(target: "sealcheck::archive", dir = config.dir.display().to_string().as_str(),
            used_mib = used as f64 / 1048576.0, max_mib = config.max_mib, min_free_mib = config.min_free_mib,
            keep = config.keep.as_str(); "archive open");
        ArchiveStore {
            config,
            used,
            chains: HashMap::new(),
        }
    }

    pub fn config(&self) -> &ArchiveConfig {
        &self.config
    }

    pub fn used_bytes(&self) -> u64 {
        self.used
    }

    /// New settings (a reload): another folder is scanned afresh; new limits
    /// apply from the next frame.
    pub fn reconfigure(&mut self, config: ArchiveConfig) {
        if config.dir != self.config.dir {
            *self = ArchiveStore::open(config);
        } else {
            self.config = config;
        }
    }

    /// Writes one frame (and mask) and its manifest line, making room first.
    pub fn write(&mut self, w: &ArchiveWrite<'_>) -> Result<u64, ArchiveDrop> {
        if let Some(camera) = w.name.camera.as_deref()
            && !is_camera_folder(camera)
        {
            log::warn!(target: "sealcheck::archive", camera = camera;
                "cannot archive a frame of a camera whose name is not a folder name ([cameras.NAME] allows A-Z a-z 0-9 _ - only, and not \"shadow\"); it is dropped: rename the camera");
            return Err(ArchiveDrop::WriteError);
        }
        // The chain's key: "" is the archive folder's own (`[source]`).
        let camera = w.name.camera.as_deref().unwrap_or("");
        let day_folder = w.name.day_folder();
        let frame_rel = w.name.frame(w.ext);
        let mask_rel = w.name.mask();
        let frame_sha = sha256_hex(w.frame);
        let mask_sha = w.mask.map(sha256_hex);
        let prev = self.previous_line_hash(camera, &w.name.day);
        let quote = |s: Option<&str>| s.map_or("null".to_string(), |s| format!("\"{s}\""));
        let in_day = |rel: &str| rel[day_folder.len() + 1..].to_string();
        let shadow_rel = w.name.shadow_mask();
        // Only a shadow disagreement has a second mask; other lines keep
        // their fields as they were.
        let shadow = w.shadow_mask.map_or_else(String::new, |m| {
            format!(
                ",\"shadow_mask\":\"{}\",\"shadow_mask_sha256\":\"{}\"",
                in_day(&shadow_rel),
                sha256_hex(m)
            )
        });
        let line = format!(
            "{{\"file\":\"{}\",\"sha256\":\"{frame_sha}\",\"mask\":{},\"mask_sha256\":{}{shadow},\"prev\":{},\"result\":{}}}",
            in_day(&frame_rel),
            quote(w.mask.map(|_| in_day(&mask_rel)).as_deref()),
            quote(mask_sha.as_deref()),
            quote(prev.as_deref()),
            w.result_line
        );
        let need = w.frame.len() as u64
            + w.mask.map_or(0, |m| m.len() as u64)
            + w.shadow_mask.map_or(0, |m| m.len() as u64)
            + line.len() as u64
            + 1;
        self.make_room(need, &w.name.day, &w.name.hour)?;

        let day_dir = self.config.dir.join(&day_folder);
        let written = (|| -> std::io::Result<()> {
            fs::create_dir_all(day_dir.join(&w.name.hour))?;
            fs::write(self.config.dir.join(&frame_rel), w.frame)?;
            if let Some(mask) = w.mask {
                fs::write(self.config.dir.join(&mask_rel), mask)?;
            }
            if let Some(mask) = w.shadow_mask {
                fs::write(self.config.dir.join(&shadow_rel), mask)?;
            }
            let mut manifest = OpenOptions::new()
                .create(true)
                .append(true)
                .open(day_dir.join(MANIFEST))?;
            manifest.write_all(format!("{line}\n").as_bytes())
        })();
        match written {
            Ok(()) => {
                self.used += need;
                self.chains.insert(
                    camera.to_string(),
                    (w.name.day.clone(), sha256_hex(line.as_bytes())),
                );
                Ok(need)
            }
            Err(e) => {
                log::warn!(target: "sealcheck::archive", file = frame_rel.as_str(), error = e.to_string().as_str();
                    "cannot write an archived frame; it is dropped (counted in sealcheck_archive_dropped_total)");
                // Whatever part made it to disk still counts against the limit.
                self.used = tree_size(&self.config.dir);
                // What reached the manifest is unknown: read it back next time.
                self.chains.remove(camera);
                Err(ArchiveDrop::WriteError)
            }
        }
    }

    /// SHA-256 of the last line of `camera`'s (`""`: the archive folder's)
    /// manifest of `day`, from memory or (after a start or a write error)
    /// from the file.
    fn previous_line_hash(&mut self, camera: &str, day: &str) -> Option<String> {
        if let Some((d, hash)) = self.chains.get(camera)
            && d == day
        {
            return Some(hash.clone());
        }
        let text =
            fs::read_to_string(self.config.dir.join(camera).join(day).join(MANIFEST)).ok()?;
        let last = text.lines().rev().find(|l| !l.is_empty())?;
        let hash = sha256_hex(last.as_bytes());
        self.chains
            .insert(camera.to_string(), (day.to_string(), hash.clone()));
        Some(hash)
    }

    /// Deletes oldest hours until `need` more bytes fit both limits.
    fn make_room(&mut self, need: u64, day: &str, hour: &str) -> Result<(), ArchiveDrop> {
        let max = self.config.max_mib.saturating_mul(1 << 20);
        let min_free = self.config.min_free_mib.saturating_mul(1 << 20);
        loop {
            let over = self.used + need > max;
            let low = free_bytes(&self.config.dir).is_some_and(|free| free < need + min_free);
            if !over && !low {
                return Ok(());
            }
            let Some(oldest) = self.oldest_hour(day, hour) else {
                return Err(if over {
                    ArchiveDrop::OverLimit
                } else {
                    ArchiveDrop::LowDisk
                });
            };
            self.delete_hour(&oldest, if over { "max_mib" } else { "min_free_mib" });
        }
    }

    /// The oldest hour folder of any camera other than `day/hour` (the hour
    /// being written, by every camera alike).
    fn oldest_hour(&self, day: &str, hour: &str) -> Option<PathBuf> {
        // The archive folder's own days (`[source]`), then each camera's:
        // folders of cameras renamed or removed since count against the
        // limit too, so they are pruned like the others.
        let mut roots = vec![self.config.dir.clone()];
        let mut cameras = list(&self.config.dir, is_camera_folder);
        cameras.sort();
        roots.extend(cameras.iter().map(|c| self.config.dir.join(c)));
        roots
            .iter()
            .filter_map(|root| oldest_in(root, day, hour))
            // An emptied day ("" for its hour) before any hour of that day.
            .min_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)))
            .map(|(_, _, path)| path)
    }

    fn delete_hour(&mut self, path: &Path, limit: &str) {
        let size = tree_size(path);
        let removed = fs::remove_dir_all(path);
        log::info!(target: "sealcheck::archive", folder = path.display().to_string().as_str(),
            mib = size as f64 / 1048576.0, limit = limit; "archive: oldest hour deleted to stay within the limits");
        if let Err(e) = removed {
            log::error!(target: "sealcheck::archive", folder = path.display().to_string().as_str(), error = e.to_string().as_str();
                "archive: cannot delete an old hour; check the folder's permissions");
        }
        // A day whose last hour went goes with its manifest.
        if let Some(day) = path.parent()
            && day != self.config.dir
            && list(day, is_hour).is_empty()
            && day.file_name().and_then(|n| n.to_str()).is_some_and(is_day)
        {
            let _ = fs::remove_dir_all(day);
        }
        // A chain whose manifest is gone starts again (`prev: null`); one
        // still there is read back from the file next time.
        let dir = &self.config.dir;
        self.chains.retain(|camera, (d, _)| {
            dir.join(camera.as_str())
                .join(d.as_str())
                .join(MANIFEST)
                .is_file()
        });
        self.used = tree_size(&self.config.dir);
    }
}

/// The oldest deletable folder under one root (the archive folder or a
/// camera's): `(day, hour, path)`, the hour `""` for a day left with only
/// its manifest. Never `day/hour`, the hour being written.
fn oldest_in(root: &Path, day: &str, hour: &str) -> Option<(String, String, PathBuf)> {
    let mut days: Vec<String> = list(root, is_day);
    days.sort();
    for d in days {
        let mut hours = list(&root.join(&d), is_hour);
        hours.sort();
        if let Some(h) = hours.into_iter().find(|h| !(d == day && h == hour)) {
            let path = root.join(&d).join(&h);
            return Some((d, h, path));
        }
        // A day left with no hour folder (only its manifest) goes too,
        // unless it is today's.
        if d != day {
            let path = root.join(&d);
            return Some((d, String::new(), path));
        }
    }
    None
}

fn list(dir: &Path, keep: fn(&str) -> bool) -> Vec<String> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|n| keep(n))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ArchiveKeep, ImageFormat};
    use std::time::{Duration, UNIX_EPOCH};

    fn config(dir: &Path, max_mib: u64) -> ArchiveConfig {
        ArchiveConfig {
            dir: dir.to_path_buf(),
            keep: ArchiveKeep::Fail,
            format: ImageFormat::Png,
            max_mib,
            min_free_mib: 0,
        }
    }

    #[test]
    fn names_follow_utc_day_hour_time_seq_reason() {
        // 2024-02-29T12:34:56.789Z
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        let n = ArchiveName::new(t, 42, "defect");
        assert_eq!(
            n.frame("jpg"),
            "2024-02-29/12/20240229T123456.789Z_42_defect.jpg"
        );
        assert_eq!(
            n.mask(),
            "2024-02-29/12/20240229T123456.789Z_42_defect_mask.png"
        );
    }

    #[test]
    fn oldest_hours_go_first_and_the_current_hour_is_never_deleted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for (day, hour) in [
            ("2020-01-01", "05"),
            ("2020-01-01", "06"),
            ("2020-01-02", "00"),
        ] {
            fs::create_dir_all(dir.join(day).join(hour)).unwrap();
            fs::write(dir.join(day).join(hour).join("x.png"), vec![0u8; 400 << 10]).unwrap();
        }
        let mut store = ArchiveStore::open(config(dir, 1));
        let t = UNIX_EPOCH + Duration::from_secs(1_577_923_200); // 2020-01-02T00:00:00Z
        let name = ArchiveName::new(t, 1, "defect");
        let frame = vec![1u8; 300 << 10];
        let w = ArchiveWrite {
            name: &name,
            ext: "png",
            frame: &frame,
            mask: None,
            result_line: "{}",
            shadow_mask: None,
        };
        store.write(&w).unwrap();
        // 3 x 400 KiB + 300 KiB > 1 MiB: the two hours of 2020-01-01 go (and the day), 2020-01-02/00 stays.
        assert!(!dir.join("2020-01-01").exists());
        assert!(dir.join("2020-01-02/00/x.png").exists());
        assert!(tree_size(dir) <= 1 << 20);
        // Now only the current hour is left: a frame that does not fit is dropped.
        let name2 = ArchiveName::new(t, 2, "defect");
        let big = vec![1u8; 600 << 10];
        let w2 = ArchiveWrite {
            name: &name2,
            ext: "png",
            frame: &big,
            mask: None,
            result_line: "{}",
            shadow_mask: None,
        };
        assert_eq!(store.write(&w2), Err(ArchiveDrop::OverLimit));
        assert!(tree_size(dir) <= 1 << 20);
    }

    #[test]
    fn manifest_lines_chain_by_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = ArchiveStore::open(config(tmp.path(), 10));
        let t = UNIX_EPOCH + Duration::from_secs(1_577_923_200);
        for seq in 0..3 {
            let name = ArchiveName::new(t + Duration::from_secs(seq), seq, "no_seal");
            let w = ArchiveWrite {
                name: &name,
                ext: "png",
                frame: b"frame",
                mask: Some(b"mask"),
                result_line: "{\"seq\":0}",
                shadow_mask: None,
            };
            store.write(&w).unwrap();
        }
        // A new store (a restart) continues the chain from the file.
        let mut store = ArchiveStore::open(config(tmp.path(), 10));
        let name = ArchiveName::new(t + Duration::from_secs(9), 9, "defect");
        let w = ArchiveWrite {
            name: &name,
            ext: "png",
            frame: b"f",
            mask: None,
            result_line: "{}",
            shadow_mask: None,
        };
        store.write(&w).unwrap();
        let text = fs::read_to_string(tmp.path().join("2020-01-02/manifest.jsonl")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert!(first["prev"].is_null());
        assert_eq!(first["sha256"], sha256_hex(b"frame"));
        for pair in lines.windows(2) {
            let next: serde_json::Value = serde_json::from_str(pair[1]).unwrap();
            assert_eq!(next["prev"], sha256_hex(pair[0].as_bytes()));
        }
        assert_eq!(store.used_bytes(), tree_size(tmp.path()));
    }

    #[test]
    fn each_camera_has_its_own_folder_and_chain_and_the_oldest_hour_of_any_camera_goes_first() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        // Left by earlier runs: a `[source]` hour, a camera's old hour, the shadow's.
        for old in [
            "2020-01-01/05",
            "side/2020-01-01/04",
            "shadow/2020-01-01/03",
        ] {
            fs::create_dir_all(dir.join(old)).unwrap();
            fs::write(dir.join(old).join("x.png"), vec![0u8; 300 << 10]).unwrap();
        }
        let mut store = ArchiveStore::open(config(dir, 2));
        let t = UNIX_EPOCH + Duration::from_secs(1_577_923_200); // 2020-01-02T00:00:00Z
        for (seq, camera) in [(0, "top"), (0, "side"), (1, "top"), (1, "side")] {
            let name = ArchiveName::new(t + Duration::from_secs(seq), seq, "defect")
                .in_camera(Some(camera));
            let frame = format!("{camera}{seq}").into_bytes();
            store
                .write(&ArchiveWrite {
                    name: &name,
                    ext: "png",
                    frame: &frame,
                    mask: None,
                    result_line: &format!("{{\"camera\":\"{camera}\",\"seq\":{seq}}}"),
                    shadow_mask: None,
                })
                .unwrap();
        }
        assert!(
            dir.join("top/2020-01-02/00/20200102T000001.000Z_1_defect.png")
                .is_file()
        );
        for camera in ["top", "side"] {
            let text =
                fs::read_to_string(dir.join(camera).join("2020-01-02/manifest.jsonl")).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 2, "{camera}: {text}");
            let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
            assert!(
                first["prev"].is_null(),
                "{camera}'s chain starts on its own"
            );
            assert_eq!(first["file"], "00/20200102T000000.000Z_0_defect.png");
            assert_eq!(first["result"]["camera"], camera);
            let second: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
            assert_eq!(second["prev"], sha256_hex(lines[0].as_bytes()), "{camera}");
        }
        assert!(
            !dir.join("2020-01-02").exists(),
            "no camera wrote to the archive folder itself"
        );

        // 3 x 300 KiB planted; 1.6 MiB more needs the two oldest hours gone:
        // side's 04 (the oldest of all), then the archive folder's 05. The
        // shadow's folder is its own store's.
        let name = ArchiveName::new(t + Duration::from_secs(5), 5, "defect").in_camera(Some("top"));
        let big = vec![1u8; 1600 << 10];
        store
            .write(&ArchiveWrite {
                name: &name,
                ext: "png",
                frame: &big,
                mask: None,
                result_line: "{}",
                shadow_mask: None,
            })
            .unwrap();
        assert!(!dir.join("side/2020-01-01").exists());
        assert!(!dir.join("2020-01-01").exists());
        assert!(dir.join("shadow/2020-01-01/03/x.png").exists());
        assert!(
            dir.join("side/2020-01-02/00").exists(),
            "the hour being written stays, for every camera"
        );
        assert_eq!(store.used_bytes(), tree_size(dir));
    }

    #[test]
    fn a_camera_name_that_is_not_a_folder_name_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = ArchiveStore::open(config(tmp.path(), 10));
        let t = UNIX_EPOCH + Duration::from_secs(1_577_923_200);
        for bad in ["..", "../x", "a/b", "shadow", "2020-01-02", ""] {
            let name = ArchiveName::new(t, 1, "defect").in_camera(Some(bad));
            let w = ArchiveWrite {
                name: &name,
                ext: "png",
                frame: b"f",
                mask: None,
                result_line: "{}",
                shadow_mask: None,
            };
            assert_eq!(store.write(&w), Err(ArchiveDrop::WriteError), "{bad:?}");
        }
        assert_eq!(tree_size(tmp.path()), 0);
        assert!(is_camera_folder("lane_2-top") && !is_camera_folder(&"x".repeat(33)));
    }
}
