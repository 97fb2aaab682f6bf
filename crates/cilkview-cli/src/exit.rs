//! Exit statuses of the tool's own failures, out of the way of the program's: as `env`,
//! `timeout` and `nice` do, 125 when cilkview-rs itself fails (bad options, bad input, an
//! unwritable output), 126 when PROGRAM was found but cannot be executed, 127 when it was not
//! found. Otherwise the status is the program's own (128 + N after signal N), or 1 when it
//! succeeded but a `--fail-below` gate failed.

use std::fmt;
use std::process::ExitCode;

/// cilkview-rs itself failed: a usage error or anything it could not do.
pub const TOOL_FAILED: u8 = 125;
/// PROGRAM was found but cannot be executed (a directory, no execute permission, …).
pub const NOT_EXECUTABLE: u8 = 126;
/// PROGRAM (or its `#!` interpreter) was not found.
pub const NOT_FOUND: u8 = 127;

/// The exit statuses, as `--help` and the man page state them.
pub const EXIT_STATUS_HELP: &str = "\
Exit status:
  the program's own    its exit status, or 128 + N when signal N killed it
  1                    the program succeeded but a --fail-below gate failed
  125                  cilkview-rs itself failed (bad option, bad input, unwritable output)
  126                  PROGRAM was found but cannot be executed
  127                  PROGRAM (or its #! interpreter) was not found";

/// A PROGRAM that cannot be started: its message and the status that says why.
#[derive(Debug)]
pub struct Unrunnable {
    pub message: String,
    /// [`NOT_FOUND`] or [`NOT_EXECUTABLE`].
    pub status: u8,
}

impl Unrunnable {
    pub fn not_found(message: String) -> Unrunnable {
        Unrunnable {
            message,
            status: NOT_FOUND,
        }
    }

    pub fn not_executable(message: String) -> Unrunnable {
        Unrunnable {
            message,
            status: NOT_EXECUTABLE,
        }
    }
}

impl fmt::Display for Unrunnable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Unrunnable {}

/// The exit status of a failure of the tool: 126 or 127 when the program cannot be started,
/// 125 otherwise.
pub fn of_error(e: &anyhow::Error) -> ExitCode {
    let status = e
        .chain()
        .find_map(|c| c.downcast_ref::<Unrunnable>())
        .map_or(TOOL_FAILED, |u| u.status);
    ExitCode::from(status)
}
