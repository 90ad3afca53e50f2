//! The frames an evaluation runs on: the images of one folder, their labels
//! and, where present, their ground-truth masks.
//!
//! Layout, as the demo clip and `scripts/demo/gen_seals.py` write it: images
//! `NAME.jpg`/`.jpeg`/`.png` whose name ends in the frame number, optional
//! masks `NAME_mask.png` beside them, and `labels.jsonl` lines
//! `{"frame": N, "label": "ok"|"defect", "kind": ...}`. A frame of a machine
//! cycle of cavities (`scripts/demo/gen_cavities.py`) is labelled per cavity,
//! `{"frame": N, "cavities": [{"cavity": 1, "label": ..., "kind": ...}, ...]}`:
//! each labelled cavity is then a sample of its own, cropped by the config's
//! `[source.layout]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A labelled image folder, in frame order.
#[derive(Debug)]
pub struct ImageSet {
    pub frames: Vec<EvalFrame>,
}

#[derive(Debug, Clone)]
pub struct EvalFrame {
    /// The number the file name ends in (`frame_00012.jpg` -> 12).
    pub frame: u64,
    pub image: PathBuf,
    /// `true` when labelled defective, `false` when good; `None` without labels.
    pub defect: Option<bool>,
    /// The label's `kind` (`wrinkle`, `gap`...), for per-kind tables.
    pub kind: Option<String>,
    pub ground_truth_mask: Option<PathBuf>,
    /// With labels per cavity: the cavity of the frame this sample is.
    pub cavity: Option<u16>,
}

/// One label of a frame: the whole frame's, or one cavity's.
#[derive(Debug, Clone)]
struct Label {
    cavity: Option<u16>,
    defect: bool,
    kind: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ImageSetError {
    #[error("cannot read image folder {}: {source}", path.display())]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("image folder {} holds no .jpg, .jpeg or .png images", .0.display())]
    Empty(PathBuf),
    #[error("image {}: its name must end in the frame number (as frame_00012.jpg), so labels can name it", .0.display())]
    Unnumbered(PathBuf),
    #[error("images {} and {} have the same frame number {frame}", first.display(), second.display())]
    Duplicate {
        frame: u64,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("cannot read labels {}: {source}", path.display())]
    LabelsFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("labels {}:{line}: {problem}", path.display())]
    Label {
        path: PathBuf,
        line: usize,
        problem: String,
    },
    #[error("labels {} name frames with no image in {}: {frames}; remove those lines or add the images", labels.display(), folder.display())]
    LabelledButMissing {
        labels: PathBuf,
        folder: PathBuf,
        frames: String,
    },
    #[error("images in {} have no line in {}: {images}; label them or move them out", folder.display(), labels.display())]
    Unlabelled {
        labels: PathBuf,
        folder: PathBuf,
        images: String,
    },
}

impl ImageSet {
    /// Reads `folder`; `labels` (default `folder/labels.jsonl` when it exists)
    /// must name exactly the images there.
    pub fn open(folder: &Path, labels: Option<&Path>) -> Result<Self, ImageSetError> {
        let entries = std::fs::read_dir(folder).map_err(|source| ImageSetError::Folder {
            path: folder.to_path_buf(),
            source,
        })?;
        let mut by_frame: BTreeMap<u64, PathBuf> = BTreeMap::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(stem) = image_stem(&path) else {
                continue;
            };
            if stem.ends_with("_mask") {
                continue;
            }
            let frame =
                trailing_number(&stem).ok_or_else(|| ImageSetError::Unnumbered(path.clone()))?;
            if let Some(first) = by_frame.insert(frame, path.clone()) {
                return Err(ImageSetError::Duplicate {
                    frame,
                    first,
                    second: path,
                });
            }
        }
        if by_frame.is_empty() {
            return Err(ImageSetError::Empty(folder.to_path_buf()));
        }
        let default_labels = folder.join("labels.jsonl");
        let labels = labels
            .map(Path::to_path_buf)
            .or_else(|| default_labels.is_file().then_some(default_labels));
        let labelled = match &labels {
            Some(path) => Some(read_labels(path)?),
            None => None,
        };
        if let (Some(path), Some(labelled)) = (&labels, &labelled) {
            check_coverage(folder, path, &by_frame, labelled)?;
        }
        let mut frames = Vec::with_capacity(by_frame.len());
        for (frame, image) in by_frame {
            let mask = image.with_file_name(format!(
                "{}_mask.png",
                image.file_stem().unwrap_or_default().to_string_lossy()
            ));
            let sample = |label: Option<&Label>| EvalFrame {
                frame,
                defect: label.map(|l| l.defect),
                kind: label.map(|l| l.kind.clone()),
                // A whole frame's mask; a cavity has none of its own.
                ground_truth_mask: (label.is_none_or(|l| l.cavity.is_none()) && mask.is_file())
                    .then(|| mask.clone()),
                cavity: label.and_then(|l| l.cavity),
                image: image.clone(),
            };
            match labelled.as_ref().and_then(|l| l.get(&frame)) {
                Some(labels) => frames.extend(labels.iter().map(|l| sample(Some(l)))),
                None => frames.push(sample(None)),
            }
        }
        Ok(ImageSet { frames })
    }

    pub fn labelled(&self) -> bool {
        self.frames.iter().all(|f| f.defect.is_some())
    }

    /// Whether the labels are per cavity.
    pub fn has_cavities(&self) -> bool {
        self.frames.iter().any(|f| f.cavity.is_some())
    }
}

fn image_stem(path: &Path) -> Option<String> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    matches!(ext.as_str(), "jpg" | "jpeg" | "png")
        .then(|| path.file_stem()?.to_str().map(str::to_string))
        .flatten()
}

