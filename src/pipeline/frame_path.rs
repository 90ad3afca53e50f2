//! Which stages read the rings, as `stages::open_frame_path` started or
//! opened them: the device thread (preprocessing and both models on the
//! GPU) when the config asks for device mode and it starts, else a host
//! engine and preprocessor for the preprocess and infer threads. Either way
//! each model is opened once.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use super::error::PipelineError;
use crate::capture::EndOfStream;
use crate::config::Config;
use crate::frame::{FrameWork, TensorGeometry};
use crate::infer;
use crate::infer::device_stage::{DeviceModelsOpener, DeviceStarted, DeviceSwap};
use crate::model_swap::RunningEngine;
use crate::preprocess::FramePreprocessor;
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

impl FramePath {
    /// The device thread as started (`stages::open_frame_path` spawns it),
    /// its geometry, and the engine it chose; `swaps` is where reloaded
    /// models reach it, kept when its engine can swap.
    pub(super) fn device(
        thread: JoinHandle<EndOfStream>,
        started: DeviceStarted,
        swaps: Sender<DeviceSwap>,
    ) -> (FramePath, TensorGeometry, ChosenEngine) {
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
        (path, started.geometry, engine)
    }
}

/// Opens the host engine and preprocessor for the preprocess and infer
/// threads (host mode, or `auto` whose GPU engines cannot run here); each
/// model is opened once.
pub(super) fn open_host_path(
    config: &Config,
    consumer: PartRings,
    free_rx: Receiver<Box<FrameWork>>,
) -> Result<(FramePath, TensorGeometry, ChosenEngine), PipelineError> {
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
