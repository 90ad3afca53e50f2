//! The typed, validated configuration: every section as the rest of the
//! program sees it, after `validate` has checked it.

use std::path::PathBuf;
use std::time::Duration;

use super::genicam::GenicamSource;

/// Largest batch `[inference] max_batch` may ask for; also the default's cap
/// (one frame per camera, up to this).
pub const MAX_BATCH: usize = 64;
/// The default `max_batch` is one frame per camera, up to this.
pub const DEFAULT_BATCH_CAP: usize = 8;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file this came from; relative paths inside were resolved against its folder.
    pub path: PathBuf,
    /// The station's cameras, in the file's order: one unnamed camera for
    /// `[source]`, or one per `[cameras.NAME]` table. Never empty. One model
    /// pair (and one engine) judges them all.
    pub cameras: Vec<CameraConfig>,
    pub inference: InferenceConfig,
    pub segmentation: SegmentationModel,
    pub classifier: ClassifierModel,
    /// `[models] acceptance_images`: a labelled folder that new models must
    /// pass (`sealcheck evaluate --gate` rules) before a reload swaps them in.
    pub acceptance_images: Option<PathBuf>,
    /// `[decision]`: every camera's thresholds and deadline unless its own
    /// `decision` sub-table overrides them (`CameraConfig::decision`).
    pub decision: DecisionConfig,
    pub output: OutputConfig,
    pub logging: LoggingConfig,
    pub service: ServiceConfig,
    pub evaluate: EvaluateConfig,
    /// `[mqtt]`: verdicts to a broker; `None` when the section is absent.
    pub mqtt: Option<MqttConfig>,
    /// `[status]`: metrics, health and the status page over HTTP; `None` = off.
    pub status: Option<StatusConfig>,
    /// `[archive]`: images of judged frames kept on disk; `None` = off.
    pub archive: Option<ArchiveConfig>,
    /// `[shadow]`: a candidate model pair judging frames beside production,
    /// never touching a verdict; `None` = off.
    pub shadow: Option<ShadowConfig>,
    /// `[trigger]`: what a part is (every frame, or a PLC's trigger).
    pub trigger: super::TriggerConfig,
    /// `[modbus]`: the PLC's Modbus TCP server; `None` = off.
    pub modbus: Option<super::ModbusConfig>,
    /// `[opcua]`: the OPC UA server (Machine Vision); `None` = off.
    pub opcua: Option<super::OpcUaConfig>,
    /// `[recipes.NAME]` and `[recipe] start`: the products the line switches
    /// between; `None` = no recipes (the config's models and thresholds).
    pub recipes: Option<super::Recipes>,
}

/// `[shadow]`: what judges beside production. Every key left out is
/// production's: a missing model is production's file, a missing
/// `backend`/`device`/`precision` is `[inference]`'s.
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowConfig {
    pub segmentation: Option<PathBuf>,
    pub classifier: Option<PathBuf>,
    pub backend: Option<BackendChoice>,
    pub device: Option<ComputeDevice>,
    /// `int8` with ONNX Runtime runs the `_int8` files beside the models
    /// (as `sealcheck evaluate` does); with TensorRT, the engine precision.
    pub precision: Option<EnginePrecision>,
    /// Judge every Nth frame (by `seq`); 1 = every frame.
    pub every: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    /// GStreamer `videotestsrc`; `num_buffers` frames, then end of stream (0 = endless).
    Test {
        pattern: String,
        width: u32,
        height: u32,
        framerate: u32,
        num_buffers: u32,
    },
    /// Any file `decodebin` reads.
    File { path: PathBuf },
    /// A numbered image sequence, e.g. `frame_%05d.jpg`, read from index 0 up to
    /// the first missing file; each file decoded on its own (`capture::image_feeder`).
    Images { location: PathBuf, framerate: u32 },
    /// A V4L2 camera.
    V4l2 {
        device: PathBuf,
        caps: Option<String>,
    },
    /// An RTSP camera.
    Rtsp { url: String, latency_ms: u32 },
    /// A Jetson CSI camera through Argus (`nvarguscamerasrc`), converted out of
    /// NVMM memory by `nvvidconv`.
    Csi {
        sensor_id: u32,
        width: u32,
        height: u32,
        framerate: u32,
    },
    /// A raw `gst-launch` description ending in `appsink name=sink`; `live`
    /// (`[source] live = true`) makes it a camera: drops by default, recovers.
    Pipeline { description: String, live: bool },
    /// An industrial camera (GigE Vision, USB3 Vision) through Aravis' `aravissrc`.
    Genicam(GenicamSource),
}

