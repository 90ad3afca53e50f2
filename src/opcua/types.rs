//! The Machine Vision data types this server encodes and decodes, written
//! by hand with `#[opcua(optional)]` on the optional fields, and their
//! `TypeLoader` (so that a client's `PartIdDataType` in `StartSingleJob`
//! decodes).
//!
//! async-opcua 0.19 defects worked around here: its code generator's
//! output for this NodeSet does not compile, and the NodeSet's own type
//! loader (structures decoded from the `DataTypeDefinition`s at run time)
//! ignores `IsOptional`, so a structure with optional fields (most of
//! these) is encoded without its encoding mask, and clients misread every
//! field after it. These hand-written types encode the mask; the tests
//! below pin the wire form.

use std::io::Read;
use std::sync::{Arc, LazyLock};

use async_opcua as opcua;
// Derived one by one: `#[ua_encodable]` gates its XML traits on *our*
// crate's `xml` feature, and async-opcua's `DynEncodable` needs them.
use opcua::types::{
    ByteString, Context, DateTime, DynEncodable, EncodingResult, ExpandedNodeId, LocalizedText,
    NodeId, TypeLoader, TypeLoaderInstance, UAString, binary_decode_to_enc,
};

use super::ids::{
    CONFIGURATION_ID, JOB_ID, MEAS_ID, MV_URI, PART_ID, PROCESSING_TIMES, PRODUCT_ID,
    RECIPE_ID_EXTERNAL, RECIPE_ID_INTERNAL, RESULT, RESULT_ID,
};

/// A node of the Machine Vision namespace by number.
fn mv(id: u32) -> ExpandedNodeId {
    ExpandedNodeId::from((NodeId::new(0, id), MV_URI))
}

macro_rules! mv_type {
    ($ty:ident, $ids:expr) => {
        impl opcua::types::ExpandedMessageInfo for $ty {
            fn full_type_id(&self) -> ExpandedNodeId {
                mv($ids.1)
            }
            fn full_json_type_id(&self) -> ExpandedNodeId {
                mv($ids.1)
            }
            fn full_xml_type_id(&self) -> ExpandedNodeId {
                mv($ids.1)
            }
            fn full_data_type_id(&self) -> ExpandedNodeId {
                mv($ids.0)
            }
        }
    };
}

/// `ResultIdDataType`: a result's id (this server: the camera's part number).
#[derive(
    Debug,
    Clone,
    PartialEq,
    Default,
    opcua::types::BinaryEncodable,
    opcua::types::BinaryDecodable,
    opcua::types::XmlEncodable,
    opcua::types::XmlDecodable,
    opcua::types::XmlType,
    opcua::types::UaNullable,
)]
pub struct ResultIdDataType {
    pub id: UAString,
}
mv_type!(ResultIdDataType, RESULT_ID);

/// `JobIdDataType`: what `StartSingleJob` returns (the part number).
#[derive(
    Debug,
    Clone,
    PartialEq,
    Default,
    opcua::types::BinaryEncodable,
    opcua::types::BinaryDecodable,
    opcua::types::XmlEncodable,
    opcua::types::XmlDecodable,
    opcua::types::XmlType,
    opcua::types::UaNullable,
)]
pub struct JobIdDataType {
    pub id: UAString,
}
mv_type!(JobIdDataType, JOB_ID);

/// `MeasIdDataType`: the client's name for a measurement.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Default,
    opcua::types::BinaryEncodable,
    opcua::types::BinaryDecodable,
    opcua::types::XmlEncodable,
    opcua::types::XmlDecodable,
    opcua::types::XmlType,
    opcua::types::UaNullable,
)]
pub struct MeasIdDataType {
    pub id: UAString,
    #[opcua(optional)]
    pub description: Option<LocalizedText>,
}
mv_type!(MeasIdDataType, MEAS_ID);

