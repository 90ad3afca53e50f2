//! One log line per event on stderr, in logfmt or JSON, with every key-value the call
//! site attached:
//!
//! ```text
//! ts=2026-11-23T03:47:21.123Z level=info target=sealcheck::output msg="verdict" seq=12 verdict=fail reason=defect defect_prob=0.93
//! {"ts":"2026-11-23T03:47:21.123Z","level":"info","target":"sealcheck::output","msg":"verdict","seq":12,"verdict":"fail","reason":"defect","defect_prob":0.93}
//! ```
//!
//! Under systemd, stderr goes to the journal. The line then starts with a syslog priority
//! (`<6>`), which journald strips and stores as PRIORITY, so `journalctl -p warning` works.
//! `ts` stays in the line: the journal has its own timestamp, but a line copied out of the
//! journal (or read from a file when run by hand) keeps the time it happened.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::time::SystemTime;

use log::kv::{Key, Value, VisitSource, VisitValue};

pub use crate::config::LogFormat;
use crate::json_line::append_json;

/// Installs the logger for the whole process. `default_level` is an env_logger filter
/// (`info`, `sealcheck=debug,warn`) used when `RUST_LOG` is unset; `RUST_LOG` replaces it.
/// Logging format and level are read once: changing them needs a restart, not a reload.
/// A second call keeps the first logger (and says so on stderr): logging never stops the
/// service.
pub fn init_logging(format: LogFormat, default_level: &str) {
    let journal = stderr_is_journal();
    let mut builder = env_logger::Builder::new();
    builder
        .parse_env(env_logger::Env::default().default_filter_or(default_level))
        .write_style(env_logger::WriteStyle::Never)
        .target(env_logger::Target::Stderr)
        .format(move |buf, record| {
            LINE.with(|cell| {
                let mut bufs = cell.borrow_mut();
                let LineBuffers { line, scratch } = &mut *bufs;
                line.clear();
                if journal {
                    line.push_str(syslog_prefix(record.level()));
                }
                format_record_into(line, scratch, format, SystemTime::now(), record);
                line.push('\n');
                buf.write_all(line.as_bytes())
            })
        });
    if let Err(e) = builder.try_init() {
        eprintln!("sealcheck: logging was already set up; keeping the first setup ({e})");
    }
}

/// Reusable per-thread buffers, so logging a line does not allocate once warmed up.
struct LineBuffers {
    line: String,
    scratch: String,
}

thread_local! {
    static LINE: RefCell<LineBuffers> =
        RefCell::new(LineBuffers { line: String::with_capacity(512), scratch: String::with_capacity(128) });
}

/// `<3>` error, `<4>` warning, `<6>` info, `<7>` debug and trace: the priorities
/// journald reads from the start of a line (SyslogLevelPrefix=, on by default).
pub fn syslog_prefix(level: log::Level) -> &'static str {
    match level {
        log::Level::Error => "<3>",
        log::Level::Warn => "<4>",
        log::Level::Info => "<6>",
        log::Level::Debug | log::Level::Trace => "<7>",
    }
}

/// Whether stderr is connected to the journal: `JOURNAL_STREAM` holds `device:inode` of
/// the stream systemd connected, and it must be the one stderr still points at (a child
/// whose stderr was redirected inherits the variable but not the stream).
pub fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = value.to_str().and_then(|v| v.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    // A duplicate of fd 2 as a File, for std's fstat; a closed stderr fails the dup.
    std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| std::fs::File::from(fd).metadata())
        .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}

/// Formats one record as a line (no newline): the pure function behind the logger.
pub fn format_record(format: LogFormat, time: SystemTime, record: &log::Record<'_>) -> String {
    let mut line = String::new();
    let mut scratch = String::new();
    format_record_into(&mut line, &mut scratch, format, time, record);
    line
}

