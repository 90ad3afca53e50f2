//! One camera's cavities as maintenance sees them (a camera with a cavity
//! layout, `config::CavityLayout`): each cavity's fails over the last
//! `RECENT_CYCLES` machine cycles and over the shift, by reason, the last
//! cycle's verdicts, and the worst cavity. A leaf, like `camera_tally`:
//! the board keeps one per camera with a layout (`BoardState::cavities`)
//! and `cavities` turns it into `/api/status` and `/metrics`.
//!
//! ```text
//! cycle (CycleVerdicts) ─▶ record: judged and failed bits of the cycle ─▶ ring of the last 100 cycles
//!                                  (per-cavity sums kept as it turns)  ─▶ shift counts by reason
//! ```
//!
//! Fixed-size arrays (64 cavities, a ring of 100 masks): recording and
//! publishing a cycle never allocate, whatever the layout.

use std::time::SystemTime;

use crate::config::MAX_CAVITIES;
use crate::cycle::CycleVerdicts;
use crate::decision::{Reason, Verdict};
use crate::frame::FrameMeta;

const REASONS: usize = Reason::ALL.len();

/// Cycles in a cavity's recent fail rate: the last 100 (a few minutes of a
/// machine at 30 cycles a minute, long enough for a 5 % rate to show).
pub const RECENT_CYCLES: usize = 100;

/// The last cycle of a camera: which cavities were judged and how.
#[derive(Debug, Clone, Copy)]
pub struct LastCycle {
    pub seq: u64,
    /// `[trigger] mode = "plc"`: the part's id (`None` in free mode).
    pub part_id: Option<u64>,
    pub captured_at: SystemTime,
    /// Bit `n - 1`: cavity `n` was judged.
    pub judged: u64,
    /// Bit `n - 1`: cavity `n` failed.
    pub failed: u64,
    /// Each cavity's reason, indexed like `Reason::ALL` (cavity `n` at `n - 1`).
    reasons: [u8; MAX_CAVITIES],
}

impl LastCycle {
    /// Cavity `number`'s verdict and reason, if it was judged.
    pub fn cavity(&self, number: u16) -> Option<(Verdict, Reason)> {
        let bit = bit(number)?;
        (self.judged & bit != 0).then(|| {
            let verdict = if self.failed & bit != 0 {
                Verdict::Fail
            } else {
                Verdict::Pass
            };
            (
                verdict,
                Reason::ALL[usize::from(self.reasons[index(number)])],
            )
        })
    }
}

/// A cavity's judged cycles and fails over a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fails {
    pub judged: u64,
    pub failed: u64,
}

impl Fails {
    /// Fails per judged cycle; `None` before the cavity was judged.
    pub fn rate(&self) -> Option<f64> {
        (self.judged > 0).then(|| self.failed as f64 / self.judged as f64)
    }
}

/// The cavity with the highest recent fail rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Worst {
    pub cavity: u16,
    pub recent: f64,
    pub shift: Option<f64>,
}

/// One camera's cavities, kept by the output thread (`Clone` copies
/// arrays only: `clone_from` into a published copy allocates nothing).
#[derive(Debug, Clone)]
pub struct CavityTally {
    /// Cavities of the layout, disabled ones included (0 until known).
    count: u16,
    /// Bit `n - 1`: cavity `n` is judged (the layout's, and every cavity
    /// a cycle judged).
    enabled: u64,
    /// Cycles recorded over the shift.
    cycles: u64,
    /// Over the shift, by cavity (`n - 1`) and reason (`Reason::ALL`).
    by_reason: [[u64; REASONS]; MAX_CAVITIES],
    judged: [u64; MAX_CAVITIES],
    failed: [u64; MAX_CAVITIES],
    /// The last `RECENT_CYCLES` cycles' (judged, failed) masks, a ring.
    ring: [(u64, u64); RECENT_CYCLES],
    ring_len: usize,
    ring_next: usize,
    /// The ring's sums by cavity, kept as it turns.
    recent_judged: [u16; MAX_CAVITIES],
    recent_failed: [u16; MAX_CAVITIES],
    last: Option<LastCycle>,
}