/// `PartIdDataType`: the part (this server: a decimal part id, as Modbus's).
#[derive(
    Debug,
    Clone,
    PartialEq,
    Default,
    opcua::types::BinaryEncodable,
    opcua::types::BinaryDecodable,
    opcua::types::XmlEncodable,
    opcua::types::XmlDecodable,
    opcua::types::XmlType,
    opcua::types::UaNullable,
)]
pub struct PartIdDataType {
    pub id: UAString,
    #[opcua(optional)]
    pub description: Option<LocalizedText>,
}
mv_type!(PartIdDataType, PART_ID);

/// `ProductIdDataType`: the product the client names with a job.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Default,
    opcua::types::BinaryEncodable,
    opcua::types::BinaryDecodable,
    opcua::types::XmlEncodable,
    opcua::types::XmlDecodable,
    opcua::types::XmlType,
    opcua::types::UaNullable,
)]
pub struct ProductIdDataType {
    pub id: UAString,
    #[opcua(optional)]
    pub description: Option<LocalizedText>,
}
mv_type!(ProductIdDataType, PRODUCT_ID);

/// `BinaryIdBaseDataType`'s fields, shared by the configuration and recipe ids.
macro_rules! binary_id {
    ($(#[$doc:meta])* $ty:ident, $ids:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Default)]
        #[derive(
            opcua::types::BinaryEncodable,
            opcua::types::BinaryDecodable,
            opcua::types::XmlEncodable,
            opcua::types::XmlDecodable,
            opcua::types::XmlType,
            opcua::types::UaNullable
        )]
        pub struct $ty {
            pub id: UAString,
            #[opcua(optional)]
            pub version: Option<UAString>,
            #[opcua(optional)]
            pub hash: Option<ByteString>,
            #[opcua(optional)]
            pub hash_algorithm: Option<UAString>,
            #[opcua(optional)]
            pub description: Option<LocalizedText>,
        }
        mv_type!($ty, $ids);
    };
}

binary_id!(
    /// `ConfigurationIdDataType`: the models that judged (their ids).
    ConfigurationIdDataType,
    CONFIGURATION_ID
);
binary_id!(
    /// `RecipeIdInternalDataType`: the recipe that judged.
    RecipeIdInternalDataType,
    RECIPE_ID_INTERNAL
);
binary_id!(
    /// `RecipeIdExternalDataType`: the recipe a client asks for.
    RecipeIdExternalDataType,
    RECIPE_ID_EXTERNAL
);

/// `ProcessingTimesDataType`: trigger (or capture) to verdict.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Default,
    opcua::types::BinaryEncodable,
    opcua::types::BinaryDecodable,
    opcua::types::XmlEncodable,
    opcua::types::XmlDecodable,
    opcua::types::XmlType,
    opcua::types::UaNullable,
)]
pub struct ProcessingTimesDataType {
    pub start_time: DateTime,
    pub end_time: DateTime,
    #[opcua(optional)]
    pub acquisition_duration: Option<f64>,
    #[opcua(optional)]
    pub processing_duration: Option<f64>,
}
mv_type!(ProcessingTimesDataType, PROCESSING_TIMES);

/// `ResultDataType`: one result as `GetResultById` returns it.
/// `ResultContent` is never set here (its bit stays 0): the result's
/// content travels in the ResultReadyEvent's `ResultContent` and the plain
/// variables; its field is typed only to keep the encoding mask's order.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Default,
    opcua::types::BinaryEncodable,
    opcua::types::BinaryDecodable,
    opcua::types::XmlEncodable,
    opcua::types::XmlDecodable,
    opcua::types::XmlType,
    opcua::types::UaNullable,
)]
pub struct ResultDataType {
    pub result_id: ResultIdDataType,
    #[opcua(optional)]
    pub has_transferable_data_on_file: Option<bool>,
    pub is_partial: bool,
    #[opcua(optional)]
    pub is_simulated: Option<bool>,
    pub result_state: i32,
    #[opcua(optional)]
    pub meas_id: Option<MeasIdDataType>,
    #[opcua(optional)]
    pub part_id: Option<PartIdDataType>,
    #[opcua(optional)]
    pub external_recipe_id: Option<RecipeIdExternalDataType>,
    pub internal_recipe_id: RecipeIdInternalDataType,
    #[opcua(optional)]
    pub product_id: Option<ProductIdDataType>,
    #[opcua(optional)]
    pub external_configuration_id: Option<ConfigurationIdDataType>,
    pub internal_configuration_id: ConfigurationIdDataType,
    pub job_id: JobIdDataType,
    pub creation_time: DateTime,
    #[opcua(optional)]
    pub processing_times: Option<ProcessingTimesDataType>,
    #[opcua(optional)]
    pub result_content: Option<UAString>,
}
mv_type!(ResultDataType, RESULT);

