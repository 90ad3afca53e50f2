//! The second stage: raw sections to the typed `Config`, with every path
//! resolved against the config file's folder and every file checked to exist.
//!
//! `document` reads the file and hands each section to its reader (each takes
//! its own table, a `raw::Section`; a table the file may leave out goes
//! through `Section::optional`); like `raw`, every reader records each problem
//! it finds and goes on, so an operator sees every problem of the file at once,
//! and `document` assembles `Config` only from sections without one. The
//! readers, by section:
//! `cameras` (`[source]`, `[cameras.NAME]`), `decision`, `inference`,
//! `models`, `evaluate`, `outputs` (`[output]`, `[status]`, `[archive]`),
//! `service` (`[logging]`, `[service]`), `parts` (`[trigger]`, `[modbus]`), `opcua`, `mqtt` (with `url` and `host`),
//! `shadow` and `recipes` (`[recipes.NAME]`, `[recipe]`); `files` resolves paths.

mod cameras;
mod decision;
mod document;
mod evaluate;
mod files;
mod genicam;
mod host;
mod inference;
mod layout;
mod models;
mod mqtt;
mod opcua;
mod outputs;
mod parts;
mod recipes;
mod service;
mod shadow;
mod url;

pub use document::{load, parse};
