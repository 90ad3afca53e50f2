//! `Station`: one camera as the PLC sees it (one Modbus unit id): the
//! coils and part id the PLC writes, the trigger handshake, and the results
//! waiting to be presented. The Modbus connections and the line (through
//! `LineOutput::send`) share it; its state is the station's, not a
//! connection's, so a PLC that reconnects finds it as it left it.
//!
//! ```text
//! PLC ─Trigger edge─▶ write_coil ─▶ trigger ─▶ TriggerDesk::trigger ─▶ TriggerAck
//! Line ─LineOutput::send─▶ take ─▶ queue ─▶ present_next ─▶ ResultsValid
//! PLC ─ResultsAck edges─▶ write_coil ─▶ pop the acknowledged one, present the next
//! ```
//!
//! The whole way between the two (frame, verdict, line) is drawn in `plc`'s
//! module doc.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::map::{
    COIL_CLEAR_ERROR, COIL_RECIPE_REQUEST, COIL_RESULTS_ACK, COIL_TRIGGER, COIL_TRIGGER_ENABLE,
    COILS, DISCRETE_INPUTS, ErrorCode, HEARTBEAT_PERIOD, HOLDING_REGISTERS, HR_RECIPE_ID,
    INPUT_REGISTERS, PlcResult, from_words, quad_words, words,
};
use crate::config::ModbusConfig;
use crate::frame::TriggeredBy;
use crate::line::{LineOutput, LineVerdict};
use crate::recipe::{RecipeDesk, Selector, SwitchError, Ticket};
use crate::service::{Admission, RateLimiter};
use crate::trigger::{Refused, TriggerDesk};

/// At most one warning a second about results not presented (the count of
/// the others rides along with the next one).
const NOT_PRESENTED_LOG_EVERY: Duration = Duration::from_secs(1);

/// One camera's Modbus unit.
pub struct Station {
    unit: u8,
    desk: Arc<TriggerDesk>,
    /// `[recipes.NAME]`: every unit's RecipeRequest goes to this one desk.
    recipes: Option<Arc<RecipeDesk>>,
    handshake: bool,
    buffer: usize,
    started: Instant,
    state: Mutex<State>,
}

struct State {
    coils: [bool; COILS as usize],
    /// PartId (0-1) and RecipeId (2).
    holding: [u16; HOLDING_REGISTERS as usize],
    /// This unit's last RecipeRequest, until RecipeRequest goes low.
    recipe: Option<RecipeRequest>,
    trigger_ack: bool,
    /// Results owed to the PLC, oldest first; with the handshake the front
    /// one is presented while `results_valid`.
    queue: VecDeque<PlcResult>,
    /// What the result registers show: the result presented last.
    shown: Option<PlcResult>,
    results_valid: bool,
    error: ErrorCode,
    /// Results never presented because the buffer was full.
    not_presented: u64,
    /// Lets one warning about them out per `NOT_PRESENTED_LOG_EVERY`.
    not_presented_log: RateLimiter,
}

/// A RecipeRequest as this unit made it.
#[derive(Debug, Clone, Copy)]
enum RecipeRequest {
    /// Taken by the recipe desk; its outcome is asked for when the PLC reads.
    Taken { ticket: Ticket, reported: bool },
    /// Refused at once; ErrorCode was raised.
    Refused,
}

/// What a trigger's rising edge turned into (for tests: the Modbus answer
/// does not depend on it).
/// A refusal is logged at debug only: a PLC that keeps triggering with
/// TriggerEnable off would flood the journal; the PLC sees ErrorCode, and
/// the desk counts refusals (`TriggerDesk::refused`, the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerOutcome {
    Accepted { number: u64, id: u32 },
    Disabled,
    Refused(Refused),
}

impl Station {
    /// The station of camera `desk` with unit id `unit` (1 = the first
    /// camera in config order; `ModbusServer::start` checks the order).
    pub fn new(
        unit: u8,
        desk: Arc<TriggerDesk>,
        config: &ModbusConfig,
        recipes: Option<Arc<RecipeDesk>>,
    ) -> Station {
        Station {
            unit,
            desk,
            recipes,
            handshake: config.handshake,
            buffer: config.buffer.max(1),
            started: Instant::now(),
            state: Mutex::new(State {
                coils: [false; COILS as usize],
                holding: [0; HOLDING_REGISTERS as usize],
                recipe: None,
                trigger_ack: false,
                queue: VecDeque::with_capacity(config.buffer.max(1)),
                shown: None,
                results_valid: false,
                error: ErrorCode::None,
                not_presented: 0,
                not_presented_log: RateLimiter::new(NOT_PRESENTED_LOG_EVERY),
            }),
        }
    }

