//! `--json FILE`: the report as JSON (docs/json-schema.md; its JSON Schema is [`json_schema`],
//! printed by `cilkview-rs schema`).

use std::path::{Path, PathBuf};

use crate::{Artifact, Destination, ExportError, Exporter, RunReport};

/// `--json FILE` (`-`: standard output) of an analysis, or of a benchmark (`bench --json`): the
/// report's serde form, pretty-printed.
pub struct JsonExporter {
    pub path: PathBuf,
}

impl<R: serde::Serialize + ?Sized> Exporter<R> for JsonExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::of_path(&self.path)]
    }

    fn render(&self, report: &R) -> Result<Vec<Artifact>, ExportError> {
        let mut bytes = to_json(report)?;
        bytes.push(b'\n');
        Ok(vec![Artifact {
            destination: Destination::of_path(&self.path),
            bytes,
        }])
    }
}

/// `value` as indented JSON, but an array inside an array on one line (the rows of
/// `call_contexts`: one line per context).
pub fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, RowsFormatter::default());
    value.serialize(&mut ser)?;
    Ok(out)
}

/// serde_json's pretty format (two spaces), except that an array whose parent is an array, and
/// everything in it, is written on one line.
#[derive(Default)]
struct RowsFormatter {
    indent: usize,
    has_value: bool,
    /// The open containers: (on one line, is an array).
    open: Vec<(bool, bool)>,
}

impl RowsFormatter {
    fn inline(&self) -> bool {
        self.open.last().is_some_and(|&(inline, _)| inline)
    }

    fn begin<W: ?Sized + std::io::Write>(&mut self, w: &mut W, array: bool) -> std::io::Result<()> {
        let inline = self.inline() || (array && self.open.last().is_some_and(|&(_, a)| a));
        self.open.push((inline, array));
        if !inline {
            self.indent += 1;
            self.has_value = false;
        }
        w.write_all(if array { b"[" } else { b"{" })
    }

    fn end<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        let (inline, array) = self.open.pop().unwrap_or((false, true));
        if !inline {
            self.indent -= 1;
            if self.has_value {
                self.newline(w)?;
            }
        }
        w.write_all(if array { b"]" } else { b"}" })
    }

    fn newline<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b"\n")?;
        for _ in 0..self.indent {
            w.write_all(b"  ")?;
        }
        Ok(())
    }

    fn item<W: ?Sized + std::io::Write>(&self, w: &mut W, first: bool) -> std::io::Result<()> {
        if self.inline() {
            return w.write_all(if first { b"" } else { b", " });
        }
        if !first {
            w.write_all(b",")?;
        }
        self.newline(w)
    }
}

impl serde_json::ser::Formatter for RowsFormatter {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.begin(w, true)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.end(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.begin(w, false)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.end(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// The JSON Schema (draft 2020-12) of what [`JsonExporter`] writes, derived from [`RunReport`]'s
/// serde form.
pub fn json_schema() -> serde_json::Value {
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<RunReport>();
    schema.insert("title".into(), "cilkview-rs report (run --json)".into());
    schema.insert(
        "description".into(),
        format!(
            "The report of `cilkview-rs run --json FILE` (and `attach --json`), format version \
             {}: work, span, burdened span, parallelism, the speedup table, regions and the \
             call-site profile of one program.",
            crate::JSON_VERSION
        )
        .into(),
    );
    schema.to_value()
}

/// Errors reading a saved JSON report.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a cilkview-rs JSON report: {source} (write one with `cilkview-rs run --json FILE`)")]
    Format {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// Reads a report written by [`JsonExporter`].
pub fn read_json(path: &Path) -> Result<RunReport, ReadError> {
    let text = std::fs::read(path).map_err(|source| ReadError::Io {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|source| ReadError::Format {
        path: path.to_owned(),
        source,
    })
}
