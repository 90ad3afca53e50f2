//! The accept loop of the status server: HTTP/1 connections served by
//! hyper with limits `axum::serve` does not set. A client that opens a
//! connection and sends its request line or headers slowly (or not at all,
//! or idles on a kept-alive connection) is cut off after
//! `HEADER_READ_TIMEOUT`, and at most `MAX_CONNECTIONS` are open at once, so
//! a slow or stuck client on the factory network cannot hold the page (or
//! the server's memory) for good. The per-request limits (size, time,
//! concurrency) stay in the router's layers.

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};

/// Longest a client may take to send a request's line and headers, also
/// the longest a kept-alive connection may idle between requests.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections open at once; one more is closed as soon as it is accepted.
pub const MAX_CONNECTIONS: usize = 64;
/// Pause after a failed accept (out of file descriptors, say), so the loop
/// does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `shutdown` fires (or its sender is
/// dropped). Connections still open then are dropped with the runtime.
pub async fn serve(listener: TcpListener, app: Router, mut shutdown: oneshot::Receiver<()>) {
    let slots = std::sync::Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut accept_error_logged = false;
    let mut refused_logged = false;
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                accept_error_logged = false;
                stream
            }
            Err(e) => {
                if !accept_error_logged {
                    accept_error_logged = true;
                    log::warn!(target: "sealcheck::status", error = e.to_string().as_str();
                        "status server cannot accept a connection; retrying");
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let Ok(slot) = std::sync::Arc::clone(&slots).try_acquire_owned() else {
            if !refused_logged {
                refused_logged = true;
                log::warn!(target: "sealcheck::status", max_connections = MAX_CONNECTIONS;
                    "status server: too many open connections; closing new ones until some end");
            }
            drop(stream);
            continue;
        };
        refused_logged = false;
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                log::debug!(target: "sealcheck::status", error = e.to_string().as_str(); "status connection ended");
            }
            drop(slot);
        });
    }
}
