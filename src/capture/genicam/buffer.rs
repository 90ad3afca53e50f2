//! Whether a GigE Vision camera's frame fits the socket buffer its stream
//! will get, said once at start (`sealcheck run`, `sealcheck cameras`).
//!
//! A camera sends each frame as one burst of UDP packets. Aravis 0.8's
//! stream socket is sized only when its `socket-buffer-size` property is set
//! (`ArvGvStream`: `socket-buffer` is `fixed` with size 0 by default, and
//! then no `SO_RCVBUF` is set); `aravissrc` sets neither, so the socket gets
//! the kernel's default, `net.core.rmem_default` (`net.core.rmem_max` only
//! caps an explicit `SO_RCVBUF`, so it does not apply). A frame larger than
//! that buffer loses packets whenever the reader is a little late, and with
//! them the frame. With `CAP_NET_RAW` Aravis reads the stream from a packet
//! socket's ring instead (`net_raw`), and a USB3 Vision camera has no socket:
//! neither is checked.
//!
//! `warning` is the rule (sizes in, the warning out); `check` reads the
//! camera's PayloadSize and `/proc/sys/net/core/rmem_default` and logs it.

use std::fmt;

use super::sys::Camera;

/// Where the kernel's default socket receive buffer is read.
const RMEM_DEFAULT: &str = "/proc/sys/net/core/rmem_default";
/// The file the sealcheck package installs (packaging/60-sealcheck-gige.conf).
const SYSCTL_FILE: &str = "/etc/sysctl.d/60-sealcheck-gige.conf";
/// What that file sets: 32 MiB.
const PACKAGE_BYTES: u64 = 32 << 20;
/// Frames a suggested buffer holds at least.
const FRAMES_HELD: u64 = 4;

/// A camera's frame that is larger than its stream's socket buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BufferWarning {
    /// One frame, in bytes (the camera's PayloadSize).
    pub(crate) frame_bytes: u64,
    /// The buffer the stream socket gets (`net.core.rmem_default`), in bytes.
    pub(crate) buffer_bytes: u64,
    /// What to raise `net.core.rmem_default` to: the package's 32 MiB, or 4
    /// frames (whole MiB) where that is more.
    pub(crate) raise_to: u64,
}

/// The rule: a warning when one frame is larger than the socket buffer.
pub(crate) fn warning(frame_bytes: u64, buffer_bytes: u64) -> Option<BufferWarning> {
    (frame_bytes > buffer_bytes).then(|| BufferWarning {
        frame_bytes,
        buffer_bytes,
        raise_to: PACKAGE_BYTES.max((frame_bytes * FRAMES_HELD).next_multiple_of(1 << 20)),
    })
}

/// "208 KiB", "150.5 KiB".
fn kib(bytes: u64) -> String {
    if bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

impl fmt::Display for BufferWarning {
    /// What is wrong and the fix, after the camera's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "one frame ({}) is larger than the socket buffer its GigE Vision stream gets \
             (net.core.rmem_default = {}): packets that do not fit are lost, and with them whole \
             frames (counted as incomplete, never judged) — ",
            kib(self.frame_bytes),
            kib(self.buffer_bytes)
        )?;
        if self.raise_to == PACKAGE_BYTES {
            write!(
                f,
                "raise it with `sudo sysctl -p {SYSCTL_FILE}` (installed by the sealcheck \
                 package: 32 MiB) or `sudo sysctl -w net.core.rmem_default={}`",
                self.raise_to
            )?;
        } else {
            write!(
                f,
                "set net.core.rmem_default (and net.core.rmem_max) to {} ({}, {FRAMES_HELD} \
                 frames; the package's 32 MiB are too few) in {SYSCTL_FILE} and apply it with \
                 `sudo sysctl -p {SYSCTL_FILE}`",
                self.raise_to,
                kib(self.raise_to)
            )?;
        }
        write!(
            f,
            "; it applies from the camera's next open (docs/OPERATIONS.md, \"GigE settings\")"
        )
    }
}

