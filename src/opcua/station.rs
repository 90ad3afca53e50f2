//! `VisionStation`: one camera as an OPC UA client sees it, the
//! VisionSystem's two state machines and its methods, apart from the
//! address space (`space` wires them to nodes). A `StartSingleJob` is a
//! trigger on the camera's `TriggerDesk`, as a Modbus PLC's Trigger coil
//! (`plc::Station`); its result comes back through the line
//! (`output::OpcUaOutput`) to `take`, which ties it to its job.
//!
//! ```text
//! StartSingleJob(PartId) ─▶ VisionStation::start_single_job ─▶ TriggerDesk::trigger ─▶ JobId
//! Line ─LineOutput::send─▶ OpcUaOutput ─channel─▶ server thread ─▶ VisionStation::take ─▶ event, variables
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_opcua::types::{ExtensionObject, StatusCode, Variant};

use super::recipe::RecipeBook;
use super::record::{JobTags, ResultLog, ResultRecord};
use super::types::{
    JobIdDataType, MeasIdDataType, PartIdDataType, ProductIdDataType, RecipeIdExternalDataType,
    RecipeIdInternalDataType,
};
use crate::frame::TriggeredBy;
use crate::trigger::{Refused, TriggerDesk};

/// VisionStateMachine's states (OPC 40100-1, 8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VisionState {
    Preoperational,
    Operational,
    Halted,
    Error,
}

/// AutomaticModeStateMachine's states (OPC 40100-1, 8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoMode {
    Initialized,
    Ready,
    SingleExecution,
    ContinuousExecution,
}

impl VisionState {
    pub fn name(self) -> &'static str {
        match self {
            VisionState::Preoperational => "Preoperational",
            VisionState::Operational => "Operational",
            VisionState::Halted => "Halted",
            VisionState::Error => "Error",
        }
    }

    /// The state's node in the NodeSet (VisionStateMachineType_<state>).
    pub fn state_id(self) -> u32 {
        match self {
            VisionState::Preoperational => 5028,
            VisionState::Halted => 5029,
            VisionState::Error => 5030,
            VisionState::Operational => 5031,
        }
    }
}

impl AutoMode {
    pub fn name(self) -> &'static str {
        match self {
            AutoMode::Initialized => "Initialized",
            AutoMode::Ready => "Ready",
            AutoMode::SingleExecution => "SingleExecution",
            AutoMode::ContinuousExecution => "ContinuousExecution",
        }
    }

    pub fn state_id(self) -> u32 {
        match self {
            AutoMode::Initialized => 5056,
            AutoMode::Ready => 5057,
            AutoMode::SingleExecution => 5058,
            AutoMode::ContinuousExecution => 5059,
        }
    }
}

/// The two states together, as the plain variables show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct States {
    pub vision: VisionState,
    pub auto: AutoMode,
}

/// A method's answer: its outputs, or a status code for the client.
pub type Answer = Result<Vec<Variant>, StatusCode>;

/// One camera's VisionSystem.
pub struct VisionStation {
    camera: usize,
    /// `plc` mode's desk; `None` in free mode (every frame is a part).
    desk: Option<Arc<TriggerDesk>>,
    recipes: RecipeBook,
    state: Mutex<State>,
}

struct State {
    states: States,
    /// Jobs started over OPC UA and not yet answered, by part number.
    jobs: HashMap<u64, JobTags>,
    log: ResultLog,
}

impl State {
    /// Operational, and Ready or running single jobs.
    fn takes_jobs(&self) -> bool {
        self.states.vision == VisionState::Operational
            && matches!(
                self.states.auto,
                AutoMode::Ready | AutoMode::SingleExecution
            )
    }
}

impl VisionStation {
    /// Camera `camera`'s station; `desk` in `plc` mode (StartSingleJob
    /// triggers), `None` in free mode (ContinuousExecution from the start).
    pub fn new(
        camera: usize,
        desk: Option<Arc<TriggerDesk>>,
        recipes: RecipeBook,
        results_kept: usize,
    ) -> VisionStation {
        let auto = if desk.is_some() {
            AutoMode::Ready
        } else {
            AutoMode::ContinuousExecution
        };
        VisionStation {
            camera,
            desk,
            recipes,
            state: Mutex::new(State {
                states: States {
                    vision: VisionState::Operational,
                    auto,
                },
                jobs: HashMap::new(),
                log: ResultLog::new(results_kept),
            }),
        }
    }

    pub fn states(&self) -> States {
        self.lock().states
    }

    /// The camera's index (config order).
    pub fn camera(&self) -> usize {
        self.camera
    }

