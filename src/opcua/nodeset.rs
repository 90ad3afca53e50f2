//! The Machine Vision NodeSet (`opcua/Opc.Ua.MachineVision.NodeSet2.xml`,
//! OPC 40100-1 v1.0.0, vendored unchanged), embedded in the binary and
//! loaded at start, with the fix its method arguments need.
//!
//! async-opcua 0.19 defect worked around here: `Argument`'s binary encoder
//! refuses an argument whose `ValueRank` is above 0 without one
//! `ArrayDimensions` entry per rank ("The array dimensions are expected in
//! the Argument matching value rank"), and the NodeSet declares
//! `StartSingleJob`'s and `StartContinuous`'s `Parameters` (and
//! `GetResultListFiltered`'s `ResultList`) with ValueRank 1 and an empty
//! `<ArrayDimensions />`. A client reading those InputArguments got a
//! failed read (the whole response fails to encode). `FixedArguments`
//! gives each such argument `[0; rank]` (0: length unknown, as OPC UA Part 3
//! says) while the NodeSet is imported.

use async_opcua::nodes::NodeSet2Import;
use async_opcua::nodes::{ImportedItem, NodeSetImport, NodeSetNamespaceMapper, NodeType};
use async_opcua::types::{
    Argument, DataEncoding, DataTypeId, ExtensionObject, NumericRange, TimestampsToReturn, Variant,
};

use super::error::OpcUaError;

/// The NodeSet as published by the OPC Foundation.
pub const MACHINE_VISION_NODESET: &str =
    include_str!("../../opcua/Opc.Ua.MachineVision.NodeSet2.xml");

/// The Machine Vision NodeSet ready to import, its arguments fixed.
pub fn machine_vision() -> Result<FixedArguments, OpcUaError> {
    let import = NodeSet2Import::new_str("en", MACHINE_VISION_NODESET, Vec::new())
        .map_err(|e| OpcUaError::NodeSet(e.to_string()))?;
    Ok(FixedArguments(import))
}

/// A NodeSet import whose method arguments encode (the module doc says why).
pub struct FixedArguments(NodeSet2Import);

impl NodeSetImport for FixedArguments {
    fn register_namespaces(&self, namespaces: &mut NodeSetNamespaceMapper) {
        self.0.register_namespaces(namespaces)
    }

    fn get_own_namespaces(&self) -> Vec<String> {
        self.0.get_own_namespaces()
    }

    fn load<'a>(
        &'a self,
        namespaces: &'a NodeSetNamespaceMapper,
    ) -> Box<dyn Iterator<Item = ImportedItem> + 'a> {
        Box::new(self.0.load(namespaces).map(|mut item| {
            if let NodeType::Variable(variable) = &mut item.node
                && variable.data_type() == DataTypeId::Argument
            {
                let value = variable
                    .value(
                        TimestampsToReturn::Neither,
                        &NumericRange::None,
                        &DataEncoding::Binary,
                        0.0,
                    )
                    .value;
                if let Some(Variant::Array(mut array)) = value
                    && fix_arguments(&mut array.values)
                {
                    let _ = variable.set_value(&NumericRange::None, Variant::Array(array));
                }
            }
            item
        }))
    }
}

/// Gives every argument of rank above 0 one `ArrayDimensions` entry per
/// rank (0 = unknown length); whether any changed.
pub fn fix_arguments(values: &mut [Variant]) -> bool {
    let mut changed = false;
    for value in values {
        let Variant::ExtensionObject(object) = value else {
            continue;
        };
        let Some(argument) = object.inner_as::<Argument>() else {
            continue;
        };
        if let Some(fixed) = fixed_argument(argument) {
            *object = ExtensionObject::from_message(fixed);
            changed = true;
        }
    }
    changed
}

/// The argument with dimensions that match its rank, if it needs them.
fn fixed_argument(argument: &Argument) -> Option<Argument> {
    let rank = usize::try_from(argument.value_rank)
        .ok()
        .filter(|r| *r > 0)?;
    if argument
        .array_dimensions
        .as_ref()
        .is_some_and(|d| d.len() == rank)
    {
        return None;
    }
    let mut dimensions = argument.array_dimensions.clone().unwrap_or_default();
    dimensions.resize(rank, 0);
    Some(Argument {
        array_dimensions: Some(dimensions),
        ..argument.clone()
    })
}

#[cfg(test)]
mod tests {
    use async_opcua::types::{BinaryEncodable, ContextOwned, UAString};

    use super::*;

    fn parameters(dimensions: Option<Vec<u32>>) -> Argument {
        Argument {
            name: UAString::from("Parameters"),
            data_type: DataTypeId::KeyValuePair.into(),
            value_rank: 1,
            array_dimensions: dimensions,
            description: Default::default(),
        }
    }

    fn encodes(argument: &Argument) -> bool {
        let context = ContextOwned::default();
        let mut bytes = Vec::new();
        argument.encode(&mut bytes, &context.context()).is_ok()
    }

    #[test]
    fn the_nodesets_parameters_argument_does_not_encode_as_published() {
        // The defect itself (async-opcua 0.19's `Argument::encode`): if this
        // ever encodes, the fix below is no longer needed.
        assert!(!encodes(&parameters(None)));
        assert!(!encodes(&parameters(Some(Vec::new()))));
    }

    #[test]
    fn a_fixed_argument_encodes_with_an_unknown_length() {
        let mut values = vec![
            Variant::from(ExtensionObject::from_message(parameters(None))),
            Variant::from(ExtensionObject::from_message(Argument {
                value_rank: -1,
                ..parameters(None)
            })),
        ];
        assert!(fix_arguments(&mut values));
        let fixed: Vec<&Argument> = values
            .iter()
            .map(|v| match v {
                Variant::ExtensionObject(o) => o.inner_as::<Argument>().unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(fixed[0].array_dimensions, Some(vec![0]));
        assert!(encodes(fixed[0]));
        // A scalar argument is left as it was.
        assert_eq!(fixed[1].array_dimensions, None);
        assert!(!fix_arguments(&mut values), "a second pass changes nothing");
    }

    #[test]
    fn the_embedded_nodeset_loads_and_every_argument_in_it_encodes() {
        let import = machine_vision().unwrap();
        let mut namespaces = async_opcua::types::NamespaceMap::new();
        let mut mapper = NodeSetNamespaceMapper::new(&mut namespaces);
        import.register_namespaces(&mut mapper);
        let mut arguments = 0;
        for item in import.load(&mapper) {
            let NodeType::Variable(variable) = item.node else {
                continue;
            };
            if variable.data_type() != DataTypeId::Argument {
                continue;
            }
            let Some(Variant::Array(array)) = variable
                .value(
                    TimestampsToReturn::Neither,
                    &NumericRange::None,
                    &DataEncoding::Binary,
                    0.0,
                )
                .value
            else {
                continue;
            };
            for value in &array.values {
                let Variant::ExtensionObject(object) = value else {
                    panic!("{value:?}");
                };
                let argument = object.inner_as::<Argument>().expect("an Argument");
                assert!(encodes(argument), "{argument:?}");
                arguments += 1;
            }
        }
        assert!(arguments > 50, "{arguments} arguments");
    }
}
