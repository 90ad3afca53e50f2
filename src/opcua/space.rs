//! The address space of sealcheck's namespace: one VisionSystem per camera
//! (instances of the NodeSet's types, built by hand: async-opcua does not
//! instantiate types), its methods wired to the camera's `VisionStation`,
//! and the plain variables; the methods' work is `methods`'. Node ids are
//! strings, `<camera>/<path>`:
//!
//! ```text
//! Objects/
//!   VisionSystem <camera>                        (VisionSystemType; EventNotifier: ResultReadyEvent)
//!     VisionStateMachine                         (VisionStateMachineType) CurrentState, Halt, Reset
//!       AutomaticModeStateMachine                (VisionAutomaticModeStateMachineType)
//!                                                CurrentState, StartSingleJob, StartContinuous, Stop, Abort
//!     RecipeManagement                           (RecipeManagementType) PrepareRecipe, UnprepareRecipe,
//!                                                GetRecipeListFiltered
//!     ResultManagement                           (ResultManagementType) GetResultById, GetResultListFiltered
//!     Sealcheck                                  plain variables: State, AutomaticMode, ResultCount,
//!                                                LastJobId, LastPartId, LastPass, LastVerdict, LastReason,
//!                                                LastDefectProb, LastSealArea, LastResultTime, LastRecipe,
//!                                                ActiveRecipe, PreparedRecipes, PreparingRecipe, RecipeError
//! ```

use std::sync::Arc;

use async_opcua::nodes::{MethodBuilder, NodeType, ObjectBuilder, VariableBuilder};
use async_opcua::server::address_space::AddressSpace;
use async_opcua::server::node_manager::memory::SimpleNodeManager;
use async_opcua::types::{
    Argument, DataEncoding, DataTypeId, LocalizedText, NodeId, NumericRange, ObjectId,
    ObjectTypeId, QualifiedName, ReferenceTypeId, TimestampsToReturn, VariableTypeId, Variant,
};

use super::ids::{
    AUTOMATIC_MODE_METHODS, AUTOMATIC_MODE_STATE_MACHINE_TYPE, Namespaces,
    RECIPE_MANAGEMENT_METHODS, RECIPE_MANAGEMENT_TYPE, RESULT_MANAGEMENT_METHODS,
    RESULT_MANAGEMENT_TYPE, VISION_STATE_MACHINE_TYPE, VISION_STATE_METHODS, VISION_SYSTEM_TYPE,
};
use super::methods::call;
use super::station::VisionStation;

/// The plain variables of a camera, in `Sealcheck/`: (name, data type).
pub const PLAIN_VARIABLES: [(&str, DataTypeId); 16] = [
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
    // The recipe that judged the last result (its verdict's models').
    ("LastRecipe", DataTypeId::String),
    // The recipe judging from the next part on.
    ("ActiveRecipe", DataTypeId::String),
    // Kept ready besides the active one, comma-separated.
    ("PreparedRecipes", DataTypeId::String),
    // Being prepared now ("" for none).
    ("PreparingRecipe", DataTypeId::String),
    // Why the last preparation or switch asked over OPC UA failed ("" after one that did not).
    ("RecipeError", DataTypeId::String),
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
    let recipes = id("RecipeManagement");
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
        ObjectBuilder::new(&recipes, mv_name("RecipeManagement"), "RecipeManagement")
            .has_type_definition(ns.mv(RECIPE_MANAGEMENT_TYPE))
            .component_of(system.clone())
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
            (&recipes, "RecipeManagement", &RECIPE_MANAGEMENT_METHODS[..]),
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
                    .value(initial(variable, station))
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
        "ActiveRecipe" => station.recipes().active().into(),
        "PreparedRecipes" => station.recipes().prepared_names().into(),
        "PreparingRecipe" => station.recipes().preparing().into(),
        _ => "".into(),
    }
}
