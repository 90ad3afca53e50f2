//! The last stage: decide each frame, hand its verdict to the line
//! (`line::Line`: MQTT and, at a deadline, `late`), append its JSON line to
//! the results file, log it, count it, and hand its buffers back for the next frame.
//!
//! Results are written in capture order (the channel preserves it) and every
//! delivered frame gets exactly one line: inspected, dropped or failed.

mod cycles;
mod frame_spans;
mod pending;
mod result_line;
mod results_file;
mod stage;
mod taps;

pub use crate::timestamp::write_rfc3339;
pub use cycles::CycleGather;
pub use result_line::{FrameLatencies, ResultLine, format_output_line, format_result};
pub use results_file::{OutputError, ResultSink, ResultsFileStatus};
pub use stage::{LiveSettings, OutputCamera, OutputStage};
pub use taps::{Latencies, ResultTaps};
