//! The second stage as a whole: the file read, every section handed to its
//! reader, and the typed `Config` assembled only when no section had a problem.
//! Every path is resolved against the config file's folder and every file
//! checked to exist.
//!
//! `read_config` is the one list of sections. Each reader reads its table on
//! its own, records every problem it finds (`raw::Problems`) and returns
//! `None` if it found one; a reader never stops another, so the operator sees
//! every problem of the file at once. Only then is `Config` assembled, each
//! field with `?`, as the readers assemble their own sections. A section the
//! file may leave out (`[mqtt]`, `[status]`, ...) is read with
//! `Section::optional`: `Some(None)` is off, `None` a problem.

use std::path::Path;

use toml::de::DeTable;

use super::cameras::read_cameras;
use super::decision::read_decision;
use super::evaluate::read_evaluate;
use super::files::Files;
use super::inference::{read_inference, with_default_batch};
use super::models::{precision_files, read_acceptance_images, read_classifier, read_segmentation};
use super::mqtt::read_mqtt;
use super::outputs::{read_archive, read_output, read_status};
use super::parts::read_parts;
use super::recipes::read_recipes;
use super::service::{read_logging, read_service};
use super::shadow::read_shadow;
use crate::config::error::ConfigError;
use crate::config::raw::{Problems, Section};
use crate::config::types::Config;

/// Reads and validates a config file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    parse(&text, path)
}

/// Validates config text as if it were read from `path` (relative paths resolve
/// against `path`'s folder). Returns every problem found, not just the first.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let invalid = |problems| ConfigError::Invalid {
        path: path.to_path_buf(),
        problems,
    };
    let problems = Problems::new(text);
    let doc = match DeTable::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            problems.at(
                e.span(),
                "",
                format!("TOML syntax error: {}", e.message().trim()),
            );
            return Err(invalid(problems.into_vec()));
        }
    };
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let root = Section::root(&doc, &problems);
    let config = read_config(&root, &Files { base: &base }, path);
    match config {
        Some(config) if problems.is_empty() => Ok(config),
        _ => Err(invalid(problems.into_vec())),
    }
}

/// Every section, read in this order (problems at one place keep it), then
/// the rules between sections, then the keys nobody read at the top level;
/// `Config` is assembled last, `None` if any section had a problem.
fn read_config(root: &Section, files: &Files, path: &Path) -> Option<Config> {
    let decision = read_decision(&root.section("decision"), None);
    let cameras = read_cameras(root, files, decision.as_ref());
    let inference = read_inference(&root.section("inference"), files);
    let models = root.section("models");
    let segmentation = read_segmentation(&models.section("segmentation"), files);
    let classifier = read_classifier(&models.section("classifier"), files);
    let acceptance_images = read_acceptance_images(&models, files);
    models.finish();
    let output = read_output(&root.section("output"), files);
    let logging = read_logging(&root.section("logging"));
    let service = read_service(&root.section("service"));
    let evaluate = read_evaluate(&root.section("evaluate"));
    let mqtt = root.optional("mqtt", |s| read_mqtt(s, files));
    let status = root.optional("status", read_status);
    let archive = root.optional("archive", |s| read_archive(s, files));
    let shadow = root.optional("shadow", |s| read_shadow(s, files, inference.as_ref()));
    let (trigger, modbus) = read_parts(root);
    let opcua = root.optional("opcua", |s| super::opcua::read_opcua(s, files));
    let recipes = read_recipes(root, files, cameras.as_deref());
    // Rules between sections: the batch follows the cameras, the precision picks the files.
    let inference = inference.map(|i| with_default_batch(i, cameras.as_ref().map(Vec::len)));
    let (segmentation, classifier) =
        precision_files(&models, inference.as_ref(), segmentation, classifier);
    root.finish();
    Some(Config {
        path: path.to_path_buf(),
        cameras: cameras?,
        inference: inference?,
        segmentation: segmentation?,
        classifier: classifier?,
        acceptance_images: acceptance_images?,
        decision: decision?,
        output: output?,
        logging: logging?,
        service: service?,
        evaluate: evaluate?,
        mqtt: mqtt?,
        status: status?,
        archive: archive?,
        shadow: shadow?,
        trigger: trigger?,
        modbus: modbus?,
        opcua: opcua?,
        recipes: recipes?,
    })
}
