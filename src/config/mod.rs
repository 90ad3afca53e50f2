//! Configuration in two stages, as ripgrep does: `raw` mirrors the TOML file
//! (with spans, for error messages), `validate` turns it into the typed `Config`
//! (`types`), which is all the rest of the program sees.
//!
//! - `types`: the typed sections (`Config` and everything under it);
//! - `raw`: the TOML document read key by key, every problem recorded;
//! - `validate`: each section's reader, the document as a whole (`load`, `parse`);
//! - `error`: `ConfigError`, `ConfigProblem` and the exit status they end in;
//! - `genicam`: the typed `kind = "genicam"` source (industrial cameras);
//! - `camera_name`: the rule for `[cameras.NAME]`;
//! - `model_files`: the FP16 and INT8 files beside a model;
//! - `parts`: `[trigger]` (what a part is) and `[modbus]` (the PLC's server);
//! - `image_sequence`: the numbered files of an image-sequence source.

mod camera_name;
mod error;
mod genicam;
mod image_sequence;
mod model_files;
mod parts;
mod raw;
mod types;
mod validate;

pub use camera_name::{
    CAMERA_NAME_MAX, RESERVED_CAMERA_NAMES, camera_name_problem, looks_like_a_day,
};
pub use error::{ConfigError, ConfigProblem, EXIT_CONFIG};
pub use genicam::{CameraValue, GenicamPixelFormat, GenicamSource, GenicamTrigger, parse_features};
pub use image_sequence::image_file;
pub use model_files::{fp16_sibling, int8_sibling};
pub use parts::{DEFAULT_FRAME_WAIT_MS, ModbusConfig, TriggerConfig, TriggerMode};
pub use types::{
    ArchiveConfig, ArchiveKeep, ArenaExtend, BackendChoice, CameraConfig, ClassifierModel,
    ClientCertificate, ComputeDevice, Config, ConvAlgoSearch, DEFAULT_BATCH_CAP, DecisionConfig,
    EnginePrecision, EvaluateConfig, GraphOptimization, ImageFormat, InferenceConfig, LogFormat,
    LoggingConfig, MAX_BATCH, MqttBroker, MqttConfig, Normalization, OnnxRuntimeConfig,
    OutputConfig, OverflowPolicy, ResultsRotation, SegmentationModel, ServiceConfig, ShadowConfig,
    SourceConfig, SourceKind, SourceRecovery, StatusConfig, TensorRtConfig,
};
pub use validate::{load, parse};
