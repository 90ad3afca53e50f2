//! Which stages read the rings: the device thread (preprocessing and both
//! models on the GPU) when the config asks for device mode and it starts,
//! else a host engine and preprocessor for the preprocess and infer threads.
//! Either way each model is opened once.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::error::PipelineError;
use crate::capture::EndOfStream;
use crate::config::Config;
use crate::frame::{FrameWork, StageMessage, TensorGeometry};
use crate::infer;
use crate::infer::device_stage::{
    DeviceFrameError, DeviceModelsOpener, DeviceStage, DeviceStartFailed, DeviceSwap,
};
use crate::line::ModelIds;
use crate::model_swap::RunningEngine;
use crate::preprocess::FramePreprocessor;
use crate::service::Liveness;
use crate::trigger::PartRings;

/// The engine a run uses and why, for the log and the summary.
pub(super) struct ChosenEngine {
    pub(super) name: String,
    pub(super) reason: String,
}

/// The stages that read the ring, as started.
// One is made per run and taken apart at once: boxing the host variant
// would save nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum FramePath {
    /// One device thread: preprocessing and both models on the GPU; `swap`
    /// when its engine can take new models on reload.
    Device {
        thread: JoinHandle<EndOfStream>,
        swap: Option<(
            RunningEngine,
            Sender<DeviceSwap>,
            Arc<dyn DeviceModelsOpener>,
        )>,
        /// Most frames the device thread judges in one batch.
        max_batch: usize,
    },
    /// Preprocess and infer threads, to be started once the output stage runs.
    Host {
        consumer: PartRings,
        free_rx: Receiver<Box<FrameWork>>,
        backend: Box<dyn infer::InferenceBackend>,
        frame_preprocessor: FramePreprocessor,
    },
}

/// Starts the device thread when the config asks for device mode (it warms
/// up on frames of `warm_up` size before it reports, and installs its
/// page-locked allocator in `slot_memory`), or opens the host engine and
/// preprocessor; either way each model is opened once.
/// `auto` whose GPU engines cannot run here goes on in host mode.
pub(super) fn open_frame_path(
    config: &Config,
    consumer: PartRings,
    free_rx: Receiver<Box<FrameWork>>,
    to_output: crossbeam_channel::Sender<StageMessage>,
    (liveness, models, pixel_demand, batch_counts): (
        &Liveness,
        &Arc<ModelIds>,
        &Arc<crate::frame::PixelDemand>,
        &Arc<infer::BatchCounts>,
    ),
    (warm_up, slot_memory): (infer::WarmUpSize, crate::frame_bytes::SlotMemory),
) -> Result<(FramePath, TensorGeometry, ChosenEngine), PipelineError> {
    let (consumer, free_rx) = match infer::device_stage::device_plan(config) {
        None => (consumer, free_rx),
        Some(plan) => {
            let (swaps, swap_rx) = bounded::<DeviceSwap>(1);
            let stage = DeviceStage {
                input: consumer,
                output: to_output,
                free_work: free_rx,
                liveness: liveness.clone(),
                models: Arc::clone(models),
                swaps: swap_rx,
                pixel_demand: Arc::clone(pixel_demand),
                batch_counts: Arc::clone(batch_counts),
                slot_memory,
            };
            match stage.spawn(config, plan, warm_up) {
                Ok((thread, started)) => {
                    let engine = ChosenEngine {
                        name: started.kind.as_str().to_string(),
                        reason: started.reason,
                    };
                    let running = RunningEngine {
                        kind: started.kind,
                        geometry: started.geometry,
                    };
                    let swap = started.swap_opener.map(|opener| (running, swaps, opener));
                    let path = FramePath::Device {
                        thread,
                        swap,
                        max_batch: started.max_batch,
                    };
                    return Ok((path, started.geometry, engine));
                }
                Err(DeviceStartFailed {
                    error,
                    stage: Some(stage),
                }) => {
                    log::info!(target: "sealcheck::pipeline", error:% = error;
                        "auto: no GPU engine for the device path; choosing a host-mode engine");
                    let stage = *stage;
                    (stage.input, stage.free_work)
                }
                Err(DeviceStartFailed { error, .. }) => {
                    return Err(match error {
                        DeviceFrameError::Open(e) => PipelineError::Inference(e),
                        other => PipelineError::Device(other),
                    });
                }
            }
        }
    };
    let selection = infer::open_backend(config)?;
    let geometry = infer::geometry(selection.backend.as_ref())?;
    let frame_preprocessor = FramePreprocessor::open(config, geometry)?;
    let engine = ChosenEngine {
        name: selection.backend.kind().as_str().to_string(),
        reason: selection.reason,
    };
    let path = FramePath::Host {
        consumer,
        free_rx,
        backend: selection.backend,
        frame_preprocessor,
    };
    Ok((path, geometry, engine))
}
