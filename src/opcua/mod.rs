//! The OPC UA server (`[opcua]`) of the Machine Vision companion
//! specification (OPC 40100-1), its Simple Inline Vision System profile:
//! one `VisionSystem` per camera, whose `StartSingleJob` triggers a part
//! and whose `ResultReadyEvent` (and plain variables) carry each result;
//! RecipeManagement over the service's recipe desk. docs/INTEGRATION.md
//! ("OPC UA") is the contract: address space, methods, events, variables,
//! security, and the S7-1500 and TwinCAT sides.
//!
//! ```text
//! client ──TCP──▶ gate (thread "opcua", current-thread tokio runtime; cap, evicts the idlest)
//!                  └─pipe─▶ async-opcua server (loopback port; endpoints `security`, logins `access`)
//!                             ─▶ space: method call ─▶ methods ─▶ VisionStation::start_single_job
//!                                                                ─▶ [RecipeBook::for_job] ─▶ TriggerDesk::trigger(PartId)
//!                                                     ─▶ RecipeBook::prepare ─▶ RecipeDesk::prepare
//! Line ──LineOutput::send──▶ OpcUaOutput ──channel──▶ Pump: VisionStation::take ─▶ ResultReadyEvent,
//!                                                      plain variables (in part order)
//!                                     Pump, every 50 ms: RecipeBook::finished ─▶ RecipePrepared
//! ```
//!
//! A StartSingleJob's whole way: the same as a Modbus trigger's (`plc`'s
//! module doc) from `TriggerDesk::trigger` to `Line`; the camera's
//! `OpcUaOutput` is one of its Line's outputs (`pipeline::parts::line_outputs`),
//! so every result of the camera, whoever triggered it, is published once.
//!
//! async-opcua 0.19's defects and where each is worked around (each with a
//! test there): method arguments that do not encode (`nodeset`); optional
//! structure fields and codegen (`types`); where clauses that compare no
//! NodeIds (patched in `vendor/async-opcua-nodes`, tested in `event`); no
//! cap on connections (`gate`).
//!
//! The files: `ids` (NodeSet ids, namespaces), `nodeset` (the NodeSet,
//! fixed), `types` (data types), `record` (a result, the last N), `event`
//! (ResultReadyEvent), `recipe_event` (RecipePrepared), `station` (state
//! machines, StartSingleJob), `recipe` (recipes as OPC UA sees them),
//! `methods` (what each method does), `space` (nodes), `output` (the line
//! output), `pump` (results and recipes to events and variables), `gate`
//! (accept, cap, eviction), `security` (endpoints, certificates), `users`
//! and `access` (who logs in), `server` (`OpcUaServer`), `error`.

mod access;
mod error;
mod event;
mod gate;
mod ids;
mod methods;
mod nodeset;
mod output;
mod pump;
mod recipe;
mod recipe_event;
mod record;
mod security;
mod server;
mod space;
mod station;
mod types;
mod users;

pub use error::OpcUaError;
pub use gate::GateCounters;
pub use ids::{MV_URI, OUR_URI};
pub use nodeset::MACHINE_VISION_NODESET;
pub use recipe::{DEFAULT_RECIPE, RecipeBook, RecipeRefused};
pub use server::{Camera, OpcUaServer, STOP_WAIT};
pub use station::{AutoMode, VisionState};
pub use users::{Users, UsersError};
