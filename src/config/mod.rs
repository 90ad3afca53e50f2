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
//! - `opcua`: `[opcua]` (the OPC UA server, Machine Vision companion specification);
//! - `recipes`: `[recipes.NAME]`, the products a line switches between;
//! - `layout`: a camera's cavities (`[source.layout]`) and the rules on them;
//! - `image_sequence`: the numbered files of an image-sequence source;
//! - `suggest`: "did you mean" for a misspelt key, section or value.
//!
//! A key of an existing section is added in three places:
//! 1. its field, with a doc comment, in the section's type: `types` (`[trigger]`
//!    and `[modbus]`: `parts`; a `kind = "genicam"` source: `genicam`);
//! 2. its reader, `validate/<section>.rs`: one read before `s.finish()`
//!    (`Section::int_in`, `choice`, `str_or`, ...: each records its own problems;
//!    a key read only when given asks `Section::given`, so it stays an allowed
//!    key), and the field where that reader builds the section;
//! 3. the template, `config/sealcheck.toml`: the key, set or commented out, and
//!    what it does. `tests/config.rs`
//!    (`the_template_names_every_key_the_config_reads_and_no_other`) fails
//!    while the template and the readers disagree, either way.
//!
//! `raw` changes only for a kind of value no `Section` method reads yet. A new
//! section also needs its `mod` line in `validate` and one read plus one field
//! in `validate/document.rs`'s `read_config` (the one list of sections).

mod camera_name;
mod error;
mod genicam;
mod image_sequence;
mod layout;
mod model_files;
mod opcua;
mod parts;
mod raw;
mod recipes;
mod suggest;
mod types;
mod validate;

pub use camera_name::{
    CAMERA_NAME_MAX, RESERVED_CAMERA_NAMES, camera_name_problem, looks_like_a_day,
};
pub use error::{ConfigError, ConfigProblem, EXIT_CONFIG};
pub use genicam::{CameraValue, GenicamPixelFormat, GenicamSource, GenicamTrigger, parse_features};
pub use image_sequence::image_file;
pub use layout::{CavityLayout, CavityRect, LayoutMisfit, MAX_CAVITIES};
pub use model_files::{fp16_sibling, int8_sibling};
pub use opcua::OpcUaConfig;
pub use parts::{DEFAULT_FRAME_WAIT_MS, ModbusConfig, TriggerConfig, TriggerMode};
pub use recipes::{CameraSettings, DecisionOverrides, MAX_RECIPE_ID, Recipe, Recipes};
pub use types::{
    ArchiveConfig, ArchiveKeep, ArenaExtend, BackendChoice, CameraConfig, ClassifierModel,
    ClientCertificate, ComputeDevice, Config, ConvAlgoSearch, DEFAULT_BATCH_CAP, DecisionConfig,
    EnginePrecision, EvaluateConfig, GraphOptimization, ImageFormat, InferenceConfig, LogFormat,
    LoggingConfig, MAX_BATCH, MqttBroker, MqttConfig, Normalization, OnnxRuntimeConfig,
    OutputConfig, OverflowPolicy, ResultsRotation, SegmentationModel, ServiceConfig, ShadowConfig,
    SourceConfig, SourceKind, SourceRecovery, StatusConfig, TensorRtConfig,
};
pub use validate::{load, parse};
