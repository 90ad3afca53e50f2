//! `PartRings`: the cameras' rings as the frame path reads them, parts
//! made. In `free` mode every event passes as it is (a frame is a part).
//! In `plc` mode each frame is paired with its camera's waiting triggers
//! (`matcher`): a claimed frame goes on carrying its part, a frame no
//! trigger claims goes straight back to capture (counted), and a trigger
//! without a frame becomes a `PartMissed` marker in its place, so every
//! accepted trigger gets exactly one result, in trigger order.
//!
//! ```text
//! capture ─ring─▶ RingSet::pop ─▶ PartRings::pop ─▶ Popped::Frame (part set) ─▶ preprocess / device batcher
//!                                      │  └────────▶ Popped::Marker(PartMissed { no_frame | overrun })
//!                                      └─ unclaimed: recycle + count
//! TriggerDesk (Modbus, HTTP) ─waiting triggers─┘
//! ```

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::desk::{Pending, TriggerDesk};
use super::matcher::{claim, expire, next_expiry};
use crate::capture::{CameraRings, EndOfStream};
use crate::frame::{CameraIndex, FrameMeta, FrameSlot, FrameSource, Next, PartMiss, StageMessage};
use crate::ring::{Popped, RingEvent};
use crate::service::Liveness;

/// Longest the frame path waits for a frame while triggers may come: a new
/// trigger's `no_frame` clock is looked at within this (the desk does not
/// wake the frame path).
const TRIGGER_LOOK: Duration = Duration::from_millis(10);

/// Where a frame no trigger claimed may still be shown (the page's live
/// view): called before the frame goes back to capture; must not wait.
pub trait UnjudgedFrames: Send + Sync {
    fn offer(&self, frame: &FrameSlot);
}

/// The rings, with each camera's triggers in `plc` mode.
pub struct PartRings {
    rings: CameraRings,
    triggers: Option<Triggers>,
    /// Events made and not yet handed out, in order.
    ready: VecDeque<Popped<EndOfStream>>,
}

struct Triggers {
    /// By camera index.
    desks: Vec<Arc<TriggerDesk>>,
    frame_wait: Duration,
    liveness: Liveness,
    /// The live view, for frames no trigger claims.
    unjudged: Option<Arc<dyn UnjudgedFrames>>,
}

impl PartRings {
    /// Every frame a part (`[trigger] mode = "free"`).
    pub fn free(rings: CameraRings) -> PartRings {
        PartRings {
            rings,
            triggers: None,
            ready: VecDeque::new(),
        }
    }

    /// Parts are triggers (`plc`): `desks[i]` is camera `i`'s.
    pub fn triggered(
        rings: CameraRings,
        desks: Vec<Arc<TriggerDesk>>,
        frame_wait: Duration,
        liveness: Liveness,
    ) -> PartRings {
        assert_eq!(desks.len(), rings.cameras(), "one trigger desk per camera");
        PartRings {
            rings,
            triggers: Some(Triggers {
                desks,
                frame_wait,
                liveness,
                unjudged: None,
            }),
            ready: VecDeque::new(),
        }
    }

    /// Frames no trigger claims are offered to `view` (the live view)
    /// before they go back to capture.
    pub fn show_unjudged(mut self, view: Option<Arc<dyn UnjudgedFrames>>) -> PartRings {
        if let Some(triggers) = &mut self.triggers {
            triggers.unjudged = view;
        }
        self
    }

    /// Gives a frame's slot back to its camera's capture.
    pub fn recycle(&mut self, slot: Box<FrameSlot>) {
        self.rings.recycle(slot);
    }

