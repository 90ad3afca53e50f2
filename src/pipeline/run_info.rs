//! What `/metrics` and the status page say about a run: backend, source,
//! cameras and the models' files and ids.

use crate::config::Config;
use crate::line::ModelIds;
use crate::status::RunInfo;

/// What `/metrics` and the page say about this run: backend, source, model ids.
pub(super) fn run_info(config: &Config, ids: &ModelIds, backend: &str) -> RunInfo {
    RunInfo {
        backend: backend.to_string(),
        source: config.first_source().kind.name().to_string(),
        cameras: config.cameras.iter().map(|c| c.name.clone()).collect(),
        models: model_info(config, ids),
    }
}

/// Role, file name and id of each of the config's models. The ids are the
/// ones results and MQTT carry (hashed once per start or swap): hashing the
/// files again costs a second read of each model, and a file changed in
/// between would make the page name other bytes than the results do.
pub(super) fn model_info(config: &Config, ids: &ModelIds) -> Vec<(&'static str, String, String)> {
    let model = |role: &'static str, path: &std::path::Path, id: &str| {
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        (role, file, id.to_string())
    };
    vec![
        model("segmentation", &config.segmentation.path, &ids.segmentation),
        model("classifier", &config.classifier.path, &ids.classifier),
    ]
}
