//! `RecipePreparedEvent` (OPC 40100-1's RecipePreparedEventType): fired
//! from the camera's VisionSystem whose PrepareRecipe asked, once the
//! recipe is ready (`recipe::RecipeBook::finished`), with InternalId (the
//! recipe's name) and ExternalId (what the client named it by). Answers
//! fields by browse path whatever type the select clause names, as
//! `event::ResultReadyEvent` does (its module doc says why).

use async_opcua::nodes::{BaseEventType, Event, EventField};
use async_opcua::types::{
    AttributeId, ByteString, DateTime, ExtensionObject, LocalizedText, NodeId, NumericRange,
    QualifiedName, UAString, Variant,
};

use super::ids::{Namespaces, RECIPE_PREPARED_EVENT_TYPE};
use super::types::{RecipeIdExternalDataType, RecipeIdInternalDataType};

/// One recipe made ready.
#[derive(Debug)]
pub struct RecipePreparedEvent {
    base: BaseEventType,
    mv: u16,
    external: RecipeIdExternalDataType,
    internal: RecipeIdInternalDataType,
}

impl RecipePreparedEvent {
    /// Recipe `name`, asked for as `asked`, from `source` (a VisionSystem);
    /// `number` makes the EventId unique.
    pub fn new(
        ns: Namespaces,
        name: &str,
        asked: &str,
        source: NodeId,
        source_name: &str,
        number: u64,
    ) -> Self {
        let now = DateTime::now();
        let mut event_id = Vec::with_capacity(16);
        event_id.extend_from_slice(b"RP");
        event_id.extend_from_slice(&number.to_be_bytes());
        event_id.extend_from_slice(&now.ticks().to_be_bytes());
        let base = BaseEventType::new(
            ns.mv(RECIPE_PREPARED_EVENT_TYPE),
            ByteString::from(event_id),
            LocalizedText::new("", &format!("recipe \"{name}\" prepared")),
            now,
        )
        .set_source_node(source)
        .set_source_name(UAString::from(source_name))
        .set_severity(100);
        RecipePreparedEvent {
            base,
            mv: ns.mv,
            external: RecipeIdExternalDataType {
                id: asked.into(),
                ..Default::default()
            },
            internal: RecipeIdInternalDataType {
                id: name.into(),
                ..Default::default()
            },
        }
    }
}

impl EventField for RecipePreparedEvent {
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
            return match field.name.as_ref() {
                "ExternalId" => ExtensionObject::from_message(self.external.clone()).into(),
                "InternalId" => ExtensionObject::from_message(self.internal.clone()).into(),
                _ => Variant::Empty,
            };
        }
        self.base
            .get_value(attribute_id, index_range, remaining_path)
    }
}

impl Event for RecipePreparedEvent {
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
    use super::*;

    #[test]
    fn its_fields_answer_by_browse_path_in_the_machine_vision_namespace() {
        let ns = Namespaces { mv: 2, ours: 3 };
        let event = RecipePreparedEvent::new(ns, "cup200", "2", NodeId::new(3, "cam"), "cam", 1);
        let field = |ns: u16, name: &str| {
            event.get_field(
                &NodeId::null(),
                AttributeId::Value,
                &NumericRange::None,
                &[QualifiedName::new(ns, name)],
            )
        };
        let Variant::ExtensionObject(internal) = field(2, "InternalId") else {
            panic!("no InternalId");
        };
        assert_eq!(
            internal
                .inner_as::<RecipeIdInternalDataType>()
                .unwrap()
                .id
                .as_ref(),
            "cup200"
        );
        assert_eq!(
            field(0, "EventType"),
            Variant::from(ns.mv(RECIPE_PREPARED_EVENT_TYPE))
        );
        assert_eq!(field(2, "ProductId"), Variant::Empty);
    }
}
