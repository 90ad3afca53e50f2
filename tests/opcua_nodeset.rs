//! `sealcheck opcua-nodeset`: the NodeSet files it writes for a two-camera
//! config, imported by another implementation, Python asyncua 2.1.0's own
//! server (tests/opcua/client.py `import`), as a client's engineering tool
//! (TIA Portal) imports them: the Machine Vision types first, then
//! sealcheck's instances. No pipeline runs.

use crate::common;
use crate::opcua::client;

use std::process::Command;

use common::{repo, test_camera};

#[test]
fn the_nodeset_files_import_into_another_servers_address_space() {
    let dir = tempfile::tempdir().unwrap();
    let models = repo().join("models");
    let config = dir.path().join("sealcheck.toml");
    std::fs::write(
        &config,
        format!(
            "[cameras.top]\n{}\n[cameras.side]\n{}\n[models.segmentation]\npath = \"{m}/seg.onnx\"\n\
             [models.classifier]\npath = \"{m}/cls.onnx\"\n[output]\nresults = \"r.jsonl\"\n\
             [trigger]\nmode = \"plc\"\n[opcua]\nlisten = \"127.0.0.1:4840\"\n",
            test_camera("ball", 10),
            test_camera("snow", 10),
            m = models.display()
        ),
    )
    .unwrap();
    let out = dir.path().join("nodeset");
    let run = Command::new(common::sealcheck_bin())
        .arg("opcua-nodeset")
        .arg("--config")
        .arg(&config)
        .arg(&out)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let written: Vec<&str> = stdout.lines().collect();
    assert_eq!(written.len(), 2, "the two files, nothing else: {stdout}");
    assert!(written[0].ends_with("sealcheck.NodeSet2.xml"));
    assert!(written[1].ends_with("Opc.Ua.MachineVision.NodeSet2.xml"));
    let report = client(&["import", &out.display().to_string(), "top", "side"]);
    for camera in ["top", "side"] {
        let imported = &report["cameras"][camera];
        assert_eq!(imported["name"], camera, "{report}");
        assert_eq!(imported["vision_system_type"], true, "{report}");
        assert_eq!(
            imported["start_single_job"],
            serde_json::json!(["MeasId", "PartId", "RecipeId", "ProductId", "Parameters"])
        );
    }
}