    /// One station per camera's desk, in camera order: unit id 1 is
    /// `desks[0]` (the order `ModbusServer::start` checks). Called once at
    /// start (`pipeline::parts::modbus_stations`), before the cameras'
    /// lines are made: each station is also its camera's `LineOutput`, the
    /// way its verdicts come back to ResultsValid (the module doc of `plc`).
    pub fn for_desks(
        desks: &[Arc<TriggerDesk>],
        config: &ModbusConfig,
        recipes: Option<&Arc<RecipeDesk>>,
    ) -> Vec<Arc<Station>> {
        desks
            .iter()
            .enumerate()
            .map(|(index, desk)| {
                Arc::new(Station::new(
                    index as u8 + 1,
                    Arc::clone(desk),
                    config,
                    recipes.cloned(),
                ))
            })
            .collect()
    }

    pub fn unit(&self) -> u8 {
        self.unit
    }

    pub fn desk(&self) -> &Arc<TriggerDesk> {
        &self.desk
    }

    /// Results the PLC never saw because its buffer was full (each is still
    /// in the results file and on MQTT).
    pub fn not_presented(&self) -> u64 {
        self.lock().not_presented
    }

    /// The coils as the PLC wrote them.
    pub fn coils(&self) -> [bool; COILS as usize] {
        self.lock().coils
    }

    /// The holding registers (PartId, high word first; RecipeId).
    pub fn holding_registers(&self) -> [u16; HOLDING_REGISTERS as usize] {
        self.lock().holding
    }

    /// The discrete inputs, in map order.
    pub fn discrete_inputs(&self) -> [bool; DISCRETE_INPUTS as usize] {
        // The desk's lock is taken apart from the station's.
        let online = self.desk.online();
        let desk_ready = online && self.desk.can_take();
        let busy = self
            .recipes
            .as_ref()
            .is_some_and(|r| r.preparing().is_some());
        let mut state = self.lock();
        let (done, failed) = self.recipe_outcome(&mut state);
        let shown = state.shown;
        [
            online,
            state.coils[COIL_TRIGGER_ENABLE as usize] && desk_ready,
            state.trigger_ack,
            state.results_valid,
            shown.is_some_and(|r| r.pass),
            shown.is_some_and(|r| r.late),
            state.error != ErrorCode::None,
            busy,
            done,
            failed,
        ]
    }

    /// The input registers, in map order.
    pub fn input_registers(&self) -> [u16; INPUT_REGISTERS as usize] {
        let heartbeat = (self.started.elapsed().as_millis() / HEARTBEAT_PERIOD.as_millis()) as u16;
        let acquisitions = self.desk.accepted() as u16;
        let active_recipe = self.recipes.as_ref().map_or(0, |r| r.active().id);
        let mut state = self.lock();
        // A refusal found now raises its ErrorCode before it is read.
        self.recipe_outcome(&mut state);
        let shown = state.shown.unwrap_or(PlcResult {
            part_id: 0,
            pass: false,
            late: false,
            reason: 0,
            defect_prob: 0,
            trigger_to_result: 0,
            seq: 0,
            number: 0,
            reject_mask: 0,
            cavities: 0,
        });
        let [id_high, id_low] = words(shown.part_id);
        let [mask_3, mask_2, mask_1, mask_0] = quad_words(shown.reject_mask);
        let [seq_high, seq_low] = words(shown.seq);
        let buffered = if self.handshake {
            state.queue.len()
        } else {
            usize::from(state.results_valid)
        };
        [
            heartbeat,
            acquisitions,
            id_high,
            id_low,
            shown.reason,
            shown.defect_prob,
            buffered as u16,
            state.error.code(),
            shown.trigger_to_result,
            seq_high,
            seq_low,
            active_recipe,
            mask_3,
            mask_2,
            mask_1,
            mask_0,
            shown.cavities,
        ]
    }

