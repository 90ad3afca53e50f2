//! MQTT over TLS (`mqtts://`): whom we trust, who we say we are (a client
//! certificate, for brokers that ask), and what a failed handshake means for
//! the person who wrote `url`, `ca_file`, `cert_file` and `key_file`.
//!
//! rustls says `UnknownIssuer` or `NotValidYet`; a technician needs "the
//! broker's certificate is not signed by the authority in ca_file" or "this
//! machine's clock is wrong" (a Jetson without network time and without a
//! clock battery starts in the past, and then no certificate is valid yet).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use rumqttc::TlsError;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::{AlertDescription, CertificateError};

use super::start_error::{StartError, open_to_others};
use crate::config::ClientCertificate;

/// What sealcheck trusts and who it says it is, for messages.
pub(super) struct TlsSetup<'a> {
    pub ca_file: Option<&'a Path>,
    pub client: Option<&'a ClientCertificate>,
}

/// rustls with the `ring` provider (no cmake or nasm to build), trusting only
/// `ca`, and showing `client`'s certificate to a broker that asks for one.
pub(super) fn client_config(
    ca: &Path,
    client: Option<&ClientCertificate>,
) -> Result<rustls::ClientConfig, StartError> {
    let bad = |why: String| StartError::CaFile {
        path: ca.to_path_buf(),
        why,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certificates(ca).map_err(bad)? {
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| bad(e.to_string()))?
    .with_root_certificates(roots);
    let Some(client) = client else {
        return Ok(builder.with_no_client_auth());
    };
    let chain = read_certificates(&client.cert_file).map_err(|why| StartError::CertFile {
        path: client.cert_file.clone(),
        why,
    })?;
    let key = read_private_key(&client.key_file)?;
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| StartError::KeyFile {
            path: client.key_file.clone(),
            why: e.to_string(),
        })
}

/// The PEM certificates in `path`, at least one.
fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certificates.is_empty() {
        return Err("it holds no certificate".into());
    }
    Ok(certificates)
}

/// The private key in `path`, a file only the service may read (like the
/// password file, and ssh's keys).
fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, StartError> {
    let bad = |why: String| StartError::KeyFile {
        path: path.to_path_buf(),
        why,
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    if let Some(mode) = open_to_others(&meta) {
        return Err(StartError::KeyFileOpen {
            path: path.to_path_buf(),
            mode,
        });
    }
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => bad("it holds no private key".into()),
        other => bad(other.to_string()),
    })
}

/// One sentence: what failed with `broker` (its url) and what to change.
pub(super) fn explain(broker: &str, setup: &TlsSetup<'_>, error: &TlsError) -> String {
    // tokio-rustls hands rustls' verdict over inside an io::Error.
    let rustls_error = match error {
        TlsError::TLS(e) => Some(e),
        TlsError::Io(io) => rustls_error_in(io),
        _ => None,
    };
    if let Some(e) = rustls_error {
        return explain_rustls(broker, setup, e);
    }
    match error {
        TlsError::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            format!(
                "{broker} closed the connection during the TLS handshake: is that port a TLS listener? (use mqtt:// for a plain one; MQTT over TLS is usually port 8883){}",
                if setup.client.is_none() {
                    "; a broker that requires client certificates may also do this: set `cert_file` and `key_file`"
                } else {
                    ""
                }
            )
        }
        other => format!(
            "TLS with {broker} failed: {other} — check `ca_file` and that the host name in `url` matches the broker's certificate"
        ),
    }
}

/// A TLS failure that surfaced as an I/O error after the handshake; `None`
/// when `io` is not one.
pub(super) fn explain_io(
    broker: &str,
    setup: &TlsSetup<'_>,
    io: &std::io::Error,
) -> Option<String> {
    rustls_error_in(io).map(|e| explain_rustls(broker, setup, e))
}

fn rustls_error_in(io: &std::io::Error) -> Option<&rustls::Error> {
    io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>())
}

