//! PROGRAM of `run`: found as `execvp` would find it, and checked before anything runs (a
//! regular executable file, a `#!` interpreter that exists, no output file that is the program).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cilkview_report::ExportOptions;

use crate::exit::Unrunnable;

/// Finds the program as `execvp` does (a name without a slash is searched in PATH only, never in
/// the current directory) and checks that it can be run, before anything runs.
pub fn resolve(program: &OsStr) -> Result<PathBuf> {
    let path = if program.as_bytes().contains(&b'/') {
        PathBuf::from(program)
    } else {
        which::which(program).map_err(|_| {
            Unrunnable::not_found(format!(
                "program `{}` not found in PATH (give a path such as ./{0})",
                Path::new(program).display()
            ))
        })?
    };
    check_file(&path, "")?;
    check_interpreter(&path)?;
    Ok(path)
}

/// `path` is a regular file that can be executed. `what` prefixes the messages (e.g. "the
/// interpreter of x.sh, ").
fn check_file(path: &Path, what: &str) -> Result<()> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Unrunnable::not_found(format!(
                "{what}{}: no such file (check the path)",
                path.display()
            ))
            .into())
        }
        Err(e) => return Err(e).with_context(|| format!("cannot run {what}{}", path.display())),
    };
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err(Unrunnable::not_executable(format!(
            "{what}{} is a directory, not a program",
            path.display()
        ))
        .into());
    }
    if !kind.is_file() {
        let is = if kind.is_fifo() {
            "a FIFO (named pipe)"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(Unrunnable::not_executable(format!(
            "{what}{} is {is}, not a program",
            path.display()
        ))
        .into());
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(Unrunnable::not_executable(format!(
            "{what}{} is not executable (chmod +x it, or build it with cc)",
            path.display()
        ))
        .into());
    }
    Ok(())
}

/// A `#!` script's interpreter exists and is executable (else the kernel's ENOENT would name the
/// script, which does exist).
fn check_interpreter(script: &Path) -> Result<()> {
    if let Some((interp, _)) = cilkview_analysis::read_shebang(script) {
        check_file(
            &interp,
            &format!("{}: its interpreter (on its #! line) ", script.display()),
        )?;
    }
    Ok(())
}

/// Refuses, before running, an output file that is the program itself (same device and inode):
/// writing the report would replace the program.
pub fn refuse_overwriting(program: &Path, outputs: &ExportOptions) -> Result<()> {
    let Ok(prog) = std::fs::metadata(program) else {
        return Ok(());
    };
    for path in outputs.files() {
        if let Ok(out) = std::fs::metadata(&path) {
            if out.dev() == prog.dev() && out.ino() == prog.ino() {
                bail!(
                    "output file {} is the program {} itself; writing the report would replace \
                     it (choose another output path)",
                    path.display(),
                    program.display()
                );
            }
        }
    }
    Ok(())
}

/// Refuses, before running, a region label (`--plot-region`, `--profile-region`,
/// `--fail-below region:LABEL:…`)
/// that no marks of the program or of the libraries it links define: a typo is found now, not
/// after the run. Programs whose labels cannot be known beforehand (scripts, `dlopen`) are not
/// checked. `name` names the program in the message.
pub fn check_region_labels(
    program: &Path,
    preloaded: Option<&Path>,
    name: &str,
    output: &crate::cli::OutputOptions,
) -> Result<()> {
    let named = output
        .plot_region
        .iter()
        .map(|l| (l, "--plot-region"))
        .chain(
            output
                .profile
                .profile_region
                .iter()
                .map(|l| (l, "--profile-region")),
        )
        .chain(
            output
                .fail_below
                .iter()
                .filter_map(|g| g.region.as_ref().map(|l| (l, "--fail-below"))),
        )
        .chain(output.what_if.region_labels().map(|l| (l, "--what-if")));
    let mut known: Option<Option<std::collections::BTreeSet<String>>> = None;
    for (label, option) in named {
        let labels = match &known {
            Some(labels) => labels,
            None => known.insert(
                [Some(program), preloaded]
                    .into_iter()
                    .flatten()
                    .map(cilkview_analysis::region_labels)
                    .collect::<Option<Vec<_>>>()
                    .map(|sets| sets.into_iter().flatten().collect()),
            ),
        };
        let Some(labels) = labels else {
            return Ok(());
        };
        if !labels.contains(label) {
            let its = if labels.is_empty() {
                "it has no cv_region_begin".to_string()
            } else {
                let list: Vec<&str> = labels.iter().map(String::as_str).collect();
                format!("its regions: {}", list.join(", "))
            };
            bail!("{option} names region \"{label}\", which {name} never reports ({its})");
        }
    }
    Ok(())
}
