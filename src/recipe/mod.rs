//! Recipes at run time: the product the line runs, switched at a part
//! boundary when a PLC (Modbus), an operator (HTTP) or a line script asks,
//! and named in every result (`[recipes.NAME]`, `crate::config::Recipe`).
//!
//! ```text
//! PLC: RecipeRequest ─▶ plc::Station ─┐
//! POST /api/recipe ───────────────────┼─▶ RecipeDesk::request ─chan: Job─▶ "recipe" thread (worker)
//!                                     │        refused at once: unknown, busy, not running
//!                                     │                                       │ same models: ids only
//!                                     │                                       │ other models: model_swap's
//!                                     │                                       │ open ▸ contract ▸ acceptance gate ▸ warm-up
//!                                     │                                       ▼
//!                                     │                         RecipeSwap::hand_over ─chan─▶ infer / device thread
//!                                     │                         (takes it before the next part: every frame
//!                                     │                          from then on carries the recipe in its ModelIds)
//!                                     ▼                                       │
//! RecipeDesk::outcome / wait ◀── finish(ticket, active recipe or refusal) ◀──┘
//! ```
//!
//! What a switch changes, and where it takes effect:
//! - the models: the model thread takes them between two parts (never
//!   between two cavities of a cycle), so a part is judged by one recipe;
//! - the thresholds: the output stage decides each frame with the recipe
//!   its `ModelIds` names (`Recipe::decision` over the camera's own), so
//!   thresholds and models always change together;
//! - the deadline: each camera's line from the hand-over on (`on_switched`).
//!
//! A refused switch (unknown recipe, models the gate refuses, a switch
//! already under way) leaves the active recipe running.
//!
//! The files: `desk` (`RecipeDesk`: state, tickets, what the interfaces
//! call), `worker` (the thread that prepares and hands over).

mod desk;
mod worker;

pub use desk::{RecipeDesk, Selector, SwitchError, Ticket};
pub use worker::{RecipeSwap, start_worker};