    /// The next frame (its part set), marker or end, waiting up to
    /// `timeout`; `None` when nothing came. In `plc` mode, triggers whose
    /// wait ended come out as `PartMissed` markers when they are due.
    pub fn pop(&mut self, timeout: Duration) -> Option<Popped<EndOfStream>> {
        if self.triggers.is_none() {
            return self.rings.pop(timeout).map(RingEvent::popped);
        }
        let until = Instant::now() + timeout;
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            let now = Instant::now();
            let next_due = self.expire_waiting(now);
            if !self.ready.is_empty() {
                continue;
            }
            let wait = until
                .saturating_duration_since(now)
                .min(TRIGGER_LOOK)
                .min(next_due.map_or(Duration::MAX, |due| due.saturating_duration_since(now)));
            match self.rings.pop(wait) {
                Some(event) => self.take(event),
                None if Instant::now() >= until => return None,
                None => {}
            }
        }
    }

    /// Fails `no_frame` every trigger whose wait ended while no frame of
    /// its camera waits in the ring (or its camera has ended). Returns when
    /// the next wait of those cameras ends (read under the same lock); a
    /// camera with a frame waiting is left out: the ring's pop returns at once.
    fn expire_waiting(&mut self, now: Instant) -> Option<Instant> {
        let triggers = self.triggers.as_ref()?;
        let mut next_due: Option<Instant> = None;
        for (camera, desk) in triggers.desks.iter().enumerate() {
            let camera = camera as CameraIndex;
            let ended = self.rings.has_ended(camera);
            if !ended && self.rings.is_waiting(camera) {
                continue;
            }
            let gone = {
                let mut waiting = desk.waiting();
                let gone = if ended {
                    waiting.queue.drain(..).collect()
                } else {
                    expire(&mut waiting.queue, now, triggers.frame_wait)
                };
                if let Some(due) = next_expiry(&waiting.queue, triggers.frame_wait) {
                    next_due = Some(next_due.map_or(due, |d| d.min(due)));
                }
                gone
            };
            for pending in gone {
                self.ready
                    .push_back(missed(desk, pending, PartMiss::NoFrame));
            }
        }
        next_due
    }

    /// One ring event, paired with its camera's triggers.
    fn take(&mut self, event: RingEvent<EndOfStream>) {
        let Some(triggers) = &self.triggers else {
            self.ready.push_back(event.popped());
            return;
        };
        let (camera, captured) = match &event {
            RingEvent::Frame(slot) => (slot.meta.camera, slot.meta.captured_instant),
            RingEvent::Dropped { meta, .. } | RingEvent::Failed { meta, .. } => {
                (meta.camera, meta.captured_instant)
            }
            RingEvent::End(_) => {
                // Every camera ended: whatever still waits gets no frame.
                for desk in &triggers.desks {
                    let gone: Vec<Pending> = {
                        let mut waiting = desk.waiting();
                        // Under the same lock: no trigger is taken after this.
                        waiting.closed = true;
                        waiting.queue.drain(..).collect()
                    };
                    for pending in gone {
                        self.ready
                            .push_back(missed(desk, pending, PartMiss::NoFrame));
                    }
                }
                self.ready.push_back(event.popped());
                return;
            }
        };
        let Some(desk) = triggers.desks.get(usize::from(camera)) else {
            self.ready.push_back(event.popped());
            return;
        };
        let claim = claim(&mut desk.waiting().queue, captured, triggers.frame_wait);
        for pending in claim.no_frame {
            self.ready
                .push_back(missed(desk, pending, PartMiss::NoFrame));
        }
        match (event, claim.claimed_by) {
            (RingEvent::Frame(mut slot), Some(by)) => {
                slot.meta.part = by.part;
                self.ready.push_back(Popped::Frame(slot));
            }
            (RingEvent::Frame(slot), None) => {
                if let Some(view) = &triggers.unjudged {
                    view.offer(&slot);
                }
                pass_over(triggers, camera, 1);
                self.rings.recycle(slot);
            }
            // A dropped run or a failed copy: only a claimed frame's part
            // gets its result (not_inspected, error); the rest are passed over.
            (RingEvent::Dropped { meta, count }, Some(by)) => {
                let first = FrameMeta {
                    part: by.part,
                    ..meta
                };
                self.ready
                    .push_back(Popped::Marker(StageMessage::NotInspected {
                        first,
                        count: 1,
                    }));
                pass_over(triggers, camera, count - 1);
            }
            (RingEvent::Failed { meta, message }, Some(by)) => {
                let meta = FrameMeta {
                    part: by.part,
                    ..meta
                };
                self.ready
                    .push_back(Popped::Marker(StageMessage::CaptureFailed {
                        meta,
                        message,
                    }));
            }
            (RingEvent::Dropped { count, .. }, None) => pass_over(triggers, camera, count),
            (RingEvent::Failed { .. }, None) => pass_over(triggers, camera, 1),
            (RingEvent::End(_), _) => unreachable!("the end returned above"),
        }
        let Some(triggers) = &self.triggers else {
            return;
        };
        let desk = &triggers.desks[usize::from(camera)];
        for pending in claim.overrun {
            self.ready
                .push_back(missed(desk, pending, PartMiss::Overrun));
        }
    }
}

