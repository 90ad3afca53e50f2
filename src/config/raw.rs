//! The first stage: the TOML document with spans, read key by key.
//!
//! Serde stops at the first error; an operator fixing a config on a line wants
//! every problem at once, each with its line and column. So sections are walked
//! by hand: each `Section` hands out typed values, records a problem for every
//! wrong type or out-of-range value, and at `finish` reports the keys nobody asked for.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ops::{Range, RangeInclusive};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::ConfigProblem;

/// Collects problems and turns byte offsets into line and column.
pub struct Problems<'s> {
    text: &'s str,
    list: RefCell<Vec<ConfigProblem>>,
}

impl<'s> Problems<'s> {
    pub fn new(text: &'s str) -> Self {
        Problems {
            text,
            list: RefCell::new(Vec::new()),
        }
    }

    /// Records a problem at `span`; without one (a key of a section that is not
    /// in the file at all) at the end of the file, where the section would go.
    pub fn at(&self, span: Option<Range<usize>>, key: &str, message: impl Into<String>) {
        let offset = span.map_or(self.text.len(), |span| span.start);
        let (line, column) = line_column(self.text, offset);
        self.list.borrow_mut().push(ConfigProblem {
            line,
            column,
            key: key.to_string(),
            message: message.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.list.borrow().is_empty()
    }

    pub fn into_vec(self) -> Vec<ConfigProblem> {
        let mut list = self.list.into_inner();
        list.sort_by_key(|p| (p.line == 0, p.line, p.column));
        list
    }
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// One TOML table being read. Every key read is marked; the rest are unknown.
pub struct Section<'t, 'i> {
    name: String,
    table: Option<&'t DeTable<'i>>,
    span: Option<Range<usize>>,
    used: RefCell<BTreeSet<String>>,
    problems: &'t Problems<'t>,
}

impl<'t, 'i> Section<'t, 'i> {
    pub fn root(doc: &'t Spanned<DeTable<'i>>, problems: &'t Problems<'t>) -> Self {
        Section {
            name: String::new(),
            table: Some(doc.get_ref()),
            span: Some(doc.span()),
            used: RefCell::new(BTreeSet::new()),
            problems,
        }
    }

    fn key_path(&self, key: &str) -> String {
        if self.name.is_empty() {
            key.to_string()
        } else {
            format!("{}.{}", self.name, key)
        }
    }

    fn value(&self, key: &str) -> Option<&'t Spanned<DeValue<'i>>> {
        self.used.borrow_mut().insert(key.to_string());
        self.table?.get(key)
    }

    /// Every key of this table, in the order the file has them (each marked
    /// as read): the names of `[table.NAME]` sub-tables.
    pub fn keys_in_file_order(&self) -> Vec<String> {
        let Some(table) = self.table else {
            return Vec::new();
        };
        let mut keys: Vec<(usize, String)> = table
            .iter()
            .map(|(key, _)| (key.span().start, key.get_ref().to_string()))
            .collect();
        keys.sort();
        let mut used = self.used.borrow_mut();
        keys.into_iter()
            .map(|(_, key)| {
                used.insert(key.clone());
                key
            })
            .collect()
    }

    pub fn has(&self, key: &str) -> bool {
        self.table.is_some_and(|t| t.contains_key(key))
    }

    /// Whether the file has `key`, which counts as read either way: for a key
    /// read only when given, so that it is still among the allowed keys that
    /// an unknown key's message lists.
    pub fn given(&self, key: &str) -> bool {
        self.value(key).is_some()
    }

    /// A sub-table; a missing one reads as empty (its keys then take defaults or
    /// report themselves missing).
    pub fn section(&self, key: &str) -> Section<'t, 'i> {
        let name = self.key_path(key);
        let (table, span) = match self.value(key) {
            Some(v) => match v.get_ref() {
                DeValue::Table(t) => (Some(t), Some(v.span())),
                other => {
                    self.problems.at(
                        Some(v.span()),
                        &name,
                        format!("must be a table ([{name}]), found {}", other.type_str()),
                    );
                    (None, Some(v.span()))
                }
            },
            None => (None, None),
        };
        Section {
            name,
            table,
            span,
            used: RefCell::new(BTreeSet::new()),
            problems: self.problems,
        }
    }

    /// A table the file may leave out (`[mqtt]`, `[status]`, `[archive]`,
    /// `[shadow]`, `[modbus]`), handed to `read` when it is there: `Some(None)`
    /// when absent (off), `Some(Some(v))` when read, `None` when `read` found a
    /// problem (recorded). Absent, the key still counts as read (an allowed key).
    pub fn optional<T>(
        &self,
        key: &str,
        read: impl FnOnce(&Section<'t, 'i>) -> Option<T>,
    ) -> Option<Option<T>> {
        let present = self.has(key);
        let section = self.section(key);
        if !present {
            return Some(None);
        }
        read(&section).map(Some)
    }

    fn missing(&self, key: &str, what: &str) {
        let where_ = if self.name.is_empty() {
            String::new()
        } else {
            format!(" in [{}]", self.name)
        };
        self.problems.at(
            self.span.clone(),
            &self.key_path(key),
            format!("is required{where_}: {what}"),
        );
    }

    fn wrong(&self, v: &Spanned<DeValue<'_>>, key: &str, expected: &str) {
        self.problems.at(
            Some(v.span()),
            &self.key_path(key),
            format!("must be {expected}, found {}", describe(v.get_ref())),
        );
    }

    pub fn problem(&self, key: &str, message: impl Into<String>) {
        let span = self
            .table
            .and_then(|t| t.get(key))
            .map(|v| v.span())
            .or(self.span.clone());
        self.problems.at(span, &self.key_path(key), message);
    }

    pub fn opt_str(&self, key: &str) -> Option<String> {
        let v = self.value(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            _ => {
                self.wrong(v, key, "a string");
                None
            }
        }
    }

    pub fn str_required(&self, key: &str, what: &str) -> Option<String> {
        if !self.has(key) {
            self.missing(key, what);
            return None;
        }
        self.opt_str(key)
    }

    pub fn str_or(&self, key: &str, default: &str) -> String {
        self.opt_str(key).unwrap_or_else(|| default.to_string())
    }

    /// A string that must be one of `allowed`; returns its index in `allowed`.
    pub fn choice(&self, key: &str, allowed: &[&str], default: Option<usize>) -> Option<usize> {
        if !self.has(key) {
            if default.is_none() {
                self.missing(key, &format!("one of {}", quoted(allowed)));
            }
            self.value(key);
            return default;
        }
        let v = self.value(key)?;
        match v.get_ref() {
            DeValue::String(s) => match allowed.iter().position(|a| *a == s.as_ref()) {
                Some(i) => Some(i),
                None => {
                    let guess = super::suggest::closest(s, allowed.iter().copied())
                        .map_or(String::new(), |g| format!(" (did you mean \"{g}\"?)"));
                    self.problems.at(
                        Some(v.span()),
                        &self.key_path(key),
                        format!(
                            "\"{s}\" is not allowed{guess}; use one of {}",
                            quoted(allowed)
                        ),
                    );
                    None
                }
            },
            _ => {
                self.wrong(v, key, &format!("one of {}", quoted(allowed)));
                None
            }
        }
    }

    pub fn int_in(
        &self,
        key: &str,
        range: RangeInclusive<i64>,
        default: Option<i64>,
    ) -> Option<i64> {
        if !self.has(key) {
            if default.is_none() {
                self.missing(
                    key,
                    &format!("an integer from {} to {}", range.start(), range.end()),
                );
            }
            self.value(key);
            return default;
        }
        let v = self.value(key)?;
        let expected = format!("an integer from {} to {}", range.start(), range.end());
        match v.get_ref() {
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) if range.contains(&n) => Some(n),
                _ => {
                    self.problems.at(
                        Some(v.span()),
                        &self.key_path(key),
                        format!("{} is out of range; use {expected}", i.as_str()),
                    );
                    None
                }
            },
            _ => {
                self.wrong(v, key, &expected);
                None
            }
        }
    }

    pub fn float_in(
        &self,
        key: &str,
        range: RangeInclusive<f64>,
        default: Option<f64>,
    ) -> Option<f64> {
        if !self.has(key) {
            if default.is_none() {
                self.missing(
                    key,
                    &format!("a number from {} to {}", range.start(), range.end()),
                );
            }
            self.value(key);
            return default;
        }
        let v = self.value(key)?;
        let expected = format!("a number from {} to {}", range.start(), range.end());
        let n = match v.get_ref() {
            DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .ok()
                .map(|n| n as f64),
            _ => {
                self.wrong(v, key, &expected);
                return None;
            }
        };
        match n {
            Some(n) if range.contains(&n) => Some(n),
            _ => {
                self.problems.at(
                    Some(v.span()),
                    &self.key_path(key),
                    format!("value is out of range; use {expected}"),
                );
                None
            }
        }
    }

    /// A number in `range` or the string "auto": `Some(None)` for "auto",
    /// `Some(Some(n))` for a number, `None` when absent or wrong (recorded).
    pub fn float_or_auto(&self, key: &str, range: RangeInclusive<f64>) -> Option<Option<f64>> {
        let v = self.value(key)?;
        let expected = format!(
            "a number from {} to {} or \"auto\"",
            range.start(),
            range.end()
        );
        match v.get_ref() {
            DeValue::String(s) if s.as_ref() == "auto" => Some(None),
            DeValue::Float(_) | DeValue::Integer(_) => self.float_in(key, range, None).map(Some),
            _ => {
                self.wrong(v, key, &expected);
                None
            }
        }
    }

    pub fn bool_or(&self, key: &str, default: bool) -> bool {
        let Some(v) = self.value(key) else {
            return default;
        };
        match v.get_ref() {
            DeValue::Boolean(b) => *b,
            _ => {
                self.wrong(v, key, "true or false");
                default
            }
        }
    }

    /// Three numbers in `range`, one per RGB channel.
    pub fn triple_in(
        &self,
        key: &str,
        range: RangeInclusive<f64>,
        default: [f32; 3],
    ) -> Option<[f32; 3]> {
        let Some(v) = self.value(key) else {
            return Some(default);
        };
        let expected = format!(
            "an array of 3 numbers (R, G, B), each from {} to {}",
            range.start(),
            range.end()
        );
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong(v, key, &expected);
            return None;
        };
        let numbers: Vec<Option<f64>> = items
            .iter()
            .map(|item| match item.get_ref() {
                DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
                DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                    .ok()
                    .map(|n| n as f64),
                _ => None,
            })
            .collect();
        match numbers.as_slice() {
            [Some(a), Some(b), Some(c)] if [a, b, c].iter().all(|n| range.contains(n)) => {
                Some([*a as f32, *b as f32, *c as f32])
            }
            _ => {
                self.problems.at(
                    Some(v.span()),
                    &self.key_path(key),
                    format!("must be {expected}"),
                );
                None
            }
        }
    }