/// As `format_record`, appending to `out`; `scratch` is a reusable buffer.
pub fn format_record_into(
    out: &mut String,
    scratch: &mut String,
    format: LogFormat,
    time: SystemTime,
    record: &log::Record<'_>,
) {
    let level = level_name(record.level());
    scratch.clear();
    // Writing to a String cannot fail.
    let _ = write!(scratch, "{}", record.args());
    match format {
        LogFormat::Logfmt => {
            out.push_str("ts=");
            crate::timestamp::write_rfc3339(out, time);
            out.push_str(" level=");
            out.push_str(level);
            out.push_str(" target=");
            push_logfmt_value(out, record.target());
            out.push_str(" msg=");
            push_quoted(out, scratch);
        }
        LogFormat::Json => {
            out.push_str("{\"ts\":\"");
            crate::timestamp::write_rfc3339(out, time);
            out.push_str("\",\"level\":\"");
            out.push_str(level);
            out.push_str("\",\"target\":");
            push_json_string(out, record.target());
            out.push_str(",\"msg\":");
            push_json_string(out, scratch);
        }
    }
    let mut visitor = PairWriter {
        out,
        scratch,
        format,
    };
    // Our visitor never fails; a failing source (a broken custom Value) only loses its pairs.
    let _ = record.key_values().visit(&mut visitor);
    if format == LogFormat::Json {
        out.push('}');
    }
}

fn level_name(level: log::Level) -> &'static str {
    match level {
        log::Level::Error => "error",
        log::Level::Warn => "warn",
        log::Level::Info => "info",
        log::Level::Debug => "debug",
        log::Level::Trace => "trace",
    }
}

/// Writes ` key=value` (logfmt) or `,"key":value` (JSON) for each pair.
struct PairWriter<'a> {
    out: &'a mut String,
    scratch: &'a mut String,
    format: LogFormat,
}

const RESERVED_JSON_KEYS: [&str; 4] = ["ts", "level", "target", "msg"];

impl<'kvs> VisitSource<'kvs> for PairWriter<'_> {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), log::kv::Error> {
        let key = key.as_str();
        match self.format {
            LogFormat::Logfmt => {
                self.out.push(' ');
                // Keys are written by our code, but a space or '=' in one would break the
                // line for every parser: replace them.
                self.out.extend(key.chars().map(|c| {
                    if c.is_whitespace() || c == '=' || c == '"' {
                        '_'
                    } else {
                        c
                    }
                }));
                self.out.push('=');
            }
            LogFormat::Json => {
                self.out.push(',');
                if RESERVED_JSON_KEYS.contains(&key) {
                    // A second "msg" would make the object ambiguous; keep both.
                    let mut renamed = String::with_capacity(key.len() + 3);
                    renamed.push_str("kv_");
                    renamed.push_str(key);
                    push_json_string(self.out, &renamed);
                } else {
                    push_json_string(self.out, key);
                }
                self.out.push(':');
            }
        }
        value.visit(ValueWriter {
            out: self.out,
            scratch: self.scratch,
            format: self.format,
        })
    }
}

/// Writes one value: numbers and booleans bare, everything else as text (quoted in JSON,
/// quoted in logfmt when it holds a space, a quote or '=').
struct ValueWriter<'a> {
    out: &'a mut String,
    scratch: &'a mut String,
    format: LogFormat,
}

impl ValueWriter<'_> {
    fn text(&mut self, s: &str) {
        match self.format {
            LogFormat::Logfmt => push_logfmt_value(self.out, s),
            LogFormat::Json => push_json_string(self.out, s),
        }
    }

    fn bare(&mut self, args: std::fmt::Arguments<'_>) {
        let _ = self.out.write_fmt(args);
    }
}

impl<'v> VisitValue<'v> for ValueWriter<'_> {
    fn visit_any(&mut self, value: Value<'_>) -> Result<(), log::kv::Error> {
        let mut scratch = std::mem::take(self.scratch);
        scratch.clear();
        let _ = write!(scratch, "{value}");
        self.text(&scratch);
        *self.scratch = scratch;
        Ok(())
    }

    fn visit_null(&mut self) -> Result<(), log::kv::Error> {
        self.out.push_str("null");
        Ok(())
    }

    fn visit_u64(&mut self, value: u64) -> Result<(), log::kv::Error> {
        self.bare(format_args!("{value}"));
        Ok(())
    }

    fn visit_i64(&mut self, value: i64) -> Result<(), log::kv::Error> {
        self.bare(format_args!("{value}"));
        Ok(())
    }

    fn visit_u128(&mut self, value: u128) -> Result<(), log::kv::Error> {
        self.bare(format_args!("{value}"));
        Ok(())
    }

    fn visit_i128(&mut self, value: i128) -> Result<(), log::kv::Error> {
        self.bare(format_args!("{value}"));
        Ok(())
    }

    fn visit_f64(&mut self, value: f64) -> Result<(), log::kv::Error> {
        if value.is_finite() {
            // An f32 widened to f64 (the log crate carries floats as f64) would print as
            // 0.9300000071525574; print it as the f32 it was. An f64 that is exactly an
            // f32 value loses nothing by this.
            let narrow = value as f32;
            if f64::from(narrow) == value {
                self.bare(format_args!("{narrow}"));
            } else {
                self.bare(format_args!("{value}"));
            }
        } else {
            // JSON has no NaN or infinity; text keeps the information.
            let mut scratch = std::mem::take(self.scratch);
            scratch.clear();
            let _ = write!(scratch, "{value}");
            self.text(&scratch);
            *self.scratch = scratch;
        }
        Ok(())
    }

    fn visit_bool(&mut self, value: bool) -> Result<(), log::kv::Error> {
        self.out.push_str(if value { "true" } else { "false" });
        Ok(())
    }

    fn visit_str(&mut self, value: &str) -> Result<(), log::kv::Error> {
        self.text(value);
        Ok(())
    }
}

