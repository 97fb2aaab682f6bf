//! `cilkview-rs schema [run|bench]`: the JSON Schema of `run --json` (and `attach --json`) or of
//! `bench --json`, derived from the report models (docs/json-schema.md explains the keys).

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SchemaOf {
    /// The report of `run --json` and `attach --json`.
    Run,
    /// The benchmark of `bench --json`.
    Bench,
}

#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// Which JSON output.
    #[arg(value_enum, default_value_t = SchemaOf::Run)]
    pub of: SchemaOf,
}

pub fn schema(args: SchemaArgs) -> Result<ExitCode> {
    let schema = match args.of {
        SchemaOf::Run => cilkview_report::json_schema(),
        SchemaOf::Bench => cilkview_bench::json_schema(),
    };
    let mut text = serde_json::to_string_pretty(&schema)?;
    text.push('\n');
    crate::print_stdout(text.as_bytes(), "the schema")
}