/// `net.core.rmem_default` as this process's network namespace reads it.
pub(crate) fn rmem_default() -> Result<u64, String> {
    let text = std::fs::read_to_string(RMEM_DEFAULT).map_err(|e| format!("{RMEM_DEFAULT}: {e}"))?;
    text.trim()
        .parse()
        .map_err(|_| format!("{RMEM_DEFAULT}: \"{}\" is not a size", text.trim()))
}

/// Reads the camera's PayloadSize and the socket buffer; logs the warning
/// when a frame does not fit, naming `camera`. Returns whether it warned.
/// The caller says whether the camera is read through a socket at all.
pub(crate) fn check(camera_name: &str, camera: &Camera) -> bool {
    let sizes = camera
        .payload()
        .map(u64::from)
        .and_then(|frame| Ok((frame, rmem_default()?)));
    match sizes {
        Ok((frame, buffer)) => match warning(frame, buffer) {
            Some(w) => {
                log::warn!(target: "sealcheck::capture", source = camera_name,
                    frame_bytes = w.frame_bytes, socket_buffer_bytes = w.buffer_bytes,
                    sysctl = "net.core.rmem_default", raise_to = w.raise_to;
                    "{camera_name}: {w}");
                true
            }
            None => {
                log::debug!(target: "sealcheck::capture", source = camera_name,
                    frame_bytes = frame, socket_buffer_bytes = buffer;
                    "a frame fits the stream's socket buffer");
                false
            }
        },
        Err(reason) => {
            log::debug!(target: "sealcheck::capture", source = camera_name, error = reason.as_str();
                "the frame size or the socket buffer could not be read: not compared");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_larger_than_the_buffer_is_warned_of_with_both_sizes_and_the_fix() {
        // The camera: 512x512 Bayer (1 byte a pixel) on Debian's default.
        let w = warning(512 * 512, 212_992).expect("256 KiB does not fit 208 KiB");
        assert_eq!(w.raise_to, 32 << 20);
        let text = w.to_string();
        for part in [
            "one frame (256 KiB)",
            "net.core.rmem_default = 208 KiB",
            "sudo sysctl -p /etc/sysctl.d/60-sealcheck-gige.conf",
            "sudo sysctl -w net.core.rmem_default=33554432",
        ] {
            assert!(text.contains(part), "no {part:?} in {text}");
        }
    }

    #[test]
    fn a_frame_that_fits_is_no_warning() {
        assert_eq!(warning(256 * 256, 212_992), None);
        assert_eq!(warning(212_992, 212_992), None, "exactly the buffer fits");
        assert!(warning(212_993, 212_992).is_some());
        assert_eq!(warning(512 * 512, 32 << 20), None, "the package's setting");
    }

    #[test]
    fn frames_too_large_for_the_package_setting_get_four_frames_in_whole_mib() {
        // 20 MP RGB: 60 MB a frame.
        let frame = 5472 * 3648 * 3;
        let w = warning(frame, 32 << 20).expect("does not fit 32 MiB");
        assert_eq!(w.raise_to % (1 << 20), 0);
        assert!(w.raise_to >= 4 * frame && w.raise_to < 4 * frame + (1 << 20));
        let text = w.to_string();
        assert!(
            text.contains(&format!(
                "net.core.rmem_default (and net.core.rmem_max) to {}",
                w.raise_to
            )) && text.contains("the package's 32 MiB are too few"),
            "{text}"
        );
    }

    #[test]
    fn sizes_are_in_kib() {
        assert_eq!(kib(212_992), "208 KiB");
        assert_eq!(kib(300 * 512), "150 KiB");
        assert_eq!(kib(1536 + 512), "2 KiB");
        assert_eq!(kib(1000), "1.0 KiB");
        assert_eq!(kib(154_112), "150.5 KiB");
    }
}
