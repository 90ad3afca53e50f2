//! A PLC simulator: the client side of the Modbus handshake in
//! docs/INTEGRATION.md ("Modbus TCP"), run as a line's PLC runs it, over
//! tokio-modbus's blocking TCP client. Every wait is bounded (`within`),
//! and polls every millisecond, as a fast PLC scan would.
//!
//! ```text
//! trigger(id):  PartId := id; Trigger := 1; wait TriggerAck; Trigger := 0
//!               (trigger_when_ready: wait TriggerReady first, as a PLC does)
//! take_result:  wait ResultsValid; read the result; ResultsAck := 1;
//!               wait ResultsValid low; ResultsAck := 0
//! ```

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio_modbus::client::sync::{self, Reader, Writer};
use tokio_modbus::{ExceptionCode, Slave};

/// How often the simulator polls, like a PLC scanning every millisecond.
pub const POLL: Duration = Duration::from_millis(1);

/// The map's addresses (docs/INTEGRATION.md), written out again here: the
/// simulator checks the contract, not the server's constants.
pub mod map {
    pub const TRIGGER_ENABLE: u16 = 0;
    pub const TRIGGER: u16 = 1;
    pub const RESULTS_ACK: u16 = 2;
    pub const CLEAR_ERROR: u16 = 3;
    pub const RECIPE_REQUEST: u16 = 4;
    pub const PART_ID: u16 = 0;
    pub const RECIPE_ID: u16 = 2;
    /// Discrete inputs 7 to 9: RecipeBusy, RecipeDone, RecipeFailed.
    pub const RECIPE_BUSY: u16 = 7;
}

/// The recipe bits (discrete inputs 7 to 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecipeBits {
    pub busy: bool,
    pub done: bool,
    pub failed: bool,
}

/// The discrete inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bits {
    pub online: bool,
    pub trigger_ready: bool,
    pub trigger_ack: bool,
    pub results_valid: bool,
    pub pass: bool,
    pub late: bool,
    pub error: bool,
}

/// The input registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registers {
    pub heartbeat: u16,
    pub acquisition_count: u16,
    pub result_part_id: u32,
    pub reason_code: u16,
    pub defect_prob: u16,
    pub results_buffered: u16,
    pub error_code: u16,
    /// Tenths of a millisecond.
    pub trigger_to_result: u16,
    pub result_seq: u32,
    /// Register 11: the active recipe's id (0: no recipes).
    pub active_recipe: u16,
    /// Registers 12 to 15, high word first: bit n-1 for failed cavity n.
    pub reject_mask: u64,
    /// Register 16: the layout's cavities (0: no layout).
    pub cavities: u16,
}

/// One result as the PLC read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlcResult {
    pub part_id: u32,
    pub pass: bool,
    pub late: bool,
    pub reason_code: u16,
    pub defect_prob: u16,
    pub trigger_to_result: u16,
    pub result_seq: u32,
    pub reject_mask: u64,
    pub cavities: u16,
    /// When the simulator first saw ResultsValid high for it.
    pub seen_at: Instant,
}

/// Why a trigger did not go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerRefused {
    /// TriggerAck did not come within the wait; ErrorCode then.
    NoAck { error_code: u16 },
}

pub struct Plc {
    ctx: sync::Context,
    pub unit: u8,
}

impl Plc {
    /// Connects to unit `unit` (1 = the first camera); each request waits at most 5 s.
    pub fn connect(addr: SocketAddr, unit: u8) -> Plc {
        Plc::try_connect(addr, unit).unwrap_or_else(|e| panic!("PLC cannot connect to {addr}: {e}"))
    }

    pub fn try_connect(addr: SocketAddr, unit: u8) -> io::Result<Plc> {
        let timeout = Some(Duration::from_secs(5));
        let ctx = sync::tcp::connect_slave_with_timeout(addr, Slave(unit), timeout)?;
        Ok(Plc { ctx, unit })
    }

    fn ok<T>(what: &str, result: tokio_modbus::Result<T>) -> T {
        match result {
            Ok(Ok(value)) => value,
            Ok(Err(exception)) => panic!("PLC {what}: exception {exception:?}"),
            Err(error) => panic!("PLC {what}: {error}"),
        }
    }

    pub fn write_coil(&mut self, address: u16, value: bool) {
        let result = self.ctx.write_single_coil(address, value);
        Plc::ok("write coil", result);
    }

    /// Input registers as they came: the values, or the server's exception.
    pub fn try_read_inputs(
        &mut self,
        address: u16,
        count: u16,
    ) -> io::Result<Result<Vec<u16>, ExceptionCode>> {
        self.ctx
            .read_input_registers(address, count)
            .map_err(io::Error::other)
    }

    pub fn enable(&mut self, on: bool) {
        self.write_coil(map::TRIGGER_ENABLE, on);
    }

    pub fn bits(&mut self) -> Bits {
        let result = self.ctx.read_discrete_inputs(0, 7);
        let b = Plc::ok("read discrete inputs", result);
        Bits {
            online: b[0],
            trigger_ready: b[1],
            trigger_ack: b[2],
            results_valid: b[3],
            pass: b[4],
            late: b[5],
            error: b[6],
        }
    }

