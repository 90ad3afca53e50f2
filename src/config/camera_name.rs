//! The rule for a camera's name (`[cameras.NAME]`): the characters it may
//! hold and the folder names the archive keeps for itself.

/// Longest camera name, in bytes (`[cameras.NAME]`).
pub const CAMERA_NAME_MAX: usize = 32;

/// Names no camera may take: folders the archive keeps for itself.
pub const RESERVED_CAMERA_NAMES: [&str; 1] = ["shadow"];

/// What is wrong with `name` as a camera's name, if anything. A name is
/// the camera's folder in the archive and part of its MQTT topic, so:
/// `[A-Za-z0-9_-]{1,32}`, not a day (`2026-11-23`, the archive's day
/// folders) and not reserved (`shadow`). The archive checks its folders
/// with this rule too.
pub fn camera_name_problem(name: &str) -> Option<String> {
    let charset = !name.is_empty()
        && name.len() <= CAMERA_NAME_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !charset {
        Some(format!(
            "must be 1 to {CAMERA_NAME_MAX} letters, digits, `_` or `-`: it names the camera in MQTT topics, archive folders and metrics"
        ))
    } else if looks_like_a_day(name) || RESERVED_CAMERA_NAMES.contains(&name) {
        Some(
            "is a folder name the archive keeps for itself (a day like 2026-11-23, or `shadow`): choose another"
                .to_string(),
        )
    } else {
        None
    }
}

/// Whether `name` is shaped like a `YYYY-MM-DD` day.
pub fn looks_like_a_day(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}
