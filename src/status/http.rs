//! The HTTP side: a small tokio runtime on its own thread serving the
//! status page, `/metrics`, `/healthz`, `/api/status`, the live frame and
//! archived files. Read-only; every request is bounded in size and time.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tower::limit::ConcurrencyLimitLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use super::board::{BoardState, WINDOW};
use super::{RunFacts, Telemetry};
use crate::archive::{ArchiveName, is_day, is_hour};
use crate::decision::Reason;
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
    Router::new()
        .route("/", get(page))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/api/status", get(api_status))
        .route("/api/live.jpg", get(live_jpeg))
        .route("/archive/{*path}", get(archive_file))
        .fallback(not_found)
        .with_state(telemetry)
        .layer(axum::middleware::from_fn(guard))
        .layer(RequestBodyLimitLayer::new(MAX_BODY))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
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
    let value = tokio::task::spawn_blocking(move || status_json(&t)).await;
    match value {
        Ok(v) => axum::Json(v).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "status unavailable\n").into_response(),
    }
}

async fn live_jpeg(State(t): State<Arc<Telemetry>>) -> Response {
    let live = Arc::clone(&t.live);
    match tokio::task::spawn_blocking(move || live.jpeg()).await {
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
                HeaderValue::from_static(frame.verdict.as_str()),
            );
            h.insert(
                "x-sealcheck-reason",
                HeaderValue::from_static(frame.reason.as_str()),
            );
            response
        }
        // No frame yet: the first one is on its way.
        _ => StatusCode::NO_CONTENT.into_response(),
    }
}

/// `/archive/YYYY-MM-DD/HH/<name>.(jpg|png)` or `/archive/YYYY-MM-DD/manifest.jsonl`.
/// Anything else, including every attempt to leave the archive folder
/// (`..`, absolute paths, encoded characters, links), is 404.
async fn archive_file(State(t): State<Arc<Telemetry>>, uri: Uri) -> Response {
    let Some(dir) = t.archive().map(|a| a.dir) else {
        return not_found().await;
    };
    let Some(relative) = uri
        .path()
        .strip_prefix("/archive/")
        .and_then(safe_archive_path)
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
/// it has exactly the archive's shape.
fn safe_archive_path(raw: &str) -> Option<PathBuf> {
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

fn by_reason(counts: &[u64]) -> Value {
    Reason::ALL
        .iter()
        .zip(counts)
        .map(|(r, n)| (r.as_str().to_string(), json!(n)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn yield_pct(passed: u64, total: u64) -> Value {
    if total == 0 {
        Value::Null
    } else {
        json!((passed as f64 * 1000.0 / total as f64).round() / 10.0)
    }
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
    let rejects: Vec<Value> = board
        .rejects()
        .map(|r| {
            let name = ArchiveName::new(r.captured_at, r.seq, r.reason.as_str());
            let link = |p: String| Value::String(format!("/archive/{p}"));
            json!({
                "seq": r.seq,
                "ts": rfc3339(r.captured_at),
                "reason": r.reason.as_str(),
                "defect_prob": r.defect_prob,
                "image": match (r.archived, ext) { (true, Some(ext)) => link(name.frame(ext)), _ => Value::Null },
                "mask": if r.archived && ext.is_some() { link(name.mask()) } else { Value::Null },
            })
        })
        .collect();
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
        "late": external.late(),
        "last": board.last.map(|l| json!({
            "seq": l.seq,
            "ts": rfc3339(l.captured_at),
            "verdict": l.verdict.as_str(),
            "reason": l.reason.as_str(),
            "latency_ms": l.latency_ms,
        })),
        "rejects": rejects,
        "archive": archive_json,
        "mqtt": external.mqtt_json(),
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

    #[test]
    fn only_archive_shaped_paths_pass() {
        assert!(safe_archive_path("2026-11-23/07/20261123T071530.123Z_42_defect.jpg").is_some());
        assert!(
            safe_archive_path("2026-11-23/07/20261123T071530.123Z_42_defect_mask.png").is_some()
        );
        assert!(safe_archive_path("2026-11-23/manifest.jsonl").is_some());
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
            assert!(safe_archive_path(bad).is_none(), "{bad}");
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
        let rel = |p| safe_archive_path(p).unwrap();
        assert_eq!(read_inside(&archive, &rel("2026-11-23/07/x.jpg")), None);
        assert_eq!(
            read_inside(&archive, &rel("2026-11-23/07/y.jpg")),
            Some(b"inside".to_vec())
        );
    }
}
