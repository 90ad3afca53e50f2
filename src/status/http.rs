//! The HTTP side: a small tokio runtime on its own thread serving the
//! status page, `/metrics`, `/healthz`, `/api/status`, the live frame and
//! archived files. Read-only; every request is bounded in size and time.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tower::limit::ConcurrencyLimitLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use super::board::{BoardState, WINDOW};
use super::cameras;
use super::cavities;
use super::figures::{by_reason, yield_pct};
use super::run_report::RunFacts;
use super::telemetry::Telemetry;
use crate::archive::{ArchiveName, is_camera_folder, is_day, is_hour};
use crate::frame::CameraIndex;
use crate::shadow::ShadowState;

/// The page: one file, no external resources.
const PAGE: &str = include_str!("page.html");
/// Longest a request may take, from its headers to the end of the response.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests carry no body; anything larger is refused.
const MAX_BODY: usize = 1024;
/// Longest request target accepted.
const MAX_URI: usize = 1024;
/// Requests served at once; more wait (then time out).
const MAX_CONCURRENT: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(
        "[status] listen = \"{addr}\": cannot listen: {source} — is another program (or another sealcheck) using the port? choose another in [status] listen"
    )]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the status server thread: {0}")]
    Spawn(std::io::Error),
}

/// The running server; dropping it stops the server (waiting at most 2 s
/// for requests in progress).
pub struct StatusServer {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    done: crossbeam_channel::Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl StatusServer {
    /// Binds `listen` now (so a port in use fails the start) and serves on a
    /// thread of its own.
    pub fn start(
        listen: SocketAddr,
        telemetry: Arc<Telemetry>,
    ) -> Result<StatusServer, StatusError> {
        let bind_error = |source| StatusError::Bind {
            addr: listen,
            source,
        };
        let listener = std::net::TcpListener::bind(listen).map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        if !addr.ip().is_loopback() {
            log::warn!(target: "sealcheck::status", listen = addr.to_string().as_str();
                "status page and metrics are reachable from the network at this address; they show the line's images");
        }
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done) = crossbeam_channel::bounded::<()>(1);
        let thread = std::thread::Builder::new()
            .name("status-http".into())
            .spawn(move || {
                crate::archive::lower_thread_priority();
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .enable_time()
                    .max_blocking_threads(2)
                    .on_thread_start(crate::archive::lower_thread_priority)
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        log::error!(target: "sealcheck::status", error = e.to_string().as_str(); "cannot start the status server's runtime; the status page is off");
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            log::error!(target: "sealcheck::status", error = e.to_string().as_str(); "status server cannot use its socket; the status page is off");
                            return;
                        }
                    };
                    super::serve::serve(listener, router(telemetry), shutdown_rx).await;
                });
                let _ = done_tx.send(());
            })
            .map_err(StatusError::Spawn)?;
        log::info!(target: "sealcheck::status", listen = addr.to_string().as_str(); "status page at http://{addr}/ (metrics at /metrics)");
        Ok(StatusServer {
            addr,
            shutdown: Some(shutdown_tx),
            done,
            thread: Some(thread),
        })
    }

    /// The address actually bound (port 0 in the config picks a free one).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        // A client holding a request open must not hold up the exit.
        if self.done.recv_timeout(Duration::from_secs(2)).is_ok()
            && let Some(thread) = self.thread.take()
        {
            let _ = thread.join();
        }
    }
}

fn router(telemetry: Arc<Telemetry>) -> Router {
    let answered_at_once = Router::new()
        .route("/", get(page))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/api/status", get(api_status))
        .route("/api/live.jpg", get(live_jpeg))
        .route("/archive/{*path}", get(archive_file))
        .route(
            "/api/trigger",
            axum::routing::post(super::trigger_api::trigger),
        )
        .fallback(not_found)
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ));
    // A recipe switch answers once it is done: its models opened, gated
    // and warmed up, which can take longer than any other answer.
    let recipe_switch = Router::new()
        .route(
            "/api/recipe",
            axum::routing::post(super::recipe_switch::switch),
        )
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            super::recipes::SWITCH_WAIT + REQUEST_TIMEOUT,
        ));
    answered_at_once
        .merge(recipe_switch)
        .with_state(telemetry)
        .layer(axum::middleware::from_fn(guard))
        .layer(RequestBodyLimitLayer::new(MAX_BODY))
        .layer(ConcurrencyLimitLayer::new(MAX_CONCURRENT))
}

