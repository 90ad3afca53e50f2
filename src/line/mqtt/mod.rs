//! Verdicts to an MQTT broker (MQTT 5, `rumqttc`).
//!
//! ```text
//! Line ──send()──▶ VerdictQueue (bounded, drop-oldest) ──▶ "mqtt-publish" thread ──try_publish──▶ rumqttc Client
//!                                                                                                     │ request channel
//!                        "mqtt" thread: owns the Connection, drives its event loop ◀──────────────────┘
//!                        (connect, backoff, ConnAck → status online, PubAck → published, errors → outage)
//! ```
//!
//! Rules the design keeps:
//! - Publishing never blocks inspection: `send` only takes a short lock and queues.
//! - Nothing leaves after it expired: a verdict that can no longer reach the
//!   broker before its deadline becomes the part's `late` fail (which may
//!   still go out for one more deadline period), and a `late` fail past that
//!   is dropped (`expired`), before anything is handed over; at most `WINDOW` are handed to
//!   rumqttc at a time, and only while connected (under the queue's lock, so a
//!   disconnect cannot slip in between). On a disconnect rumqttc's own resend
//!   list (where stale publishes would otherwise wait, rumqtt issue 211) is
//!   emptied; what was not acknowledged goes back to the front of our queue,
//!   where it is either sent again in time or dropped as expired.
//! - MQTT 5 message expiry is whole seconds: each publish carries the time left
//!   rounded up (at least 1 s), so a broker never keeps it much past its expiry;
//!   the client-side check is what keeps the exact deadline.
//! - Every verdict handed to MQTT ends as exactly one of: published (QoS 1:
//!   acknowledged by the broker; QoS 0: written), or dropped for a reason.
//! - `<topic>/status` is `online` (retained) after each connect, and the last
//!   will, `offline` (retained, QoS 1), when the connection dies; a clean stop
//!   publishes `offline` itself.
//!
//! The files: `mqtt_line` (`MqttLine`: start, output, finish), `queue` (the
//! shared queue and `VerdictQueue`), `client` (the two threads and rumqttc),
//! `message` (a verdict's JSON), `stats` (`MqttStats`, `MqttCounts`,
//! `DropReason`), `check` (`check_files` for `check-config`), `tls` and
//! `start_error` (what can stop MQTT from starting).

mod check;
mod client;
pub mod message;
mod mqtt_line;
mod queue;
mod start_error;
mod stats;
#[cfg(test)]
mod testing;
mod tls;

pub use check::{MqttFilesError, check_files};
pub use mqtt_line::MqttLine;
pub use stats::{DropReason, MqttCounts, MqttStats};