impl SourceKind {
    pub fn name(&self) -> &'static str {
        match self {
            SourceKind::Test { .. } => "test",
            SourceKind::File { .. } => "file",
            SourceKind::Images { .. } => "images",
            SourceKind::V4l2 { .. } => "v4l2",
            SourceKind::Rtsp { .. } => "rtsp",
            SourceKind::Csi { .. } => "csi",
            SourceKind::Pipeline { .. } => "pipeline",
            SourceKind::Genicam(_) => "genicam",
        }
    }

    /// A camera that sends a frame only when triggered (`kind = "genicam"`
    /// with `trigger` other than "off"): no frame for a while is no fault.
    pub fn is_triggered(&self) -> bool {
        matches!(self, SourceKind::Genicam(g) if g.trigger != super::genicam::GenicamTrigger::Off)
    }

    /// The frame size the config fixes (`test`, `csi`): what a cavity
    /// layout is checked against before the first frame; `None` where only
    /// the camera or the files know it.
    pub fn frame_size(&self) -> Option<(u32, u32)> {
        match self {
            SourceKind::Test { width, height, .. } | SourceKind::Csi { width, height, .. } => {
                Some((*width, *height))
            }
            _ => None,
        }
    }

    /// Live sources drop frames by default; stored ones apply backpressure.
    pub fn is_live(&self) -> bool {
        matches!(
            self,
            SourceKind::V4l2 { .. }
                | SourceKind::Rtsp { .. }
                | SourceKind::Csi { .. }
                | SourceKind::Genicam(_)
                | SourceKind::Pipeline { live: true, .. }
        )
    }
}

/// What capture does when every frame slot is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowPolicy {
    /// Wait for a free slot (backpressure into GStreamer).
    Block,
    /// Drop the new frame; it still gets a `fail`/`not_inspected` result.
    Drop,
}

/// One camera of the station.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraConfig {
    /// `NAME` of `[cameras.NAME]`: the camera's id in result lines, MQTT
    /// topics, archive folders, metrics and the journal. `None` for the one
    /// camera of `[source]` (lines and topics then stay as before).
    pub name: Option<String>,
    pub source: SourceConfig,
    /// `[decision]` with this camera's `decision` sub-table applied.
    pub decision: DecisionConfig,
}

impl CameraConfig {
    /// The name as logs and the status page show it (`source` for `[source]`).
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or("source")
    }
}

impl Config {
    /// The first camera's source (the only one with `[source]`): what the
    /// warm-up sizes its frames from, and what `bench` replays.
    pub fn first_source(&self) -> &SourceConfig {
        &self.cameras[0].source
    }

