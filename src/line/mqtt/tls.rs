//! MQTT over TLS (`mqtts://`): whom we trust, and what a failed handshake
//! means for the person who wrote `url` and `ca_file`.
//!
//! rustls says `UnknownIssuer` or `NotValidYet`; a technician needs "the
//! broker's certificate is not signed by the authority in ca_file" or "this
//! machine's clock is wrong" (a Jetson without network time and without a
//! clock battery starts in the past, and then no certificate is valid yet).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use rumqttc::TlsError;
use rustls::CertificateError;
use rustls::pki_types::UnixTime;

use super::client::StartError;

/// rustls with the `ring` provider (no cmake or nasm to build), trusting only `ca`.
pub(super) fn client_config(ca: &Path) -> Result<rustls::ClientConfig, StartError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let bad = |why: String| StartError::CaFile {
        path: ca.to_path_buf(),
        why,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| bad(e.to_string()))? {
        roots
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("it holds no certificate".into()));
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
}

/// One sentence: what failed with `broker` (its url) and what to change.
pub(super) fn explain(broker: &str, ca_file: Option<&Path>, error: &TlsError) -> String {
    let ca = ca_file.map_or_else(
        || "ca_file".to_string(),
        |p| format!("ca_file {}", p.display()),
    );
    // tokio-rustls hands rustls' verdict over inside an io::Error.
    let rustls_error = match error {
        TlsError::TLS(e) => Some(e),
        TlsError::Io(io) => io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()),
        _ => None,
    };
    let certificate = match rustls_error {
        Some(rustls::Error::InvalidCertificate(c)) => c,
        Some(other) => {
            return format!(
                "TLS with {broker} failed: {other} — check that the broker's TLS settings and {ca} belong together"
            );
        }
        None => {
            return match error {
                TlsError::Io(io)
                    if matches!(
                        io.kind(),
                        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::UnexpectedEof
                    ) =>
                {
                    format!(
                        "{broker} closed the connection during the TLS handshake: is that port a TLS listener? (use mqtt:// for a plain one; MQTT over TLS is usually port 8883)"
                    )
                }
                other => format!(
                    "TLS with {broker} failed: {other} — check `ca_file` and that the host name in `url` matches the broker's certificate"
                ),
            };
        }
    };
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
    crate::output::write_rfc3339(&mut out, UNIX_EPOCH + Duration::from_secs(t.as_secs()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;

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
        let say = |c| explain(BROKER, Some(ca), &refused(c));

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
        let s = explain(BROKER, None, &reset);
        assert!(
            s.contains("is that port a TLS listener") && s.contains("mqtt://"),
            "{s}"
        );
        let other = TlsError::Io(std::io::Error::other("no route"));
        let s = explain(BROKER, None, &other);
        assert!(s.contains("no route") && s.contains("`ca_file`"), "{s}");
    }
}
