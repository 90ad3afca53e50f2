//! `ResultReadyEvent`: one per result, from the camera's VisionSystem
//! object (and so from the Server object too), with the mandatory fields of
//! OPC 40100-1's ResultReadyEventType (CreationTime,
//! InternalConfigurationId, InternalRecipeId, IsPartial, JobId, ResultId,
//! ResultState) and PartId, ProductId, MeasId, ProcessingTimes and
//! ResultContent.
//!
//! Written by hand rather than with async-opcua's `#[derive(Event)]`: the
//! derived `get_field` answers the type's own fields only when the select
//! clause names ResultReadyEventType, while clients (Python asyncua among
//! them) name BaseEventType for every field, which OPC UA Part 4 says the
//! server evaluates by browse path alone.

use async_opcua::nodes::{BaseEventType, Event, EventField};
use async_opcua::types::{
    AttributeId, ByteString, DateTime, ExtensionObject, LocalizedText, NodeId, NumericRange,
    QualifiedName, UAString, Variant,
};

use super::ids::{Namespaces, RESULT_READY_EVENT_TYPE};
use super::record::ResultRecord;
use super::types::{
    ConfigurationIdDataType, JobIdDataType, MeasIdDataType, PartIdDataType,
    ProcessingTimesDataType, ProductIdDataType, RecipeIdExternalDataType, RecipeIdInternalDataType,
    ResultDataType, ResultIdDataType,
};

/// One result as an event.
#[derive(Debug)]
pub struct ResultReadyEvent {
    base: BaseEventType,
    mv: u16,
    result: ResultDataType,
    content: String,
}

impl ResultReadyEvent {
    /// The event of `record` from `source` (the camera's VisionSystem).
    pub fn new(ns: Namespaces, record: &ResultRecord, source: NodeId, source_name: &str) -> Self {
        let mut event_id = Vec::with_capacity(16);
        event_id.extend_from_slice(&record.number.to_be_bytes());
        event_id.extend_from_slice(
            &u64::try_from(
                record
                    .created
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos(),
            )
            .unwrap_or(u64::MAX)
            .to_be_bytes(),
        );
        let message = format!(
            "part {} {} ({})",
            record
                .part_id
                .map_or_else(|| record.number.to_string(), |id| id.to_string()),
            record.verdict(),
            record.reason
        );
        let time = opc_time(record.created);
        let base = BaseEventType::new(
            ns.mv(RESULT_READY_EVENT_TYPE),
            ByteString::from(event_id),
            LocalizedText::new("", &message),
            time,
        )
        .set_source_node(source)
        .set_source_name(UAString::from(source_name))
        .set_severity(if record.pass { 100 } else { 500 });
        ResultReadyEvent {
            base,
            mv: ns.mv,
            result: result_data(record),
            content: record.content_json(),
        }
    }
}

/// 100-ns ticks from 1601-01-01 (OPC UA's epoch) to 1970-01-01.
const TICKS_TO_UNIX_EPOCH: i64 = 116_444_736_000_000_000;

/// A `SystemTime` as OPC UA's `DateTime` (100 ns ticks).
pub fn opc_time(t: std::time::SystemTime) -> DateTime {
    let since_unix = t
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
        / 100;
    DateTime::from(TICKS_TO_UNIX_EPOCH.saturating_add(i64::try_from(since_unix).unwrap_or(0)))
}

/// The record as `ResultDataType` (`GetResultById`, the event's fields).
pub fn result_data(record: &ResultRecord) -> ResultDataType {
    let job = record.job_id();
    let tagged = |id: &Option<String>| id.as_ref().map(|s| UAString::from(s.as_str()));
    ResultDataType {
        result_id: ResultIdDataType {
            id: job.as_str().into(),
        },
        has_transferable_data_on_file: None,
        is_partial: false,
        is_simulated: None,
        result_state: record.result_state(),
        meas_id: tagged(&record.tags.meas_id).map(|id| MeasIdDataType {
            id,
            description: None,
        }),
        part_id: record.part_id.map(|id| PartIdDataType {
            id: id.to_string().into(),
            description: None,
        }),
        external_recipe_id: tagged(&record.tags.recipe_id).map(|id| RecipeIdExternalDataType {
            id,
            ..Default::default()
        }),
        internal_recipe_id: RecipeIdInternalDataType {
            id: record.recipe.as_str().into(),
            ..Default::default()
        },
        product_id: tagged(&record.tags.product_id).map(|id| ProductIdDataType {
            id,
            description: None,
        }),
        external_configuration_id: None,
        internal_configuration_id: ConfigurationIdDataType {
            id: record.models.as_str().into(),
            ..Default::default()
        },
        job_id: JobIdDataType {
            id: job.as_str().into(),
        },
        creation_time: opc_time(record.created),
        processing_times: Some(ProcessingTimesDataType {
            start_time: opc_time(record.started),
            end_time: opc_time(record.created),
            acquisition_duration: None,
            processing_duration: Some(record.latency_ms),
        }),
        result_content: None,
    }
}

fn object<T: async_opcua::types::DynEncodable>(value: T) -> Variant {
    Variant::from(ExtensionObject::from_message(value))
}