    /// Whether the cameras are named (`[cameras.*]`): lines then carry `camera`.
    pub fn has_named_cameras(&self) -> bool {
        self.cameras.iter().any(|c| c.name.is_some())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SourceConfig {
    pub kind: SourceKind,
    pub overflow: OverflowPolicy,
    /// Number of preallocated frame slots (and ring capacity).
    pub pool_size: usize,
    /// How a live source is brought back after it is lost.
    pub recovery: SourceRecovery,
    /// `layout`: the cavities of one machine cycle in each frame, each
    /// judged on its own; `None`: the frame is one seal.
    pub layout: Option<std::sync::Arc<super::layout::CavityLayout>>,
}

/// Recovery of a live source inside the process (`[source] retry_min_ms`,
/// `retry_max_ms`, `frame_timeout_ms`): on an error, end-of-stream or a frozen
/// stream the source's pipeline is rebuilt, waiting `retry_min` after the loss
/// and doubling up to `retry_max` between failed tries. Finite sources (file,
/// images, test) never recover: their end-of-stream ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRecovery {
    pub retry_min: Duration,
    pub retry_max: Duration,
    /// No frame for this long (no error, no end-of-stream) means the source is
    /// frozen; `None`: ten frame intervals of the negotiated rate, at least 1 s.
    pub frame_timeout: Option<Duration>,
}

impl Default for SourceRecovery {
    fn default() -> Self {
        SourceRecovery {
            retry_min: Duration::from_millis(500),
            retry_max: Duration::from_secs(10),
            frame_timeout: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    Auto,
    TensorRt,
    OnnxRuntime,
    Tract,
}

impl BackendChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::TensorRt => "tensorrt",
            BackendChoice::OnnxRuntime => "onnxruntime",
            BackendChoice::Tract => "tract",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputeDevice {
    Cpu,
    Cuda,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InferenceConfig {
    pub backend: BackendChoice,
    /// Where ONNX Runtime runs (`cpu` or `cuda`).
    pub device: ComputeDevice,
    /// Where preprocessing runs.
    pub preprocess: ComputeDevice,
    /// Intra-op threads for the inference engine (0 = engine default).
    pub threads: usize,
    /// Batches a GPU device path may keep on its stream at once (1 or 2; a
    /// batch is one frame without batching): 2 stages the next batch while
    /// the GPU works when frames queue up.
    pub frames_in_flight: usize,
    /// Most frames judged in one engine run (`max_batch`; default: one per
    /// camera, up to `DEFAULT_BATCH_CAP`). Used only with models whose batch
    /// dimension is dynamic; batch-1 models judge one frame after another.
    pub max_batch: usize,
    /// Longest the inference stage waits for more frames to fill a batch
    /// (`batch_wait_us`; zero: take what is ready, never wait).
    pub batch_wait: Duration,
    /// `[inference] zero_copy`: on the device path, ring slots are mapped
    /// page-locked memory that the frame kernel reads in place (no upload).
    /// `None` (not given): on where the GPU shares the host's memory
    /// (`CU_DEVICE_ATTRIBUTE_INTEGRATED`: a Jetson), off on a discrete GPU,
    /// where the slots are page-locked and uploaded on a stream of their own.
    pub zero_copy: Option<bool>,
    /// `[inference] precision` for ONNX Runtime: `fp16` runs the `_fp16`
    /// files beside the named models (`fp16_sibling`; the paths in
    /// `segmentation`/`classifier` are already those files).
    pub precision: EnginePrecision,
    /// Path of `libonnxruntime.so`, if the config names one.
    pub onnxruntime_library: Option<PathBuf>,
    /// TensorRT engine building, `[inference.tensorrt]`.
    pub tensorrt: TensorRtConfig,
    /// ONNX Runtime session settings, `[inference.onnxruntime]`.
    pub onnxruntime: OnnxRuntimeConfig,
}

/// ONNX Runtime's graph optimisation level (`graph_optimization`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphOptimization {
    Disable,
    Basic,
    Extended,
    All,
}

/// How ONNX Runtime's CUDA memory arena grows (`cuda_arena_extend_strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArenaExtend {
    /// Doubles: fewer allocations, more memory held.
    NextPowerOfTwo,
    /// Exactly what is asked: tight, for a Jetson's shared memory.
    SameAsRequested,
}

/// How cuDNN picks convolution algorithms (`cudnn_conv_algo_search`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvAlgoSearch {
    /// Tries them all on the first run: slower start, fastest after.
    Exhaustive,
    Heuristic,
    Default,
}

/// `[inference.onnxruntime]`. Intra-op threads are `[inference] threads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnnxRuntimeConfig {
    pub graph_optimization: GraphOptimization,
    /// Plan the models' intermediate buffers once (the shapes are fixed) and
    /// reuse the plan every run.
    pub memory_pattern: bool,
    pub cuda_arena_extend_strategy: ArenaExtend,
    /// CUDA arena limit in MiB; 0 = no limit.
    pub cuda_mem_limit_mib: u64,
    pub cudnn_conv_algo_search: ConvAlgoSearch,
    /// TF32 convolutions and matmuls on Ampere and newer: faster, but a 10-bit
    /// mantissa (the demo classifier's logits moved 2.2e-3 relative on an H100,
    /// over the 1e-3 parity limit), so off unless asked for.
    pub cuda_tf32: bool,
    /// GPU device path only: ONNX Runtime records each model's kernel
    /// launches once as a CUDA graph and replays it (the models' tensors stay
    /// at fixed addresses there), saving the per-kernel launch cost: 2.3x the
    /// frames per second of the demo models on an H100, parity unchanged.
    pub cuda_graph: bool,
    /// cuDNN convolutions in NHWC layout, which some GPUs run faster.
    pub cuda_prefer_nhwc: bool,
}

