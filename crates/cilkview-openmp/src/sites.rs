//! Names for the thread queries' call sites.

use std::path::Path;

use cilkview_symbols::Symbolizer;

use crate::ThreadQuery;

/// `function at file:line` (or `symbol+offset`) of a thread query; `program` stands for a file
/// the library named by a path that does not exist (the main program is named by argv\[0\]).
pub fn name_thread_query(query: &ThreadQuery, program: &Path) -> String {
    let file = if query.file.is_file() {
        query.file.as_path()
    } else {
        program
    };
    match Symbolizer::open(file) {
        Ok(symbols) => {
            let symbol = symbols.lookup(query.offset);
            format!("{} ({})", symbol.function_name(), symbol.location())
        }
        Err(_) => format!("{}+{:#x}", file.display(), query.offset),
    }
}