impl Default for CavityTally {
    fn default() -> Self {
        CavityTally {
            count: 0,
            enabled: 0,
            cycles: 0,
            by_reason: [[0; REASONS]; MAX_CAVITIES],
            judged: [0; MAX_CAVITIES],
            failed: [0; MAX_CAVITIES],
            ring: [(0, 0); RECENT_CYCLES],
            ring_len: 0,
            ring_next: 0,
            recent_judged: [0; MAX_CAVITIES],
            recent_failed: [0; MAX_CAVITIES],
            last: None,
        }
    }
}

impl CavityTally {
    /// A tally for a layout of `count` cavities whose judged ones are the
    /// bits of `enabled` (known at start from the config).
    pub fn for_layout(count: u16, enabled: u64) -> Self {
        CavityTally {
            count: count.min(MAX_CAVITIES as u16),
            enabled,
            ..CavityTally::default()
        }
    }

    /// One cycle's cavities.
    pub fn record(&mut self, meta: &FrameMeta, cycle: &CycleVerdicts) {
        let mut judged = 0u64;
        let mut failed = 0u64;
        let mut reasons = [0u8; MAX_CAVITIES];
        for c in cycle.cavities() {
            let Some(b) = bit(c.cavity) else { continue };
            let i = index(c.cavity);
            let reason = reason_index(c.decision.reason);
            judged |= b;
            self.judged[i] += 1;
            self.by_reason[i][reason] += 1;
            reasons[i] = reason as u8;
            if c.decision.verdict == Verdict::Fail {
                failed |= b;
                self.failed[i] += 1;
            }
        }
        self.count = self.count.max(cycle.count()).min(MAX_CAVITIES as u16);
        self.enabled |= judged;
        self.cycles += 1;
        if self.ring_len == RECENT_CYCLES {
            let (old_judged, old_failed) = self.ring[self.ring_next];
            for_bits(old_judged, |i| self.recent_judged[i] -= 1);
            for_bits(old_failed, |i| self.recent_failed[i] -= 1);
        } else {
            self.ring_len += 1;
        }
        self.ring[self.ring_next] = (judged, failed);
        self.ring_next = (self.ring_next + 1) % RECENT_CYCLES;
        for_bits(judged, |i| self.recent_judged[i] += 1);
        for_bits(failed, |i| self.recent_failed[i] += 1);
        self.last = Some(LastCycle {
            seq: meta.seq,
            part_id: meta.part.triggered_id(),
            captured_at: meta.captured_at,
            judged,
            failed,
            reasons,
        });
    }

    /// Cavities of the layout, disabled ones included.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// Whether cavity `number` is judged.
    pub fn is_enabled(&self, number: u16) -> bool {
        bit(number).is_some_and(|b| self.enabled & b != 0)
    }