    /// The PLC writes holding registers from `address` (the caller checked
    /// the range).
    pub fn write_registers(&self, address: u16, values: &[u16]) {
        let mut state = self.lock();
        for (i, value) in values.iter().enumerate() {
            state.holding[usize::from(address) + i] = *value;
        }
    }

    /// The PLC writes coils from `address` (the caller checked the range),
    /// each in address order, as if written one after the other.
    pub fn write_coils(&self, address: u16, values: &[bool]) {
        for (i, value) in values.iter().enumerate() {
            self.write_coil(address + i as u16, *value);
        }
    }

    /// One coil; its edges drive the handshake.
    pub fn write_coil(&self, address: u16, value: bool) -> Option<TriggerOutcome> {
        let mut state = self.lock();
        let was = std::mem::replace(&mut state.coils[usize::from(address)], value);
        let rising = value && !was;
        let falling = was && !value;
        match address {
            COIL_TRIGGER if rising => {
                if !state.coils[COIL_TRIGGER_ENABLE as usize] {
                    state.raise(ErrorCode::TriggerDisabled);
                    drop(state);
                    log::debug!(target: "sealcheck::plc", unit = self.unit;
                        "trigger refused: TriggerEnable is off");
                    return Some(TriggerOutcome::Disabled);
                }
                let id = from_words(state.holding[0], state.holding[1]);
                // The desk's lock is never taken under the station's.
                drop(state);
                return Some(self.trigger(id));
            }
            COIL_TRIGGER if falling => state.trigger_ack = false,
            COIL_RESULTS_ACK if rising => {
                if state.results_valid {
                    state.results_valid = false;
                    if self.handshake {
                        state.queue.pop_front();
                    }
                }
            }
            COIL_RESULTS_ACK if falling => self.present_next(&mut state),
            COIL_CLEAR_ERROR if rising => state.error = ErrorCode::None,
            COIL_RECIPE_REQUEST if rising => {
                let id = state.holding[usize::from(HR_RECIPE_ID)];
                // The recipe desk's lock is never taken under the station's.
                drop(state);
                self.request_recipe(id);
            }
            COIL_RECIPE_REQUEST if falling => state.recipe = None,
            _ => {}
        }
        None
    }

    /// RecipeRequest's rising edge: the recipe of `id` asked for. Refused
    /// at once (RecipeFailed, ErrorCode 6 or 8) or taken (RecipeBusy until
    /// it is done or refused).
    fn request_recipe(&self, id: u16) {
        let outcome = match &self.recipes {
            Some(recipes) => recipes.request(&Selector::Id(id)),
            None => Err(SwitchError::Unknown {
                asked: format!("id {id}"),
                known: "none (the config has no [recipes.NAME])".into(),
            }),
        };
        let mut state = self.lock();
        match outcome {
            Ok(ticket) => {
                state.recipe = Some(RecipeRequest::Taken {
                    ticket,
                    reported: false,
                })
            }
            Err(error) => {
                state.raise(recipe_error_code(&error));
                state.recipe = Some(RecipeRequest::Refused);
                drop(state);
                log::debug!(target: "sealcheck::plc", unit = self.unit, recipe_id = id;
                    "recipe request refused: {error}");
            }
        }
    }

    /// RecipeDone and RecipeFailed of this unit's request; a refusal the
    /// desk reported since the last read raises its ErrorCode (once).
    fn recipe_outcome(&self, state: &mut State) -> (bool, bool) {
        match state.recipe {
            None => (false, false),
            Some(RecipeRequest::Refused) => (false, true),
            Some(RecipeRequest::Taken { ticket, reported }) => {
                let outcome = self.recipes.as_ref().and_then(|r| r.outcome(ticket));
                match outcome {
                    None => (false, false),
                    Some(Ok(_)) => (true, false),
                    Some(Err(error)) => {
                        if !reported {
                            state.raise(recipe_error_code(&error));
                            state.recipe = Some(RecipeRequest::Taken {
                                ticket,
                                reported: true,
                            });
                        }
                        (false, true)
                    }
                }
            }
        }
    }

