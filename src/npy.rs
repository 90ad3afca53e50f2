//! Tensors to NumPy `.npy` files (format version 1.0, little-endian `<f4`,
//! C order), for `sealcheck inspect --dump`: the tensors can then be compared
//! with the training code's own preprocessing in Python.
//!
//! Layout, per the NumPy format specification: the magic `\x93NUMPY`, version
//! bytes 1 and 0, a little-endian u16 header length, then an ASCII Python dict
//! literal padded with spaces and ended by `\n` so that the data starts at a
//! multiple of 64 bytes, then the raw data.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Magic, two version bytes and the u16 header length.
const PREAMBLE_LEN: usize = MAGIC.len() + 2 + 2;
const ALIGNMENT: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("cannot dump tensor to {}: shape {shape:?} holds {elements} values but {data_len} were given", path.display())]
    ShapeMismatch {
        path: PathBuf,
        shape: Vec<usize>,
        elements: usize,
        data_len: usize,
    },
    #[error("cannot dump tensor to {}: shape {shape:?} does not fit a version 1.0 .npy header", path.display())]
    HeaderTooLong { path: PathBuf, shape: Vec<usize> },
    #[error("cannot write {}: {source} — check that the dump folder exists and is writable", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes `data` (C order) as a `float32` array of `shape` to `path`,
/// replacing any file there.
pub fn write_npy_f32(path: &Path, shape: &[usize], data: &[f32]) -> Result<(), NpyError> {
    let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if elements != Some(data.len()) {
        return Err(NpyError::ShapeMismatch {
            path: path.to_path_buf(),
            shape: shape.to_vec(),
            elements: elements.unwrap_or(usize::MAX),
            data_len: data.len(),
        });
    }
    let header = npy_header_f32(shape).ok_or_else(|| NpyError::HeaderTooLong {
        path: path.to_path_buf(),
        shape: shape.to_vec(),
    })?;
    let write_error = |source| NpyError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = File::create(path).map_err(write_error)?;
    let mut out = BufWriter::new(file);
    out.write_all(&header).map_err(write_error)?;
    // Converted in blocks: the format is little-endian whatever the host.
    let mut block = [0u8; 4 * 1024];
    for values in data.chunks(block.len() / 4) {
        let bytes = &mut block[..4 * values.len()];
        for (dst, value) in bytes.chunks_exact_mut(4).zip(values) {
            dst.copy_from_slice(&value.to_le_bytes());
        }
        out.write_all(bytes).map_err(write_error)?;
    }
    out.into_inner()
        .map_err(|e| write_error(e.into_error()))?
        .sync_all()
        .map_err(write_error)?;
    Ok(())
}

/// The preamble and padded header of a `<f4` C-order array of `shape`, or
/// `None` when the header would not fit the u16 length of version 1.0.
pub fn npy_header_f32(shape: &[usize]) -> Option<Vec<u8>> {
    let dims = match shape {
        [single] => format!("({single},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {dims}, }}");
    // Pad with spaces so preamble + dict + '\n' ends on the alignment.
    let unpadded = PREAMBLE_LEN + dict.len() + 1;
    dict.extend(std::iter::repeat_n(
        ' ',
        unpadded.next_multiple_of(ALIGNMENT) - unpadded,
    ));
    dict.push('\n');
    let header_len = u16::try_from(dict.len()).ok()?;
    let mut header = Vec::with_capacity(PREAMBLE_LEN + dict.len());
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&[1, 0]);
    header.extend_from_slice(&header_len.to_le_bytes());
    header.extend_from_slice(dict.as_bytes());
    Some(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_ends_with_newline() {
        for shape in [
            &[][..],
            &[5],
            &[1, 3, 640, 640],
            &[123_456_789, 7, 1, 2, 3, 4, 5, 6],
        ] {
            let header = npy_header_f32(shape).unwrap();
            assert_eq!(header.len() % ALIGNMENT, 0, "{shape:?}");
            assert_eq!(&header[..8], b"\x93NUMPY\x01\x00");
            let declared = u16::from_le_bytes([header[8], header[9]]) as usize;
            assert_eq!(declared, header.len() - PREAMBLE_LEN);
            assert_eq!(header.last(), Some(&b'\n'));
        }
    }

    #[test]
    fn header_spells_the_shape_as_a_python_tuple() {
        let text = |shape: &[usize]| {
            String::from_utf8(npy_header_f32(shape).unwrap()[10..].to_vec()).unwrap()
        };
        assert!(
            text(&[1, 3, 640, 640]).starts_with(
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 640, 640), }"
            )
        );
        assert!(text(&[5]).contains("'shape': (5,),"));
        assert!(text(&[]).contains("'shape': (),"));
    }

    #[test]
    fn data_follows_the_header_little_endian() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.npy");
        write_npy_f32(&path, &[2, 2], &[1.0, -2.5, 0.0, f32::MAX]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        // NumPy itself writes a 128-byte header for this shape.
        let start = npy_header_f32(&[2, 2]).unwrap().len();
        assert_eq!(start, 128);
        assert_eq!(bytes.len(), start + 16);
        assert_eq!(&bytes[start..start + 4], &1.0f32.to_le_bytes());
        assert_eq!(&bytes[start + 4..start + 8], &(-2.5f32).to_le_bytes());
        assert_eq!(&bytes[start + 12..], &f32::MAX.to_le_bytes());
    }

    #[test]
    fn wrong_element_count_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_npy_f32(&dir.path().join("t.npy"), &[2, 3], &[0.0; 5]).unwrap_err();
        assert!(err.to_string().contains("holds 6 values but 5"), "{err}");
    }
}
