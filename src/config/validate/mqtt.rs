//! `[mqtt]`: the broker, client id, topic, TLS files and queue, checked
//! together (mqtts:// needs a CA file, a client certificate needs its key...).

use std::time::Duration;

use super::files::{Files, looked_for};
use super::host::host_name;
use super::url::parse_mqtt_url;
use crate::config::raw::Section;
use crate::config::types::{ClientCertificate, MqttBroker, MqttConfig};

pub(super) fn read_mqtt(s: &Section, files: &Files) -> Option<MqttConfig> {
    let url = s.str_required("url", "the broker, e.g. \"mqtt://192.168.1.10:1883\"");
    let ca_file = s.opt_str("ca_file").map(|p| files.resolve(&p));
    let host = host_name();
    let client_id = s.str_or("client_id", &host);
    let topic = s.str_or("topic", &format!("sealcheck/{host}"));
    let qos = s.int_in("qos", 0..=1, Some(1));
    let username = s.opt_str("username");
    let password_file = s.opt_str("password_file").map(|p| files.resolve(&p));
    let cert_file = s.opt_str("cert_file").map(|p| files.resolve(&p));
    let key_file = s.opt_str("key_file").map(|p| files.resolve(&p));
    let keep_alive = s.int_in("keep_alive_s", 5..=3600, Some(10));
    let queue = s.int_in("queue", 1..=100_000, Some(256));
    s.finish();
    let broker = url.and_then(|url| match parse_mqtt_url(&url) {
        Ok((tls, host, port)) => Some((tls, host, port)),
        Err(message) => {
            s.problem("url", message);
            None
        }
    });
    let tls_ca_file = match (&broker, ca_file) {
        (Some((true, ..)), None) => {
            s.problem(
                "url",
                "mqtts:// needs `ca_file`, the PEM file of the certificate authority that signed the broker's certificate",
            );
            return None;
        }
        (Some((false, ..)), Some(_)) => {
            s.problem(
                "ca_file",
                "is only used with an mqtts:// url; use mqtts:// or remove ca_file",
            );
            return None;
        }
        (_, Some(ca)) if !ca.is_file() => {
            s.problem(
                "ca_file",
                format!("file {} does not exist", looked_for(&ca).display()),
            );
            return None;
        }
        (_, ca) => ca,
    };
    if client_id.is_empty() || client_id.len() > 256 || client_id.starts_with(char::is_whitespace) {
        s.problem(
            "client_id",
            "must be 1 to 256 characters, not starting with a space",
        );
        return None;
    }
    if topic.is_empty()
        || topic.contains(['+', '#', '\0'])
        || topic.starts_with('$')
        || topic.ends_with('/')
    {
        s.problem(
            "topic",
            format!("\"{topic}\" is not a topic to publish under: no + or # wildcards, no leading $, no trailing /"),
        );
        return None;
    }
    let client_certificate = match (cert_file, key_file) {
        (None, None) => None,
        (Some(_), None) => {
            s.problem(
                "cert_file",
                "needs `key_file` too: the private key of this client's certificate",
            );
            return None;
        }
        (None, Some(_)) => {
            s.problem(
                "key_file",
                "needs `cert_file` too: the certificate this key belongs to",
            );
            return None;
        }
        (Some(cert_file), Some(key_file)) => {
            if tls_ca_file.is_none() {
                s.problem(
                    "cert_file",
                    "a client certificate is only used with an mqtts:// url; use mqtts:// (with ca_file) or remove cert_file and key_file",
                );
                return None;
            }
            for (key, path) in [("cert_file", &cert_file), ("key_file", &key_file)] {
                if !path.is_file() {
                    s.problem(
                        key,
                        format!("file {} does not exist", looked_for(&path).display()),
                    );
                    return None;
                }
            }
            Some(ClientCertificate {
                cert_file,
                key_file,
            })
        }
    };
    if password_file.is_some() && username.is_none() {
        s.problem(
            "password_file",
            "needs `username`: the broker checks the password of a named user",
        );
        return None;
    }
    let (_, host, port) = broker?;
    Some(MqttConfig {
        broker: MqttBroker {
            host,
            port,
            tls_ca_file,
        },
        client_id,
        topic,
        qos: qos? as u8,
        username,
        password_file,
        client_certificate,
        keep_alive: Duration::from_secs(keep_alive? as u64),
        queue: queue? as usize,
    })
}
