//! Helpers shared by integration tests (`mod common;` in each that needs them).

use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The first `frames` frames of the demo clip with their lines of
/// `labels.jsonl`, copied into `dir/name/`: a labelled image folder.
pub fn labelled_clip_prefix(dir: &Path, name: &str, frames: usize) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    for i in 0..frames {
        let file = format!("frame_{i:05}.jpg");
        std::fs::copy(
            repo().join("samples/demo_clip").join(&file),
            folder.join(&file),
        )
        .unwrap();
    }
    let labels: Vec<&str> = include_str!("../../samples/demo_clip/labels.jsonl")
        .lines()
        .take(frames)
        .collect();
    std::fs::write(folder.join("labels.jsonl"), labels.join("\n") + "\n").unwrap();
    folder
}
