//! The register map: the contract with the PLC (docs/INTEGRATION.md,
//! "Modbus TCP"). Every address is zero-based; a 32-bit value is two
//! registers, high word first. New entries go after these, never between.

use std::time::Duration;

use crate::decision::Verdict;
use crate::line::LineVerdict;

/// Coils (the PLC writes them and reads back what it wrote).
pub const COIL_TRIGGER_ENABLE: u16 = 0;
pub const COIL_TRIGGER: u16 = 1;
pub const COIL_RESULTS_ACK: u16 = 2;
pub const COIL_CLEAR_ERROR: u16 = 3;
/// Rising edge: switch to the recipe in holding register 2 (`crate::recipe`).
pub const COIL_RECIPE_REQUEST: u16 = 4;
pub const COILS: u16 = 5;

/// Discrete inputs (the PLC reads them).
pub const DI_ONLINE: u16 = 0;
pub const DI_TRIGGER_READY: u16 = 1;
pub const DI_TRIGGER_ACK: u16 = 2;
pub const DI_RESULTS_VALID: u16 = 3;
pub const DI_PASS: u16 = 4;
pub const DI_LATE: u16 = 5;
pub const DI_ERROR: u16 = 6;
/// A recipe switch is under way (any interface's).
pub const DI_RECIPE_BUSY: u16 = 7;
/// This unit's RecipeRequest was done: the recipe is active; high until
/// RecipeRequest goes low.
pub const DI_RECIPE_DONE: u16 = 8;
/// This unit's RecipeRequest was refused (ErrorCode 6, 7 or 8 says why);
/// high until RecipeRequest goes low. The active recipe stays.
pub const DI_RECIPE_FAILED: u16 = 9;
pub const DISCRETE_INPUTS: u16 = 10;

/// Holding registers (the PLC writes them): the next trigger's part id,
/// and the recipe the next RecipeRequest asks for.
pub const HR_PART_ID: u16 = 0;
pub const HR_RECIPE_ID: u16 = 2;
pub const HOLDING_REGISTERS: u16 = 3;

/// Input registers (the PLC reads them).
pub const IR_HEARTBEAT: u16 = 0;
pub const IR_ACQUISITION_COUNT: u16 = 1;
pub const IR_RESULT_PART_ID: u16 = 2;
pub const IR_REASON_CODE: u16 = 4;
pub const IR_DEFECT_PROB: u16 = 5;
pub const IR_RESULTS_BUFFERED: u16 = 6;
pub const IR_ERROR_CODE: u16 = 7;
pub const IR_TRIGGER_TO_RESULT_MS: u16 = 8;
pub const IR_RESULT_SEQ: u16 = 9;
/// The active recipe's id (`[recipes.NAME] id`); 0 without recipes.
pub const IR_ACTIVE_RECIPE: u16 = 11;
/// The presented result's reject mask, 64 bits in four registers, high
/// word first: register 12 holds bits 63..48, register 15 bits 15..0; bit
/// `n - 1` set for each failed cavity `n`. 0 without a cavity layout.
pub const IR_REJECT_MASK: u16 = 12;
/// The presented result's number of cavities (the layout's, disabled ones
/// included); 0 without a cavity layout.
pub const IR_CAVITY_COUNT: u16 = 16;
pub const INPUT_REGISTERS: u16 = 17;

/// Heartbeat counts up once per this period while the server runs.
pub const HEARTBEAT_PERIOD: Duration = Duration::from_millis(100);

/// DefectProb when the classifier did not run (e.g. `no_seal`, `no_frame`).
pub const DEFECT_PROB_NONE: u16 = 0xFFFF;

/// ResultSeq of a result no frame stands behind (`no_frame`, `overrun`).
pub const RESULT_SEQ_NO_FRAME: u32 = 0xFFFF_FFFF;