    /// The judged cavities' numbers, in order.
    pub fn enabled(&self) -> impl Iterator<Item = u16> + '_ {
        (1..=self.count).filter(|n| self.is_enabled(*n))
    }

    /// Cycles recorded over the shift, and in the recent window.
    pub fn cycles(&self) -> (u64, usize) {
        (self.cycles, self.ring_len)
    }

    /// Cavity `number` over the last `RECENT_CYCLES` cycles.
    pub fn recent(&self, number: u16) -> Fails {
        self.fails(number, |i| {
            (
                u64::from(self.recent_judged[i]),
                u64::from(self.recent_failed[i]),
            )
        })
    }

    /// Cavity `number` over the shift.
    pub fn shift(&self, number: u16) -> Fails {
        self.fails(number, |i| (self.judged[i], self.failed[i]))
    }

    fn fails(&self, number: u16, at: impl Fn(usize) -> (u64, u64)) -> Fails {
        if bit(number).is_none() {
            return Fails::default();
        }
        let (judged, failed) = at(index(number));
        Fails { judged, failed }
    }

    /// Cavity `number`'s results over the shift, by reason (`Reason::ALL`'s order).
    pub fn by_reason(&self, number: u16) -> [u64; REASONS] {
        match bit(number) {
            Some(_) => self.by_reason[index(number)],
            None => [0; REASONS],
        }
    }

    pub fn last(&self) -> Option<&LastCycle> {
        self.last.as_ref()
    }

    /// The cavity that fails most over the recent window; `None` while
    /// none failed there. A tie goes to the higher shift rate (the older
    /// fault), then to the lower number.
    pub fn worst(&self) -> Option<Worst> {
        let mut worst: Option<Worst> = None;
        for number in self.enabled() {
            let Some(recent) = self.recent(number).rate().filter(|r| *r > 0.0) else {
                continue;
            };
            let shift = self.shift(number).rate();
            let better = match &worst {
                None => true,
                Some(w) => {
                    recent > w.recent
                        || (recent == w.recent && shift.unwrap_or(0.0) > w.shift.unwrap_or(0.0))
                }
            };
            if better {
                worst = Some(Worst {
                    cavity: number,
                    recent,
                    shift,
                });
            }
        }
        worst
    }
}

/// Cavity `number`'s bit, if it can be one of a layout's.
fn bit(number: u16) -> Option<u64> {
    (1..=MAX_CAVITIES as u16)
        .contains(&number)
        .then(|| 1u64 << (number - 1))
}

fn index(number: u16) -> usize {
    usize::from(number) - 1
}

fn reason_index(reason: Reason) -> usize {
    Reason::ALL.iter().position(|r| *r == reason).unwrap_or(0)
}

