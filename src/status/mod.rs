//! What the people at the line see: Prometheus metrics, health, and the
//! operators' status page, served over HTTP by their own thread.
//!
//! ```text
//!  output thread ──ResultCounters (counted once, stats) ─────────┐
//!      └──OperatorTaps: StatusFeed (NoStatus when [status] is off)
//!      │                 LineMetrics (latency atomics)           ─┤
//!      │                 StatusBoard ─▶ SnapshotSlot              ─┼─▶ HTTP thread (tokio, axum):
//!      │                   (station and per-camera tallies)       ─┤     /  /metrics  /healthz
//!      │                 LiveView (latest frame per camera)       ─┤     /api/status  /api/live.jpg[?camera=]
//!      └──ArchiveQueue──▶ archive thread ──▶ dir/[camera/]YYYY-MM-DD/HH/  /archive/…
//!  pipeline ──RunReport (watch: state, engine, models, cameras, counters) ─┘
//! ```
//!
//! With `[cameras.NAME]` everything above is per camera too (`cameras`): the
//! page shows a tile per camera, `/api/status` lists them, `/metrics` labels
//! their series with `camera`. With `[source]` nothing looks or answers
//! differently from before.
//!
//! A camera with a cavity layout (`[source.layout]`) is tallied per cavity
//! as well (`cavity_tally`, in the board): `/api/status` gives its layout,
//! last cycle, fail rates and worst cavity, `/metrics` counts
//! `sealcheck_cavity_results_total`, and the page outlines each cavity on
//! the frame and shows the heat map (`cavities`).
//!
//! Nothing here is on the frame path: the output thread touches atomics and,
//! a few times a second, a `try_lock` that never waits; encoding, JSON and
//! sockets happen on the HTTP and archive threads. Two endpoints act on the
//! service when asked to: `POST /api/trigger` takes triggers (only with
//! `[trigger] http = true`: `trigger_api`), `POST /api/recipe` switches
//! recipes (only with `[recipes.NAME]`: `recipe_switch`).

mod board;
mod camera_tally;
mod cameras;
mod cavities;
mod cavity_tally;
mod external;
mod figures;
mod http;
mod live;
pub mod metrics;
mod recipe_switch;
mod recipes;
mod run_report;
mod serve;
mod taps;
mod telemetry;
mod trigger_api;

pub use board::{BoardState, SnapshotSlot, StatusBoard};
pub use camera_tally::{CameraTally, MinuteBucket, TREND_MINUTES};
pub use cameras::CameraState;
pub use cavity_tally::{CavityTally, RECENT_CYCLES};
pub use external::{CameraSource, ExternalStats};
pub use http::{StatusError, StatusServer};
pub use live::{LiveJpeg, LiveView};
pub use metrics::LineMetrics;
pub use recipes::{RecipeApi, SWITCH_WAIT};
pub use run_report::{RunFacts, RunInfo, RunReport, RunState};
pub use taps::{NoStatus, OperatorTaps, ServerFeed, StatusFeed};
pub use telemetry::{CavityLayouts, Telemetry};
pub use trigger_api::TriggerApi;
