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
        let mut bytes = serde_json::to_vec_pretty(report)?;
        bytes.push(b'\n');
        Ok(vec![Artifact {
            destination: Destination::of_path(&self.path),
            bytes,
        }])
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
