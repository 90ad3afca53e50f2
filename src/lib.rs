//! sealcheck: camera-to-decision seal inspection.
//!
//! Where a frame goes, in order (each stage owns its thread):
//!
//! ```text
//! capture (GStreamer appsink) --ring::frame_ring--> preprocess --channel--> infer
//!     --channel--> decision + output (results file, log line) --recycle--> preprocess
//!
//! device mode (preprocess = "cuda", GPU engine): preprocess + infer are one thread,
//! capture --ring--> infer::device_stage (preprocess::gpu kernels + engine on one
//!     CUDA stream, infer::device_runner; the engine chosen by infer::engine_choice)
//!     --channel--> decision + output
//!
//! the stage that reads the rings reads them through trigger::PartRings: every
//! frame is a part in free (and camera) mode; in plc mode a frame goes on only
//! when a PLC's trigger claims it, the others go back to capture unjudged
//! ```
//!
//! Every path that judges frames (the host infer thread, the device thread,
//! the shadow) runs the one frame loop, `infer::batcher::Batcher`: it
//! gathers a batch from the rings or a channel, waits at most
//! `batch_wait_us`, passes markers on after their batch, and changes models
//! only between batches. A path says only what it
//! does with a batch (`infer::batcher::BatchPath`): `infer::host_stage`,
//! `infer::device_stage`, `shadow::judge`; each source (`frame::FrameSource`)
//! is implemented beside its type (the stage channel in `frame`, the
//! cameras' rings in `trigger::rings`, the shadow's hand-over in
//! `shadow::judge`). Every stage thread, the device thread too, is started
//! in `pipeline::stages`.
//!
//! A `[shadow]` (`shadow`) judges frames beside production: the output stage
//! hands them over after the verdict went to the line, and the shadow's
//! verdict comes back into the frame's result line.
//!
//! Layers run one way: `gpu` is the CUDA layer (driver, context, stream,
//! memory, kernels) and imports no stage; `preprocess` and `infer` build on it.
//! `ring` imports no stage either: it is generic over how a stream ends
//! (`ring::StreamEnd`), and `capture` names its types for `capture::EndOfStream`.
//!
//! `status` (metrics, the page, `/healthz`) is above the stages: it reads the
//! counters the other rooms own (`capture::SourceStatus`, `capture::GenicamCounters`,
//! `archive::ArchiveCounters`, `output::ResultsFileStatus`, `stats::ResultCounters`,
//! `line::LineStats`)
//! and implements the output stage's `output::ResultTaps`; no room below it
//! imports it. The pipeline tells it how the run goes on a watch channel
//! (`status::RunReport`), read or not: nothing checks whether the page is on.
//! Small shared
//! vocabulary sits in leaves that import nothing of ours (`timestamp`,
//! `gpu::element`, `infer::model_role`, `infer::device_path`).
//! `scripts/ci/import_cycles.py` (run by `make test`) fails on any import circle.
//!
//! Hardware and test-only code sits behind stubs with the same names, not
//! behind `cfg` lines in the code that calls it: `gpu/stub.rs` (feature
//! `cuda`), `infer/tensorrt/stub.rs` (`tensorrt`),
//! `infer/onnxruntime/device_stub.rs` (`cuda`), `fault_stub.rs`
//! (`fault-injection`).
//!
//! `plc` (the Modbus TCP server) sits above `trigger` and `line`: a
//! `plc::Station` triggers through a camera's `trigger::TriggerDesk` and is a
//! `line::LineOutput`; nothing below it imports it. `opcua` (the OPC UA
//! server) sits beside it, the same way: `opcua::VisionStation` triggers
//! through the desk, `opcua::OpcUaOutput` is a line output.
//! A trigger's way, from the PLC's Trigger coil through `TriggerDesk`,
//! `PartRings`, the judged frame and `line::Line` back to the PLC's
//! ResultsValid, is drawn in `plc`'s module doc, with where each hand-over
//! is wired.
//!
//! `pipeline` wires the stages; `main` only parses the command line.

pub mod archive;
pub mod bench;
pub mod bench_parts;
pub mod capture;
pub mod check_config;
pub mod config;
pub mod cycle;
pub mod decision;
pub mod evaluate;
// Test-only fault hooks; a stub that does nothing without the feature.
#[cfg(feature = "fault-injection")]
pub mod fault;
#[cfg(not(feature = "fault-injection"))]
#[path = "fault_stub.rs"]
pub mod fault;
pub mod frame;
pub mod frame_bytes;
pub mod gpu;
pub mod infer;
pub mod inspect;
pub mod json_line;
pub mod line;
pub mod model_id;
pub mod model_swap;
pub mod npy;
// The OPC UA server of the Machine Vision companion specification (OPC 40100-1).
pub mod opcua;
pub mod output;
pub mod pipeline;
// The Modbus TCP server a PLC triggers parts through and reads verdicts from.
pub mod plc;
pub mod preprocess;
pub mod recipe;
pub mod ring;
pub mod service;
pub mod shadow;
pub mod stats;
pub mod status;
pub mod timestamp;
pub mod trigger;