/// Refuses long targets and sets headers every answer carries.
async fn guard(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if request.uri().to_string().len() > MAX_URI {
        return (StatusCode::URI_TOO_LONG, "request target too long\n").into_response();
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found\n").into_response()
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

/// OpenMetrics when the client asks for it (Prometheus does), else the
/// classic text format.
async fn metrics(State(t): State<Arc<Telemetry>>, headers: axum::http::HeaderMap) -> Response {
    t.metrics.source_up.set(i64::from(t.source_up()));
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    if openmetrics {
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            t.metrics.encode_openmetrics(),
        )
            .into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            t.metrics.encode_prometheus(),
        )
            .into_response()
    }
}

async fn healthz(State(t): State<Arc<Telemetry>>) -> Response {
    match t.health() {
        Ok(text) => (StatusCode::OK, format!("{text}\n")).into_response(),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response(),
    }
}

async fn api_status(State(t): State<Arc<Telemetry>>) -> Response {
    let value = tokio::task::spawn_blocking(move || {
        let mut value = status_json(&t);
        // With recipes only: without, the answer is as it always was.
        if let (Some(api), Some(object)) = (t.recipes(), value.as_object_mut()) {
            object.insert("recipe".into(), super::recipes::status_json(api));
        }
        value
    })
    .await;
    match value {
        Ok(v) => axum::Json(v).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "status unavailable\n").into_response(),
    }
}

/// `/api/live.jpg`'s query: `camera=NAME` with `[cameras.NAME]` (none: the
/// first camera, the only one of `[source]`).
#[derive(serde::Deserialize)]
struct LiveQuery {
    camera: Option<String>,
}

async fn live_jpeg(State(t): State<Arc<Telemetry>>, Query(query): Query<LiveQuery>) -> Response {
    let index = match &query.camera {
        None => 0,
        Some(name) => {
            let facts = t.facts();
            match cameras::index_of(&facts, name) {
                Some(index) => index,
                None => {
                    let names = cameras::names_list(&facts);
                    let text = if names.is_empty() {
                        format!(
                            "no camera {name:?}: this run has one unnamed camera ([source]); ask for /api/live.jpg without ?camera=\n"
                        )
                    } else {
                        format!(
                            "no camera {name:?}: ask for one of {names} (/api/status lists the cameras)\n"
                        )
                    };
                    return (StatusCode::NOT_FOUND, text).into_response();
                }
            }
        }
    };
    let live = Arc::clone(&t.live);
    match tokio::task::spawn_blocking(move || live.jpeg(index)).await {
        Ok(Some(frame)) => {
            let mut response = (
                [(header::CONTENT_TYPE, "image/jpeg")],
                frame.jpeg.as_ref().clone(),
            )
                .into_response();
            let h = response.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&frame.seq.to_string()) {
                h.insert("x-sealcheck-seq", v);
            }
            h.insert(
                "x-sealcheck-verdict",
                HeaderValue::from_static(if frame.judged {
                    frame.verdict.as_str()
                } else {
                    "none"
                }),
            );
            // With a cavity layout: the cycle's failed cavities (bit n - 1
            // for cavity n, as the result line's `reject_mask`).
            if let Some(mask) = frame.reject_mask
                && let Ok(v) = HeaderValue::from_str(&mask.to_string())
            {
                h.insert("x-sealcheck-reject-mask", v);
            }
            h.insert(
                "x-sealcheck-reason",
                HeaderValue::from_static(if frame.judged {
                    frame.reason.as_str()
                } else {
                    "not_judged"
                }),
            );
            response
        }
        // No frame yet: the first one is on its way.
        _ => StatusCode::NO_CONTENT.into_response(),
    }
}

