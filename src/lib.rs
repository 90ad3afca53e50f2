//! sealcheck: camera-to-decision seal inspection.
//!
//! Where a frame goes, in order (each stage owns its thread):
//!
//! ```text
//! capture (GStreamer appsink) --ring::FrameRing--> preprocess --channel--> infer
//!     --channel--> decision + output (results file, log line) --recycle--> preprocess
//! ```
//!
//! `pipeline` wires the stages; `main` only parses the command line.

pub mod bench;
pub mod capture;
pub mod config;
pub mod decision;
pub mod evaluate;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod frame;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod infer;
pub mod inspect;
pub mod line;
pub mod model_id;
pub mod model_swap;
pub mod npy;
pub mod output;
pub mod pipeline;
pub mod preprocess;
pub mod ring;
pub mod service;
pub mod stats;