fn explain_rustls(broker: &str, setup: &TlsSetup<'_>, error: &rustls::Error) -> String {
    let ca = setup.ca_file.map_or_else(
        || "ca_file".to_string(),
        |p| format!("ca_file {}", p.display()),
    );
    match error {
        rustls::Error::InvalidCertificate(certificate) => {
            explain_certificate(broker, &ca, certificate)
        }
        // The broker's answer to our certificate, or to its absence.
        rustls::Error::AlertReceived(alert) => match (alert, setup.client) {
            (AlertDescription::CertificateRequired, None)
            | (AlertDescription::HandshakeFailure, None) => format!(
                "TLS with {broker} failed: the broker wants a client certificate ({alert:?}) — set `cert_file` and `key_file` in [mqtt] to this client's certificate and key"
            ),
            (
                AlertDescription::BadCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::CertificateUnknown
                | AlertDescription::CertificateRevoked
                | AlertDescription::CertificateExpired
                | AlertDescription::DecryptError
                | AlertDescription::AccessDenied
                | AlertDescription::HandshakeFailure
                | AlertDescription::CertificateRequired,
                Some(client),
            ) => format!(
                "TLS with {broker} failed: the broker refused this client's certificate {} ({alert:?}) — it must be signed by an authority the broker trusts, be valid now, and `key_file` must be its key",
                client.cert_file.display()
            ),
            (alert, _) => format!(
                "TLS with {broker} failed: the broker ended the handshake ({alert:?}) — check that the broker's TLS settings and {ca} belong together"
            ),
        },
        other => format!(
            "TLS with {broker} failed: {other} — check that the broker's TLS settings and {ca} belong together"
        ),
    }
}

fn explain_certificate(broker: &str, ca: &str, certificate: &CertificateError) -> String {
    match certificate {
        CertificateError::UnknownIssuer | CertificateError::BadSignature => format!(
            "TLS with {broker} failed: the broker's certificate is not signed by the authority in {ca} — set `ca_file` to the certificate of the authority that signed the broker's (ask the broker's administrator)"
        ),
        CertificateError::NotValidForName => format!(
            "TLS with {broker} failed: the broker's certificate is not issued for the host name in `url` — write `url` with a name the certificate carries"
        ),
        CertificateError::NotValidForNameContext { presented, .. } => format!(
            "TLS with {broker} failed: the broker's certificate is not issued for the host name in `url`; it names {} — write `url` with one of those",
            presented.join(", ")
        ),
        CertificateError::Expired => format!(
            "TLS with {broker} failed: the broker's certificate has expired — renew it on the broker, or set this machine's clock right if it is wrong (timedatectl)"
        ),
        CertificateError::ExpiredContext { time, not_after } => format!(
            "TLS with {broker} failed: the broker's certificate expired at {}, and this machine's clock says {} — renew it on the broker, or set this machine's clock right if it is wrong (timedatectl)",
            utc(*not_after),
            utc(*time)
        ),
        CertificateError::NotValidYet => format!(
            "TLS with {broker} failed: the broker's certificate is not valid yet — this machine's clock is probably behind: check `timedatectl` and that network time (NTP) is on"
        ),
        CertificateError::NotValidYetContext { time, not_before } => format!(
            "TLS with {broker} failed: the broker's certificate is valid from {}, and this machine's clock says {} — this machine's clock is probably behind: check `timedatectl` and that network time (NTP) is on",
            utc(*not_before),
            utc(*time)
        ),
        other => format!(
            "TLS with {broker} failed: the broker's certificate was refused ({other}) — check it with the broker's administrator, and `ca_file`"
        ),
    }
}

