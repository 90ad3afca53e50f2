//! JSON lines written by serde into a reused `String`: result lines, MQTT
//! verdicts and `inspect`'s lines are `#[derive(Serialize)]` structs, and these
//! are the pieces they share. The journal's lines (`service::logging`) quote
//! their values with `append_json` too: one way serde_json writes into a `String`.
//!
//! Those lines were written by hand before, and people parse them byte for
//! byte, so two spellings are kept that serde_json would write differently:
//! numbers with fixed decimals (`0.930000`, `12.000`, where serde_json writes
//! the shortest form, `0.93`, `12.0`), and times as RFC 3339 with milliseconds
//! (`timestamp`). A number that is not finite is `null`, as it always was.
//!
//! Nothing here allocates: a warm buffer takes a line without growing.

use std::fmt::{self, Write as _};
use std::io;
use std::time::SystemTime;

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::timestamp::write_rfc3339;

/// Replaces `out`'s text with `value` as one line of JSON, in its capacity.
pub fn write_json(out: &mut String, value: &impl Serialize) {
    out.clear();
    append_json(out, value);
}

/// Appends `value` as JSON to `out`, in its capacity.
pub fn append_json(out: &mut String, value: &impl Serialize) {
    let start = out.len();
    let written = serde_json::to_writer(Utf8Sink(out), value);
    // Only a failing `Serialize` or writer could fail, and neither ours does:
    // never leave half a value behind if one ever did.
    debug_assert!(written.is_ok(), "JSON line not written: {written:?}");
    if written.is_err() {
        out.truncate(start);
    }
}

/// Appends the fields of `object` (which serializes as a JSON object) to
/// the JSON object already in `out`: `{"a":1}` and `{"b":2}` make
/// `{"a":1,"b":2}`.
///
/// Only for a line that is already text when its last fields come: the
/// shadow's verdict (`shadow::ShadowVerdict::append_to`) and its absence
/// (`output`'s pending lines) arrive after the line went to the line and
/// the taps. A line built in one go puts its parts into one struct with
/// `#[serde(flatten)]` instead (`output::format_output_line`, `inspect`).
pub fn merge_into(out: &mut String, object: &impl Serialize) {
    // Two objects become one: the line's closing brace gives way to a
    // comma, and the new fields' opening brace to nothing.
    if out.ends_with('}') {
        out.pop();
    }
    let start = out.len();
    append_json(out, object);
    if out[start..].starts_with('{') {
        out.replace_range(start..=start, ",");
    }
}

/// serde_json writes bytes; this takes them into a `String`. It writes only
/// UTF-8, and in whole characters (it cuts a string only before an escaped
/// ASCII character), so each piece converts on its own.
struct Utf8Sink<'a>(&'a mut String);

impl io::Write for Utf8Sink<'_> {
    fn write(&mut self, piece: &[u8]) -> io::Result<usize> {
        let text = std::str::from_utf8(piece).map_err(|_| io::ErrorKind::InvalidData)?;
        self.0.push_str(text);
        Ok(piece.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `serialize_with` for a fraction: 6 fixed decimals, `null` when absent or not finite.
pub fn six_decimals<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    fixed_decimals(*value, 6, serializer)
}

/// `serialize_with` for milliseconds: 3 fixed decimals, `null` when not finite.
pub fn three_decimals<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    fixed_decimals(Some(*value), 3, serializer)
}

/// `serialize_with` for milliseconds that may be absent: 3 fixed decimals or `null`.
pub fn three_decimals_or_null<S: Serializer>(
    value: &Option<f64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    fixed_decimals(*value, 3, serializer)
}

fn fixed_decimals<S: Serializer>(
    value: Option<f64>,
    decimals: usize,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let Some(v) = value.filter(|v| v.is_finite()) else {
        return serializer.serialize_none();
    };
    let mut text = StackText::new();
    // A raw value is how serde_json takes a number spelled by someone else;
    // `{:.N}` of a finite number always parses as one.
    if write!(text, "{v:.decimals$}").is_ok()
        && let Ok(raw) = serde_json::from_str::<&RawValue>(text.as_str())
    {
        return raw.serialize(serializer);
    }
    serializer.serialize_f64(v)
}

/// Room for `{:.6}` of any finite f64: a sign, 309 integer digits, a point and
/// the decimals.
const NUMBER_ROOM: usize = 320;

/// A number's text on the stack, so that spelling it does not allocate.
struct StackText {
    bytes: [u8; NUMBER_ROOM],
    len: usize,
}

impl StackText {
    fn new() -> Self {
        StackText {
            bytes: [0; NUMBER_ROOM],
            len: 0,
        }
    }

    fn as_str(&self) -> &str {
        // Only whole `&str`s are ever copied in, so this is always UTF-8.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let room = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// `serialize_with` for a time: an RFC 3339 string (`timestamp`).
pub fn rfc3339<S: Serializer>(t: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&Rfc3339(*t))
}

/// `serialize_with` for a time that may be absent: RFC 3339 or `null`.
pub fn rfc3339_or_null<S: Serializer>(
    t: &Option<SystemTime>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => rfc3339(t, serializer),
        None => serializer.serialize_none(),
    }
}

/// A time as `Display`: serde_json writes it straight into its output.
struct Rfc3339(SystemTime);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_rfc3339(f, self.0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[derive(Serialize)]
    struct Sample {
        #[serde(serialize_with = "six_decimals")]
        fraction: Option<f64>,
        #[serde(serialize_with = "three_decimals")]
        ms: f64,
        #[serde(serialize_with = "rfc3339")]
        at: SystemTime,
        #[serde(serialize_with = "rfc3339_or_null")]
        due: Option<SystemTime>,
        name: &'static str,
    }

    #[test]
    fn numbers_keep_fixed_decimals_and_times_rfc3339() {
        let mut line = String::from("old text");
        let at = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        write_json(
            &mut line,
            &Sample {
                fraction: Some(0.93),
                ms: 12.0,
                at,
                due: None,
                name: "a \"b\"\n",
            },
        );
        assert_eq!(
            line,
            r#"{"fraction":0.930000,"ms":12.000,"at":"2024-02-29T12:34:56.789Z","due":null,"name":"a \"b\"\n"}"#
        );
        write_json(
            &mut line,
            &Sample {
                fraction: Some(f64::NAN),
                ms: f64::NEG_INFINITY,
                at,
                due: Some(at),
                name: "ü",
            },
        );
        assert_eq!(
            line,
            r#"{"fraction":null,"ms":null,"at":"2024-02-29T12:34:56.789Z","due":"2024-02-29T12:34:56.789Z","name":"ü"}"#
        );
    }

    #[test]
    fn the_largest_numbers_fit_their_room() {
        for v in [f64::MAX, f64::MIN, f64::MIN_POSITIVE, -0.0] {
            let mut line = String::new();
            write_json(
                &mut line,
                &Sample {
                    fraction: Some(v),
                    ms: v,
                    at: UNIX_EPOCH,
                    due: None,
                    name: "",
                },
            );
            let expected = format!(
                r#"{{"fraction":{v:.6},"ms":{v:.3},"at":"1970-01-01T00:00:00.000Z","due":null,"name":""}}"#
            );
            assert_eq!(line, expected);
        }
    }

    #[test]
    fn appending_keeps_what_was_there() {
        let mut line = String::from("x");
        append_json(&mut line, &Some(1u8));
        assert_eq!(line, "x1");
    }
}