    pub fn registers(&mut self) -> Registers {
        let result = self.ctx.read_input_registers(0, 17);
        let r = Plc::ok("read input registers", result);
        let u32_at = |i: usize| (u32::from(r[i]) << 16) | u32::from(r[i + 1]);
        let u64_at = |i: usize| (u64::from(u32_at(i)) << 32) | u64::from(u32_at(i + 2));
        Registers {
            heartbeat: r[0],
            acquisition_count: r[1],
            result_part_id: u32_at(2),
            reason_code: r[4],
            defect_prob: r[5],
            results_buffered: r[6],
            error_code: r[7],
            trigger_to_result: r[8],
            result_seq: u32_at(9),
            active_recipe: r[11],
            reject_mask: u64_at(12),
            cavities: r[16],
        }
    }

    pub fn recipe_bits(&mut self) -> RecipeBits {
        let result = self.ctx.read_discrete_inputs(map::RECIPE_BUSY, 3);
        let b = Plc::ok("read the recipe bits", result);
        RecipeBits {
            busy: b[0],
            done: b[1],
            failed: b[2],
        }
    }

    /// A recipe switch as a PLC runs it: RecipeId, RecipeRequest high, wait
    /// (at most `within`) for RecipeDone or RecipeFailed, RecipeRequest low.
    /// `Err(ErrorCode)` when refused; `Err(0)` when neither came in time.
    pub fn switch_recipe(&mut self, id: u16, within: Duration) -> Result<(), u16> {
        let result = self.ctx.write_single_register(map::RECIPE_ID, id);
        Plc::ok("write RecipeId", result);
        self.write_coil(map::RECIPE_REQUEST, true);
        let mut last = None;
        self.wait(within, |plc| {
            let bits = plc.recipe_bits();
            last = Some(bits);
            bits.done || bits.failed
        });
        let outcome = match last {
            Some(bits) if bits.done => Ok(()),
            Some(bits) if bits.failed => Err(self.registers().error_code),
            _ => Err(0),
        };
        self.write_coil(map::RECIPE_REQUEST, false);
        outcome
    }

    /// One trigger of part `id`: PartId, Trigger high, wait TriggerAck (at
    /// most `within`), Trigger low.
    pub fn trigger(&mut self, id: u32, within: Duration) -> Result<(), TriggerRefused> {
        let result = self
            .ctx
            .write_multiple_registers(map::PART_ID, &[(id >> 16) as u16, id as u16]);
        Plc::ok("write PartId", result);
        self.write_coil(map::TRIGGER, true);
        let acked = self.wait(within, |plc| plc.bits().trigger_ack);
        self.write_coil(map::TRIGGER, false);
        if acked {
            Ok(())
        } else {
            Err(TriggerRefused::NoAck {
                error_code: self.registers().error_code,
            })
        }
    }

    /// As a PLC does: waits (at most `within`) for TriggerReady, then `trigger`.
    pub fn trigger_when_ready(&mut self, id: u32, within: Duration) -> Result<(), TriggerRefused> {
        self.wait(within, |plc| plc.bits().trigger_ready);
        self.trigger(id, within)
    }

    /// Waits (at most `within`) for ResultsValid and reads the result, without acknowledging it.
    pub fn wait_result(&mut self, within: Duration) -> Option<PlcResult> {
        let start = Instant::now();
        loop {
            let bits = self.bits();
            if bits.results_valid {
                let seen_at = Instant::now();
                let r = self.registers();
                return Some(PlcResult {
                    part_id: r.result_part_id,
                    pass: bits.pass,
                    late: bits.late,
                    reason_code: r.reason_code,
                    defect_prob: r.defect_prob,
                    trigger_to_result: r.trigger_to_result,
                    result_seq: r.result_seq,
                    reject_mask: r.reject_mask,
                    cavities: r.cavities,
                    seen_at,
                });
            }
            if start.elapsed() >= within {
                return None;
            }
            std::thread::sleep(POLL);
        }
    }

    /// ResultsAck high, wait (bounded) for ResultsValid low, ResultsAck low.
    pub fn ack(&mut self) {
        self.write_coil(map::RESULTS_ACK, true);
        let lowered = self.wait(Duration::from_secs(5), |plc| !plc.bits().results_valid);
        assert!(lowered, "ResultsValid stayed high 5 s after ResultsAck");
        self.write_coil(map::RESULTS_ACK, false);
    }

    /// The next result, acknowledged; `None` if none came within `within`.
    pub fn take_result(&mut self, within: Duration) -> Option<PlcResult> {
        let result = self.wait_result(within)?;
        self.ack();
        Some(result)
    }

    pub fn clear_error(&mut self) {
        self.write_coil(map::CLEAR_ERROR, true);
        self.write_coil(map::CLEAR_ERROR, false);
    }

    /// Polls `done` every `POLL` for at most `within`.
    fn wait(&mut self, within: Duration, mut done: impl FnMut(&mut Plc) -> bool) -> bool {
        let start = Instant::now();
        loop {
            if done(self) {
                return true;
            }
            if start.elapsed() >= within {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }
}