/// `/archive/[CAMERA/]YYYY-MM-DD/HH/<name>.(jpg|png)` or
/// `/archive/[CAMERA/]YYYY-MM-DD/manifest.jsonl`, `CAMERA` one of the run's
/// named cameras. Anything else, including every attempt to leave the
/// archive folder (`..`, absolute paths, encoded characters, links), is 404.
async fn archive_file(State(t): State<Arc<Telemetry>>, uri: Uri) -> Response {
    let Some(dir) = t.archive().map(|a| a.dir) else {
        return not_found().await;
    };
    let facts = t.facts();
    let Some(relative) = uri
        .path()
        .strip_prefix("/archive/")
        .and_then(|raw| safe_archive_path(raw, |c| cameras::index_of(&facts, c).is_some()))
    else {
        return not_found().await;
    };
    let content_type = match relative.extension().and_then(|e| e.to_str()) {
        Some("jpg") => "image/jpeg",
        Some("png") => "image/png",
        _ => "application/x-ndjson",
    };
    let read = tokio::task::spawn_blocking(move || read_inside(&dir, &relative)).await;
    match read {
        Ok(Some(bytes)) => (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "private, max-age=3600"),
            ],
            bytes,
        )
            .into_response(),
        _ => not_found().await,
    }
}

/// The relative path a raw (still percent-encoded) request path names, if
/// it has exactly the archive's shape; a camera's folder only where
/// `is_camera` says the run has that camera.
fn safe_archive_path(raw: &str, is_camera: impl Fn(&str) -> bool) -> Option<PathBuf> {
    if let Some((camera, rest)) = raw.split_once('/')
        && is_camera_folder(camera)
    {
        return is_camera(camera)
            .then(|| in_day_folder(rest))
            .flatten()
            .map(|p| PathBuf::from(camera).join(p));
    }
    in_day_folder(raw)
}

/// `YYYY-MM-DD/HH/<file>.(jpg|png)` or `YYYY-MM-DD/manifest.jsonl`.
fn in_day_folder(raw: &str) -> Option<PathBuf> {
    let name_ok = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
    };
    let parts: Vec<&str> = raw.split('/').collect();
    match parts.as_slice() {
        [day, "manifest.jsonl"] if is_day(day) => Some(PathBuf::from(day).join("manifest.jsonl")),
        [day, hour, file]
            if is_day(day)
                && is_hour(hour)
                && name_ok(file)
                && (file.ends_with(".jpg") || file.ends_with(".png")) =>
        {
            Some(PathBuf::from(day).join(hour).join(file))
        }
        _ => None,
    }
}

/// Reads `dir/relative` if, with every link resolved, it still lies inside `dir`.
fn read_inside(dir: &Path, relative: &Path) -> Option<Vec<u8>> {
    let root = dir.canonicalize().ok()?;
    let path = root.join(relative).canonicalize().ok()?;
    if !path.starts_with(&root) || !path.is_file() {
        return None;
    }
    std::fs::read(path).ok()
}

fn rfc3339(t: SystemTime) -> String {
    let mut s = String::with_capacity(24);
    crate::timestamp::write_rfc3339(&mut s, t);
    s
}

