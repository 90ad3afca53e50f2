//! OPC UA security end to end, with Python asyncua 2.1.0
//! (tests/opcua/client.py `cert`, `connect`): the server listens on one of
//! this machine's own addresses that is not loopback (127.0.0.2 would
//! still be loopback: the kernel's, and `IpAddr::is_loopback`'s, 127/8),
//! so it is off loopback as it would be on a plant network; the client
//! connects to that address from this machine.
//!
//! The matrix: anonymous refused (over SecurityPolicy None and over
//! SignAndEncrypt, the client forcing its way past what the endpoints
//! offer, so that the server's checks refuse, not the client's manners); a
//! wrong password refused and never in the log (RUST_LOG=debug, async-opcua's
//! own records included); an untrusted client certificate refused (and put
//! in pki_dir/rejected); SignAndEncrypt with Basic256Sha256 and Sign with
//! Aes256Sha256RsaPss working with a trusted certificate and a user's password.
//!
//! Every wait is bounded; the only addresses used are this machine's own.

use crate::common;
use crate::opcua::{client, start_logging, write_config_on};

use std::net::{IpAddr, SocketAddr};

use common::free_port;

const USER: &str = "plc";
const PASSWORD: &str = "correct-horse-4711";
const WRONG: &str = "wrong-battery-0815";

/// One of this machine's own IPv4 addresses that is not loopback (the
/// kernel's local routes, /proc/net/fib_trie), if it has one.
fn own_address() -> Option<IpAddr> {
    let trie = std::fs::read_to_string("/proc/net/fib_trie").ok()?;
    let mut last: Option<IpAddr> = None;
    for line in trie.lines() {
        let line = line.trim();
        if let Some(address) = line.strip_prefix("|-- ") {
            last = address.parse().ok();
        } else if line.contains("/32 host LOCAL")
            && let Some(ip) = last
            && !ip.is_loopback()
        {
            return Some(ip);
        }
    }
    None
}

fn connect(url: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["connect", url];
    all.extend_from_slice(args);
    client(&all)
}

#[test]
fn off_loopback_only_a_trusted_client_with_a_users_password_gets_in() {
    let _serial = common::serial();
    let Some(ip) = own_address() else {
        common::skipped(format_args!(
            "this machine has no address but loopback: an off-loopback server cannot be tested"
        ));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let certs_arg = certs.display().to_string();
    client(&["cert", &certs_arg, "trusted"]);
    client(&["cert", &certs_arg, "stranger"]);
    // The PLC's certificate dropped into trusted/ under a name of its own.
    let pki = dir.path().join("opcua-pki");
    std::fs::create_dir_all(pki.join("trusted")).unwrap();
    std::fs::copy(certs.join("trusted.der"), pki.join("trusted/line-plc.der")).unwrap();
    let users = dir.path().join("opcua-users");
    std::fs::write(
        &users,
        format!("# test users\n{USER}:{PASSWORD}\nmes:other\n"),
    )
    .unwrap();
    std::fs::set_permissions(&users, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let listen = SocketAddr::new(ip, free_port());
    let config = write_config_on(
        dir.path(),
        listen,
        &format!("users_file = \"{}\"", users.display()),
        "",
    );
    let service = start_logging(&config, listen, "debug");
    let url = format!("opc.tcp://{listen}/");
    let cert = |name: &str| certs.join(format!("{name}.der")).display().to_string();
    let key = |name: &str| certs.join(format!("{name}.pem")).display().to_string();
    let secure = |policy: &str, mode: &str, who: &str, password: &str| {
        let (cert, key) = (cert(who), key(who));
        let mut args = vec![
            "--policy", policy, "--mode", mode, "--cert", &cert, "--key", &key,
        ];
        if !password.is_empty() {
            args.extend_from_slice(&["--user", USER, "--password", password]);
        }
        connect(&url, &args)
    };

    let none = connect(&url, &["--force"]);
    assert_eq!(
        none["ok"], false,
        "anonymous over SecurityPolicy None: {none}"
    );
    let anonymous = {
        let (cert, key) = (cert("trusted"), key("trusted"));
        connect(
            &url,
            &[
                "--policy",
                "Basic256Sha256",
                "--mode",
                "SignAndEncrypt",
                "--cert",
                &cert,
                "--key",
                &key,
                "--force",
            ],
        )
    };
    assert_eq!(anonymous["ok"], false, "anonymous, encrypted: {anonymous}");
    assert!(
        service
            .stderr()
            .contains("OPC UA login refused (anonymous)"),
        "the server refused it, not the client:\n{}",
        service.stderr()
    );
    let wrong = secure("Basic256Sha256", "SignAndEncrypt", "trusted", WRONG);
    assert_eq!(wrong["ok"], false, "a wrong password: {wrong}");
    assert!(
        wrong["error"]
            .as_str()
            .unwrap()
            .contains("BadUserAccessDenied"),
        "{wrong}"
    );
    let stranger = secure("Basic256Sha256", "SignAndEncrypt", "stranger", PASSWORD);
    assert_eq!(
        stranger["ok"], false,
        "an untrusted certificate: {stranger}"
    );
    let rejected = std::fs::read_dir(pki.join("rejected")).unwrap().count();
    assert_eq!(rejected, 1, "the refused certificate waits in rejected/");
    for (policy, mode) in [
        ("Basic256Sha256", "SignAndEncrypt"),
        ("Aes256Sha256RsaPss", "SignAndEncrypt"),
        ("Aes256Sha256RsaPss", "Sign"),
    ] {
        let ok = secure(policy, mode, "trusted", PASSWORD);
        assert_eq!(ok["ok"], true, "{policy} {mode}: {ok}");
        assert_eq!(ok["state"], "Running");
    }
    let log = service.stderr();
    // logfmt escapes the quotes around the user name.
    assert!(
        log.contains(r#"OPC UA login refused (user \"plc\"): wrong user name or password"#),
        "{log}"
    );
    for secret in [PASSWORD, WRONG] {
        assert!(!log.contains(secret), "a password in the log:\n{log}");
    }
    let made = pki.join("own/cert.der");
    assert!(
        made.is_file(),
        "the server's certificate made on first start"
    );
    drop(service);
}

#[test]
fn a_users_file_is_needed_off_loopback() {
    let Some(ip) = own_address() else {
        common::skipped(format_args!("this machine has no address but loopback"));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let listen = SocketAddr::new(ip, free_port());
    let config = write_config_on(dir.path(), listen, "", "");
    let output = std::process::Command::new(common::sealcheck_bin())
        .arg("check-config")
        .arg(&config)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("is not a loopback address"), "{stderr}");
    assert!(stderr.contains("users_file"), "{stderr}");
}
