//! The pump: a task on the server's thread that publishes what happens
//! elsewhere. Each camera's results (`output::OpcUaOutput`, in part order)
//! become a ResultReadyEvent and the plain variables; every `POLL` it
//! brings the state machines' and the recipes' variables up to date and
//! fires a RecipePrepared event for each preparation that ended
//! (`recipe::RecipeBook::finished`).

use std::sync::Arc;
use std::time::Duration;

use async_opcua::nodes::Event;
use async_opcua::server::ServerHandle;
use async_opcua::server::node_manager::memory::SimpleNodeManager;
use async_opcua::types::{DataValue, LocalizedText, NodeId, Variant};
use tokio::sync::mpsc;

use super::event::{ResultReadyEvent, opc_time};
use super::ids::Namespaces;
use super::recipe::RecipeBook;
use super::recipe_event::RecipePreparedEvent;
use super::record::ResultRecord;
use super::space::CameraNodes;
use super::station::{States, VisionStation};

/// How often states and recipes are compared with what the variables show.
const POLL: Duration = Duration::from_millis(50);

/// The recipes as the variables show them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RecipeView {
    active: String,
    prepared: String,
    preparing: String,
}

/// Results in, events and variables out.
pub struct Pump {
    ns: Namespaces,
    handle: ServerHandle,
    manager: Arc<SimpleNodeManager>,
    stations: Vec<Arc<VisionStation>>,
    nodes: Vec<CameraNodes>,
    recipes: RecipeBook,
    /// The states the variables show.
    shown: Vec<States>,
    shown_recipes: RecipeView,
    counts: Vec<u64>,
    /// RecipePrepared events fired (their EventIds).
    announced: u64,
}

impl Pump {
    pub fn new(
        ns: Namespaces,
        handle: ServerHandle,
        manager: Arc<SimpleNodeManager>,
        stations: Vec<Arc<VisionStation>>,
        nodes: Vec<CameraNodes>,
        recipes: RecipeBook,
    ) -> Pump {
        Pump {
            ns,
            handle,
            manager,
            shown: stations.iter().map(|s| s.states()).collect(),
            counts: vec![0; stations.len()],
            stations,
            nodes,
            shown_recipes: RecipeView {
                active: recipes.active(),
                prepared: recipes.prepared_names(),
                preparing: recipes.preparing(),
            },
            recipes,
            announced: 0,
        }
    }

    pub async fn run(mut self, mut results: mpsc::Receiver<(usize, ResultRecord)>) {
        let mut poll = tokio::time::interval(POLL);
        loop {
            tokio::select! {
                next = results.recv() => match next {
                    Some((camera, record)) => self.publish(camera, record),
                    None => return,
                },
                _ = poll.tick() => {
                    self.refresh_states();
                    self.refresh_recipes();
                }
            }
        }
    }

    /// Sets `updates` on the nodes, stamped `now` (or the server's time).
    fn set(&self, updates: Vec<(&NodeId, Variant)>, at: Option<async_opcua::types::DateTime>) {
        let value = |v: Variant| match at {
            Some(at) => DataValue::new_at(v, at),
            None => DataValue::new_now(v),
        };
        let _ = self.manager.set_values(
            self.handle.subscriptions(),
            updates.into_iter().map(|(id, v)| (id, None, value(v))),
        );
    }

