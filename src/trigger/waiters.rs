//! `PartWaiters`: a camera's verdicts as the line gets them, for whoever
//! waits for one part's (the HTTP trigger). A `LineOutput`: it never
//! blocks the line; a waiter that falls far behind misses verdicts and
//! times out, it does not slow anything.

use tokio::sync::broadcast;

use crate::line::{LineOutput, LineVerdict};

/// Verdicts kept for slow waiters (a few seconds of parts).
const KEPT: usize = 1024;

pub struct PartWaiters {
    verdicts: broadcast::Sender<LineVerdict>,
}

impl Default for PartWaiters {
    fn default() -> Self {
        PartWaiters {
            verdicts: broadcast::channel(KEPT).0,
        }
    }
}

impl PartWaiters {
    /// Every verdict sent from now on. Subscribe before triggering, so the
    /// part's verdict cannot come before the wait starts.
    pub fn subscribe(&self) -> broadcast::Receiver<LineVerdict> {
        self.verdicts.subscribe()
    }
}

impl LineOutput for PartWaiters {
    fn send(&self, verdict: &LineVerdict) {
        // Nobody waiting is the usual case: nothing to do then.
        if self.verdicts.receiver_count() > 0 {
            let _ = self.verdicts.send(verdict.clone());
        }
    }
}

/// Waits for the verdict of part `number` (`Part::number`), up to `limit`.
pub async fn verdict_of(
    verdicts: &mut broadcast::Receiver<LineVerdict>,
    number: u64,
    limit: std::time::Duration,
) -> Option<LineVerdict> {
    let wait = async {
        loop {
            match verdicts.recv().await {
                Ok(v) if v.part.number == number => return Some(v),
                Ok(v) if v.part.number > number => return None,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    };
    tokio::time::timeout(limit, wait).await.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;
    use crate::frame::{FrameMeta, Part};
    use std::time::Duration;

    fn verdict(number: u64) -> LineVerdict {
        let meta = FrameMeta::now(number);
        LineVerdict {
            seq: number,
            part: Part {
                id: 4711 + number,
                ..Part::free(number)
            },
            captured_at: meta.captured_at,
            captured_instant: meta.captured_instant,
            decision: Decision::error(),
            latency_ms: 1.0,
            deadline: None,
            models: None,
            camera: None,
            cavities: None,
        }
    }

    #[test]
    fn a_waiter_gets_its_parts_verdict_and_nothing_else() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let waiters = PartWaiters::default();
        let mut rx = waiters.subscribe();
        waiters.send(&verdict(0));
        waiters.send(&verdict(1));
        let got = runtime.block_on(verdict_of(&mut rx, 1, Duration::from_secs(1)));
        assert_eq!(got.map(|v| v.part.id), Some(4712));
        // A part whose verdict never comes: the wait ends at its limit.
        let got = runtime.block_on(verdict_of(&mut rx, 5, Duration::from_millis(20)));
        assert!(got.is_none());
    }
}