    /// An array of integers, each in `range`, of exactly `len` items when
    /// `len` is given: `Some(None)` when the key is absent, `None` (a
    /// problem recorded) when it is not such an array.
    pub fn int_list(
        &self,
        key: &str,
        len: Option<usize>,
        range: RangeInclusive<i64>,
        what: &str,
    ) -> Option<Option<Vec<i64>>> {
        let Some(v) = self.value(key) else {
            return Some(None);
        };
        let expected = match len {
            Some(n) => format!(
                "an array of {n} integers from {} to {} ({what})",
                range.start(),
                range.end()
            ),
            None => format!(
                "an array of integers from {} to {} ({what})",
                range.start(),
                range.end()
            ),
        };
        let numbers = integers(v.get_ref())
            .filter(|n| len.is_none_or(|len| n.len() == len))
            .filter(|n| n.iter().all(|i| range.contains(i)));
        if numbers.is_none() {
            self.problems.at(
                Some(v.span()),
                &self.key_path(key),
                format!("must be {expected}"),
            );
        }
        numbers.map(Some)
    }

    /// An array of arrays of `len` integers each, each in `range`:
    /// `Some(None)` when the key is absent, `None` (a problem recorded,
    /// naming the item) when it is not such an array.
    pub fn int_rows(
        &self,
        key: &str,
        len: usize,
        range: RangeInclusive<i64>,
        what: &str,
    ) -> Option<Option<Vec<Vec<i64>>>> {
        let Some(v) = self.value(key) else {
            return Some(None);
        };
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong(v, key, &format!("an array of [{what}] arrays"));
            return None;
        };
        let mut rows = Some(Vec::with_capacity(items.len()));
        for (i, item) in items.iter().enumerate() {
            let row = integers(item.get_ref())
                .filter(|n| n.len() == len && n.iter().all(|x| range.contains(x)));
            match (row, rows.as_mut()) {
                (Some(row), Some(rows)) => rows.push(row),
                (Some(_), None) => {}
                (None, _) => {
                    self.problems.at(
                        Some(item.span()),
                        &self.key_path(key),
                        format!(
                            "item {} must be [{what}]: {len} integers from {} to {}",
                            i + 1,
                            range.start(),
                            range.end()
                        ),
                    );
                    rows = None;
                }
            }
        }
        rows.map(Some)
    }

    /// An array of strings; `Some(vec![])` when the key is absent, `None`
    /// (a problem recorded) when it is not an array of strings.
    pub fn str_list(&self, key: &str, what: &str) -> Option<Vec<String>> {
        let Some(v) = self.value(key) else {
            return Some(Vec::new());
        };
        let strings = match v.get_ref() {
            DeValue::Array(items) => items
                .iter()
                .map(|item| match item.get_ref() {
                    DeValue::String(s) => Some(s.to_string()),
                    _ => None,
                })
                .collect::<Option<Vec<String>>>(),
            _ => None,
        };
        if strings.is_none() {
            self.wrong(v, key, &format!("an array of strings ({what})"));
        }
        strings
    }

    /// Reports every key in this table that no reader asked for.
    pub fn finish(&self) {
        let Some(table) = self.table else { return };
        let used = self.used.borrow();
        let known: Vec<&str> = used.iter().map(String::as_str).collect();
        for (key, value) in table.iter() {
            let name: &str = key.get_ref().as_ref();
            if !used.contains(name) {
                let where_ = if self.name.is_empty() {
                    "at the top level".to_string()
                } else {
                    format!("in [{}]", self.name)
                };
                // A table is a section: `[mqqt]` reads as one, not as a key.
                let is_table = matches!(value.get_ref(), DeValue::Table(_));
                let what = if is_table {
                    format!("unknown section [{}]", self.key_path(name))
                } else {
                    "unknown key".to_string()
                };
                let guess = super::suggest::closest(name, known.iter().copied()).map_or(
                    String::new(),
                    |g| {
                        if is_table {
                            format!(" (did you mean [{}]?)", self.key_path(g))
                        } else {
                            format!(" (did you mean `{g}`?)")
                        }
                    },
                );
                self.problems.at(
                    Some(key.span()),
                    &self.key_path(name),
                    format!("{what} {where_}{guess}; allowed keys: {}", known.join(", ")),
                );
            }
        }
    }
}

/// The integers of an array value; `None` for anything else.
fn integers(v: &DeValue<'_>) -> Option<Vec<i64>> {
    let DeValue::Array(items) = v else {
        return None;
    };
    items
        .iter()
        .map(|item| match item.get_ref() {
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).ok(),
            _ => None,
        })
        .collect()
}

fn describe(v: &DeValue<'_>) -> String {
    match v {
        DeValue::String(s) => format!("the string \"{s}\""),
        DeValue::Integer(i) => format!("the integer {}", i.as_str()),
        DeValue::Float(f) => format!("the number {}", f.as_str()),
        DeValue::Boolean(b) => format!("the boolean {b}"),
        other => other.type_str().to_string(),
    }
}

fn quoted(allowed: &[&str]) -> String {
    allowed
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ")
}
