//! What can stop a run: `PipelineError`, one variant per stage or side.

use crate::capture::CaptureError;
use crate::config::ConfigError;
use crate::infer::InferError;
use crate::infer::device_stage::DeviceFrameError;
use crate::output::OutputError;
use crate::preprocess::FramePreprocessError;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Inference(#[from] InferError),
    /// The device stage (a GPU engine with CUDA preprocessing) could not start.
    #[error(transparent)]
    Device(DeviceFrameError),
    #[error(transparent)]
    Preprocess(#[from] FramePreprocessError),
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("cannot start the {0} thread: {1}")]
    Spawn(&'static str, std::io::Error),
    #[error("the {0} thread panicked; results up to the panic were written")]
    Panicked(&'static str),
    #[error(transparent)]
    Status(#[from] crate::status::StatusError),
    /// The PLC's Modbus TCP server (`[modbus]`) could not start.
    #[error(transparent)]
    Plc(#[from] crate::plc::PlcError),
    #[error(transparent)]
    OpcUa(#[from] crate::opcua::OpcUaError),
}