/// `frames` of `camera` no trigger claimed: counted, not judged.
fn pass_over(triggers: &Triggers, camera: CameraIndex, frames: u64) {
    if frames == 0 {
        return;
    }
    triggers.desks[usize::from(camera)]
        .passed_over
        .fetch_add(frames, Ordering::Relaxed);
    triggers.liveness.frames_passed_over(frames);
}

/// The marker that stands for a trigger no frame was judged for.
fn missed(desk: &TriggerDesk, pending: Pending, miss: PartMiss) -> Popped<EndOfStream> {
    Popped::Marker(StageMessage::PartMissed {
        meta: desk.part_meta(pending.part, pending.trigger()),
        miss,
    })
}

/// A ring's message that is not a frame (`PartRings` as a `FrameSource`).
#[derive(Debug)]
pub enum NotAFrame<End> {
    /// `NotInspected`, `CaptureFailed` or `PartMissed`, in the place of its
    /// frames.
    Marker(StageMessage),
    /// Every camera's stream ended; the most severe end stands for all.
    End(End),
}

/// The device thread's source (`infer::batcher::Batcher` reads it): every
/// camera's ring, read fairly (`ring::RingSet`), with parts made; the end
/// comes once every camera ended, as `NotAFrame::End` (the rings never
/// close).
impl FrameSource for PartRings {
    type Frame = Box<FrameSlot>;
    type Other = NotAFrame<EndOfStream>;

