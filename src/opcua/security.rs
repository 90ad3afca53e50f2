//! The server's security apart from who logs in (`access`): the endpoints
//! it offers, its application certificate, and the client certificates it
//! trusts, all in the certificate store `[opcua] pki_dir`:
//!
//! ```text
//! pki_dir/
//!   own/cert.der          the server's application certificate (made on first start, 10 years)
//!   private/private.pem   its key (the folder 0700: the service's only)
//!   trusted/              client certificates trusted: async-opcua looks each up by the name
//!                         "<CN> [<SHA-1 thumbprint>].der"; any other .der/.pem/.crt/.cer file
//!                         there is copied under that name at start (`adopt_trusted`)
//!   rejected/             where a refused client's certificate lands (move it to trusted/
//!                         to trust it: read at each connection, no restart)
//! ```
//!
//! Endpoints: SecurityPolicy None only when `[opcua] listen` is a loopback
//! address (only this machine reaches it); Basic256Sha256 and
//! Aes256Sha256RsaPss with Sign and with SignAndEncrypt always.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use async_opcua::crypto::{CertificateStore, SecurityPolicy, X509, X509Data};
use async_opcua::server::ServerEndpoint;
use async_opcua::types::MessageSecurityMode;

use super::error::OpcUaError;

/// The server's ApplicationUri, also the first name of its certificate.
pub const APPLICATION_URI: &str = "urn:sealcheck";
/// The endpoint's path: `opc.tcp://HOST:PORT/`.
pub const PATH: &str = "/";
/// How long a certificate made here is valid.
const CERTIFICATE_DAYS: u32 = 3650;
/// The key size of a certificate made here (both policies take 2048 to 4096).
const KEY_BITS: u32 = 2048;
/// A certificate this close to its end is warned about at start.
const EXPIRY_WARNING_DAYS: i64 = 60;

/// The secure endpoints, offered on every address: (id, policy, mode).
pub const SECURE: [(&str, SecurityPolicy, MessageSecurityMode); 4] = [
    (
        "basic256sha256_sign",
        SecurityPolicy::Basic256Sha256,
        MessageSecurityMode::Sign,
    ),
    (
        "basic256sha256_sign_encrypt",
        SecurityPolicy::Basic256Sha256,
        MessageSecurityMode::SignAndEncrypt,
    ),
    (
        "aes256sha256rsapss_sign",
        SecurityPolicy::Aes256Sha256RsaPss,
        MessageSecurityMode::Sign,
    ),
    (
        "aes256sha256rsapss_sign_encrypt",
        SecurityPolicy::Aes256Sha256RsaPss,
        MessageSecurityMode::SignAndEncrypt,
    ),
];

/// The endpoints for a server on a loopback address (`loopback`) or not.
/// Which identities each takes is `access::Access`'s.
pub fn endpoints(loopback: bool) -> Vec<(&'static str, ServerEndpoint)> {
    let mut endpoints = Vec::with_capacity(SECURE.len() + 1);
    if loopback {
        endpoints.push(("none", ServerEndpoint::new_none(PATH, &[])));
    }
    for (id, policy, mode) in SECURE {
        endpoints.push((id, ServerEndpoint::new(PATH, policy, mode, &[])));
    }
    endpoints
}

/// The host name the endpoint URLs name: the listen address, or this
/// machine's name for 0.0.0.0 (a client cannot connect to 0.0.0.0).
pub fn endpoint_host(ip: IpAddr) -> String {
    if ip.is_unspecified() {
        X509Data::computer_hostnames()
            .into_iter()
            .next()
            .unwrap_or_else(|| "localhost".to_string())
    } else {
        ip.to_string()
    }
}

/// The server's certificate and key in `pki_dir`, made when neither is
/// there; its thumbprint. Leaves the store's folders made.
pub fn ensure_certificate(pki_dir: &Path, listen: IpAddr) -> Result<String, OpcUaError> {
    let store = CertificateStore::new(pki_dir);
    let failed = |why: String| OpcUaError::Certificate {
        dir: pki_dir.to_path_buf(),
        why,
    };
    store.ensure_pki_path().map_err(failed)?;
    let cert_path = store.own_certificate_path();
    let key_path = store.own_private_key_path();
    let cert = match (cert_path.exists(), key_path.exists()) {
        (true, true) => {
            let cert = store.read_own_cert().map_err(failed)?;
            store.read_own_pkey().map_err(failed)?;
            cert
        }
        (false, false) => make_certificate(&cert_path, &key_path, listen).map_err(failed)?,
        (has_cert, _) => {
            let (there, missing) = if has_cert {
                (&cert_path, &key_path)
            } else {
                (&key_path, &cert_path)
            };
            return Err(OpcUaError::HalfCertificate {
                there: there.clone(),
                missing: missing.clone(),
            });
        }
    };
    let thumbprint = cert.thumbprint().as_hex_string();
    if let Ok(until) = cert.not_after() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let left = (until.timestamp() - now) / 86_400;
        if left < EXPIRY_WARNING_DAYS {
            log::warn!(target: "sealcheck::opcua", days_left = left;
                "the OPC UA server's certificate {} ends in {left} days ({until}): clients will refuse it then; remove {} and {} to have a new one made at the next start (clients must trust it anew)",
                cert_path.display(), cert_path.display(), key_path.display());
        }
    }
    Ok(thumbprint)
}

