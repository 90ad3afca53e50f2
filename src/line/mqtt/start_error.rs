//! Why MQTT could not start, and the check both the password file and the
//! client key go through. A leaf under `client` (which reads the password and
//! starts the threads) and `tls` (which reads the certificates and the key),
//! so that neither imports the other for them.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

/// Why MQTT could not start. Never holds the password.
#[derive(Debug, thiserror::Error)]
pub(super) enum StartError {
    #[error("password file {} does not exist — create it holding only the password, owned by the service's user, mode 600", .0.display())]
    PasswordFileMissing(PathBuf),
    #[error("password file {} may be read by other users (mode {mode:o}) — run `chmod 600 {}` and make the service's user its owner", path.display(), path.display())]
    PasswordFileOpen { path: PathBuf, mode: u32 },
    #[error("cannot read password file {}: {source} — check that the service's user may read it", path.display())]
    PasswordFileRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("password file {} is empty — write the password into it", .0.display())]
    PasswordFileEmpty(PathBuf),
    #[error("cannot use ca_file {}: {why} — it must be the PEM certificate of the authority that signed the broker's certificate", path.display())]
    CaFile { path: PathBuf, why: String },
    #[error("cannot use cert_file {}: {why} — it must hold this client's PEM certificate (then any intermediate authorities)", path.display())]
    CertFile { path: PathBuf, why: String },
    #[error("key_file {} may be read by other users (mode {mode:o}) — run `chmod 600 {}` and make the service's user its owner", path.display(), path.display())]
    KeyFileOpen { path: PathBuf, mode: u32 },
    #[error("cannot use key_file {}: {why} — it must hold the PEM private key (PKCS#8, PKCS#1 or SEC1) of the certificate in cert_file", path.display())]
    KeyFile { path: PathBuf, why: String },
    #[error("cannot start the MQTT threads: {0}")]
    Spawn(std::io::Error),
}

/// The file's mode when its group or others have any access to it: a secret
/// (the password, the client key) must be its owner's alone, like ssh's keys.
pub(super) fn open_to_others(meta: &std::fs::Metadata) -> Option<u32> {
    let mode = meta.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}