impl Default for OnnxRuntimeConfig {
    fn default() -> Self {
        OnnxRuntimeConfig {
            graph_optimization: GraphOptimization::All,
            memory_pattern: true,
            cuda_arena_extend_strategy: ArenaExtend::NextPowerOfTwo,
            cuda_mem_limit_mib: 0,
            cudnn_conv_algo_search: ConvAlgoSearch::Exhaustive,
            cuda_tf32: false,
            cuda_graph: true,
            cuda_prefer_nhwc: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnginePrecision {
    Fp32,
    Fp16,
    Int8,
}

impl EnginePrecision {
    pub fn as_str(self) -> &'static str {
        match self {
            EnginePrecision::Fp32 => "fp32",
            EnginePrecision::Fp16 => "fp16",
            EnginePrecision::Int8 => "int8",
        }
    }
}

impl ComputeDevice {
    pub fn as_str(self) -> &'static str {
        match self {
            ComputeDevice::Cpu => "cpu",
            ComputeDevice::Cuda => "cuda",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TensorRtConfig {
    pub precision: EnginePrecision,
    /// Builder workspace limit.
    pub workspace_mib: u64,
    /// Where engines are cached; `None`: `$STATE_DIRECTORY/engines` under
    /// systemd, else `engines/` next to the segmentation model.
    pub engine_dir: Option<PathBuf>,
    /// Typical frames for INT8 calibration (required for `int8`).
    pub calibration_images: Option<PathBuf>,
    /// CUDA device ordinal.
    pub device: usize,
}

/// Mean and standard deviation per channel, applied after x / 255.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalization {
    pub mean: [f32; 3],
    pub std: [f32; 3],
}

#[derive(Debug, Clone, PartialEq)]
pub struct SegmentationModel {
    pub path: PathBuf,
    pub input: String,
    pub output: String,
    pub normalization: Normalization,
    /// Class index of the seal in the logits.
    pub mask_class: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClassifierModel {
    pub path: PathBuf,
    pub input: String,
    pub output: String,
    pub normalization: Normalization,
    pub mask_mean: f32,
    pub mask_std: f32,
    /// Class index of "defective" in the logits.
    pub defect_class: usize,
}

/// What `sealcheck evaluate --gate` demands of a candidate, against the
/// reference engine on the same frames, and of every engine, the reference
/// included, against the labels (`[evaluate]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvaluateConfig {
    /// Mean seal-mask IoU with the reference's masks, at least.
    pub min_mean_mask_iou: f64,
    /// Defect recall against the labels may fall this far below the reference's.
    pub recall_tolerance: f64,
    /// Wrong verdicts against the labels beyond the reference's count that are allowed.
    pub extra_label_errors: u64,
    /// Floors against the labels, for every engine: the rules above only
    /// compare with the reference, which is no check when the reference runs
    /// the same wrong models. `0` turns a `min_` floor off, `1` the
    /// `max_` one (no engine can be outside them then).
    pub min_accuracy: f64,
    pub min_defect_recall: f64,
    pub max_false_reject_rate: f64,
}

/// Thresholds an operator tunes; applied at once on reload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecisionConfig {
    /// Fail when softmax(logits)[defect_class] >= this.
    pub defect_threshold: f64,
    /// Below this mask area fraction there is no seal (reason `no_seal`).
    pub no_seal_below: f64,
    /// Seal area fraction must lie in [min, max] (else reason `seal_area`).
    pub min_seal_area: f64,
    pub max_seal_area: f64,
    /// Per-part deadline from capture (`deadline_ms`; `None` = off): a part
    /// without a verdict by then is failed on the line with reason `late`.
    pub deadline: Option<Duration>,
}

impl DecisionConfig {
    /// What an empty `[decision]` means.
    pub const DEFAULT: DecisionConfig = DecisionConfig {
        defect_threshold: 0.5,
        no_seal_below: 0.005,
        min_seal_area: 0.01,
        max_seal_area: 0.9,
        deadline: None,
    };
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutputConfig {
    /// JSON lines, one per frame, appended.
    pub results: PathBuf,
    /// Flush the results file after every line (else on a short timer and at exit).
    pub flush_each_line: bool,
    /// Log every verdict as a structured line (at info for fails, debug for passes).
    pub log_verdicts: bool,
    /// When the results file reaches `max_mib` it is renamed `<results>.1`
    /// (older ones shift up, `<results>.<keep_files>` is the oldest kept).
    pub rotation: ResultsRotation,
}

/// Size-based rotation of the results file, so months of frames cannot fill the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultsRotation {
    /// Rotate once the file holds this many MiB; 0 = never.
    pub max_mib: u64,
    /// Rotated files kept.
    pub keep_files: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Logfmt,
    Json,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LoggingConfig {
    pub format: LogFormat,
    /// Default filter when `RUST_LOG` is unset, e.g. `info` or `sealcheck=debug`.
    pub level: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServiceConfig {
    /// On SIGTERM/SIGINT, how long frames in flight may take to finish.
    pub drain_timeout: Duration,
    /// A pipeline that moves no frame for this long while the source says it
    /// is streaming is stalled: watchdog pings stop.
    pub stall_timeout: Duration,
}

/// Where an MQTT broker is and how to reach it (`[mqtt]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttBroker {
    pub host: String,
    pub port: u16,
    /// `mqtts://`: TLS, trusting the certificates in this PEM file.
    pub tls_ca_file: Option<PathBuf>,
}

impl MqttBroker {
    /// `mqtt://host:port` or `mqtts://host:port`, for messages.
    pub fn url(&self) -> String {
        let scheme = if self.tls_ca_file.is_some() {
            "mqtts"
        } else {
            "mqtt"
        };
        format!("{scheme}://{}:{}", self.host, self.port)
    }
}

/// `[mqtt]`: verdicts published to a broker, one message per part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttConfig {
    pub broker: MqttBroker,
    pub client_id: String,
    /// Verdicts go to `<topic>/verdict`, availability to `<topic>/status`.
    pub topic: String,
    /// 0 (at most once) or 1 (at least once, acknowledged by the broker).
    pub qos: u8,
    pub username: Option<String>,
    /// A file holding the password, readable only by the service; read at start.
    pub password_file: Option<PathBuf>,
    /// This client's certificate and key, for a broker that asks for one
    /// (mutual TLS; `cert_file` and `key_file`, with mqtts:// only).
    pub client_certificate: Option<ClientCertificate>,
    pub keep_alive: Duration,
    /// Verdicts that may wait to be sent; when full, the oldest is dropped (counted).
    pub queue: usize,
}

/// A client certificate for mutual TLS with the broker (`[mqtt] cert_file`, `key_file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    /// PEM: this client's certificate, then any intermediate authorities.
    pub cert_file: PathBuf,
    /// PEM: its private key (PKCS#8, PKCS#1 or SEC1), readable only by the service.
    pub key_file: PathBuf,
}

/// `[status]`: the HTTP server for Prometheus, health checks and the operators' page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusConfig {
    /// Address and port to listen on; the template's is loopback only
    /// (another address has to be written out).
    pub listen: std::net::SocketAddr,
}

/// Which judged frames `[archive]` keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKeep {
    /// Failed frames only (every reason with a picture: defect, no_seal, seal_area, error).
    Fail,
    /// Every inspected frame.
    All,
    /// Nothing (the section stays in the file, the archive is off).
    None,
}

impl ArchiveKeep {
    pub fn as_str(self) -> &'static str {
        match self {
            ArchiveKeep::Fail => "fail",
            ArchiveKeep::All => "all",
            ArchiveKeep::None => "none",
        }
    }
}

/// How archived frames are encoded; masks are always PNG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Jpeg,
    Png,
}

impl ImageFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "jpg",
            ImageFormat::Png => "png",
        }
    }
}

/// `[archive]`: frames (and their masks) under `dir/YYYY-MM-DD/HH/`, a daily
/// manifest of SHA-256 hashes, oldest hours deleted first at the limits.
/// Applies on reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveConfig {
    pub dir: PathBuf,
    pub keep: ArchiveKeep,
    pub format: ImageFormat,
    /// The archive folder never holds more than this many MiB.
    pub max_mib: u64,
    /// Oldest hours go (and new frames are dropped) when the disk's free space
    /// would fall under this many MiB.
    pub min_free_mib: u64,
}