/// ErrorCode (input register 7); the Error bit is high while it is not `None`.
/// A later error replaces an earlier one, except that a refused trigger or
/// recipe request never hides `BufferFull` (results were not presented:
/// parts to reject).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    None = 0,
    /// A Trigger rising edge while TriggerEnable was off: refused.
    TriggerDisabled = 1,
    /// A Trigger rising edge while the station was offline (starting,
    /// stopping, camera not streaming): refused.
    TriggerOffline = 2,
    /// A Trigger rising edge while too many triggers waited for frames
    /// (`trigger::BACKLOG`): refused.
    TriggerBacklog = 3,
    /// A result came while `[modbus] buffer` results waited for the PLC: it
    /// was not presented (the results file and MQTT still have it).
    BufferFull = 4,
    /// A Trigger rising edge in `[trigger] mode = "camera"`, where the
    /// camera's input line triggers each part: refused.
    TriggerByCamera = 5,
    /// RecipeRequest named no recipe of the config (or it has none).
    RecipeUnknown = 6,
    /// The recipe's models were refused (open, contract, acceptance gate,
    /// warm-up): the active recipe stays.
    RecipeRefused = 7,
    /// RecipeRequest while another switch was under way (or while the
    /// service starts or stops): refused, ask again once RecipeBusy is low.
    RecipeBusy = 8,
}

impl ErrorCode {
    pub fn code(self) -> u16 {
        self as u16
    }
}

/// One result as the PLC reads it (the input registers and bits it fills).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlcResult {
    /// The part id, its low 32 bits (the PLC names parts with a u32).
    pub part_id: u32,
    pub pass: bool,
    pub late: bool,
    pub reason: u16,
    /// Defect probability ×10000; `DEFECT_PROB_NONE` when not computed.
    pub defect_prob: u16,
    /// Trigger (free mode: capture) to verdict, in tenths of a millisecond,
    /// saturating at 65535 (6.5535 s).
    pub trigger_to_result: u16,
    /// The judged frame's `seq` (low 32 bits); `RESULT_SEQ_NO_FRAME` without a frame.
    pub seq: u32,
    /// The part's place on the line (not on the map; for logs and tests).
    pub number: u64,
    /// Bit `n - 1` set for each failed cavity `n` (a cavity layout; else 0).
    pub reject_mask: u64,
    /// The layout's cavities; 0 without a layout.
    pub cavities: u16,
}

impl PlcResult {
    pub fn of(verdict: &LineVerdict) -> PlcResult {
        let decision = &verdict.decision;
        PlcResult {
            part_id: verdict.part.id as u32,
            pass: decision.verdict == Verdict::Pass,
            late: verdict.is_late_fail(),
            reason: decision.reason.code(),
            defect_prob: decision.defect_prob.map_or(DEFECT_PROB_NONE, |p| {
                (p.clamp(0.0, 1.0) * 10_000.0).round() as u16
            }),
            // `as` saturates (and makes NaN 0).
            trigger_to_result: (verdict.latency_ms * 10.0).round() as u16,
            seq: if verdict.part.framed {
                verdict.seq as u32
            } else {
                RESULT_SEQ_NO_FRAME
            },
            number: verdict.part.number,
            reject_mask: verdict.cavities.as_ref().map_or(0, |c| c.reject_mask()),
            cavities: verdict.cavities.as_ref().map_or(0, |c| c.count()),
        }
    }
}

/// A u64 as four registers, high word first.
pub fn quad_words(value: u64) -> [u16; 4] {
    [
        (value >> 48) as u16,
        (value >> 32) as u16,
        (value >> 16) as u16,
        value as u16,
    ]
}

/// A u32 as two registers, high word first.
pub fn words(value: u32) -> [u16; 2] {
    [(value >> 16) as u16, value as u16]
}

/// Two registers, high word first, as a u32.
pub fn from_words(high: u16, low: u16) -> u32 {
    (u32::from(high) << 16) | u32::from(low)
}
