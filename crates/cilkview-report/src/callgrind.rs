//! `PREFIX.callgrind` of `--profile PREFIX`: the profile in the Callgrind format (Valgrind manual,
//! "Callgrind Format Specification"), so KCachegrind/qcachegrind and `callgrind_annotate` show it
//! with its call graph.
//!
//! Each call site is a "function" (named `function location`, at the site's file and line), plus
//! one for the code under no call site (named after the program, in file `???`: no source). Two
//! events: `Work` and `Span`.
//! - self cost: `Work` = the site's local work (all invocations, nested call sites excluded),
//!   `Span` = its local span on span (the critical path's instructions that ran there);
//! - a call from site A to site B (B invoked directly under A): `calls` = B's invocations there,
//!   inclusive cost = B's work and span on work there (top-call-site invocations).
//!
//! So the self `Span` costs add up to the span, and the self `Work` costs to the work.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;

/// callgrind's name for code of no known source file (valgrind's own spelling).
const UNKNOWN_FILE: &str = "???";

use crate::{prefixed, Artifact, Destination, ExportError, Exporter, RunReport};

pub struct CallgrindExporter {
    pub prefix: PathBuf,
}

/// `file:line` (or `file:line @0xaddress`, a site told apart from others on its line) →
/// (file, line); anything else has no file and line 0.
fn file_line(location: &str) -> (String, u64) {
    let location = location.split_once(" @").map_or(location, |(l, _)| l);
    match location.rsplit_once(':') {
        Some((file, line)) if !file.is_empty() => match line.parse() {
            Ok(l) => (file.to_string(), l),
            Err(_) => ("???".into(), 0),
        },
        _ => ("???".into(), 0),
    }
}

#[derive(Default)]
struct Node {
    self_work: u64,
    self_span: u64,
    /// callee → (calls, inclusive work, inclusive span)
    calls: BTreeMap<usize, (u64, u64, u64)>,
}

impl CallgrindExporter {
    /// The Callgrind text, or an empty string without a profile.
    pub fn to_callgrind(report: &RunReport) -> String {
        let (Some(sites), Some(contexts)) = (
            report.call_sites.as_deref(),
            report.call_contexts.as_deref(),
        ) else {
            return String::new();
        };
        // Node 0 is the root; node s + 1 is site s.
        let mut nodes: Vec<Node> = (0..=sites.len()).map(|_| Node::default()).collect();
        let node_of = |c: usize| contexts[c].site.map_or(0, |s| s + 1);
        for (i, c) in contexts.iter().enumerate() {
            let n = &mut nodes[node_of(i)];
            n.self_work += c.local_work;
            n.self_span += c.local_on_span.span;
            if let Some(p) = c.parent {
                let e = nodes[node_of(p)]
                    .calls
                    .entry(node_of(i))
                    .or_insert((0, 0, 0));
                e.0 += c.invocations;
                e.1 += c.on_work.work;
                e.2 += c.on_work.span;
            }
        }
        let subject = report.profiled_subject();
        let name = |n: usize| -> (String, String, u64) {
            if n == 0 {
                // No source file: `???`, as valgrind writes it (the program's own path made
                // callgrind_annotate read the binary as source).
                (
                    format!("{subject} (outside call sites)"),
                    UNKNOWN_FILE.to_string(),
                    0,
                )
            } else {
                let s = &sites[n - 1];
                let (file, line) = file_line(&s.location);
                (s.label(), file, line)
            }
        };
        let mut out = String::new();
        let _ = writeln!(out, "# callgrind format");
        let _ = writeln!(out, "version: 1");
        let _ = writeln!(out, "creator: cilkview-rs");
        let _ = writeln!(out, "cmd: {} {}", report.program, report.args.join(" "));
        let _ = writeln!(out, "positions: line");
        let _ = writeln!(out, "events: Work Span");
        let total = report.profiled();
        let _ = writeln!(out, "summary: {} {}", total.work, total.span);
        for (i, n) in nodes.iter().enumerate() {
            let (fname, file, line) = name(i);
            let _ = writeln!(out, "\nfl={file}\nfn={fname}");
            let _ = writeln!(out, "{line} {} {}", n.self_work, n.self_span);
            for (&callee, &(calls, work, span)) in &n.calls {
                let (cname, cfile, cline) = name(callee);
                let _ = writeln!(out, "cfl={cfile}\ncfn={cname}");
                let _ = writeln!(out, "calls={calls} {cline}");
                let _ = writeln!(out, "{cline} {work} {span}");
            }
        }
        let _ = writeln!(out, "\ntotals: {} {}", total.work, total.span);
        out
    }
}

impl Exporter for CallgrindExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::File(prefixed(&self.prefix, "callgrind"))]
    }

    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError> {
        Ok(vec![Artifact {
            destination: Destination::File(prefixed(&self.prefix, "callgrind")),
            bytes: Self::to_callgrind(report).into_bytes(),
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::file_line;

    #[test]
    fn a_site_told_apart_by_its_address_keeps_its_file_and_line() {
        assert_eq!(file_line("fib.c:17 @0x11c5"), ("fib.c".to_string(), 17));
        assert_eq!(file_line("src/fib.c:9"), ("src/fib.c".to_string(), 9));
        assert_eq!(file_line("fib+0x12").1, 0);
    }
}
