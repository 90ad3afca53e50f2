//! Wires the stages together and drives a run.
//!
//! ```text
//! host mode:
//!  GStreamer streaming thread        preprocess thread        infer thread          output thread
//!  capture::Capture ──FrameRing──▶ PreprocessStage ──chan──▶ InferStage ──chan──▶ OutputStage ──▶ results file, log
//!        ▲  (SPSC, lock-free)            │  ▲                                            │
//!        └──────── free slots ───────────┘  └──────────── free work records ─────────────┘
//!
//! device mode (preprocess = "cuda" with a GPU engine):
//!                                    device thread (one CUDA stream)
//!  capture::Capture ──FrameRing──▶ DeviceStage: DeviceRunner + dyn DeviceEngine ──chan──▶ OutputStage ──▶ ...
//!        ▲                               │  ▲   (frame kernel, models, mask)          │
//!        └──────── free slots ───────────┘  └──────────── free work records ─────────┘
//! ```
//!
//! Which mode runs is decided from the config alone (`engine_choice::device_plan`)
//! before any engine is opened; the stage that runs opens each model once and
//! its geometry sizes the work records.
//!
//! New model files on reload are prepared on this (the calling) thread, on
//! the running engine, and swapped in between two frames by the infer thread
//! (host mode) or the device thread (device mode): `model_swap`.
//!
//! The output stage hands each verdict to the line (`line::Line`: MQTT, and a
//! deadline thread fed by the ring producer that fails a part `late` when its
//! verdict is not ready in time); see `line` for that side.
//!
//! After a verdict went to the line, the output stage hands frames due to a
//! `[shadow]` to the shadow thread (`shadow`: its own engine, nice 19, never
//! waited for) and writes their result lines once the shadow's verdict is
//! in them:
//!
//! ```text
//! OutputStage ──ShadowHandoff (try, 2 records)──▶ shadow thread ──verdict──▶ OutputStage (line written)
//! ```
//!
//! In `[trigger] mode = "plc"` a part is a PLC's trigger (`trigger`): each
//! camera's `TriggerDesk` takes triggers (Modbus, HTTP) and starts each
//! part's deadline clock; the stage that reads the rings reads them through
//! `trigger::PartRings`, which pairs frames with triggers before anything
//! is preprocessed.
//!
//! The calling thread keeps the service side: signals, reload, watchdog, READY/STOPPING.
//!
//! The files, by job: `run` drives a run (set-up, signals, the end);
//! `stages` starts every stage thread in order (the device thread too) and
//! `frame_path` is the one that reads the rings (device thread, or the host
//! engine opened); `sources` runs every camera's source; `parts` makes the trigger desks;
//! `reload` applies a reloaded config; `recipes` wires `[recipes.NAME]`
//! (the desk, the start recipe's models, the worker); `status_text` is STATUS=, `run_info`
//! what the page says of the run, `summary` what it did; `context` is what
//! a run is given, `error` what stops it.

mod context;
mod error;
mod frame_path;
mod parts;
mod recipes;
mod reload;
mod run;
mod run_info;
mod sources;
mod stages;
mod status_text;
mod summary;

pub use context::{RunContext, SourcePlan};
pub use error::PipelineError;
pub use run::run;
pub use status_text::LineTelemetry;
pub use summary::{GenicamFrameCounts, RunSummary, SourceOutages};