    fn next(&mut self, wait: Duration) -> Next<Box<FrameSlot>, NotAFrame<EndOfStream>> {
        match self.pop(wait) {
            Some(Popped::Frame(slot)) => Next::Frame(slot),
            Some(Popped::Marker(message)) => Next::Other(NotAFrame::Marker(message)),
            Some(Popped::End(end)) => Next::Other(NotAFrame::End(end)),
            None => Next::Idle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OverflowPolicy;
    use crate::frame::TriggeredBy;
    use crate::ring::frame_ring;

    type Producer = crate::ring::RingProducer<EndOfStream>;

    const WAIT: Duration = Duration::from_millis(100);

    /// A plc-mode ring set of one camera whose triggers wait `WAIT`.
    fn station() -> (Producer, PartRings, Arc<TriggerDesk>) {
        let (producer, consumer) = frame_ring::<EndOfStream>(4);
        let desk = Arc::new(TriggerDesk::new(0, Duration::ZERO));
        desk.set_ready(true);
        let rings = PartRings::triggered(
            CameraRings::new(vec![consumer]),
            vec![Arc::clone(&desk)],
            WAIT,
            Liveness::new(),
        );
        (producer, rings, desk)
    }

    /// Capture delivers frame `seq`, captured now.
    fn deliver(producer: &mut Producer, seq: u64) {
        let mut slot = producer
            .acquire_slot(OverflowPolicy::Drop)
            .expect("a free slot");
        slot.meta = FrameMeta::now(seq);
        producer.push(RingEvent::Frame(slot));
    }

    /// What the frame path gets next: (seq, part id) of a frame, or the
    /// miss of a trigger's part id.
    #[derive(Debug, PartialEq)]
    enum Got {
        Frame(u64, u64),
        Missed(u64, PartMiss),
    }

    fn next(rings: &mut PartRings, timeout: Duration) -> Option<Got> {
        match rings.pop(timeout)? {
            Popped::Frame(slot) => {
                let got = Got::Frame(slot.meta.seq, slot.meta.part.id);
                assert!(slot.meta.part.trigger.is_some() && slot.meta.part.framed);
                rings.recycle(slot);
                Some(got)
            }
            Popped::Marker(StageMessage::PartMissed { meta, miss }) => {
                assert!(!meta.part.framed);
                Some(Got::Missed(meta.part.id, miss))
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn unclaimed_frames_go_back_to_capture_and_a_trigger_claims_the_next_one() {
        let (mut producer, mut rings, desk) = station();
        // Four frames, no trigger: none is handed on, every slot comes back.
        for seq in 0..4 {
            deliver(&mut producer, seq);
        }
        assert_eq!(next(&mut rings, Duration::from_millis(30)), None);
        assert_eq!(desk.passed_over(), 4);
        for seq in 4..8 {
            deliver(&mut producer, seq);
            assert_eq!(next(&mut rings, Duration::from_millis(5)), None);
        }
        // A trigger, then two frames: the first is the part's, the second passed over.
        desk.trigger(4711, TriggeredBy::Plc).unwrap();
        deliver(&mut producer, 8);
        deliver(&mut producer, 9);
        assert_eq!(next(&mut rings, WAIT), Some(Got::Frame(8, 4711)));
        assert_eq!(next(&mut rings, Duration::from_millis(10)), None);
        assert_eq!(desk.passed_over(), 9);
    }

    #[test]
    fn two_triggers_before_a_frame_give_the_frame_then_an_overrun() {
        let (mut producer, mut rings, desk) = station();
        desk.trigger(1, TriggeredBy::Plc).unwrap();
        desk.trigger(2, TriggeredBy::Plc).unwrap();
        deliver(&mut producer, 0);
        assert_eq!(next(&mut rings, WAIT), Some(Got::Frame(0, 1)));
        assert_eq!(
            next(&mut rings, WAIT),
            Some(Got::Missed(2, PartMiss::Overrun))
        );
    }

    #[test]
    fn a_trigger_with_no_frame_fails_no_frame_when_its_wait_ends() {
        let (_producer, mut rings, desk) = station();
        let triggered = Instant::now();
        desk.trigger(7, TriggeredBy::Plc).unwrap();
        assert_eq!(
            next(&mut rings, Duration::from_secs(2)),
            Some(Got::Missed(7, PartMiss::NoFrame))
        );
        let after = triggered.elapsed();
        assert!(
            after >= WAIT && after < WAIT + Duration::from_millis(50),
            "no_frame after {after:?}, its wait is {WAIT:?}"
        );
    }

    #[test]
    fn a_frame_waiting_in_the_ring_is_never_failed_no_frame_by_the_clock() {
        let (mut producer, mut rings, desk) = station();
        desk.trigger(9, TriggeredBy::Plc).unwrap();
        deliver(&mut producer, 0);
        // The frame path comes to it only after the trigger's wait ended.
        std::thread::sleep(WAIT + Duration::from_millis(30));
        assert_eq!(next(&mut rings, WAIT), Some(Got::Frame(0, 9)));
    }

    #[test]
    fn waiting_triggers_get_no_frame_when_the_camera_ends() {
        let (mut producer, mut rings, desk) = station();
        desk.trigger(1, TriggeredBy::Plc).unwrap();
        producer.push(RingEvent::End(EndOfStream::Finished));
        assert_eq!(
            next(&mut rings, WAIT),
            Some(Got::Missed(1, PartMiss::NoFrame))
        );
        assert!(matches!(
            rings.pop(WAIT),
            Some(Popped::End(EndOfStream::Finished))
        ));
    }
}
