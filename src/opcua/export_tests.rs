//! The exported NodeSet read back with async-opcua's own NodeSet2 loader:
//! every camera's nodes, their type definitions in the Machine Vision
//! namespace, and StartSingleJob's arguments as the server serves them.

use async_opcua::nodes::{HasNodeId, NodeSet2Import, NodeSetImport, NodeSetNamespaceMapper};
use async_opcua::types::{
    Argument, DataEncoding, NamespaceMap, NumericRange, ReferenceTypeId, TimestampsToReturn,
};

use super::*;

#[test]
fn the_exported_instances_load_back_with_their_types_and_arguments() {
    let cameras = ["left".to_string(), "right & <spare>".to_string()];
    let xml = instance_nodeset(&cameras).unwrap();
    // The file names both its namespaces (NamespaceUris): no dependent ones.
    let import = NodeSet2Import::new_str("en", &xml, Vec::new()).unwrap();
    let mut namespaces = NamespaceMap::new();
    namespaces.add_namespace(MV_URI);
    let mut mapper = NodeSetNamespaceMapper::new(&mut namespaces);
    import.register_namespaces(&mut mapper);
    let ours = mapper.namespaces().get_index(OUR_URI).unwrap();
    let mv = mapper.namespaces().get_index(MV_URI).unwrap();
    let items: Vec<_> = import.load(&mapper).collect();
    let per_camera = items.len() / cameras.len();
    assert_eq!(
        items.len() % cameras.len(),
        0,
        "as many nodes for each camera"
    );
    assert!(per_camera > 40, "{per_camera} nodes a camera");
    for name in &cameras {
        let system = NodeId::new(ours, format!("{name}/VisionSystem"));
        let item = items
            .iter()
            .find(|i| i.node.node_id() == &system)
            .unwrap_or_else(|| panic!("{system} exported"));
        assert_eq!(item.node.as_node().browse_name().name.as_ref(), name);
        assert!(
            item.references
                .iter()
                .any(|r| r.type_id == ReferenceTypeId::HasTypeDefinition
                    && r.target_id == NodeId::new(mv, 1003u32)),
            "a VisionSystemType instance"
        );
    }
    let inputs = NodeId::new(
        ours,
        "left/AutomaticModeStateMachine/StartSingleJob/InputArguments",
    );
    let item = items.iter().find(|i| i.node.node_id() == &inputs).unwrap();
    let NodeType::Variable(variable) = &item.node else {
        panic!("InputArguments is a variable");
    };
    let Some(Variant::Array(array)) = variable
        .value(
            TimestampsToReturn::Neither,
            &NumericRange::None,
            &DataEncoding::Binary,
            0.0,
        )
        .value
    else {
        panic!("InputArguments has a value");
    };
    let arguments: Vec<Argument> = array
        .values
        .into_iter()
        .map(|v| match v {
            Variant::ExtensionObject(o) => *o.into_inner_as::<Argument>().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    let names: Vec<&str> = arguments.iter().map(|a| a.name.as_ref()).collect();
    assert_eq!(
        names,
        ["MeasId", "PartId", "RecipeId", "ProductId", "Parameters"]
    );
    assert_eq!(
        arguments[1].data_type,
        NodeId::new(mv, 3004u32),
        "PartIdDataType"
    );
    assert_eq!(arguments[4].array_dimensions, Some(vec![0]));
}