fn utc(t: UnixTime) -> String {
    let mut out = String::new();
    crate::timestamp::write_rfc3339(&mut out, UNIX_EPOCH + Duration::from_secs(t.as_secs()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use std::os::unix::fs::PermissionsExt as _;

    /// As tokio-rustls reports a refused certificate: inside an io::Error.
    fn refused(certificate: CertificateError) -> TlsError {
        TlsError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(certificate),
        ))
    }

    const BROKER: &str = "mqtts://broker.plant:8883";

    #[test]
    fn each_certificate_problem_names_what_to_change() {
        let ca = Path::new("/etc/sealcheck/plant-ca.pem");
        let setup = TlsSetup {
            ca_file: Some(ca),
            client: None,
        };
        let say = |c| explain(BROKER, &setup, &refused(c));

        let s = say(CertificateError::UnknownIssuer);
        assert!(
            s.contains("not signed by the authority in ca_file /etc/sealcheck/plant-ca.pem"),
            "{s}"
        );

        let s = say(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("10.0.0.5").unwrap(),
            presented: vec!["DnsName(\"broker.plant\")".into()],
        });
        assert!(
            s.contains("host name in `url`") && s.contains("broker.plant"),
            "{s}"
        );

        // 2026-11-23T00:00:00Z, and a clock left at 1970 plus a day.
        let s = say(CertificateError::NotValidYetContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(86_400)),
            not_before: UnixTime::since_unix_epoch(Duration::from_secs(1_795_392_000)),
        });
        assert!(
            s.contains("2026-11-23T00:00:00.000Z")
                && s.contains("1970-01-02T00:00:00.000Z")
                && s.contains("timedatectl"),
            "{s}"
        );

        let s = say(CertificateError::ExpiredContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(1_795_392_000)),
            not_after: UnixTime::since_unix_epoch(Duration::from_secs(1_795_392_000 - 86_400)),
        });
        assert!(
            s.contains("expired at 2026-11-22T00:00:00.000Z") && s.contains("renew"),
            "{s}"
        );
        assert!(say(CertificateError::Expired).contains("renew it on the broker"));
    }

    #[test]
    fn a_handshake_cut_short_asks_whether_the_port_speaks_tls() {
        let reset = TlsError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        let setup = TlsSetup {
            ca_file: None,
            client: None,
        };
        let s = explain(BROKER, &setup, &reset);
        assert!(
            s.contains("is that port a TLS listener") && s.contains("mqtt://"),
            "{s}"
        );
        let other = TlsError::Io(std::io::Error::other("no route"));
        let s = explain(BROKER, &setup, &other);
        assert!(s.contains("no route") && s.contains("`ca_file`"), "{s}");
    }

    #[test]
    fn the_brokers_word_on_the_client_certificate_says_what_to_set() {
        // TLS 1.3: the refusal comes on the first read after the handshake.
        let alert = |a| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                rustls::Error::AlertReceived(a),
            )
        };
        let none = TlsSetup {
            ca_file: None,
            client: None,
        };
        let s = explain_io(BROKER, &none, &alert(AlertDescription::CertificateRequired)).unwrap();
        assert!(
            s.contains("wants a client certificate") && s.contains("`cert_file` and `key_file`"),
            "{s}"
        );
        let ours = ClientCertificate {
            cert_file: "/etc/sealcheck/line7.pem".into(),
            key_file: "/etc/sealcheck/line7.key".into(),
        };
        let with = TlsSetup {
            ca_file: None,
            client: Some(&ours),
        };
        let s = explain_io(BROKER, &with, &alert(AlertDescription::UnknownCA)).unwrap();
        assert!(
            s.contains("refused this client's certificate /etc/sealcheck/line7.pem"),
            "{s}"
        );
        assert_eq!(
            explain_io(BROKER, &with, &std::io::Error::other("plain I/O")),
            None
        );
    }

    #[test]
    fn a_key_file_others_may_read_is_refused_before_it_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("line7.key");
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_private_key(&key).unwrap_err();
        assert!(
            matches!(e, StartError::KeyFileOpen { mode: 0o644, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::write(&key, "not a key\n").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = read_private_key(&key).unwrap_err();
        assert!(e.to_string().contains("holds no private key"), "{e}");
    }
}
