//! The Machine Vision NodeSet's ids this server uses (its `NodeIds.csv`),
//! numbers in the Machine Vision namespace, whose index the server assigns
//! at start (`Namespaces`).

use async_opcua::types::NodeId;

/// The companion specification's namespace (OPC 40100-1).
pub const MV_URI: &str = "http://opcfoundation.org/UA/MachineVision";
/// sealcheck's own namespace: the cameras' VisionSystem instances.
pub const OUR_URI: &str = "urn:sealcheck:opcua";

pub const VISION_SYSTEM_TYPE: u32 = 1003;
pub const RECIPE_MANAGEMENT_TYPE: u32 = 1004;
pub const RESULT_MANAGEMENT_TYPE: u32 = 1007;
pub const VISION_STATE_MACHINE_TYPE: u32 = 1017;
pub const AUTOMATIC_MODE_STATE_MACHINE_TYPE: u32 = 1021;
pub const RECIPE_PREPARED_EVENT_TYPE: u32 = 1022;
pub const RESULT_READY_EVENT_TYPE: u32 = 1024;

/// The type's methods: (name, method id, input arguments, output arguments).
pub const VISION_STATE_METHODS: [(&str, u32, u32, u32); 2] =
    [("Halt", 7094, 6254, 6255), ("Reset", 7093, 6256, 6257)];
pub const AUTOMATIC_MODE_METHODS: [(&str, u32, u32, u32); 4] = [
    ("StartSingleJob", 7098, 6281, 6282),
    ("StartContinuous", 7009, 6086, 6087),
    ("Stop", 7096, 6287, 6288),
    ("Abort", 7097, 6285, 6286),
];
pub const RECIPE_MANAGEMENT_METHODS: [(&str, u32, u32, u32); 3] = [
    ("PrepareRecipe", 7015, 6148, 6149),
    ("UnprepareRecipe", 7055, 6152, 6153),
    ("GetRecipeListFiltered", 7014, 6156, 6157),
];
pub const RESULT_MANAGEMENT_METHODS: [(&str, u32, u32, u32); 2] = [
    ("GetResultById", 7026, 6209, 6210),
    ("GetResultListFiltered", 7089, 6213, 6214),
];

/// Data types and their default binary encodings: (data type, encoding).
pub const RESULT_ID: (u32, u32) = (3021, 5274);
pub const JOB_ID: (u32, u32) = (3016, 5008);
pub const MEAS_ID: (u32, u32) = (3015, 5006);
pub const PART_ID: (u32, u32) = (3004, 5013);
pub const PRODUCT_ID: (u32, u32) = (3003, 5224);
pub const CONFIGURATION_ID: (u32, u32) = (3008, 5090);
pub const RECIPE_ID_INTERNAL: (u32, u32) = (3013, 5268);
pub const RECIPE_ID_EXTERNAL: (u32, u32) = (3002, 5002);
pub const PROCESSING_TIMES: (u32, u32) = (3005, 5016);
pub const RESULT: (u32, u32) = (3006, 5018);

/// The two namespaces' indices in this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Namespaces {
    pub mv: u16,
    pub ours: u16,
}

impl Namespaces {
    pub fn mv(&self, id: u32) -> NodeId {
        NodeId::new(self.mv, id)
    }

    pub fn ours(&self, path: &str) -> NodeId {
        NodeId::new(self.ours, path.to_string())
    }
}
