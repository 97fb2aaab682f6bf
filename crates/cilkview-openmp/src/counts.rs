//! What the preload library saw, from the file it writes at the program's exit.

use std::path::PathBuf;

use crate::wire::{Warning, COUNTS_HEADER, WARNINGS};

/// Code that asked for the thread number or count inside a parallel region: a static loop
/// (gcc computes its chunks from them, so no chunk is visible) or code split by thread id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadQuery {
    /// The image (program or library) the call is in.
    pub file: PathBuf,
    /// File-relative address of the call (as cilkview-symbols takes it).
    pub offset: u64,
    pub calls: u64,
}

/// The library's counters, in its order (`tasks`, `undeferred_tasks`, `loops`, `chunks`, …;
/// docs/openmp.md), and the thread queries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub counters: Vec<(String, u64)>,
    pub thread_queries: Vec<ThreadQuery>,
    /// What the library could not do as asked (`crate::wire::WARNINGS`, by name).
    pub warnings: Vec<&'static Warning>,
}

impl Counts {
    /// Reads the file's text: [`COUNTS_HEADER`], `NAME VALUE` lines, `warning NAME` lines,
    /// `thread_query CALLS 0xOFFSET FILE` lines, `end`. `None` when it is not complete (the program ended without
    /// running its exit handlers, e.g. killed or `_exit`).
    pub fn parse(text: &str) -> Option<Counts> {
        let mut lines = text.lines();
        if lines.next()? != COUNTS_HEADER {
            return None;
        }
        let mut counts = Counts::default();
        for line in lines {
            if line == "end" {
                return Some(counts);
            }
            if let Some(name) = line.strip_prefix("warning ") {
                counts
                    .warnings
                    .extend(WARNINGS.iter().filter(|w| w.name == name));
            } else if let Some(rest) = line.strip_prefix("thread_query ") {
                let mut f = rest.splitn(3, ' ');
                let calls = f.next()?.parse().ok()?;
                let offset = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
                let file = PathBuf::from(f.next()?);
                counts.thread_queries.push(ThreadQuery {
                    file,
                    offset,
                    calls,
                });
            } else {
                let (name, value) = line.split_once(' ')?;
                counts.counters.push((name.to_owned(), value.parse().ok()?));
            }
        }
        None
    }

    /// The counter `name` (0 when absent).
    pub fn get(&self, name: &str) -> u64 {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |&(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_complete_file_parses_and_a_cut_one_does_not() {
        let text = "cilkview-openmp 1\ntasks 33\nloops 2\nwarning team_no_memory\n\
                    thread_query 4 0x1a2b /tmp/a b\nend\n";
        let c = Counts::parse(text).unwrap();
        assert_eq!(c.get("tasks"), 33);
        assert_eq!(c.get("loops"), 2);
        assert_eq!(c.get("absent"), 0);
        assert_eq!(
            c.thread_queries,
            [ThreadQuery {
                file: "/tmp/a b".into(),
                offset: 0x1a2b,
                calls: 4
            }]
        );
        assert_eq!(c.warnings, [&crate::wire::TEAM_NO_MEMORY]);
        assert_eq!(Counts::parse(&text[..text.len() - 4]), None);
        assert_eq!(Counts::parse("something else\nend\n"), None);
    }
}