fn trailing_number(stem: &str) -> Option<u64> {
    let digits = stem.len() - stem.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    stem[stem.len() - digits..].parse().ok()
}

/// frame -> its labels: one for the whole frame, or one per labelled cavity.
fn read_labels(path: &Path) -> Result<BTreeMap<u64, Vec<Label>>, ImageSetError> {
    let text = std::fs::read_to_string(path).map_err(|source| ImageSetError::LabelsFile {
        path: path.to_path_buf(),
        source,
    })?;
    let mut labels = BTreeMap::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let problem = |problem: String| ImageSetError::Label {
            path: path.to_path_buf(),
            line: i + 1,
            problem,
        };
        let row: serde_json::Value =
            serde_json::from_str(line).map_err(|e| problem(format!("not JSON: {e}")))?;
        let frame = row["frame"]
            .as_u64()
            .ok_or_else(|| problem("needs \"frame\": a whole number".into()))?;
        let read = |row: &serde_json::Value, cavity: Option<u16>| {
            let defect = match row["label"].as_str() {
                Some("defect") => true,
                Some("ok") => false,
                _ => return Err(problem("needs \"label\": \"ok\" or \"defect\"".into())),
            };
            let kind = row["kind"]
                .as_str()
                .unwrap_or(if defect { "defect" } else { "ok" });
            Ok(Label {
                cavity,
                defect,
                kind: kind.to_string(),
            })
        };
        let frame_labels = match row["cavities"].as_array() {
            None => vec![read(&row, None)?],
            Some(cavities) => {
                let mut list = Vec::with_capacity(cavities.len());
                for c in cavities {
                    let number = c["cavity"]
                        .as_u64()
                        .and_then(|n| u16::try_from(n).ok())
                        .filter(|n| *n >= 1)
                        .ok_or_else(|| {
                            problem(
                                "each of \"cavities\" needs \"cavity\": its number, from 1".into(),
                            )
                        })?;
                    if list.iter().any(|l: &Label| l.cavity == Some(number)) {
                        return Err(problem(format!("cavity {number} is labelled twice")));
                    }
                    list.push(read(c, Some(number))?);
                }
                list.sort_by_key(|l| l.cavity);
                list
            }
        };
        if labels.insert(frame, frame_labels).is_some() {
            return Err(problem(format!("frame {frame} is labelled twice")));
        }
    }
    Ok(labels)
}

fn check_coverage(
    folder: &Path,
    labels_path: &Path,
    images: &BTreeMap<u64, PathBuf>,
    labels: &BTreeMap<u64, Vec<Label>>,
) -> Result<(), ImageSetError> {
    let missing: Vec<String> = labels
        .keys()
        .filter(|f| !images.contains_key(f))
        .map(u64::to_string)
        .collect();
    if !missing.is_empty() {
        return Err(ImageSetError::LabelledButMissing {
            labels: labels_path.to_path_buf(),
            folder: folder.to_path_buf(),
            frames: abbreviate(&missing),
        });
    }
    let unlabelled: Vec<String> = images
        .iter()
        .filter(|(f, _)| !labels.contains_key(f))
        .map(|(_, p)| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    if !unlabelled.is_empty() {
        return Err(ImageSetError::Unlabelled {
            labels: labels_path.to_path_buf(),
            folder: folder.to_path_buf(),
            images: abbreviate(&unlabelled),
        });
    }
    Ok(())
}

fn abbreviate(items: &[String]) -> String {
    let shown = items
        .iter()
        .take(10)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > 10 {
        format!("{shown} and {} more", items.len() - 10)
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(files: &[&str], labels: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        std::fs::write(dir.path().join("labels.jsonl"), labels).unwrap();
        dir
    }

    #[test]
    fn frames_come_in_number_order_with_labels_and_masks() {
        let dir = folder(
            &[
                "frame_00002.jpg",
                "frame_00010.png",
                "frame_00002_mask.png",
                "notes.txt",
            ],
            "{\"frame\":10,\"label\":\"ok\",\"kind\":\"ok\"}\n{\"frame\":2,\"label\":\"defect\",\"kind\":\"gap\"}\n",
        );
        let set = ImageSet::open(dir.path(), None).unwrap();
        let frames: Vec<_> = set.frames.iter().map(|f| (f.frame, f.defect)).collect();
        assert_eq!(frames, [(2, Some(true)), (10, Some(false))]);
        assert!(set.frames[0].ground_truth_mask.is_some());
        assert!(set.frames[1].ground_truth_mask.is_none());
        assert!(set.labelled());
    }

    #[test]
    fn labels_and_images_must_match_one_to_one() {
        let dir = folder(
            &["a_1.jpg"],
            "{\"frame\":1,\"label\":\"ok\"}\n{\"frame\":7,\"label\":\"ok\"}\n",
        );
        let e = ImageSet::open(dir.path(), None).unwrap_err().to_string();
        assert!(
            e.contains("name frames with no image") && e.contains('7'),
            "{e}"
        );
        let dir = folder(&["a_1.jpg", "a_2.jpg"], "{\"frame\":1,\"label\":\"ok\"}\n");
        let e = ImageSet::open(dir.path(), None).unwrap_err().to_string();
        assert!(e.contains("have no line") && e.contains("a_2.jpg"), "{e}");
        let dir = folder(&["a_1.jpg"], "{\"frame\":1,\"label\":\"maybe\"}\n");
        let e = ImageSet::open(dir.path(), None).unwrap_err().to_string();
        assert!(
            e.contains("labels.jsonl:1") && e.contains("\"ok\" or \"defect\""),
            "{e}"
        );
    }
}
