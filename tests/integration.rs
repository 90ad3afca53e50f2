//! sealcheck's integration tests, one crate (issue 36): each `tests/NAME.rs`
//! below is a module of this one test binary, so `tests/common` is compiled and
//! the library linked once instead of once per file.
//!
//! Run one file's tests with `cargo test --test integration NAME::` (or
//! `cargo nextest run --test integration -E 'test(/^NAME::/)'`). `make test`
//! runs them with cargo-nextest, every test in a process of its own; the tests
//! that start a pipeline (which uses every core) form the `pipeline` test group
//! of `.config/nextest.toml` and run one at a time, as they did before.
//!
//! Four test files stay binaries of their own (`Cargo.toml` says why for each):
//! `parity` and `gpu_parity` (own harness: an absent path counts as skipped),
//! `tensorrt` (built again by the TensorRT check with the feature) and
//! `steady_state_alloc` (its counting global allocator must see one test alone).
//!
//! A new test file: add `mod NAME;` here and `use crate::common;` in it.

mod common;

/// Not a test of its own: the RTSP camera that `common::rtsp::RtspCamera` starts
/// (this binary re-run with `--exact rtsp_camera_process`); returns at once otherwise.
#[test]
fn rtsp_camera_process() {
    common::rtsp::serve_when_asked();
}

mod alerts;
mod cameras;
mod cameras_status;
mod capture;
mod cavities;
mod cavities_status;
mod config;
mod config_proptest;
mod demo_assets;
mod demo_assets_batch;
mod evaluate;
mod first_hour;
mod genicam;
mod infer;
mod install;
mod journal_stream;
mod model_swap;
mod mqtt;
mod opcua;
mod opcua_recipes;
mod opcua_security;
mod parts;
mod pipeline;
mod plc;
mod plc_server;
mod preprocess;
mod recipes;
mod recovery;
mod service;
mod shadow;
mod status;
mod warm_up;
