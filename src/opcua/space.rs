//! The address space of sealcheck's namespace: one VisionSystem per camera
//! (instances of the NodeSet's types, built by hand: async-opcua does not
//! instantiate types), its methods wired to the camera's `VisionStation`,
//! and the plain variables. Node ids are strings, `<camera>/<path>`:
//!
//! ```text
//! Objects/
//!   VisionSystem <camera>                        (VisionSystemType; EventNotifier: ResultReadyEvent)
//!     VisionStateMachine                         (VisionStateMachineType) CurrentState, Halt, Reset
//!       AutomaticModeStateMachine                (VisionAutomaticModeStateMachineType)
//!                                                CurrentState, StartSingleJob, StartContinuous, Stop, Abort
//!     ResultManagement                           (ResultManagementType) GetResultById, GetResultListFiltered
//!     Sealcheck                                  plain variables: State, AutomaticMode, ResultCount,
//!                                                LastJobId, LastPartId, LastPass, LastVerdict, LastReason,
//!                                                LastDefectProb, LastSealArea, LastResultTime, ActiveRecipe
//! ```

use std::sync::Arc;

use async_opcua::nodes::{MethodBuilder, NodeType, ObjectBuilder, VariableBuilder};
use async_opcua::server::address_space::AddressSpace;
use async_opcua::server::node_manager::memory::SimpleNodeManager;
use async_opcua::types::{
    Argument, DataEncoding, DataTypeId, ExtensionObject, LocalizedText, NodeId, NumericRange,
    ObjectId, ObjectTypeId, QualifiedName, ReferenceTypeId, StatusCode, TimestampsToReturn,
    VariableTypeId, Variant,
};

use super::event::result_data;
use super::ids::{
    AUTOMATIC_MODE_METHODS, AUTOMATIC_MODE_STATE_MACHINE_TYPE, Namespaces,
    RESULT_MANAGEMENT_METHODS, RESULT_MANAGEMENT_TYPE, VISION_STATE_MACHINE_TYPE,
    VISION_STATE_METHODS, VISION_SYSTEM_TYPE,
};
use super::station::{Answer, VisionStation, text_of};

/// The plain variables of a camera, in `Sealcheck/`: (name, data type).
pub const PLAIN_VARIABLES: [(&str, DataTypeId); 12] = [
    ("State", DataTypeId::String),
    ("AutomaticMode", DataTypeId::String),
    ("ResultCount", DataTypeId::UInt64),
    ("LastJobId", DataTypeId::String),
    ("LastPartId", DataTypeId::UInt64),
    ("LastPass", DataTypeId::Boolean),
    ("LastVerdict", DataTypeId::String),
    ("LastReason", DataTypeId::String),
    ("LastDefectProb", DataTypeId::Double),
    ("LastSealArea", DataTypeId::Double),
    ("LastResultTime", DataTypeId::DateTime),
    ("ActiveRecipe", DataTypeId::String),
];

/// One camera's nodes, as the server thread updates them.
pub struct CameraNodes {
    pub system: NodeId,
    pub name: String,
    pub vision_state: NodeId,
    pub auto_state: NodeId,
    /// `Sealcheck/<name>` for each of `PLAIN_VARIABLES`.
    pub plain: Vec<NodeId>,
}

impl CameraNodes {
    pub fn plain(&self, name: &str) -> &NodeId {
        let index = PLAIN_VARIABLES
            .iter()
            .position(|(n, _)| *n == name)
            .expect("a plain variable's name");
        &self.plain[index]
    }
}

/// The type's method arguments (fixed at import), read from the Machine
/// Vision node manager's address space.
pub fn arguments(mv_space: &AddressSpace, id: &NodeId) -> Vec<Argument> {
    let Some(NodeType::Variable(variable)) = mv_space.find(id) else {
        return Vec::new();
    };
    let value = variable
        .value(
            TimestampsToReturn::Neither,
            &NumericRange::None,
            &DataEncoding::Binary,
            0.0,
        )
        .value;
    let Some(Variant::Array(array)) = value else {
        return Vec::new();
    };
    array
        .values
        .into_iter()
        .filter_map(|v| match v {
            Variant::ExtensionObject(o) => o.into_inner_as::<Argument>().map(|a| *a),
            _ => None,
        })
        .collect()
}