    pub fn recipes(&self) -> &RecipeBook {
        &self.recipes
    }

    /// A result for this camera: tied to its job (MeasId, ProductId), kept
    /// for GetResultById, and the automatic mode back to Ready after the
    /// last job's result.
    pub fn take(&self, mut record: ResultRecord) -> ResultRecord {
        let mut state = self.lock();
        if let Some(tags) = state.jobs.remove(&record.number) {
            record.tags = tags;
            if state.jobs.is_empty() && state.states.auto == AutoMode::SingleExecution {
                state.states.auto = AutoMode::Ready;
            }
        }
        state.log.push(record.clone());
        record
    }

    /// `StartSingleJob(MeasId, PartId, RecipeId, ProductId, Parameters)
    /// -> (JobId, Error)`. A RecipeId other than the active recipe's (empty
    /// or "0": the active one) must name a prepared recipe: it is switched
    /// to before the trigger, so it judges the part (`RecipeBook::for_job`);
    /// a refused one answers Error 6 to 9 and triggers nothing.
    pub fn start_single_job(&self, args: &[Variant]) -> Answer {
        let Some(desk) = &self.desk else {
            // Free mode: every frame is judged already.
            return Err(StatusCode::BadNotSupported);
        };
        let part_id = args
            .get(1)
            .and_then(text_of)
            .ok_or(StatusCode::BadInvalidArgument)?;
        let part_id: u64 = part_id
            .trim()
            .parse()
            .map_err(|_| StatusCode::BadInvalidArgument)?;
        if !self.takes_jobs() {
            return Err(StatusCode::BadInvalidState);
        }
        let recipe = args.get(2).and_then(text_of).unwrap_or_default();
        // Before the station's lock: a switch waits for the recipe thread.
        if let Err(refused) = self.recipes.for_job(&recipe) {
            log::warn!(target: "sealcheck::opcua", part_id = part_id, recipe = recipe.as_str();
                "OPC UA StartSingleJob for part {part_id} refused (Error {}): {refused}", refused.code());
            return Ok(vec![job_id(""), Variant::from(refused.code())]);
        }
        let tags = JobTags {
            meas_id: args.first().and_then(text_of).filter(|s| !s.is_empty()),
            product_id: args.get(3).and_then(text_of).filter(|s| !s.is_empty()),
            recipe_id: Some(recipe).filter(|s| !s.is_empty()),
        };
        let mut state = self.lock();
        if !state.takes_jobs() {
            return Err(StatusCode::BadInvalidState);
        }
        // The desk's lock is taken under the station's, never the other way.
        match desk.trigger(part_id, TriggeredBy::OpcUa) {
            Ok(part) => {
                state.jobs.insert(part.number, tags);
                state.states.auto = AutoMode::SingleExecution;
                Ok(vec![job_id(&part.number.to_string()), Variant::from(0i32)])
            }
            Err(Refused::Backlog) => Err(StatusCode::BadResourceUnavailable),
            Err(Refused::Offline) => Err(StatusCode::BadInvalidState),
            Err(Refused::ByCamera) => Err(StatusCode::BadNotSupported),
        }
    }

    fn takes_jobs(&self) -> bool {
        self.lock().takes_jobs()
    }

    /// `StartContinuous`: free mode only (the config's `[trigger] mode`).
    pub fn start_continuous(&self) -> Answer {
        let mut state = self.lock();
        if self.desk.is_some() || state.states.vision != VisionState::Operational {
            return Err(StatusCode::BadInvalidState);
        }
        state.states.auto = AutoMode::ContinuousExecution;
        Ok(vec![job_id("continuous"), Variant::from(0i32)])
    }

    /// `Stop` and `Abort`: back to Ready. Jobs already triggered still get
    /// their results (a triggered part is never left without one).
    pub fn stop(&self) -> Answer {
        let mut state = self.lock();
        if self.desk.is_none() {
            return Err(StatusCode::BadInvalidState);
        }
        if state.states.auto == AutoMode::SingleExecution {
            state.states.auto = AutoMode::Ready;
        }
        Ok(vec![Variant::from(0i32)])
    }

    /// `Halt`: no job is started until `Reset`.
    pub fn halt(&self) -> Answer {
        let mut state = self.lock();
        state.states = States {
            vision: VisionState::Halted,
            auto: AutoMode::Initialized,
        };
        Ok(vec![Variant::from(0i32)])
    }

