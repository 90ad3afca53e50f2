//! The per-part deadline clock: every delivered frame's deadline goes into a
//! FIFO the moment capture hands the frame on; one thread sleeps until the
//! oldest open part's deadline and, if the decision stage has not claimed it by
//! then, gives the line a `late` fail for it, at the deadline, by the timer.
//!
//! Parts are decided in capture order and deadlines only grow with `seq`, so
//! the thread only ever needs the front of the FIFO.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};

use super::gate::Line;
use super::part_deadline::PartDeadline;
use crate::frame::FrameMeta;

/// Parts whose deadline may be pending at once. The thread removes them at
/// their deadline at the latest, so this holds `deadline_ms` worth of frames:
/// 60 s at 60 frames/s.
const PENDING_PARTS: usize = 4096;

/// The producer side, called for each delivered frame in `seq` order (from
/// the ring producer, so with the frame's final capture time).
pub struct DeadlineFeed {
    line: Arc<Line>,
    fifo: Sender<(FrameMeta, PartDeadline)>,
    /// Deadlines never go backwards (a shorter deadline after a reload, or a
    /// dropped frame stamped at arrival): the thread relies on it.
    last_due: Option<std::time::Instant>,
    full_logged: bool,
}

impl DeadlineFeed {
    pub fn delivered(&mut self, meta: &FrameMeta) {
        let Some(deadline) = self.line.deadline() else {
            return;
        };
        let mut part = PartDeadline::of(meta, deadline);
        if let Some(last) = self.last_due
            && part.due < last
        {
            part.due = last;
            part.expires = last;
        }
        self.last_due = Some(part.due);
        match self.fifo.try_send((*meta, part)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.line.stats().untimed.fetch_add(1, Ordering::Relaxed);
                if !self.full_logged {
                    self.full_logged = true;
                    log::error!(target: "sealcheck::line", seq = meta.seq, pending = PENDING_PARTS;
                        "deadline queue full: parts from here get their verdict without a deadline timer until it drains");
                }
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

/// The deadline thread, for the end of a run.
pub struct DeadlineThread {
    handle: JoinHandle<()>,
    /// Disconnected when the thread ends (its sender is dropped with it).
    ended: Receiver<()>,
}

impl DeadlineThread {
    /// Waits up to `limit` for the thread to end (no polling: the wait ends
    /// the moment its sender drops) and joins it; `false` when it is still
    /// running, left behind.
    pub fn join_within(self, limit: std::time::Duration) -> bool {
        match self.ended.recv_timeout(limit) {
            // Nothing is ever sent: a disconnect is the thread's closure
            // returning, so the join waits only for the thread's exit.
            Err(RecvTimeoutError::Disconnected) | Ok(()) => {
                let _ = self.handle.join();
                true
            }
            Err(RecvTimeoutError::Timeout) => false,
        }
    }
}

/// Starts the deadline thread; it ends when the feed is dropped and every
/// pending part has been claimed or failed late.
pub fn start(line: Arc<Line>) -> std::io::Result<(DeadlineFeed, DeadlineThread)> {
    let (tx, rx) = bounded(PENDING_PARTS);
    let (ended_tx, ended) = bounded::<()>(0);
    let thread_line = Arc::clone(&line);
    let handle = std::thread::Builder::new()
        .name("deadline".into())
        .spawn(move || {
            // Dropped when this thread ends, which wakes `join_within`.
            let _ended = ended_tx;
            run(&thread_line, &rx)
        })?;
    Ok((
        DeadlineFeed {
            line,
            fifo: tx,
            last_due: None,
            full_logged: false,
        },
        DeadlineThread { handle, ended },
    ))
}

fn run(line: &Line, fifo: &Receiver<(FrameMeta, PartDeadline)>) {
    super::priority::raise_thread_priority();
    for (meta, deadline) in fifo.iter() {
        if line.is_claimed(meta.part.number) {
            continue;
        }
        let now = Instant::now();
        if deadline.due > now {
            std::thread::sleep(deadline.due - now);
        }
        if line.expire(&meta, deadline) {
            log::debug!(target: "sealcheck::line", seq = meta.seq; "no verdict by the deadline: the line gets a late fail");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Reason;
    use crate::line::verdict::{LineOutput, LineVerdict};
    use std::sync::Mutex;
    use std::time::Duration;

    /// (seq, reason, when it came, when it was due).
    type Arrival = (u64, Reason, Instant, Option<Instant>);

    /// Test double: records each verdict with the time it came.
    #[derive(Default)]
    struct Clocked(Mutex<Vec<Arrival>>);

    impl LineOutput for Clocked {
        fn send(&self, v: &LineVerdict) {
            self.0.lock().unwrap().push((
                v.seq,
                v.decision.reason,
                Instant::now(),
                v.deadline.map(|d| d.due),
            ));
        }
    }

    #[test]
    fn open_parts_fail_late_at_their_deadline_and_decided_ones_do_not() {
        let out = Arc::new(Clocked::default());
        let line = Arc::new(Line::new(
            vec![out.clone() as Arc<dyn LineOutput>],
            Some(Duration::from_millis(30)),
        ));
        let (mut feed, thread) = start(Arc::clone(&line)).unwrap();
        let metas: Vec<FrameMeta> = (0..4).map(FrameMeta::now).collect();
        for m in &metas {
            feed.delivered(m);
        }
        // Part 0 is decided at once; 1..3 never are.
        line.deliver(
            &metas[0],
            &crate::decision::Decision::error(),
            0.1,
            None,
            None,
        );
        drop(feed);
        assert!(
            thread.join_within(Duration::from_secs(10)),
            "the deadline thread ends once its feed is gone and every part is decided"
        );
        let got = out.0.lock().unwrap().clone();
        let seqs: Vec<u64> = got.iter().map(|g| g.0).collect();
        assert_eq!(seqs, vec![0, 1, 2, 3]);
        assert_eq!(got[0].1, Reason::Error);
        for (seq, reason, at, due) in &got[1..] {
            assert_eq!(*reason, Reason::Late, "part {seq}");
            let due = due.unwrap();
            assert!(*at >= due, "part {seq} failed before its deadline");
            assert!(
                *at - due < Duration::from_millis(20),
                "part {seq}: {:?} after",
                *at - due
            );
        }
    }
}
