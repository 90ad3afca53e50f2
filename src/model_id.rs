//! Which models judged a part: the first 12 hex digits of each model file's
//! SHA-256, in every line message and results-file line, so a verdict can be
//! traced to the exact files (the same short form the TensorRT engine cache
//! prints for an ONNX digest).

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::config::{Config, Recipe};

/// Hex digits kept of each digest.
pub const ID_LEN: usize = 12;

/// Serialized as `{"segmentation":"…","classifier":"…"}`, in that order.
/// The recipe rides along unserialized: the output stage writes its name
/// as a key of its own (`"recipe"`), and decides with its thresholds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelIds {
    pub segmentation: String,
    pub classifier: String,
    /// The recipe these models were taken for (`[recipes.NAME]`); `None`
    /// without recipes. Set where the models are taken, so every frame
    /// they judge names it.
    #[serde(skip)]
    pub recipe: Option<Arc<Recipe>>,
}

impl ModelIds {
    /// Hashes the config's model files. A file that cannot be read (it was
    /// read moments ago to load the model) gets the id `unreadable`, logged.
    pub fn of(config: &Config) -> ModelIds {
        ModelIds {
            segmentation: id_or_unreadable(&config.segmentation.path),
            classifier: id_or_unreadable(&config.classifier.path),
            recipe: None,
        }
    }

    /// These ids, taken for `recipe`.
    pub fn for_recipe(self, recipe: Option<Arc<Recipe>>) -> ModelIds {
        ModelIds { recipe, ..self }
    }

    /// The recipe's name, if these models were taken for one.
    pub fn recipe_name(&self) -> Option<&str> {
        self.recipe.as_deref().map(|r| &*r.name)
    }
}

fn id_or_unreadable(path: &Path) -> String {
    model_id(path).unwrap_or_else(|e| {
        log::error!(target: "sealcheck::line", model = path.display().to_string().as_str(), error = e.to_string().as_str();
            "cannot read the model file to compute its id; results say \"unreadable\"");
        "unreadable".to_string()
    })
}

/// The first `ID_LEN` hex digits of the file's SHA-256.
pub fn model_id(path: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    let mut hex = format!("{:x}", hasher.finalize());
    hex.truncate(ID_LEN);
    Ok(hex)
}

/// Lower-case hex SHA-256 of `bytes`: how every digest sealcheck writes is
/// spelled (model ids, the archive manifest's chain, TensorRT engine keys).
pub fn sha256_hex(bytes: &[u8]) -> String {
    // The digest's array prints itself as lower-case hex, two digits a byte.
    format!("{:x}", Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_the_sha256_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.onnx");
        std::fs::write(&path, b"abc").unwrap();
        // sha256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
        assert_eq!(model_id(&path).unwrap(), "ba7816bf8f01");
    }

    #[test]
    fn sha256_hex_is_the_lower_case_digest() {
        // FIPS 180-2's examples: "abc" and the empty message.
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    /// The ids' JSON (inside every result line and MQTT message), pinned as it
    /// was when it was still written by hand.
    #[test]
    fn ids_json_bytes_are_pinned() {
        let ids = ModelIds {
            segmentation: "0123456789ab".into(),
            classifier: "unreadable".into(),
            recipe: None,
        };
        let s = serde_json::to_string(&ids).unwrap();
        assert_eq!(
            s,
            "{\"segmentation\":\"0123456789ab\",\"classifier\":\"unreadable\"}"
        );
    }
}