/// `f(i)` for each set bit `i` of `mask`.
fn for_bits(mut mask: u64, mut f: impl FnMut(usize)) {
    while mask != 0 {
        f(mask.trailing_zeros() as usize);
        mask &= mask - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CavityLayout;
    use crate::decision::Decision;

    fn layout(cavities: u32, disabled: &[u16]) -> CavityLayout {
        CavityLayout::in_a_row(cavities, disabled)
    }

    fn decision(reason: Reason) -> Decision {
        Decision {
            verdict: reason.verdict(),
            reason,
            defect_prob: None,
            seal_area: None,
        }
    }

    /// A cycle of `layout` whose cavities in `failing` fail with `reason`.
    fn cycle(layout: &CavityLayout, failing: &[u16], reason: Reason) -> CycleVerdicts {
        let mut cycle = CycleVerdicts::with_capacity(usize::from(layout.count()));
        cycle.start(layout);
        for n in layout.enabled() {
            let r = if failing.contains(&n) {
                reason
            } else {
                Reason::Ok
            };
            cycle.push(n, decision(r));
        }
        cycle
    }

    fn tally_of(layout: &CavityLayout) -> CavityTally {
        CavityTally::for_layout(layout.count(), layout.enabled_mask())
    }

    #[test]
    fn the_recent_window_keeps_the_last_hundred_cycles_and_the_shift_every_one() {
        let l = layout(6, &[]);
        let mut t = tally_of(&l);
        // 150 cycles: cavity 2 fails in the first 50 only, cavity 5 in
        // every other cycle of the last 100.
        for seq in 0..150u64 {
            let mut failing = Vec::new();
            if seq < 50 {
                failing.push(2);
            }
            if seq >= 50 && seq % 2 == 0 {
                failing.push(5);
            }
            t.record(&FrameMeta::now(seq), &cycle(&l, &failing, Reason::Defect));
        }
        assert_eq!(t.cycles(), (150, RECENT_CYCLES));
        assert_eq!(
            t.recent(2),
            Fails {
                judged: 100,
                failed: 0
            },
            "cavity 2's fails left the window"
        );
        assert_eq!(
            t.shift(2),
            Fails {
                judged: 150,
                failed: 50
            }
        );
        assert_eq!(t.recent(5).rate(), Some(0.5));
        assert_eq!(t.shift(5).failed, 50);
        assert_eq!(t.recent(1).rate(), Some(0.0));
        let defect = reason_index(Reason::Defect);
        assert_eq!(t.by_reason(2)[defect], 50);
        assert_eq!(t.by_reason(2)[reason_index(Reason::Ok)], 100);
        let worst = t.worst().unwrap();
        assert_eq!((worst.cavity, worst.recent), (5, 0.5));
        let last = t.last().unwrap();
        assert_eq!(last.seq, 149);
        assert_eq!(last.cavity(5), Some((Verdict::Pass, Reason::Ok)));
    }

    #[test]
    fn a_disabled_cavity_is_never_judged_nor_worst_and_the_last_cycle_says_why_each_failed() {
        let l = layout(4, &[3]);
        let mut t = tally_of(&l);
        assert_eq!(t.enabled().collect::<Vec<_>>(), [1, 2, 4]);
        assert!(t.worst().is_none(), "nothing judged yet");
        assert_eq!(t.recent(1).rate(), None);
        let mut c = cycle(&l, &[4], Reason::NoSeal);
        t.record(&FrameMeta::now(7), &c);
        // Not inspected: every judged cavity fails with that reason.
        c.fill_failed(&l, Reason::NotInspected);
        t.record(&FrameMeta::now(8), &c);
        let last = t.last().unwrap();
        assert_eq!(last.seq, 8);
        assert_eq!(last.cavity(3), None, "disabled");
        assert_eq!(last.cavity(1), Some((Verdict::Fail, Reason::NotInspected)));
        assert_eq!(t.recent(3), Fails::default());
        assert_eq!(t.shift(4).failed, 2);
        assert_eq!(t.recent(1).rate(), Some(0.5));
        assert_eq!(t.worst().unwrap().cavity, 4);
        assert_eq!(t.by_reason(4)[reason_index(Reason::NoSeal)], 1);
        // Out of range: empty, never a panic.
        assert_eq!(t.recent(0), Fails::default());
        assert_eq!(t.shift(65), Fails::default());
    }

    #[test]
    fn the_worst_cavity_is_none_while_all_pass_and_a_tie_goes_to_the_older_fault() {
        let l = layout(3, &[]);
        let mut t = tally_of(&l);
        for seq in 0..10 {
            t.record(&FrameMeta::now(seq), &cycle(&l, &[], Reason::Defect));
        }
        assert!(t.worst().is_none(), "all at 0 %: no worst cavity");
        // 100 cycles later cavities 1 and 3 fail alike in the window; 3
        // also failed before it, so its shift rate is higher.
        t.record(&FrameMeta::now(10), &cycle(&l, &[3], Reason::Defect));
        for seq in 11..111 {
            let failing: &[u16] = if seq % 10 == 0 { &[1, 3] } else { &[] };
            t.record(&FrameMeta::now(seq), &cycle(&l, failing, Reason::Defect));
        }
        assert_eq!(t.recent(1), t.recent(3));
        let worst = t.worst().unwrap();
        assert_eq!(worst.cavity, 3);
        assert_eq!(worst.recent, 0.1);
        assert!(worst.shift.unwrap() > t.shift(1).rate().unwrap());
    }

    #[test]
    fn sixty_four_cavities_fit_and_the_ring_sums_stay_exact() {
        let l = layout(64, &[]);
        let mut t = tally_of(&l);
        for seq in 0..(3 * RECENT_CYCLES as u64 + 7) {
            // Cavity 64 always fails, cavity 1 every third cycle.
            let failing: &[u16] = if seq % 3 == 0 { &[1, 64] } else { &[64] };
            t.record(&FrameMeta::now(seq), &cycle(&l, failing, Reason::SealArea));
        }
        assert_eq!(t.count(), 64);
        assert_eq!(t.recent(64).rate(), Some(1.0));
        // In the window seq 207..306: multiples of 3 from 207 to 306.
        assert_eq!(t.recent(1).failed, 34);
        assert_eq!(t.worst().unwrap().cavity, 64);
    }
}
