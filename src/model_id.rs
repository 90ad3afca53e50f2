//! Short, stable identities of model files: the first 12 hex digits of the
//! file's SHA-256. They go wherever a verdict or a metric has to say which
//! models made it (`model_info` in /metrics, verdict messages), so two sites
//! running "seg.onnx" can be told apart by what the file holds, not its name.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Hex digits kept of the SHA-256.
pub const MODEL_ID_LEN: usize = 12;

/// The model file's id: the first 12 hex digits of its SHA-256.
pub fn model_id(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let mut hex = to_hex(&hasher.finalize());
    hex.truncate(MODEL_ID_LEN);
    Ok(hex)
}

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_the_first_12_hex_digits_of_the_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.onnx");
        std::fs::write(&path, b"abc").unwrap();
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
        assert_eq!(model_id(&path).unwrap(), "ba7816bf8f01");
    }
}