static TYPES: LazyLock<TypeLoaderInstance> = LazyLock::new(|| {
    let mut types = TypeLoaderInstance::new();
    macro_rules! add {
        ($ty:ident, $ids:expr) => {
            types.add_binary_type($ids.0, $ids.1, binary_decode_to_enc::<$ty>);
        };
    }
    add!(ResultIdDataType, RESULT_ID);
    add!(JobIdDataType, JOB_ID);
    add!(MeasIdDataType, MEAS_ID);
    add!(PartIdDataType, PART_ID);
    add!(ProductIdDataType, PRODUCT_ID);
    add!(ConfigurationIdDataType, CONFIGURATION_ID);
    add!(RecipeIdInternalDataType, RECIPE_ID_INTERNAL);
    add!(RecipeIdExternalDataType, RECIPE_ID_EXTERNAL);
    add!(ProcessingTimesDataType, PROCESSING_TIMES);
    add!(ResultDataType, RESULT);
    types
});

/// Decodes the types above (binary) when a client sends them.
#[derive(Debug, Clone, Copy)]
pub struct MachineVisionTypes;

impl MachineVisionTypes {
    pub fn loader() -> Arc<dyn TypeLoader> {
        Arc::new(MachineVisionTypes)
    }
}

impl TypeLoader for MachineVisionTypes {
    fn load_from_xml(
        &self,
        _node_id: &NodeId,
        _stream: &mut opcua::types::xml::XmlStreamReader<&mut dyn Read>,
        _ctx: &Context<'_>,
        _name: &str,
    ) -> Option<EncodingResult<Box<dyn DynEncodable>>> {
        None
    }

    fn load_from_binary(
        &self,
        node_id: &NodeId,
        stream: &mut dyn Read,
        ctx: &Context<'_>,
        _length: Option<usize>,
    ) -> Option<EncodingResult<Box<dyn DynEncodable>>> {
        let index = ctx.namespaces().get_index(MV_URI)?;
        if index != node_id.namespace {
            return None;
        }
        TYPES.decode_binary(node_id.as_u32()?, stream, ctx)
    }
}

#[cfg(test)]
mod tests {
    use opcua::types::{BinaryDecodable, BinaryEncodable, ContextOwned};

    use super::*;

    #[test]
    fn an_optional_field_sets_its_bit_of_the_encoding_mask_and_follows_it() {
        let context = ContextOwned::default();
        let context = context.context();
        let part = PartIdDataType {
            id: "4711".into(),
            description: Some(LocalizedText::new("en", "lid")),
        };
        let mut bytes = Vec::new();
        part.encode(&mut bytes, &context).unwrap();
        assert_eq!(&bytes[..4], &[1, 0, 0, 0], "mask: Description present");
        assert_eq!(&bytes[4..8], &[4, 0, 0, 0], "then Id's length");
        let back = PartIdDataType::decode(&mut bytes.as_slice(), &context).unwrap();
        assert_eq!(back, part);
        let bare = PartIdDataType {
            id: "1".into(),
            description: None,
        };
        let mut bytes = Vec::new();
        bare.encode(&mut bytes, &context).unwrap();
        assert_eq!(bytes, [0, 0, 0, 0, 1, 0, 0, 0, b'1']);
    }

    #[test]
    fn a_result_without_its_optional_fields_has_a_zero_mask_first() {
        let context = ContextOwned::default();
        let mut bytes = Vec::new();
        ResultDataType::default()
            .encode(&mut bytes, &context.context())
            .unwrap();
        assert_eq!(&bytes[..4], &[0, 0, 0, 0]);
    }
}
