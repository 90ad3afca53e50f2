//! The numbered file names of an image-sequence source: `location` holds one
//! printf-style index (`%d`, `%5d` or `%05d`), as `multifilesrc` reads it.

use std::path::{Path, PathBuf};

/// The file holding image `index` of the sequence named by `location`. A
/// location without an index names one file, whatever the index.
pub fn image_file(location: &Path, index: u64) -> PathBuf {
    let text = location.to_string_lossy();
    let Some(start) = text.find('%') else {
        return location.to_path_buf();
    };
    let Some(len) = text[start..].find('d') else {
        return location.to_path_buf();
    };
    let spec = &text[start + 1..start + len];
    let width: usize = spec.trim_start_matches('0').parse().unwrap_or(0);
    let number = if spec.starts_with('0') {
        format!("{index:0width$}")
    } else {
        format!("{index:width$}")
    };
    PathBuf::from(format!(
        "{}{}{}",
        &text[..start],
        number,
        &text[start + len + 1..]
    ))
}

/// Whether `location` numbers its files (has an index), rather than naming one file.
pub fn is_numbered(location: &Path) -> bool {
    image_file(location, 0) != image_file(location, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_formats_as_printf_does() {
        let at = |pattern: &str, index| image_file(Path::new(pattern), index);
        assert_eq!(at("/a/frame_%05d.jpg", 7), Path::new("/a/frame_00007.jpg"));
        assert_eq!(
            at("/a/frame_%05d.jpg", 123456),
            Path::new("/a/frame_123456.jpg")
        );
        assert_eq!(at("/a/f%d.png", 42), Path::new("/a/f42.png"));
        assert_eq!(at("/a/f%3d.png", 4), Path::new("/a/f  4.png"));
        assert_eq!(at("/a/still.png", 9), Path::new("/a/still.png"));
        assert!(is_numbered(Path::new("/a/f%d.png")));
        assert!(!is_numbered(Path::new("/a/still.png")));
    }
}
