//! The README is for a newcomer: a marked program's code within its first 600 words,
//! well under 30 KB, the test command kept; and no relative link of the README or of docs/ points
//! at a file that is not there (reference material moved from the README to docs/).

use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Markdown outside its fenced code blocks.
fn prose(markdown: &str) -> String {
    let mut inside = false;
    let mut out = String::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            inside = !inside;
        } else if !inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn the_readme_reaches_a_marked_program_in_600_words() {
    let readme = read(&repo_root().join("README.md"));
    assert!(readme.len() < 20_000, "README.md is {} bytes", readme.len());
    let code = readme.find("```c\n").expect("a C code block");
    assert!(
        readme[code..].contains("cv_spawn("),
        "the first C block is marked code"
    );
    let words = readme[..code].split_whitespace().count();
    assert!(words <= 600, "{words} words before the marked code");
    for step in ["install", "mark", "compile", "run", "read"] {
        let heading = readme
            .lines()
            .filter(|l| l.starts_with('#'))
            .any(|l| l.to_lowercase().contains(step));
        assert!(heading, "a heading for `{step}`");
    }
    assert!(
        readme.contains("\nscripts/test.sh "),
        "the README's test command"
    );
}

/// Sentences of at most 30 words and table cells of one line (a row is one line in Markdown;
/// what is checked is that no row runs past 30 words in a cell).
#[test]
fn the_readme_says_things_briefly() {
    let text = prose(&read(&repo_root().join("README.md")));
    let mut long = Vec::new();
    for line in text.lines() {
        let pieces: Vec<&str> = if line.starts_with('|') {
            line.split(" | ").collect()
        } else {
            line.split(". ").collect()
        };
        for piece in pieces {
            if piece.split_whitespace().count() > 30 {
                long.push(piece.to_string());
            }
        }
    }
    assert!(long.is_empty(), "over 30 words:\n{}", long.join("\n"));
}

#[test]
fn relative_links_of_the_readme_and_docs_resolve() {
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let mut broken = Vec::new();
    for file in &files {
        let text = prose(&read(file));
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let path = file.parent().unwrap().join(target);
            if !path.exists() {
                broken.push(format!("{}: {target}", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
