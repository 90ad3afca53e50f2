//! The second stage as a whole: the file read, every section handed to its
//! reader, and the typed `Config` assembled only when no section had a problem.
//! Every path is resolved against the config file's folder and every file
//! checked to exist.

use std::path::Path;

use toml::de::DeTable;

use super::cameras::read_cameras;
use super::decision::read_decision;
use super::evaluate::read_evaluate;
use super::files::Files;
use super::inference::read_inference;
use super::models::{fp16_model, read_classifier, read_segmentation};
use super::mqtt::read_mqtt;
use super::outputs::{read_archive, read_output, read_status};
use super::parts::{read_modbus, read_trigger};
use super::service::{read_logging, read_service};
use super::shadow::read_shadow;
use crate::config::error::ConfigError;
use crate::config::raw::{Problems, Section};
use crate::config::types::{
    ClassifierModel, Config, DEFAULT_BATCH_CAP, EnginePrecision, SegmentationModel,
};

/// Reads and validates a config file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
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
    let files = Files { base: &base };

    let decision = read_decision(&root.section("decision"), None);
    let cameras = read_cameras(&root, &files, decision.as_ref());
    let inference = read_inference(&root.section("inference"), &files);
    let models = root.section("models");
    let segmentation = read_segmentation(&models.section("segmentation"), &files);
    let classifier = read_classifier(&models.section("classifier"), &files);
    let acceptance_images = models.opt_str("acceptance_images").and_then(|dir| {
        let dir = files.resolve(&dir);
        if dir.is_dir() {
            Some(dir)
        } else {
            models.problem("acceptance_images", format!("folder {} does not exist (relative paths resolve against the config file's folder); it holds labelled frames new models must pass on reload", dir.display()));
            None
        }
    });
    models.finish();
    let output = read_output(&root.section("output"), &files);
    let logging = read_logging(&root.section("logging"));
    let service = read_service(&root.section("service"));
    let evaluate = read_evaluate(&root.section("evaluate"));
    let mqtt = root
        .has("mqtt")
        .then(|| read_mqtt(&root.section("mqtt"), &files));
    let status = read_status(&root, "status");
    let archive = read_archive(&root, "archive", &files);
    let shadow = read_shadow(&root, "shadow", &files, inference.as_ref());
    let trigger = read_trigger(&root.section("trigger"));
    let modbus = read_modbus(&root, "modbus");
    if let (Some(Some(_)), Some(t)) = (&modbus, &trigger)
        && t.mode == crate::config::TriggerMode::Free
    {
        root.section("trigger").problem(
            "mode",
            "[modbus] serves a PLC its parts: set [trigger] mode = \"plc\" (the PLC triggers) or \"camera\" (the camera's input line triggers), or remove [modbus]",
        );
    }
    let inference = inference.map(|mut inference| {
        if inference.max_batch == 0 {
            let cameras = cameras.as_ref().map_or(1, Vec::len);
            inference.max_batch = cameras.clamp(1, DEFAULT_BATCH_CAP);
        }
        inference
    });
    let (segmentation, classifier) = match &inference {
        Some(i) if i.precision == EnginePrecision::Fp16 => (
            segmentation.and_then(|m| {
                fp16_model(&models, "segmentation", m.path.clone())
                    .map(|path| SegmentationModel { path, ..m })
            }),
            classifier.and_then(|m| {
                fp16_model(&models, "classifier", m.path.clone())
                    .map(|path| ClassifierModel { path, ..m })
            }),
        ),
        _ => (segmentation, classifier),
    };
    root.finish();

    match (
        cameras,
        inference,
        segmentation,
        classifier,
        decision,
        output,
        logging,
        service,
        evaluate,
    ) {
        (
            Some(cameras),
            Some(inference),
            Some(segmentation),
            Some(classifier),
            Some(decision),
            Some(output),
            Some(logging),
            Some(service),
            Some(evaluate),
        ) if problems.is_empty()
            && !matches!(mqtt, Some(None))
            && status.is_some()
            && archive.is_some()
            && shadow.is_some()
            && trigger.is_some()
            && modbus.is_some() =>
        {
            Ok(Config {
                path: path.to_path_buf(),
                cameras,
                inference,
                segmentation,
                classifier,
                decision,
                output,
                logging,
                service,
                evaluate,
                acceptance_images,
                mqtt: mqtt.flatten(),
                status: status.flatten(),
                archive: archive.flatten(),
                shadow: shadow.flatten(),
                trigger: trigger.unwrap_or_default(),
                modbus: modbus.flatten(),
            })
        }
        _ => Err(invalid(problems.into_vec())),
    }
}