/// The page's data.
pub fn status_json(t: &Telemetry) -> Value {
    let board: BoardState = t.board.read();
    let (seals, ok, window_by_reason) = board.window_counts();
    // One snapshot of the run, so state, health and source agree.
    let facts = t.facts();
    let external = &facts.external;
    let info = facts.info.as_ref();
    let health = t.health_of(&facts);
    let archive = t.archive();
    let m = &t.metrics;
    let archive_json = archive.as_ref().map(|a| {
        json!({
            "keep": a.keep.as_str(),
            "format": a.format.extension(),
            "bytes": m.archive.bytes.get(),
            "max_mib": a.max_mib,
            "min_free_mib": a.min_free_mib,
            "free_mib": free_mib(&a.dir),
            "files": m.archive.files.get(),
            "dropped": crate::status::metrics::ArchiveDrop::ALL.iter().map(|d| (d.as_str().to_string(), json!(m.archive.drops(*d)))).collect::<serde_json::Map<_, _>>(),
        })
    });
    let ext = archive.as_ref().map(|a| a.format.extension());
    let views = cameras::cameras(&facts, &board, t.idle_after(), std::time::Instant::now());
    let camera_name = |index: CameraIndex| views.get(usize::from(index)).and_then(|c| c.name);
    let rejects: Vec<Value> = board
        .rejects()
        .map(|r| {
            let camera = camera_name(r.camera);
            let name =
                ArchiveName::new(r.captured_at, r.seq, r.reason.as_str()).in_camera(camera);
            let link = |p: String| Value::String(format!("/archive/{p}"));
            json!({
                "camera": camera,
                "seq": r.seq,
                "part_id": r.part_id,
                "ts": rfc3339(r.captured_at),
                "reason": r.reason.as_str(),
                "defect_prob": r.defect_prob,
                "image": match (r.archived, ext) { (true, Some(ext)) => link(name.frame(ext)), _ => Value::Null },
                "mask": if r.archived && ext.is_some() { link(name.mask()) } else { Value::Null },
            })
        })
        .collect();
    let mut cameras_json = cameras::cameras_json(&views, SystemTime::now());
    cavities::add_cavities(&mut cameras_json, &views, &t.cavity_layouts());
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "state": facts.state.as_str(),
        "uptime_s": t.uptime().as_secs(),
        "health": match &health { Ok(text) => json!({"ok": true, "text": text}), Err(text) => json!({"ok": false, "text": text}) },
        "backend": info.map(|i| i.backend.clone()),
        "models": info.map(|i| i.models.iter().map(|(role, file, id)| json!({"role": role, "file": file, "id": id})).collect::<Vec<_>>()),
        "source": {
            "kind": info.map(|i| i.source.clone()),
            "up": facts.source_up(),
            "recovery": external.source_json(),
        },
        "results_file": external.results_file_json(),
        "shift": {
            "since": rfc3339(board.shift_started),
            "frames": board.frames,
            "pass": board.passed,
            "fail": board.failed,
            "yield_pct": yield_pct(board.passed, board.frames),
            "by_reason": by_reason(&board.by_reason),
        },
        "window": {
            "size": WINDOW,
            "seals": seals,
            "pass": ok,
            "fail": seals - ok,
            "yield_pct": yield_pct(ok as u64, seals as u64),
            "by_reason": by_reason(&window_by_reason),
        },
        "latency_ms": {
            "p50": board.window_latency_quantile(0.5),
            "p99": board.window_latency_quantile(0.99),
        },
        "cameras": cameras_json,
        "late": external.late(),
        "last": board.last.map(|l| json!({
            "seq": l.seq,
            "part_id": l.part_id,
            "ts": rfc3339(l.captured_at),
            "verdict": l.verdict.as_str(),
            "reason": l.reason.as_str(),
            "latency_ms": l.latency_ms,
        })),
        "rejects": rejects,
        "archive": archive_json,
        "mqtt": external.mqtt_json(),
        "triggers": external.triggers_json(),
        "shadow": shadow_json(&facts),
        "snapshot": board.version,
    })
}

/// The shadow's agreement while a `[shadow]` is configured (opening,
/// running, refused or stopped); `null` when the run has none, so the page
/// shows no panel for a shadow nobody asked for.
fn shadow_json(facts: &RunFacts) -> Value {
    let Some(snapshot) = facts
        .shadow
        .as_ref()
        .map(|agreement| agreement.snapshot())
        .filter(|snapshot| snapshot.state != ShadowState::Off)
    else {
        return Value::Null;
    };
    // Only numbers, strings and string-keyed maps: this cannot fail, and a
    // NaN would come out as `null`, which the page shows as "–".
    serde_json::to_value(snapshot).unwrap_or(Value::Null)
}