/// A logfmt value: bare when it is a single plain word, quoted otherwise.
fn push_logfmt_value(out: &mut String, s: &str) {
    let needs_quotes = s.is_empty()
        || s.chars()
            .any(|c| c == ' ' || c == '"' || c == '=' || c == '\\' || c.is_control());
    if needs_quotes {
        push_quoted(out, s);
    } else {
        out.push_str(s);
    }
}

/// `"..."` as a JSON string (serde_json's escapes: `"`, `\` and every control character
/// below U+0020), so a value can never end the line or the field early. logfmt parsers
/// read the same escapes, so logfmt's quoted values use it too. Written by serde_json
/// straight into the line (`json_line::append_json`, no allocation of its own).
fn push_quoted(out: &mut String, s: &str) {
    append_json(out, &s);
}

fn push_json_string(out: &mut String, s: &str) {
    push_quoted(out, s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    /// 2026-11-23T03:47:21.123Z
    fn fixed_time() -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_795_405_641_123)
    }

    fn render(
        format: LogFormat,
        level: log::Level,
        msg: &str,
        kvs: &[(&str, Value<'_>)],
    ) -> String {
        let kvs: Vec<(&str, Value<'_>)> = kvs.to_vec();
        // One statement: the `format_args!` temporary lives until its end.
        format_record(
            format,
            fixed_time(),
            &log::Record::builder()
                .level(level)
                .target("sealcheck::output")
                .args(format_args!("{msg}"))
                .key_values(&kvs)
                .build(),
        )
    }

    #[test]
    fn timestamp_is_rfc3339_utc_with_milliseconds() {
        let mut s = String::new();
        crate::timestamp::write_rfc3339(&mut s, fixed_time());
        assert_eq!(s, "2026-11-23T03:47:21.123Z");
        s.clear();
        crate::timestamp::write_rfc3339(&mut s, UNIX_EPOCH + Duration::from_micros(5_999));
        assert_eq!(s, "1970-01-01T00:00:00.005Z");
    }

    #[test]
    fn logfmt_line_has_every_field_and_key_value() {
        let line = render(
            LogFormat::Logfmt,
            log::Level::Info,
            "verdict",
            &[
                ("seq", Value::from(12u64)),
                ("verdict", Value::from("fail")),
                ("reason", Value::from("defect")),
                ("defect_prob", Value::from(0.93f64)),
                ("area", Value::from(0.25f32)),
                ("prob32", Value::from(0.93f32)),
                ("saved", Value::from(true)),
            ],
        );
        assert_eq!(
            line,
            "ts=2026-11-23T03:47:21.123Z level=info target=sealcheck::output msg=\"verdict\" \
             seq=12 verdict=fail reason=defect defect_prob=0.93 area=0.25 prob32=0.93 saved=true"
        );
    }

    #[test]
    fn logfmt_quotes_values_with_spaces_quotes_or_equals() {
        let line = render(
            LogFormat::Logfmt,
            log::Level::Warn,
            "camera said \"no\"",
            &[
                ("path", Value::from("/var/lib/sealcheck/my images")),
                ("expr", Value::from("a=b")),
                ("quote", Value::from("say \"hi\"")),
                ("empty", Value::from("")),
                ("multi", Value::from("line1\nline2")),
            ],
        );
        assert_eq!(
            line,
            "ts=2026-11-23T03:47:21.123Z level=warn target=sealcheck::output msg=\"camera said \\\"no\\\"\" \
             path=\"/var/lib/sealcheck/my images\" expr=\"a=b\" quote=\"say \\\"hi\\\"\" empty=\"\" \
             multi=\"line1\\nline2\""
        );
    }

    #[test]
    fn json_line_is_one_object_with_numbers_as_numbers() {
        let line = render(
            LogFormat::Json,
            log::Level::Error,
            "verdict",
            &[
                ("seq", Value::from(12u64)),
                ("offset", Value::from(-3i64)),
                ("verdict", Value::from("fail")),
                ("defect_prob", Value::from(0.93f64)),
                ("saved", Value::from(false)),
                ("msg", Value::from("shadowed")),
                ("nan", Value::from(f64::NAN)),
            ],
        );
        assert_eq!(
            line,
            "{\"ts\":\"2026-11-23T03:47:21.123Z\",\"level\":\"error\",\"target\":\"sealcheck::output\",\
             \"msg\":\"verdict\",\"seq\":12,\"offset\":-3,\"verdict\":\"fail\",\"defect_prob\":0.93,\
             \"saved\":false,\"kv_msg\":\"shadowed\",\"nan\":\"NaN\"}"
        );
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["seq"], serde_json::json!(12));
        assert_eq!(parsed["defect_prob"], serde_json::json!(0.93));
    }

    #[test]
    fn json_escapes_control_characters_and_quotes() {
        let line = render(
            LogFormat::Json,
            log::Level::Info,
            "tab\there \"q\" back\\slash bell\u{7}",
            &[("path", Value::from_display(&"C:\\x\ny"))],
        );
        let parsed: serde_json::Value = serde_json::from_str(&line).expect(&line);
        assert_eq!(parsed["msg"], "tab\there \"q\" back\\slash bell\u{7}");
        assert_eq!(parsed["path"], "C:\\x\ny");
        assert!(
            !line.contains('\n'),
            "a record must stay on one line: {line}"
        );
    }

    #[test]
    fn every_control_character_stays_on_the_line_and_reads_back() {
        let nasty: String = (0u32..0x20)
            .chain([0x7f, 0x85, 0x2028])
            .filter_map(char::from_u32)
            .chain("\"\\ end".chars())
            .collect();
        for format in [LogFormat::Json, LogFormat::Logfmt] {
            let line = render(
                format,
                log::Level::Info,
                &nasty,
                &[("value", Value::from(nasty.as_str()))],
            );
            assert!(
                !line.contains('\n') && !line.contains('\r'),
                "a record must stay on one line: {line:?}"
            );
            if format == LogFormat::Json {
                let parsed: serde_json::Value = serde_json::from_str(&line).expect(&line);
                assert_eq!(parsed["msg"], nasty.as_str());
                assert_eq!(parsed["value"], nasty.as_str());
            } else {
                let quoted = line.split_once(" value=").expect(&line).1;
                let value: String = serde_json::from_str(quoted).expect(quoted);
                assert_eq!(value, nasty);
            }
        }
    }

    #[test]
    fn display_values_are_text() {
        let err = std::io::Error::new(std::io::ErrorKind::NotFound, "no such device /dev/video0");
        let line = render(
            LogFormat::Logfmt,
            log::Level::Error,
            "camera not found",
            &[("error", Value::from_display(&err))],
        );
        assert!(
            line.ends_with("error=\"no such device /dev/video0\""),
            "{line}"
        );
    }

    #[test]
    fn record_without_key_values() {
        let line = render(LogFormat::Json, log::Level::Debug, "plain", &[]);
        assert_eq!(
            line,
            "{\"ts\":\"2026-11-23T03:47:21.123Z\",\"level\":\"debug\",\"target\":\"sealcheck::output\",\"msg\":\"plain\"}"
        );
    }

    #[test]
    fn syslog_priorities_follow_levels() {
        assert_eq!(syslog_prefix(log::Level::Error), "<3>");
        assert_eq!(syslog_prefix(log::Level::Warn), "<4>");
        assert_eq!(syslog_prefix(log::Level::Info), "<6>");
        assert_eq!(syslog_prefix(log::Level::Trace), "<7>");
    }
}
