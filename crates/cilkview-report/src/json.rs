//! `--json FILE`: the report as JSON (schema: docs/json-schema.md).

use std::path::{Path, PathBuf};

use crate::{Artifact, Destination, ExportError, Exporter, RunReport};

pub struct JsonExporter {
    pub path: PathBuf,
}

impl Exporter for JsonExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::File(self.path.clone())]
    }

    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError> {
        let mut bytes = serde_json::to_vec_pretty(report)?;
        bytes.push(b'\n');
        Ok(vec![Artifact {
            destination: Destination::File(self.path.clone()),
            bytes,
        }])
    }
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