/// Builds camera `station`'s nodes named `name` and wires its methods.
pub fn add_camera(
    manager: &SimpleNodeManager,
    mv_space: &AddressSpace,
    ns: Namespaces,
    name: &str,
    station: &Arc<VisionStation>,
) -> CameraNodes {
    let id = |path: &str| ns.ours(&format!("{name}/{path}"));
    let mv_name = |n: &str| QualifiedName::new(ns.mv, n);
    let system = id("VisionSystem");
    let vision = id("VisionStateMachine");
    let auto = id("AutomaticModeStateMachine");
    let results = id("ResultManagement");
    let folder = id("Sealcheck");
    let mut methods: Vec<(NodeId, &'static str)> = Vec::new();
    let nodes = {
        let mut space = manager.address_space().write();
        ObjectBuilder::new(&system, QualifiedName::new(ns.ours, name), name)
            .has_type_definition(ns.mv(VISION_SYSTEM_TYPE))
            .organized_by(ObjectId::ObjectsFolder)
            .event_notifier(async_opcua::nodes::EventNotifier::SUBSCRIBE_TO_EVENTS)
            .reference(
                ObjectId::Server,
                ReferenceTypeId::HasNotifier,
                async_opcua::nodes::ReferenceDirection::Inverse,
            )
            .insert(&mut *space);
        ObjectBuilder::new(&vision, mv_name("VisionStateMachine"), "VisionStateMachine")
            .has_type_definition(ns.mv(VISION_STATE_MACHINE_TYPE))
            .component_of(system.clone())
            .insert(&mut *space);
        ObjectBuilder::new(
            &auto,
            mv_name("AutomaticModeStateMachine"),
            "AutomaticModeStateMachine",
        )
        .has_type_definition(ns.mv(AUTOMATIC_MODE_STATE_MACHINE_TYPE))
        .component_of(vision.clone())
        .insert(&mut *space);
        ObjectBuilder::new(&results, mv_name("ResultManagement"), "ResultManagement")
            .has_type_definition(ns.mv(RESULT_MANAGEMENT_TYPE))
            .component_of(system.clone())
            .insert(&mut *space);
        ObjectBuilder::new(
            &folder,
            QualifiedName::new(ns.ours, "Sealcheck"),
            "Sealcheck",
        )
        .has_type_definition(ObjectTypeId::FolderType)
        .component_of(system.clone())
        .insert(&mut *space);
        let states = station.states();
        let vision_state = current_state(
            &mut space,
            &vision,
            &id("VisionStateMachine/CurrentState"),
            states.vision.name(),
        );
        let auto_state = current_state(
            &mut space,
            &auto,
            &id("AutomaticModeStateMachine/CurrentState"),
            states.auto.name(),
        );
        for (parent, parent_path, list) in [
            (&vision, "VisionStateMachine", &VISION_STATE_METHODS[..]),
            (
                &auto,
                "AutomaticModeStateMachine",
                &AUTOMATIC_MODE_METHODS[..],
            ),
            (&results, "ResultManagement", &RESULT_MANAGEMENT_METHODS[..]),
        ] {
            for (method, _, inputs, outputs) in list {
                let method_id = id(&format!("{parent_path}/{method}"));
                MethodBuilder::new(&method_id, mv_name(method), *method)
                    .component_of(parent.clone())
                    .executable(true)
                    .user_executable(true)
                    .input_args(
                        &mut *space,
                        &id(&format!("{parent_path}/{method}/InputArguments")),
                        &arguments(mv_space, &ns.mv(*inputs)),
                    )
                    .output_args(
                        &mut *space,
                        &id(&format!("{parent_path}/{method}/OutputArguments")),
                        &arguments(mv_space, &ns.mv(*outputs)),
                    )
                    .insert(&mut *space);
                methods.push((method_id, method));
            }
        }
        let plain = PLAIN_VARIABLES
            .iter()
            .map(|(variable, data_type)| {
                let node = id(&format!("Sealcheck/{variable}"));
                VariableBuilder::new(&node, QualifiedName::new(ns.ours, *variable), *variable)
                    .data_type(*data_type)
                    .value(initial(*variable, station))
                    .has_type_definition(VariableTypeId::BaseDataVariableType)
                    .component_of(folder.clone())
                    .insert(&mut *space);
                node
            })
            .collect();
        CameraNodes {
            system,
            name: name.to_string(),
            vision_state,
            auto_state,
            plain,
        }
    };
    let inner = manager.inner();
    for (method_id, method) in methods {
        let station = Arc::clone(station);
        inner.add_method_callback(method_id, move |args| call(&station, method, args));
    }
    nodes
}

/// A state machine's `CurrentState` (FiniteStateVariableType).
fn current_state(space: &mut AddressSpace, parent: &NodeId, node: &NodeId, state: &str) -> NodeId {
    VariableBuilder::new(node, QualifiedName::new(0, "CurrentState"), "CurrentState")
        .data_type(DataTypeId::LocalizedText)
        .value(LocalizedText::new("", state))
        .has_type_definition(VariableTypeId::FiniteStateVariableType)
        .component_of(parent.clone())
        .insert(space);
    node.clone()
}

fn initial(variable: &str, station: &VisionStation) -> Variant {
    let states = station.states();
    match variable {
        "State" => states.vision.name().into(),
        "AutomaticMode" => states.auto.name().into(),
        "ResultCount" | "LastPartId" => 0u64.into(),
        "LastPass" => false.into(),
        "LastDefectProb" | "LastSealArea" => f64::NAN.into(),
        "LastResultTime" => async_opcua::types::DateTime::null().into(),
        "ActiveRecipe" => station.active_recipe().into(),
        _ => "".into(),
    }
}

/// A method call on camera `station`.
fn call(station: &VisionStation, method: &str, args: &[Variant]) -> Answer {
    match method {
        "StartSingleJob" => station.start_single_job(args),
        "StartContinuous" => station.start_continuous(),
        "Stop" | "Abort" => station.stop(),
        "Halt" => station.halt(),
        "Reset" => station.reset(),
        "GetResultById" => get_result_by_id(station, args),
        "GetResultListFiltered" => get_result_list(station, args),
        _ => Err(StatusCode::BadMethodInvalid),
    }
}

/// `GetResultById(ResultId, Timeout) -> (ResultHandle, Result, Error)`.
fn get_result_by_id(station: &VisionStation, args: &[Variant]) -> Answer {
    let id = args.first().and_then(text_of).unwrap_or_default();
    let found = station.with_results(|log| log.by_id(&id).map(result_data));
    Ok(match found {
        Some(result) => vec![
            0u32.into(),
            ExtensionObject::from_message(result).into(),
            0i32.into(),
        ],
        // Error 1: no such result among those kept.
        None => vec![0u32.into(), Variant::Empty, 1i32.into()],
    })
}

/// `GetResultListFiltered(ResultState, MeasId, PartId, ExternalRecipeId,
/// InternalRecipeId, ExternalConfigurationId, InternalConfigurationId,
/// ProductId, JobId, MaxResults, StartIndex, Timeout) -> (IsComplete,
/// ResultCount, ResultHandle, ResultList, Error)`. Filters on ResultState
/// (0 = any), PartId, JobId and the internal recipe (empty = any).
fn get_result_list(station: &VisionStation, args: &[Variant]) -> Answer {
    let text = |i: usize| args.get(i).and_then(text_of).filter(|s| !s.is_empty());
    let state = match args.first() {
        Some(Variant::Int32(s)) => *s,
        _ => 0,
    };
    let part = text(2);
    let recipe = text(4);
    let job = text(8);
    let max = match args.get(9) {
        Some(Variant::UInt32(n)) => *n as usize,
        _ => 0,
    };
    let start = match args.get(10) {
        Some(Variant::UInt32(n)) => *n as usize,
        _ => 0,
    };
    let (list, complete) = station.with_results(|log| {
        let (page, complete) = log.filtered(
            |r| {
                (state == 0 || r.result_state() == state)
                    && part
                        .as_ref()
                        .is_none_or(|p| r.part_id.is_some_and(|id| id.to_string() == *p))
                    && job.as_ref().is_none_or(|j| r.job_id() == *j)
                    && recipe.as_ref().is_none_or(|name| r.recipe == *name)
            },
            start,
            max,
        );
        let list: Vec<ExtensionObject> = page
            .into_iter()
            .map(|r| ExtensionObject::from_message(result_data(r)))
            .collect();
        (list, complete)
    });
    Ok(vec![
        complete.into(),
        (list.len() as u32).into(),
        0u32.into(),
        list.into(),
        0i32.into(),
    ])
}