fn free_mib(dir: &Path) -> Option<u64> {
    crate::archive::free_bytes(dir).map(|b| b >> 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Reason;
    use crate::shadow::{ShadowAgreement, ShadowCounters};
    use crate::status::RunReport;

    fn telemetry(report: &RunReport) -> Arc<Telemetry> {
        Telemetry::new(
            Duration::from_secs(5),
            false,
            Duration::from_millis(500),
            Arc::default(),
            None,
            report.subscribe(),
        )
    }

    #[test]
    fn shadow_is_null_without_a_shadow_section_and_shown_once_there_is_one() {
        let report = RunReport::new();
        let t = telemetry(&report);
        assert_eq!(
            status_json(&t)["shadow"],
            Value::Null,
            "no agreement reported"
        );
        // The pipeline always reports the agreement; without `[shadow]` it is off.
        let agreement = Arc::new(ShadowAgreement::new(ShadowCounters::default()));
        agreement.set_state(ShadowState::Off, None);
        report.set_shadow(Arc::clone(&agreement));
        assert_eq!(status_json(&t)["shadow"], Value::Null, "shadow off");

        agreement.set_state(ShadowState::Refused, Some("cannot open cls.onnx".into()));
        let shadow = status_json(&t)["shadow"].clone();
        assert_eq!(shadow["state"], "refused");
        assert_eq!(shadow["problem"], "cannot open cls.onnx");
        assert_eq!(shadow["since_start"]["compared"], 0);
        assert_eq!(shadow["since_start"]["agreement"], Value::Null);
        assert_eq!(
            shadow,
            serde_json::to_value(agreement.snapshot()).unwrap(),
            "the snapshot as serialized"
        );

        let ids = crate::model_id::ModelIds {
            segmentation: "aaaa".into(),
            classifier: "bbbb".into(),
            recipe: None,
        };
        agreement.set_running("tract", ids, 2);
        let judged = |verdict, reason, p| crate::decision::Decision {
            verdict,
            reason,
            defect_prob: Some(p),
            seal_area: Some(0.1),
        };
        let (pass, fail) = (
            crate::decision::Verdict::Pass,
            crate::decision::Verdict::Fail,
        );
        agreement.record(
            &judged(pass, Reason::Ok, 0.1),
            &judged(fail, Reason::Defect, 0.9),
            Some(1.0),
        );
        agreement.record(
            &judged(pass, Reason::Ok, 0.1),
            &judged(pass, Reason::Ok, 0.2),
            Some(0.5),
        );
        let shadow = status_json(&t)["shadow"].clone();
        assert_eq!(
            (
                &shadow["state"],
                &shadow["engine"],
                &shadow["models"]["classifier"],
                &shadow["every"]
            ),
            (
                &json!("running"),
                &json!("tract"),
                &json!("bbbb"),
                &json!(2)
            )
        );
        assert_eq!(shadow["problem"], Value::Null);
        for span in ["since_start", "last_1000"] {
            let s = &shadow[span];
            assert_eq!(s["compared"], 2, "{span}");
            assert_eq!(
                s["flips"],
                json!({"pass_to_fail": 1, "fail_to_pass": 0}),
                "{span}"
            );
            assert_eq!(s["agreement"], 0.5, "{span}");
            assert_eq!(s["mask_iou_worst"], 0.5, "{span}");
        }
    }

    /// A running pipeline's facts with `cameras` (name, source status).
    fn running(
        report: &RunReport,
        cameras: &[(Option<&str>, Option<crate::capture::SourceStatus>)],
    ) {
        let liveness = crate::service::Liveness::new();
        liveness.set_source_streaming(true);
        report.set_liveness(liveness);
        report.set_info(crate::status::RunInfo {
            backend: "tract".into(),
            source: "images".into(),
            cameras: cameras.iter().map(|(n, _)| n.map(str::to_string)).collect(),
            models: vec![],
        });
        report.set_external(crate::status::ExternalStats {
            source: cameras[0].1.clone(),
            cameras: cameras
                .iter()
                .map(|(name, status)| crate::status::CameraSource {
                    name: name.map(str::to_string),
                    kind: if status.is_some() { "rtsp" } else { "images" },
                    status: status.clone(),
                    genicam: None,
                })
                .collect(),
            ..Default::default()
        });
        report.set_state(crate::status::RunState::Running);
    }

    /// `camera`'s results: `passes` passes, then `fails` fails (no seal).
    fn judge(
        board: &mut crate::status::StatusBoard,
        t: &Telemetry,
        camera: u16,
        passes: u64,
        fails: u64,
    ) {
        for seq in 0..passes + fails {
            let reason = if seq < passes {
                Reason::Ok
            } else {
                Reason::NoSeal
            };
            t.metrics.results.record(reason);
            let meta = crate::frame::FrameMeta {
                camera,
                ..crate::frame::FrameMeta::now(seq)
            };
            let d = crate::decision::Decision {
                verdict: reason.verdict(),
                reason,
                defect_prob: None,
                seal_area: None,
            };
            board.record(&meta, &d, Some(5.0), false, None);
        }
        board.publish();
    }

    #[test]
    fn two_named_cameras_are_listed_counted_and_a_lost_one_is_named_in_health_and_metrics() {
        let report = RunReport::new();
        let t = telemetry(&report);
        let side = crate::capture::SourceStatus::new(&crate::service::Liveness::new());
        side.lost("rtsp: connection refused", false, false);
        running(&report, &[(Some("top"), None), (Some("side"), Some(side))]);
        let mut board =
            crate::status::StatusBoard::new(Arc::clone(&t.board), t.metrics.results.clone());
        judge(&mut board, &t, 0, 7, 3);
        judge(&mut board, &t, 1, 2, 0);

        let status = status_json(&t);
        let cameras = status["cameras"].as_array().unwrap();
        assert_eq!(cameras.len(), 2, "{status:#}");
        let (top, side) = (&cameras[0], &cameras[1]);
        assert_eq!(
            (&top["name"], &top["kind"], &top["state"]),
            (&json!("top"), &json!("images"), &json!("inspecting"))
        );
        assert_eq!(
            (&top["pass"], &top["fail"], &top["yield_pct"]),
            (&json!(7), &json!(3), &json!(70.0))
        );
        assert_eq!(
            (&top["up"], &top["problem"], &top["outages"]),
            (&json!(true), &Value::Null, &Value::Null)
        );
        assert_eq!(top["by_reason"]["no_seal"], 3);
        assert_eq!(top["last"]["seq"], 9);
        assert_eq!(top["last"]["verdict"], "fail");
        let trend = top["trend"].as_array().unwrap();
        assert_eq!(trend.len(), crate::status::TREND_MINUTES);
        assert_eq!(
            (&trend[59]["pass"], &trend[59]["fail"]),
            (&json!(7), &json!(3)),
            "this minute is the last"
        );
        assert!(trend[59]["minute"].as_str().unwrap().ends_with(":00.000Z"));
        assert_eq!(
            (&side["name"], &side["state"], &side["up"], &side["outages"]),
            (&json!("side"), &json!("lost"), &json!(false), &json!(1))
        );
        assert!(side["lost_since"].is_string());
        let problem = side["problem"].as_str().unwrap();
        assert!(problem.starts_with("camera side lost since "), "{problem}");
        // The station's source is down while one camera is; the process is healthy.
        assert_eq!(status["source"]["up"], false);
        assert_eq!(status["health"]["ok"], true);
        let health = t.health().unwrap();
        assert!(health.contains("; camera side lost since "), "{health}");
        let reject = &status["rejects"][0];
        assert_eq!(
            (&reject["camera"], &reject["seq"]),
            (&json!("top"), &json!(9))
        );

        let metrics = t.metrics.encode_prometheus();
        for line in [
            "# TYPE sealcheck_camera_results_total counter",
            "sealcheck_camera_results_total{camera=\"top\",verdict=\"pass\",reason=\"ok\"} 7",
            "sealcheck_camera_results_total{camera=\"top\",verdict=\"fail\",reason=\"no_seal\"} 3",
            "sealcheck_camera_results_total{camera=\"side\",verdict=\"fail\",reason=\"defect\"} 0",
            "sealcheck_camera_source_up{camera=\"top\"} 1",
            "sealcheck_camera_source_up{camera=\"side\"} 0",
            "sealcheck_camera_source_outages_total{camera=\"side\"} 1",
        ] {
            assert!(
                metrics.lines().any(|l| l == line),
                "no {line:?} in\n{metrics}"
            );
        }
        assert!(
            !metrics.contains("sealcheck_camera_source_outages_total{camera=\"top\"}"),
            "a replay has no outages"
        );
    }

    /// A 2x3 grid with cavity 6 disabled.
    fn grid_layout() -> Arc<crate::config::CavityLayout> {
        let rects =
            crate::config::CavityLayout::grid_rects(2, 3, (320, 180), (640, 360), (600, 340))
                .unwrap();
        Arc::new(crate::config::CavityLayout::new(rects, &[6], 0, Some((2, 3))).unwrap())
    }

    /// `cycles` cycles of `layout` on `camera`: cavity 2 fails (defect) in
    /// every other one, the rest pass.
    fn cycles(
        board: &mut crate::status::StatusBoard,
        t: &Telemetry,
        camera: u16,
        layout: &crate::config::CavityLayout,
        cycles: u64,
    ) {
        for seq in 0..cycles {
            let mut cycle = crate::cycle::CycleVerdicts::with_capacity(6);
            cycle.start(layout);
            for n in layout.enabled() {
                let reason = if n == 2 && seq % 2 == 1 {
                    Reason::Defect
                } else {
                    Reason::Ok
                };
                cycle.push(
                    n,
                    crate::decision::Decision {
                        verdict: reason.verdict(),
                        reason,
                        defect_prob: None,
                        seal_area: None,
                    },
                );
            }
            let d = cycle.overall();
            t.metrics.results.record(d.reason);
            let meta = crate::frame::FrameMeta {
                camera,
                ..crate::frame::FrameMeta::now(seq)
            };
            board.record(&meta, &d, Some(5.0), false, Some(&cycle));
        }
        board.publish();
    }

    #[test]
    fn a_camera_with_a_cavity_layout_is_tallied_per_cavity_in_api_status_and_metrics() {
        let report = RunReport::new();
        let t = telemetry(&report);
        let layout = grid_layout();
        t.set_cavity_layouts(vec![Some(Arc::clone(&layout)), None]);
        running(&report, &[(Some("top"), None), (Some("side"), None)]);
        let mut board =
            crate::status::StatusBoard::new(Arc::clone(&t.board), t.metrics.results.clone());
        board.prepare_cavities(&t.cavity_layouts());
        cycles(&mut board, &t, 0, &layout, 10);
        judge(&mut board, &t, 1, 2, 0);

        let status = status_json(&t);
        let (top, side) = (&status["cameras"][0], &status["cameras"][1]);
        assert_eq!(side["cavities"], Value::Null, "no layout: as before");
        let cavities = &top["cavities"];
        assert_eq!(cavities["grid"], json!({"rows": 2, "cols": 3}));
        assert_eq!(cavities["layout"].as_array().unwrap().len(), 6);
        assert_eq!(cavities["layout"][1]["rect"], json!([660, 10, 600, 340]));
        assert_eq!(cavities["layout"][1]["recent"]["rate"], 0.5);
        assert_eq!(cavities["layout"][5]["enabled"], false);
        assert_eq!(cavities["last"]["seq"], 9);
        assert_eq!(cavities["last"]["cavities"][1]["verdict"], "fail");
        assert_eq!(cavities["worst"]["cavity"], 2);
        assert_eq!(top["fail"], 5, "a cycle is one result");

        let metrics = t.metrics.encode_prometheus();
        for line in [
            "# TYPE sealcheck_cavity_results_total counter",
            "sealcheck_cavity_results_total{camera=\"top\",cavity=\"2\",verdict=\"fail\",reason=\"defect\"} 5",
            "sealcheck_cavity_results_total{camera=\"top\",cavity=\"2\",verdict=\"pass\",reason=\"ok\"} 5",
            "sealcheck_cavity_results_total{camera=\"top\",cavity=\"5\",verdict=\"pass\",reason=\"ok\"} 10",
            "sealcheck_cavity_results_total{camera=\"top\",cavity=\"1\",verdict=\"fail\",reason=\"no_seal\"} 0",
        ] {
            assert!(
                metrics.lines().any(|l| l == line),
                "no {line:?} in\n{metrics}"
            );
        }
        assert!(
            !metrics.contains("cavity=\"6\""),
            "a disabled cavity has no series"
        );
        assert!(!metrics.contains("sealcheck_cavity_results_total{camera=\"side\""));
    }

    #[test]
    fn a_sources_cavities_are_counted_without_a_camera_label() {
        let report = RunReport::new();
        let t = telemetry(&report);
        let layout = grid_layout();
        t.set_cavity_layouts(vec![Some(Arc::clone(&layout))]);
        running(&report, &[(None, None)]);
        let mut board =
            crate::status::StatusBoard::new(Arc::clone(&t.board), t.metrics.results.clone());
        // No cycle yet: every judged cavity's series is there, at 0.
        board.prepare_cavities(&t.cavity_layouts());
        board.publish();
        let metrics = t.metrics.encode_prometheus();
        assert!(
            metrics.lines().any(|l| l
                == "sealcheck_cavity_results_total{cavity=\"1\",verdict=\"pass\",reason=\"ok\"} 0"),
            "{metrics}"
        );
        assert_eq!(
            status_json(&t)["cameras"][0]["cavities"]["last"],
            Value::Null
        );
        cycles(&mut board, &t, 0, &layout, 4);
        let metrics = t.metrics.encode_prometheus();
        assert!(
            metrics.lines().any(|l| l
                == "sealcheck_cavity_results_total{cavity=\"2\",verdict=\"fail\",reason=\"defect\"} 2"),
            "{metrics}"
        );
        assert!(!metrics.contains("camera=\""), "{metrics}");
        assert_eq!(
            status_json(&t)["cameras"][0]["cavities"]["worst"]["cavity"],
            2
        );
    }

    #[test]
    fn one_unnamed_source_is_a_list_of_one_and_metrics_and_health_stay_as_they_were() {
        let report = RunReport::new();
        let t = telemetry(&report);
        running(
            &report,
            &[(
                None,
                Some(crate::capture::SourceStatus::new(
                    &crate::service::Liveness::new(),
                )),
            )],
        );
        let mut board =
            crate::status::StatusBoard::new(Arc::clone(&t.board), t.metrics.results.clone());
        judge(&mut board, &t, 0, 4, 1);
        let status = status_json(&t);
        let cameras = status["cameras"].as_array().unwrap();
        assert_eq!(cameras.len(), 1);
        assert_eq!(
            (&cameras[0]["name"], &cameras[0]["kind"]),
            (&Value::Null, &json!("rtsp"))
        );
        assert_eq!(
            (&cameras[0]["pass"], &cameras[0]["fail"]),
            (&json!(4), &json!(1))
        );
        assert_eq!(cameras[0]["up"], status["source"]["up"]);
        assert_eq!(status["rejects"][0]["camera"], Value::Null);
        assert!(!t.metrics.encode_prometheus().contains("sealcheck_camera_"));
        assert!(!t.health().unwrap().contains(';'));
    }

    fn no_camera(_: &str) -> bool {
        false
    }

    #[test]
    fn a_cameras_folder_is_served_only_for_a_camera_of_the_run() {
        let top = |c: &str| c == "top";
        assert_eq!(
            safe_archive_path("top/2026-11-23/07/20261123T071530.123Z_42_defect.jpg", top),
            Some(PathBuf::from(
                "top/2026-11-23/07/20261123T071530.123Z_42_defect.jpg"
            ))
        );
        assert!(safe_archive_path("top/2026-11-23/manifest.jsonl", top).is_some());
        // A day path still works (a `[source]` run's files, left in the folder).
        assert!(safe_archive_path("2026-11-23/manifest.jsonl", top).is_some());
        for bad in [
            "side/2026-11-23/manifest.jsonl",
            "shadow/2026-11-23/07/x.jpg",
            "top/../2026-11-23/manifest.jsonl",
            "top/top/2026-11-23/manifest.jsonl",
            "top/2026-11-23/07/x.txt",
            "top",
            "top/",
            "..%2Ftop/2026-11-23/manifest.jsonl",
        ] {
            assert!(safe_archive_path(bad, top).is_none(), "{bad}");
        }
    }

    #[test]
    fn only_archive_shaped_paths_pass() {
        assert!(
            safe_archive_path(
                "2026-11-23/07/20261123T071530.123Z_42_defect.jpg",
                no_camera
            )
            .is_some()
        );
        assert!(
            safe_archive_path(
                "2026-11-23/07/20261123T071530.123Z_42_defect_mask.png",
                no_camera
            )
            .is_some()
        );
        assert!(safe_archive_path("2026-11-23/manifest.jsonl", no_camera).is_some());
        for bad in [
            "../etc/passwd",
            "2026-11-23/07/../../../etc/passwd",
            "2026-11-23/07/..%2F..%2Fetc%2Fpasswd",
            "2026-11-23%2F07%2Fx.jpg",
            "/etc/passwd",
            "2026-11-23/07/.hidden.jpg",
            "2026-11-23/07/x.jpg/",
            "2026-11-23/07/x.txt",
            "2026-11-23//x.jpg",
            "2026-11-23/07/x%00.jpg",
            "..",
            "",
        ] {
            assert!(safe_archive_path(bad, no_camera).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_link_out_of_the_archive_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let archive = tmp.path().join("archive");
        std::fs::create_dir_all(archive.join("2026-11-23/07")).unwrap();
        std::fs::write(tmp.path().join("secret.jpg"), b"secret").unwrap();
        std::os::unix::fs::symlink(
            tmp.path().join("secret.jpg"),
            archive.join("2026-11-23/07/x.jpg"),
        )
        .unwrap();
        std::fs::write(archive.join("2026-11-23/07/y.jpg"), b"inside").unwrap();
        let rel = |p| safe_archive_path(p, no_camera).unwrap();
        assert_eq!(read_inside(&archive, &rel("2026-11-23/07/x.jpg")), None);
        assert_eq!(
            read_inside(&archive, &rel("2026-11-23/07/y.jpg")),
            Some(b"inside".to_vec())
        );
    }
}