    /// `Reset`: Operational again, Ready (or ContinuousExecution in free mode).
    pub fn reset(&self) -> Answer {
        let mut state = self.lock();
        state.states = States {
            vision: VisionState::Operational,
            auto: if self.desk.is_some() {
                AutoMode::Ready
            } else {
                AutoMode::ContinuousExecution
            },
        };
        Ok(vec![Variant::from(0i32)])
    }

    /// Runs `f` on the results kept (GetResultById, GetResultListFiltered).
    pub fn with_results<T>(&self, f: impl FnOnce(&ResultLog) -> T) -> T {
        f(&self.lock().log)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every statement leaves the state whole: a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn job_id(id: &str) -> Variant {
    Variant::from(ExtensionObject::from_message(JobIdDataType {
        id: id.into(),
    }))
}

/// The text of an id argument: the structure's `Id` (PartIdDataType and
/// the like), or a plain String or number from a client that cannot send
/// structures (a PLC's method call block).
pub fn text_of(value: &Variant) -> Option<String> {
    match value {
        Variant::String(s) => Some(s.as_ref().to_string()),
        Variant::UInt32(n) => Some(n.to_string()),
        Variant::UInt64(n) => Some(n.to_string()),
        Variant::Int32(n) => Some(n.to_string()),
        Variant::Int64(n) => Some(n.to_string()),
        Variant::Empty => None,
        Variant::ExtensionObject(o) => {
            if let Some(v) = o.inner_as::<PartIdDataType>() {
                return Some(v.id.as_ref().to_string());
            }
            if let Some(v) = o.inner_as::<MeasIdDataType>() {
                return Some(v.id.as_ref().to_string());
            }
            if let Some(v) = o.inner_as::<ProductIdDataType>() {
                return Some(v.id.as_ref().to_string());
            }
            if let Some(v) = o.inner_as::<RecipeIdExternalDataType>() {
                return Some(v.id.as_ref().to_string());
            }
            if let Some(v) = o.inner_as::<RecipeIdInternalDataType>() {
                return Some(v.id.as_ref().to_string());
            }
            o.inner_as::<JobIdDataType>()
                .map(|v| v.id.as_ref().to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn plc_station() -> (VisionStation, Arc<TriggerDesk>) {
        let desk = Arc::new(TriggerDesk::new(0, Duration::ZERO));
        desk.set_ready(true);
        (
            VisionStation::new(0, Some(Arc::clone(&desk)), RecipeBook::new(None), 10),
            desk,
        )
    }

    fn part(id: &str) -> Variant {
        Variant::from(ExtensionObject::from_message(PartIdDataType {
            id: id.into(),
            description: None,
        }))
    }

    #[test]
    fn a_single_job_triggers_the_desk_with_its_part_id_and_returns_the_part_number() {
        let (station, desk) = plc_station();
        let out = station
            .start_single_job(&[Variant::Empty, part("4711"), Variant::Empty, "cup".into()])
            .unwrap();
        assert_eq!(text_of(&out[0]).as_deref(), Some("0"));
        assert_eq!(out[1], Variant::from(0i32));
        assert_eq!(desk.accepted(), 1);
        assert_eq!(station.states().auto, AutoMode::SingleExecution);
        // A plain string part id works too (PLC method-call blocks).
        station
            .start_single_job(&[Variant::Empty, "4712".into()])
            .unwrap();
        assert_eq!(desk.accepted(), 2);
        assert_eq!(
            station.start_single_job(&[Variant::Empty, "lid".into()]),
            Err(StatusCode::BadInvalidArgument)
        );
    }

    #[test]
    fn halted_takes_no_job_until_reset_and_an_unknown_recipe_is_refused() {
        let (station, desk) = plc_station();
        station.halt().unwrap();
        assert_eq!(
            station.start_single_job(&[Variant::Empty, part("1")]),
            Err(StatusCode::BadInvalidState)
        );
        station.reset().unwrap();
        let out = station
            .start_single_job(&[Variant::Empty, part("1"), "other".into()])
            .unwrap();
        assert_eq!(out[1], Variant::from(6i32), "unknown recipe");
        assert_eq!(desk.accepted(), 0);
        station
            .start_single_job(&[Variant::Empty, part("1"), "0".into()])
            .unwrap();
        assert_eq!(desk.accepted(), 1);
    }

    #[test]
    fn free_mode_has_no_single_jobs() {
        let station = VisionStation::new(0, None, RecipeBook::new(None), 10);
        assert_eq!(station.states().auto, AutoMode::ContinuousExecution);
        assert_eq!(
            station.start_single_job(&[Variant::Empty, part("1")]),
            Err(StatusCode::BadNotSupported)
        );
        assert!(station.start_continuous().is_ok());
    }
}