    fn trigger(&self, id: u32) -> TriggerOutcome {
        let outcome = match self.desk.trigger(u64::from(id), TriggeredBy::Plc) {
            Ok(part) => TriggerOutcome::Accepted {
                number: part.number,
                id,
            },
            Err(refused) => TriggerOutcome::Refused(refused),
        };
        let mut state = self.lock();
        match outcome {
            // Trigger may have gone low meanwhile (another connection).
            TriggerOutcome::Accepted { .. } => {
                state.trigger_ack = state.coils[COIL_TRIGGER as usize];
            }
            TriggerOutcome::Refused(refused) => {
                state.raise(match refused {
                    Refused::Offline => ErrorCode::TriggerOffline,
                    Refused::Backlog => ErrorCode::TriggerBacklog,
                    Refused::ByCamera => ErrorCode::TriggerByCamera,
                });
                drop(state);
                log::debug!(target: "sealcheck::plc", unit = self.unit, part_id = id;
                    "trigger refused: {refused}");
            }
            TriggerOutcome::Disabled => {}
        }
        outcome
    }

    /// With the handshake: present the oldest waiting result once the last
    /// one was acknowledged and ResultsAck is low again.
    fn present_next(&self, state: &mut State) {
        if !self.handshake || state.results_valid || state.coils[COIL_RESULTS_ACK as usize] {
            return;
        }
        if let Some(next) = state.queue.front() {
            state.shown = Some(*next);
            state.results_valid = true;
        }
    }

    /// A verdict for the PLC: presented now, queued, or (buffer full) counted
    /// and not presented. A full buffer gives up the **newest** result, not
    /// the oldest as MQTT's queue does: the oldest is on the registers while
    /// the PLC reads it, and the ones behind it are the results the PLC waits
    /// for next, in trigger order; it rejects the parts whose result never
    /// came (ErrorCode 4). `line`'s module doc compares the outputs.
    fn take(&self, result: PlcResult) {
        let mut state = self.lock();
        if !self.handshake {
            state.shown = Some(result);
            state.results_valid = true;
            return;
        }
        if state.queue.len() < self.buffer {
            state.queue.push_back(result);
            self.present_next(&mut state);
            return;
        }
        state.raise(ErrorCode::BufferFull);
        state.not_presented += 1;
        // This one and those held back since the last warning.
        let count = match state.not_presented_log.admit() {
            Admission::Hold => return,
            Admission::Log(held) => 1 + held.map_or(0, |h| h.count),
        };
        let total = state.not_presented;
        drop(state);
        log::warn!(target: "sealcheck::plc", unit = self.unit, part_id = result.part_id,
            part = result.number, count = count, total = total, buffer = self.buffer;
            "result buffer full: part {} not presented to the PLC ({count} since the last warning, \
             {total} in all; the results file and MQTT have them); the PLC must acknowledge \
             results (ResultsAck) and clear the error (ClearError)", result.part_id);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every statement leaves the state whole: a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The ErrorCode a refused recipe switch raises.
fn recipe_error_code(error: &SwitchError) -> ErrorCode {
    match error {
        SwitchError::Unknown { .. } => ErrorCode::RecipeUnknown,
        SwitchError::Refused { .. } => ErrorCode::RecipeRefused,
        SwitchError::Busy { .. } | SwitchError::NotRunning { .. } => ErrorCode::RecipeBusy,
    }
}

impl State {
    fn raise(&mut self, code: ErrorCode) {
        let refusal = matches!(
            code,
            ErrorCode::TriggerDisabled
                | ErrorCode::TriggerOffline
                | ErrorCode::TriggerBacklog
                | ErrorCode::TriggerByCamera
                | ErrorCode::RecipeUnknown
                | ErrorCode::RecipeRefused
                | ErrorCode::RecipeBusy
        );
        if !(refusal && self.error == ErrorCode::BufferFull) {
            self.error = code;
        }
    }
}

impl LineOutput for Station {
    /// Queues the verdict for the PLC under one short lock; never blocks.
    /// A part triggered over HTTP or OPC UA is not the Modbus PLC's: its
    /// result goes to the results file, MQTT and the interface that asked,
    /// not into the PLC's buffer.
    fn send(&self, verdict: &LineVerdict) {
        if verdict
            .part
            .trigger
            .is_some_and(|t| matches!(t.by, TriggeredBy::Http | TriggeredBy::OpcUa))
        {
            return;
        }
        self.take(PlcResult::of(verdict));
    }
}

#[cfg(test)]
#[path = "station_tests.rs"]
mod tests;
