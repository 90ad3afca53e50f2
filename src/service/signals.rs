//! Turns process signals into service requests on a channel.
//!
//! ```text
//! SIGTERM, SIGINT  -> Stop       (drain frames in flight, then exit 0)
//! again, either    -> ForceStop  (the operator means it: stop draining)
//! SIGHUP           -> Reload     (re-read the config; `systemctl reload`)
//! ```
//!
//! signal-hook's iterator runs the (async-signal-safe) handler and wakes a plain thread,
//! which does the counting and sends on a crossbeam channel the main loop selects on.

use crossbeam_channel::{Receiver, Sender};
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// What a signal asks the service to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceSignal {
    /// Finish frames in flight, then exit.
    Stop,
    /// A second stop request during the drain: exit without waiting further.
    ForceStop,
    /// Re-read the configuration file.
    Reload,
}

#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("cannot install handlers for SIGTERM/SIGINT/SIGHUP: {source}")]
    Register { source: std::io::Error },
    #[error("cannot start the signal thread: {source}")]
    Thread { source: std::io::Error },
}

/// Starts forwarding signals for the rest of the process's life and returns the channel.
/// The thread ends by itself once the receiver is dropped and another signal arrives.
pub fn watch_signals() -> Result<Receiver<ServiceSignal>, SignalError> {
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|source| SignalError::Register { source })?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || forward(&mut signals, &tx))
        .map_err(|source| SignalError::Thread { source })?;
    Ok(rx)
}

fn forward(signals: &mut Signals, tx: &Sender<ServiceSignal>) {
    let mut stops_seen = 0u32;
    for signal in signals.forever() {
        let Some(request) = classify(signal, &mut stops_seen) else {
            continue;
        };
        // The main loop logs what it does about each request; this only records the cause.
        log::debug!(target: "sealcheck::service", signal = signal_name(signal), request:? = request; "signal received");
        if tx.send(request).is_err() {
            // Nobody listens any more: the service is on its way out.
            return;
        }
    }
}

/// Maps a signal to a request. The first SIGTERM/SIGINT is `Stop`, every later one
/// `ForceStop`; `stops_seen` carries the count between calls.
pub fn classify(signal: i32, stops_seen: &mut u32) -> Option<ServiceSignal> {
    match signal {
        SIGTERM | SIGINT => {
            *stops_seen = stops_seen.saturating_add(1);
            Some(if *stops_seen == 1 {
                ServiceSignal::Stop
            } else {
                ServiceSignal::ForceStop
            })
        }
        SIGHUP => Some(ServiceSignal::Reload),
        _ => None,
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        SIGHUP => "SIGHUP",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn first_stop_drains_later_ones_force() {
        let mut stops = 0;
        assert_eq!(classify(SIGHUP, &mut stops), Some(ServiceSignal::Reload));
        assert_eq!(classify(SIGTERM, &mut stops), Some(ServiceSignal::Stop));
        assert_eq!(classify(SIGHUP, &mut stops), Some(ServiceSignal::Reload));
        assert_eq!(classify(SIGINT, &mut stops), Some(ServiceSignal::ForceStop));
        assert_eq!(
            classify(SIGTERM, &mut stops),
            Some(ServiceSignal::ForceStop)
        );
        assert_eq!(classify(signal_hook::consts::SIGUSR1, &mut stops), None);
    }

    /// Raises real signals at this process. The handlers are installed before the first
    /// raise, so the default action (terminate) never runs.
    #[test]
    fn real_signals_arrive_on_the_channel_in_order() {
        let rx = watch_signals().unwrap();
        let wait = Duration::from_secs(5);
        signal_hook::low_level::raise(SIGHUP).unwrap();
        assert_eq!(rx.recv_timeout(wait), Ok(ServiceSignal::Reload));
        signal_hook::low_level::raise(SIGTERM).unwrap();
        assert_eq!(rx.recv_timeout(wait), Ok(ServiceSignal::Stop));
        signal_hook::low_level::raise(SIGINT).unwrap();
        assert_eq!(rx.recv_timeout(wait), Ok(ServiceSignal::ForceStop));
    }
}
