//! `sealcheck opcua-nodeset`: the server's own nodes (sealcheck's
//! namespace: one VisionSystem per camera of the config, its methods with
//! their arguments, the plain variables) as a NodeSet2 XML file, for
//! clients that import a server's interface offline (TIA Portal's OPC UA
//! client interface import makes UDTs and method calls of it). The types
//! stay in the Machine Vision NodeSet, written beside it unchanged.
//!
//! The nodes are those the server serves: the address space is built as
//! `server` builds it (`space::add_camera`, no network, no certificate) and
//! walked from each VisionSystem along its forward references within
//! sealcheck's namespace. Namespace indices are the file's: 1 sealcheck's,
//! 2 Machine Vision's.

use std::collections::{BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_opcua::nodes::{DefaultTypeTree, NodeType, ReferenceDirection};
use async_opcua::server::ServerBuilder;
use async_opcua::server::ServerEndpoint;
use async_opcua::server::address_space::AddressSpace;
use async_opcua::types::{
    Argument, BrowseDirection, DataEncoding, Identifier, NodeId, NumericRange, TimestampsToReturn,
    Variant,
};

use super::error::OpcUaError;
use super::ids::{MV_URI, Namespaces, OUR_URI};
use super::nodeset::MACHINE_VISION_NODESET;
use super::recipe::RecipeBook;
use super::security::APPLICATION_URI;
use super::server::{Managers, managers, with_node_managers};
use super::space::add_camera;
use super::station::VisionStation;

/// The files `write` makes in its folder.
pub const INSTANCES_FILE: &str = "sealcheck.NodeSet2.xml";
pub const TYPES_FILE: &str = "Opc.Ua.MachineVision.NodeSet2.xml";
/// The PublicationDate of sealcheck's namespace: the day its nodes last
/// changed (a client may refuse a model older than one it has).
const MODEL_DATE: &str = "2026-11-28T00:00:00Z";

/// Each camera's VisionSystem name: `[cameras.NAME]`'s name, or "camera"
/// for one `[source]` (the server's and the export's).
pub fn camera_names(config: &crate::config::Config) -> Vec<String> {
    config
        .cameras
        .iter()
        .map(|c| c.name.clone().unwrap_or_else(|| "camera".to_string()))
        .collect()
}

/// Writes the instances of `cameras` (their names) and the Machine Vision
/// NodeSet into `dir` (made if missing); the files written.
pub fn write(dir: &Path, cameras: &[String]) -> Result<Vec<PathBuf>, OpcUaError> {
    let xml = instance_nodeset(cameras)?;
    let failed = |path: &Path, e: std::io::Error| OpcUaError::Export {
        path: path.to_path_buf(),
        why: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
    let instances = dir.join(INSTANCES_FILE);
    std::fs::write(&instances, xml).map_err(|e| failed(&instances, e))?;
    let types = dir.join(TYPES_FILE);
    std::fs::write(&types, MACHINE_VISION_NODESET).map_err(|e| failed(&types, e))?;
    Ok(vec![instances, types])
}

/// sealcheck's namespace for `cameras`, as NodeSet2 XML.
pub fn instance_nodeset(cameras: &[String]) -> Result<String, OpcUaError> {
    // The builder spawns its samplers' tasks (never run here) on a runtime.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| OpcUaError::Build(e.to_string()))?;
    let _entered = runtime.enter();
    // async-opcua's builder opens a certificate store; give it one of its own.
    let pki = std::env::temp_dir().join(format!("sealcheck-nodeset-{}", std::process::id()));
    let built = ServerBuilder::new()
        .application_name("sealcheck")
        .application_uri(APPLICATION_URI)
        .pki_dir(&pki)
        .create_sample_keypair(false)
        .add_endpoint("none", ServerEndpoint::new_none("/", &[]))
        .discovery_urls(vec!["/".to_owned()]);
    let built = with_node_managers(built)?
        .build()
        .map_err(OpcUaError::Build);
    let _ = std::fs::remove_dir_all(&pki);
    let (_server, handle) = built?;
    let Managers { ns, mv, ours } = managers(&handle).map_err(OpcUaError::Build)?;
    let systems: Vec<NodeId> = {
        let mv_space = mv.address_space().read();
        cameras
            .iter()
            .enumerate()
            .map(|(index, name)| {
                let station = Arc::new(VisionStation::new(index, None, RecipeBook::new(None), 1));
                add_camera(&ours, &mv_space, ns, name, &station).system
            })
            .collect()
    };
    let space = ours.address_space().read();
    Ok(Writer::new(ns, &space).nodeset(&systems))
}

/// NodeSet2 XML of the nodes reached from some roots.
struct Writer<'a> {
    ns: Namespaces,
    space: &'a AddressSpace,
    tree: DefaultTypeTree,
    out: String,
}

impl<'a> Writer<'a> {
    fn new(ns: Namespaces, space: &'a AddressSpace) -> Writer<'a> {
        Writer {
            ns,
            space,
            tree: DefaultTypeTree::new(),
            out: String::new(),
        }
    }

    fn nodeset(mut self, roots: &[NodeId]) -> String {
        self.out.push_str(concat!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n",
            "<UANodeSet xmlns=\"http://opcfoundation.org/UA/2011/03/UANodeSet.xsd\" ",
            "xmlns:uax=\"http://opcfoundation.org/UA/2008/02/Types.xsd\">\n",
        ));
        let _ = write!(
            self.out,
            "  <NamespaceUris>\n    <Uri>{OUR_URI}</Uri>\n    <Uri>{MV_URI}</Uri>\n  </NamespaceUris>\n"
        );
        // The required models as the Machine Vision NodeSet itself names them.
        let _ = write!(
            self.out,
            "  <Models>\n    <Model ModelUri=\"{OUR_URI}\" Version=\"{}\" PublicationDate=\"{MODEL_DATE}\">\n      \
             <RequiredModel ModelUri=\"http://opcfoundation.org/UA/\" Version=\"1.04\" PublicationDate=\"2018-05-15T00:00:00Z\" />\n      \
             <RequiredModel ModelUri=\"{MV_URI}\" Version=\"1.0.0\" PublicationDate=\"2019-07-11T10:18:27Z\" />\n    </Model>\n  </Models>\n",
            env!("CARGO_PKG_VERSION")
        );
        for id in self.reachable(roots) {
            self.node(&id);
        }
        self.out.push_str("</UANodeSet>\n");
        self.out
    }

    /// The roots and every node of sealcheck's namespace their forward
    /// references reach, in the order met.
    fn reachable(&self, roots: &[NodeId]) -> Vec<NodeId> {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut order = Vec::new();
        let mut queue: VecDeque<NodeId> = roots.iter().cloned().collect();
        while let Some(id) = queue.pop_front() {
            if !seen.insert(id.to_string()) {
                continue;
            }
            for reference in self.space.find_references(
                &id,
                None::<(NodeId, bool)>,
                &self.tree,
                BrowseDirection::Forward,
            ) {
                if reference.target_node.namespace == self.ns.ours {
                    queue.push_back(reference.target_node.clone());
                }
            }
            order.push(id);
        }
        order
    }

    /// A node id with the file's namespace index.
    fn id(&self, id: &NodeId) -> String {
        let ns = if id.namespace == 0 {
            0
        } else if id.namespace == self.ns.ours {
            1
        } else if id.namespace == self.ns.mv {
            2
        } else {
            id.namespace
        };
        let identifier = match &id.identifier {
            Identifier::Numeric(n) => format!("i={n}"),
            Identifier::String(s) => format!("s={}", escape(s.as_ref())),
            Identifier::Guid(g) => format!("g={g}"),
            Identifier::ByteString(b) => format!("b={}", b.as_base64()),
        };
        if ns == 0 {
            identifier
        } else {
            format!("ns={ns};{identifier}")
        }
    }

    fn node(&mut self, id: &NodeId) {
        let Some(node) = self.space.find(id) else {
            return;
        };
        let base = node.as_node();
        let browse = base.browse_name();
        let browse_ns = match browse.namespace_index {
            0 => 0,
            n if n == self.ns.ours => 1,
            n if n == self.ns.mv => 2,
            n => n,
        };
        let browse_name = if browse_ns == 0 {
            escape(browse.name.as_ref())
        } else {
            format!("{browse_ns}:{}", escape(browse.name.as_ref()))
        };
        let display = escape(base.display_name().text.as_ref());
        let (tag, extra) = match node {
            NodeType::Object(object) => (
                "UAObject",
                if object.event_notifier().bits() != 0 {
                    format!(" EventNotifier=\"{}\"", object.event_notifier().bits())
                } else {
                    String::new()
                },
            ),
            NodeType::Method(_) => ("UAMethod", String::new()),
            NodeType::Variable(variable) => {
                let rank = variable.value_rank();
                let mut extra = format!(
                    " DataType=\"{}\" ValueRank=\"{rank}\"",
                    self.id(&variable.data_type())
                );
                if let Some(dimensions) = variable.array_dimensions().filter(|d| !d.is_empty()) {
                    let dimensions: Vec<String> = dimensions.iter().map(u32::to_string).collect();
                    let _ = write!(extra, " ArrayDimensions=\"{}\"", dimensions.join(","));
                }
                ("UAVariable", extra)
            }
            _ => return,
        };
        let _ = writeln!(
            self.out,
            "  <{tag} NodeId=\"{}\" BrowseName=\"{browse_name}\"{extra}>\n    <DisplayName>{display}</DisplayName>\n    <References>",
            self.id(id)
        );
        let references: Vec<(NodeId, NodeId, bool)> = self
            .space
            .find_references(
                id,
                None::<(NodeId, bool)>,
                &self.tree,
                BrowseDirection::Both,
            )
            .map(|r| {
                (
                    r.reference_type.clone(),
                    r.target_node.clone(),
                    r.direction == ReferenceDirection::Forward,
                )
            })
            .collect();
        for (kind, target, forward) in references {
            let inverse = if forward { "" } else { " IsForward=\"false\"" };
            let _ = writeln!(
                self.out,
                "      <Reference ReferenceType=\"{}\"{inverse}>{}</Reference>",
                self.id(&kind),
                self.id(&target)
            );
        }
        self.out.push_str("    </References>\n");
        if let NodeType::Variable(variable) = node {
            let value = variable
                .value(
                    TimestampsToReturn::Neither,
                    &NumericRange::None,
                    &DataEncoding::Binary,
                    0.0,
                )
                .value;
            if let Some(Variant::Array(array)) = value {
                let arguments: Vec<Argument> = array
                    .values
                    .into_iter()
                    .filter_map(|v| match v {
                        Variant::ExtensionObject(o) => o.into_inner_as::<Argument>().map(|a| *a),
                        _ => None,
                    })
                    .collect();
                if !arguments.is_empty() {
                    self.arguments(&arguments);
                }
            }
        }
        let _ = writeln!(self.out, "  </{tag}>");
    }

    /// A method's InputArguments or OutputArguments value.
    fn arguments(&mut self, arguments: &[Argument]) {
        self.out
            .push_str("    <Value>\n      <uax:ListOfExtensionObject>\n");
        for argument in arguments {
            let dimensions: String = argument
                .array_dimensions
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(|d| format!("<uax:UInt32>{d}</uax:UInt32>"))
                .collect();
            let _ = writeln!(
                self.out,
                "        <uax:ExtensionObject>\n          <uax:TypeId><uax:Identifier>i=297</uax:Identifier></uax:TypeId>\n          \
                 <uax:Body>\n            <uax:Argument>\n              <uax:Name>{}</uax:Name>\n              \
                 <uax:DataType><uax:Identifier>{}</uax:Identifier></uax:DataType>\n              \
                 <uax:ValueRank>{}</uax:ValueRank>\n              <uax:ArrayDimensions>{dimensions}</uax:ArrayDimensions>\n              \
                 <uax:Description />\n            </uax:Argument>\n          </uax:Body>\n        </uax:ExtensionObject>",
                escape(argument.name.as_ref()),
                self.id(&argument.data_type),
                argument.value_rank
            );
        }
        self.out
            .push_str("      </uax:ListOfExtensionObject>\n    </Value>\n");
    }
}

/// Text for XML content and attributes.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
#[path = "export_tests.rs"]
mod tests;