    /// One result: its job's tags, the event, the plain variables.
    fn publish(&mut self, camera: usize, record: ResultRecord) {
        let (Some(station), Some(nodes)) = (self.stations.get(camera), self.nodes.get(camera))
        else {
            return;
        };
        let record = station.take(record);
        self.counts[camera] += 1;
        let event = ResultReadyEvent::new(self.ns, &record, nodes.system.clone(), &nodes.name);
        let now = opc_time(record.created);
        let updates: Vec<(&NodeId, Variant)> = vec![
            (nodes.plain("ResultCount"), self.counts[camera].into()),
            (nodes.plain("LastJobId"), record.job_id().into()),
            (
                nodes.plain("LastPartId"),
                record.part_id.unwrap_or(record.number).into(),
            ),
            (nodes.plain("LastPass"), record.pass.into()),
            (nodes.plain("LastVerdict"), record.verdict().into()),
            (nodes.plain("LastReason"), record.reason.into()),
            (
                nodes.plain("LastDefectProb"),
                record.defect_prob.unwrap_or(f64::NAN).into(),
            ),
            (
                nodes.plain("LastSealArea"),
                record.seal_area.unwrap_or(f64::NAN).into(),
            ),
            (nodes.plain("LastResultTime"), now.into()),
            (nodes.plain("LastRecipe"), record.recipe.as_str().into()),
        ];
        // The variables first: a client that reads them on the event sees this result.
        self.set(updates, Some(now));
        self.handle
            .subscriptions()
            .notify_events([(&event as &dyn Event, &nodes.system)].into_iter());
        self.refresh_states();
    }

    /// The state machines' CurrentState and the plain State variables,
    /// where a method changed them.
    fn refresh_states(&mut self) {
        for index in 0..self.stations.len() {
            let states = self.stations[index].states();
            if states == self.shown[index] {
                continue;
            }
            self.shown[index] = states;
            let nodes = &self.nodes[index];
            let updates = vec![
                (
                    &nodes.vision_state,
                    Variant::from(LocalizedText::new("", states.vision.name())),
                ),
                (
                    &nodes.auto_state,
                    Variant::from(LocalizedText::new("", states.auto.name())),
                ),
                (nodes.plain("State"), Variant::from(states.vision.name())),
                (
                    nodes.plain("AutomaticMode"),
                    Variant::from(states.auto.name()),
                ),
            ];
            self.set(updates, None);
        }
    }

    /// The recipe variables (every camera's), and a RecipePrepared event
    /// (or RecipeError) for each preparation that ended.
    fn refresh_recipes(&mut self) {
        let view = RecipeView {
            active: self.recipes.active(),
            prepared: self.recipes.prepared_names(),
            preparing: self.recipes.preparing(),
        };
        if view != self.shown_recipes {
            for nodes in &self.nodes {
                let updates = vec![
                    (nodes.plain("ActiveRecipe"), view.active.as_str().into()),
                    (
                        nodes.plain("PreparedRecipes"),
                        view.prepared.as_str().into(),
                    ),
                    (
                        nodes.plain("PreparingRecipe"),
                        view.preparing.as_str().into(),
                    ),
                ];
                self.set(updates, None);
            }
            self.shown_recipes = view;
        }
        for finished in self.recipes.finished() {
            let Some(nodes) = self.nodes.get(finished.camera) else {
                continue;
            };
            match finished.outcome {
                Ok(name) => {
                    self.announced += 1;
                    let event = RecipePreparedEvent::new(
                        self.ns,
                        &name,
                        &finished.asked,
                        nodes.system.clone(),
                        &nodes.name,
                        self.announced,
                    );
                    self.set(vec![(nodes.plain("RecipeError"), "".into())], None);
                    self.handle
                        .subscriptions()
                        .notify_events([(&event as &dyn Event, &nodes.system)].into_iter());
                    log::info!(target: "sealcheck::opcua", recipe = name.as_str(), camera = nodes.name.as_str();
                        "OPC UA: RecipePrepared for recipe \"{name}\" (PrepareRecipe on {})", nodes.name);
                }
                Err(refused) => {
                    let text = format!("Error {}: {refused}", refused.code());
                    log::warn!(target: "sealcheck::opcua", recipe = finished.asked.as_str();
                        "OPC UA PrepareRecipe({:?}) failed ({text}); no RecipePrepared", finished.asked);
                    self.set(vec![(nodes.plain("RecipeError"), text.into())], None);
                }
            }
        }
    }
}
