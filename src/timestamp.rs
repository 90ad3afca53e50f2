//! The one way sealcheck writes a time: RFC 3339, UTC, milliseconds
//! (`2026-11-23T04:05:06.789Z`), into a reused buffer. Result lines, MQTT
//! verdicts, log lines and the status server all use it; a leaf, so that none
//! of them imports another room for it.

use std::fmt::Write;
use std::time::SystemTime;

/// Appends `t` as RFC 3339 UTC with milliseconds, without allocating. Any
/// `fmt::Write`, so that a `Display` (a JSON string written by serde) can use it.
pub fn write_rfc3339(out: &mut (impl Write + ?Sized), t: SystemTime) {
    let t = time::OffsetDateTime::from(t);
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn rfc3339_of_known_instants() {
        let mut s = String::new();
        write_rfc3339(&mut s, UNIX_EPOCH);
        assert_eq!(s, "1970-01-01T00:00:00.000Z");
        s.clear();
        // 2024-02-29T12:34:56.789Z: a leap day.
        write_rfc3339(
            &mut s,
            UNIX_EPOCH + Duration::from_millis(1_709_210_096_789),
        );
        assert_eq!(s, "2024-02-29T12:34:56.789Z");
        s.clear();
        // Milliseconds are cut, not rounded.
        write_rfc3339(&mut s, UNIX_EPOCH + Duration::from_micros(5_999));
        assert_eq!(s, "1970-01-01T00:00:00.005Z");
    }
}
