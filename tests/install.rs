//! `scripts/install.sh` into a staging root (DESTDIR), and `scripts/ci/verify_unit.sh` on the
//! unit: what `make install`, `make uninstall` and `make test` rely on.

use crate::common;

use common::repo;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

fn install_sh(action: &str, destdir: &Path, prefix: Option<&str>) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("scripts/install.sh"))
        .arg(action)
        .env("DESTDIR", destdir)
        .env("BINARY", crate::common::sealcheck_bin())
        .env_remove("PREFIX")
        .env_remove("UNITDIR");
    if let Some(prefix) = prefix {
        cmd.env("PREFIX", prefix);
    }
    let out = cmd.output().expect("run scripts/install.sh");
    assert!(
        out.status.success(),
        "install.sh {action} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The models the source tree ships, by file name.
fn shipped_models() -> Vec<String> {
    let Ok(dir) = fs::read_dir(repo().join("models")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".onnx"))
        .collect();
    names.sort();
    names
}

/// Every file and folder under `root`, as paths relative to it.
fn tree(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            out.push(path.strip_prefix(root).unwrap().display().to_string());
            if path.is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

#[test]
fn install_lays_out_program_config_unit_user_models_and_manifest() {
    let staging = tempfile::tempdir().unwrap();
    let root = staging.path();
    let out = install_sh("install", root, None);

    let bin = root.join("usr/local/bin/sealcheck");
    assert_eq!(
        fs::read(&bin).unwrap(),
        fs::read(crate::common::sealcheck_bin()).unwrap()
    );
    assert_eq!(
        fs::metadata(&bin).unwrap().permissions().mode() & 0o777,
        0o755
    );

    let config = fs::read_to_string(root.join("etc/sealcheck/sealcheck.toml")).unwrap();
    assert_eq!(
        config,
        fs::read_to_string(repo().join("config/sealcheck.toml")).unwrap()
    );

    let unit = fs::read_to_string(root.join("etc/systemd/system/sealcheck.service")).unwrap();
    assert!(unit.contains(
        "\nExecStart=/usr/local/bin/sealcheck run --config /etc/sealcheck/sealcheck.toml\n"
    ));
    assert!(unit.contains("\nType=notify\n"));

    let sysusers = fs::read_to_string(root.join("usr/lib/sysusers.d/sealcheck.conf")).unwrap();
    assert!(
        sysusers.lines().any(|l| l.starts_with("u sealcheck ")),
        "{sysusers}"
    );
    assert!(
        sysusers.lines().any(|l| l == "m sealcheck video"),
        "{sysusers}"
    );

    assert!(
        root.join("usr/local/share/doc/sealcheck/OPERATIONS.md")
            .is_file()
    );
    assert_eq!(
        fs::read(root.join("usr/local/share/sealcheck/prometheus/sealcheck-alerts.yml")).unwrap(),
        fs::read(repo().join("prometheus/sealcheck-alerts.yml")).unwrap()
    );
    let models = shipped_models();
    for model in &models {
        let installed = root.join("usr/local/share/sealcheck/models").join(model);
        assert_eq!(
            fs::read(&installed).unwrap(),
            fs::read(repo().join("models").join(model)).unwrap(),
            "{model}"
        );
    }
    if models.is_empty() {
        assert!(
            stdout(&out).contains("WARNING: no models"),
            "{}",
            stdout(&out)
        );
    }

    let manifest =
        fs::read_to_string(root.join("usr/local/share/sealcheck/install-manifest")).unwrap();
    for path in [
        "/usr/local/bin/sealcheck",
        "/etc/sealcheck/sealcheck.toml",
        "/etc/systemd/system/sealcheck.service",
        "/usr/lib/sysusers.d/sealcheck.conf",
    ] {
        assert!(
            manifest.lines().any(|l| l.ends_with(&format!("\t{path}"))),
            "{path} missing from manifest:\n{manifest}"
        );
    }
    // Staged: no user created, systemd left alone.
    assert!(stdout(&out).contains("staged under"), "{}", stdout(&out));
}

#[test]
fn second_install_keeps_a_modified_config_and_uninstall_keeps_it_too() {
    let staging = tempfile::tempdir().unwrap();
    let root = staging.path();
    install_sh("install", root, None);

    let config = root.join("etc/sealcheck/sealcheck.toml");
    let mut edited = fs::read_to_string(&config).unwrap();
    edited = edited.replace("defect_threshold = 0.5", "defect_threshold = 0.35");
    edited.push_str("\n# tuned on line 3\n");
    fs::write(&config, &edited).unwrap();

    let out = install_sh("install", root, None);
    assert_eq!(
        fs::read_to_string(&config).unwrap(),
        edited,
        "a reinstall overwrote the operator's config"
    );
    let new = root.join("etc/sealcheck/sealcheck.toml.new");
    assert_eq!(
        fs::read_to_string(&new).unwrap(),
        fs::read_to_string(repo().join("config/sealcheck.toml")).unwrap()
    );
    assert!(
        stdout(&out).contains("sealcheck.toml.new"),
        "the installer must say where the template went"
    );

    let out = install_sh("uninstall", root, None);
    assert_eq!(
        fs::read_to_string(&config).unwrap(),
        edited,
        "uninstall removed a modified config"
    );
    assert!(
        stdout(&out).contains("kept /etc/sealcheck/sealcheck.toml"),
        "{}",
        stdout(&out)
    );
    assert!(
        !new.exists(),
        "the .new template is the installer's and goes"
    );
    for gone in [
        "usr/local/bin/sealcheck",
        "etc/systemd/system/sealcheck.service",
        "usr/lib/sysusers.d/sealcheck.conf",
        "usr/local/share/sealcheck",
        "usr/local/share/doc/sealcheck",
    ] {
        assert!(!root.join(gone).exists(), "{gone} left behind");
    }
    // Only the kept config and the folders holding it remain.
    assert_eq!(
        tree(root),
        ["etc", "etc/sealcheck", "etc/sealcheck/sealcheck.toml"]
    );
}

#[test]
fn uninstall_after_an_untouched_install_leaves_nothing() {
    let staging = tempfile::tempdir().unwrap();
    let root = staging.path();
    install_sh("install", root, None);
    install_sh("install", root, None); // an unchanged config is not duplicated as .new
    assert!(!root.join("etc/sealcheck/sealcheck.toml.new").exists());
    install_sh("uninstall", root, None);
    assert_eq!(tree(root), Vec::<String>::new());
}

#[test]
fn uninstall_keeps_folders_and_files_it_did_not_create() {
    let staging = tempfile::tempdir().unwrap();
    let root = staging.path();
    fs::create_dir_all(root.join("usr/local/bin")).unwrap();
    fs::write(root.join("usr/local/bin/other-tool"), "#!/bin/sh\n").unwrap();
    install_sh("install", root, None);
    install_sh("uninstall", root, None);
    assert_eq!(
        tree(root),
        [
            "usr",
            "usr/local",
            "usr/local/bin",
            "usr/local/bin/other-tool"
        ]
    );
}

#[test]
fn prefix_moves_program_and_models_and_the_unit_follows() {
    let staging = tempfile::tempdir().unwrap();
    let root = staging.path();
    install_sh("install", root, Some("/opt/sealcheck"));
    assert!(root.join("opt/sealcheck/bin/sealcheck").is_file());
    assert!(
        root.join("opt/sealcheck/share/sealcheck/install-manifest")
            .is_file()
    );
    let unit = fs::read_to_string(root.join("etc/systemd/system/sealcheck.service")).unwrap();
    assert!(unit.contains(
        "\nExecStart=/opt/sealcheck/bin/sealcheck run --config /etc/sealcheck/sealcheck.toml\n"
    ));
    let config = fs::read_to_string(root.join("etc/sealcheck/sealcheck.toml")).unwrap();
    assert!(
        !config.contains("/usr/local/share/sealcheck"),
        "model paths still point at /usr/local"
    );
    if !shipped_models().is_empty() {
        assert!(config.contains("/opt/sealcheck/share/sealcheck/models/seg.onnx"));
    }
    install_sh("uninstall", root, Some("/opt/sealcheck"));
    assert_eq!(tree(root), Vec::<String>::new());
}

#[test]
fn install_refuses_without_a_built_program() {
    let staging = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(repo().join("scripts/install.sh"))
        .arg("install")
        .env("DESTDIR", staging.path())
        .env("BINARY", staging.path().join("no-such-binary"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("make build"));
    assert_eq!(
        tree(staging.path()),
        Vec::<String>::new(),
        "nothing may be installed half-way"
    );
}

/// Runs scripts/ci/verify_unit.sh; `None` when systemd-analyze is not installed (exit 77).
fn verify_unit(unit: &Path) -> Option<Output> {
    let out = Command::new("bash")
        .arg(repo().join("scripts/ci/verify_unit.sh"))
        .arg(unit)
        .output()
        .unwrap();
    if out.status.code() == Some(77) {
        common::skipped(format_args!("systemd-analyze not available"));
        return None;
    }
    Some(out)
}

#[test]
fn unit_passes_systemd_analyze_verify_and_security() {
    let Some(out) = verify_unit(&repo().join("systemd/sealcheck.service")) else {
        return;
    };
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("OK"));
}

#[test]
fn verify_unit_catches_a_misspelled_key_and_a_weakened_unit() {
    let dir = tempfile::tempdir().unwrap();
    let original = fs::read_to_string(repo().join("systemd/sealcheck.service")).unwrap();

    let typo = dir.path().join("typo/sealcheck.service");
    fs::create_dir_all(typo.parent().unwrap()).unwrap();
    fs::write(
        &typo,
        original.replace("ProtectSystem=strict", "ProtectSytem=strict"),
    )
    .unwrap();
    let Some(out) = verify_unit(&typo) else {
        return;
    };
    assert!(!out.status.success(), "a misspelled key passed");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ProtectSytem"));

    let weak = dir.path().join("weak/sealcheck.service");
    fs::create_dir_all(weak.parent().unwrap()).unwrap();
    let weakened: String = original
        .lines()
        .filter(|l| {
            !(l.starts_with("Protect")
                || l.starts_with("SystemCallFilter")
                || l.starts_with("CapabilityBoundingSet")
                || l.starts_with("RestrictNamespaces")
                || l.starts_with("NoNewPrivileges")
                || l.starts_with("PrivateTmp"))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&weak, weakened).unwrap();
    let Some(out) = verify_unit(&weak) else {
        return;
    };
    assert!(
        !out.status.success(),
        "a unit without hardening passed the exposure check"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("exposure"));
}
