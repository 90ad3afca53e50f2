#[macro_use]
mod event;
mod evaluate;
mod validation;

pub use evaluate::AttributeQueryable;
pub use event::{BaseEventType, Event, MethodEventField};
pub use opcua_types::event_field::EventField;
pub use validation::{
    ParsedAttributeOperand, ParsedContentFilter, ParsedContentFilterElement, ParsedEventFilter,
    ParsedOperand, ParsedSimpleAttributeOperand,
};