impl ResultReadyEvent {
    /// A field of ResultReadyEventType by its browse name.
    fn own_field(&self, name: &str) -> Variant {
        let r = &self.result;
        match name {
            "CreationTime" => Variant::from(r.creation_time),
            "InternalConfigurationId" => object(r.internal_configuration_id.clone()),
            "InternalRecipeId" => object(r.internal_recipe_id.clone()),
            "IsPartial" => Variant::from(r.is_partial),
            "JobId" => object(r.job_id.clone()),
            "ResultId" => object(r.result_id.clone()),
            "ResultState" => Variant::from(r.result_state),
            "PartId" => r.part_id.clone().map_or(Variant::Empty, object),
            "ProductId" => r.product_id.clone().map_or(Variant::Empty, object),
            "MeasId" => r.meas_id.clone().map_or(Variant::Empty, object),
            "ProcessingTimes" => r.processing_times.clone().map_or(Variant::Empty, object),
            "ExternalRecipeId" => r.external_recipe_id.clone().map_or(Variant::Empty, object),
            "ResultContent" => Variant::from(vec![UAString::from(self.content.as_str())]),
            _ => Variant::Empty,
        }
    }
}

impl EventField for ResultReadyEvent {
    fn get_value(
        &self,
        attribute_id: AttributeId,
        index_range: &NumericRange,
        remaining_path: &[QualifiedName],
    ) -> Variant {
        if let [field] = remaining_path
            && field.namespace_index == self.mv
            && attribute_id == AttributeId::Value
        {
            return self.own_field(field.name.as_ref());
        }
        self.base
            .get_value(attribute_id, index_range, remaining_path)
    }
}

impl Event for ResultReadyEvent {
    /// Answers by browse path whatever type the clause names (the module
    /// doc says why).
    fn get_field(
        &self,
        _type_definition_id: &NodeId,
        attribute_id: AttributeId,
        index_range: &NumericRange,
        browse_path: &[QualifiedName],
    ) -> Variant {
        self.get_value(attribute_id, index_range, browse_path)
    }

    fn time(&self) -> &DateTime {
        &self.base.time
    }

    fn event_type_id(&self) -> &NodeId {
        &self.base.event_type
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use async_opcua::nodes::{DefaultTypeTree, ParsedEventFilter};
    use async_opcua::types::{
        ContentFilter, ContentFilterElement, EventFilter, FilterOperator, LiteralOperand,
        ObjectTypeId, SimpleAttributeOperand,
    };

    use super::*;
    use crate::opcua::record::JobTags;

    const NS: Namespaces = Namespaces { mv: 2, ours: 3 };

    fn record() -> ResultRecord {
        ResultRecord {
            number: 7,
            part_id: Some(4711),
            seq: Some(70),
            pass: false,
            reason: "defect",
            defect_prob: Some(0.9),
            seal_area: Some(0.2),
            latency_ms: 12.5,
            started: SystemTime::now(),
            created: SystemTime::now(),
            camera: Some("left".into()),
            models: "seg=a,cls=b".into(),
            recipe: "default".into(),
            tags: JobTags {
                meas_id: None,
                product_id: Some("cup-200".into()),
                recipe_id: None,
            },
        }
    }

    fn field(path: &[QualifiedName]) -> SimpleAttributeOperand {
        SimpleAttributeOperand {
            type_definition_id: ObjectTypeId::BaseEventType.into(),
            browse_path: Some(path.to_vec()),
            attribute_id: AttributeId::Value as u32,
            index_range: Default::default(),
        }
    }

    /// The filter Python asyncua's `subscribe_events` sends: every field
    /// named under BaseEventType, and `InList(EventType, <the types>)`.
    fn default_filter(types: &[NodeId]) -> EventFilter {
        let mut operands = vec![ExtensionObject::from_message(field(&[QualifiedName::new(
            0,
            "EventType",
        )]))];
        operands.extend(types.iter().map(|t| {
            ExtensionObject::from_message(LiteralOperand {
                value: Variant::from(t.clone()),
            })
        }));
        EventFilter {
            select_clauses: Some(vec![
                field(&[QualifiedName::new(0, "EventType")]),
                field(&[QualifiedName::new(NS.mv, "PartId")]),
                field(&[QualifiedName::new(NS.mv, "ResultState")]),
            ]),
            where_clause: ContentFilter {
                elements: Some(vec![ContentFilterElement {
                    filter_operator: FilterOperator::InList,
                    filter_operands: Some(operands),
                }]),
            },
        }
    }

    #[test]
    fn the_default_where_clause_of_clients_matches_result_ready() {
        // Fails without vendor/async-opcua-nodes' patch: 0.19 compares no NodeIds.
        let tree = DefaultTypeTree::new();
        let event = ResultReadyEvent::new(NS, &record(), NodeId::new(3, "cam"), "cam");
        let wanted = default_filter(&[NodeId::new(NS.mv, RESULT_READY_EVENT_TYPE)]);
        let (_, parsed) = ParsedEventFilter::new(wanted, &tree);
        let fields = parsed
            .unwrap()
            .evaluate(&event, 1, &tree)
            .expect("the event passes the filter");
        let fields = fields.event_fields.unwrap();
        assert_eq!(
            fields[0],
            Variant::from(NodeId::new(NS.mv, RESULT_READY_EVENT_TYPE))
        );
        let Variant::ExtensionObject(part) = &fields[1] else {
            panic!("{:?}", fields[1]);
        };
        assert_eq!(
            part.inner_as::<PartIdDataType>().unwrap().id.as_ref(),
            "4711"
        );
        assert_eq!(fields[2], Variant::from(2i32), "NOK");
        // And a filter for another type still keeps it out.
        let other = default_filter(&[NodeId::new(0, 2041u32 + 1000)]);
        let (_, parsed) = ParsedEventFilter::new(other, &tree);
        assert!(parsed.unwrap().evaluate(&event, 1, &tree).is_none());
    }
}