/// Makes the certificate and its key; the key's folder is the service's only.
fn make_certificate(cert_path: &Path, key_path: &Path, listen: IpAddr) -> Result<X509, String> {
    use std::os::unix::fs::PermissionsExt;
    let private = key_path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(private)
        .and_then(|()| std::fs::set_permissions(private, std::fs::Permissions::from_mode(0o700)))
        .map_err(|e| format!("{}: {e}", private.display()))?;
    let host = X509Data::computer_hostnames()
        .into_iter()
        .next()
        .unwrap_or_else(|| "localhost".to_string());
    let addresses =
        (!listen.is_unspecified() && !listen.is_loopback()).then(|| vec![listen.to_string()]);
    let data = X509Data {
        key_size: KEY_BITS,
        common_name: format!("sealcheck@{host}"),
        organization: "sealcheck".to_string(),
        organizational_unit: String::new(),
        country: String::new(),
        state: String::new(),
        alt_host_names: X509Data::alt_host_names(APPLICATION_URI, addresses, true, true, true),
        certificate_duration_days: CERTIFICATE_DAYS,
    };
    let (cert, _key) =
        CertificateStore::create_certificate_and_key(&data, false, cert_path, key_path)?;
    let _ = std::fs::set_permissions(key_path, std::fs::Permissions::from_mode(0o600));
    log::info!(target: "sealcheck::opcua", certificate = cert_path.display().to_string().as_str();
        "OPC UA: made the server's application certificate {} (CN sealcheck@{host}, thumbprint {}, {} days): a client trusts it on first connection or by importing this file",
        cert_path.display(), cert.thumbprint().as_hex_string(), CERTIFICATE_DAYS);
    Ok(cert)
}

/// Copies each certificate in `trusted/` not named as async-opcua looks it
/// up ("<CN> [<thumbprint>].der") under that name, so that a certificate
/// dropped there as "plc.der" or "plc.pem" is trusted; names each one.
pub fn adopt_trusted(pki_dir: &Path) -> Vec<PathBuf> {
    let trusted = CertificateStore::new(pki_dir).trusted_certs_dir();
    let Ok(entries) = std::fs::read_dir(&trusted) else {
        return Vec::new();
    };
    let mut adopted = Vec::new();
    for path in entries.flatten().map(|e| e.path()) {
        let is_cert = path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
            matches!(
                e.to_ascii_lowercase().as_str(),
                "der" | "pem" | "crt" | "cer"
            )
        });
        if !is_cert || !path.is_file() {
            continue;
        }
        let Some(cert) = read_certificate(&path) else {
            log::warn!(target: "sealcheck::opcua", file = path.display().to_string().as_str();
                "{}: not a certificate (DER or PEM): ignored, no client is trusted by it", path.display());
            continue;
        };
        let canonical = trusted.join(CertificateStore::cert_file_name(&cert));
        if canonical == path || canonical.exists() {
            continue;
        }
        let written = cert
            .to_der()
            .map_err(|e| e.to_string())
            .and_then(|der| std::fs::write(&canonical, der).map_err(|e| e.to_string()));
        match written {
            Ok(()) => {
                log::info!(target: "sealcheck::opcua", file = path.display().to_string().as_str();
                    "OPC UA: {} trusted, as {}", path.display(), canonical.display());
                adopted.push(canonical);
            }
            Err(why) => {
                log::warn!(target: "sealcheck::opcua", file = path.display().to_string().as_str();
                    "OPC UA: {} is not trusted: cannot write {}: {why}", path.display(), canonical.display());
            }
        }
    }
    adopted
}

/// A certificate file, DER or PEM whatever its name says.
fn read_certificate(path: &Path) -> Option<X509> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.starts_with(b"-----BEGIN") {
        X509::from_pem(&bytes).ok()
    } else {
        X509::from_der(&bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_is_offered_on_loopback_only_and_the_secure_endpoints_everywhere() {
        let ids =
            |loopback| -> Vec<&str> { endpoints(loopback).into_iter().map(|(id, _)| id).collect() };
        assert_eq!(ids(true)[0], "none");
        assert!(!ids(false).contains(&"none"));
        for loopback in [true, false] {
            let offered = endpoints(loopback);
            for (_, policy, mode) in SECURE {
                assert!(offered.iter().any(
                    |(_, e)| e.security_policy() == policy && e.message_security_mode() == mode
                ));
            }
        }
    }

    #[test]
    fn a_certificate_is_made_once_and_a_dropped_client_certificate_is_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        let listen: IpAddr = "127.0.0.1".parse().unwrap();
        let first = ensure_certificate(&pki, listen).unwrap();
        assert_eq!(
            ensure_certificate(&pki, listen).unwrap(),
            first,
            "kept, not made again"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(pki.join("private"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the key's folder is the service's only");
        // A client's certificate dropped into trusted/ under a name of its own.
        let own = std::fs::read(pki.join("own/cert.der")).unwrap();
        std::fs::write(pki.join("trusted/plc.der"), &own).unwrap();
        std::fs::write(pki.join("trusted/notes.pem"), b"not a certificate").unwrap();
        let adopted = adopt_trusted(&pki);
        assert_eq!(adopted.len(), 1);
        let name = adopted[0]
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(name.ends_with(&format!("[{first}].der")), "{name}");
        assert!(adopt_trusted(&pki).is_empty(), "once");
        // Half a store is refused with what is missing.
        std::fs::remove_file(pki.join("private/private.pem")).unwrap();
        let error = ensure_certificate(&pki, listen).unwrap_err().to_string();
        assert!(error.contains("private.pem"), "{error}");
    }
}
