//! The shape of the documentation, checked like code:
//!
//! * README.md stays a front page: at most [`README_MAX_WORDS`] words, no line longer than
//!   [`README_MAX_LINE`] characters, and its first code block holds the two commands a newcomer
//!   runs first. A word is a whitespace-separated token of the whole file (code blocks, tables
//!   and link targets included), as `wc -w` counts them.
//! * Every page `docs/*.md` is linked from the index, docs/README.md (the logs under
//!   docs/gpu-runs/ are not pages).
//! * Every relative link in README.md and docs/*.md (images and reference definitions included,
//!   code blocks and code spans excluded) names a file or folder of the repository, and a
//!   `#anchor` names a heading of the target page, by GitHub's rule for heading ids: the
//!   heading's text lowercased, every character but letters, digits, spaces, `-` and `_`
//!   dropped, spaces turned into `-`, and `-1`, `-2`, ... added to repeated ids.
//!
//! The files are read from the source tree. Under cargo (`CARGO_MANIFEST_DIR` set at run time)
//! the tree must be there; a test binary carried to a machine without it (a GPU host or Jetson
//! bundle) skips these checks and says so.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

/// Most words README.md may hold.
const README_MAX_WORDS: usize = 1500;
/// Most characters on one line of README.md.
const README_MAX_LINE: usize = 300;
/// The commands of README.md's first code block, in order (each line up to its comment).
const FIRST_COMMANDS: [&str; 2] = ["cargo run --example camera_zero_copy", "cargo test"];

/// The repository root, or `None` where the test runs without the source tree.
fn root() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if dir.join("README.md").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CARGO_MANIFEST_DIR").is_none(),
        "run by cargo, but {} has no README.md",
        dir.display()
    );
    eprintln!("the source tree ({}) is not on this machine: documentation checks skipped", dir.display());
    None
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Markdown pages directly in `docs/`, as names relative to it.
fn doc_pages(root: &Path) -> Vec<String> {
    let mut pages: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md"))
        .collect();
    pages.sort();
    pages
}

/// Whitespace-separated tokens of the whole text.
fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// `(line number, characters)` of every line longer than `max` characters.
fn long_lines(text: &str, max: usize) -> Vec<(usize, usize)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.chars().count())).filter(|&(_, n)| n > max).collect()
}

/// Whether a line opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    line.len() - t.len() < 4 && (t.starts_with("```") || t.starts_with("~~~"))
}

/// The lines outside fenced code blocks, with their line numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut inside = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if is_fence(line) {
            inside = !inside;
        } else if !inside {
            out.push((i + 1, line));
        }
    }
    out
}

/// The lines of the first fenced code block.
fn first_code_block(text: &str) -> Vec<&str> {
    text.lines().skip_while(|l| !is_fence(l)).skip(1).take_while(|l| !is_fence(l)).collect()
}

/// A line with its code spans removed.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + ticks..];
        let closing = "`".repeat(ticks);
        match after.find(&closing) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                out.push_str(&rest[start..]);
                return out;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every link target of the text, with its line number: inline links and images `[..](target)`
/// and reference definitions `[label]: target`, outside code blocks and code spans.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        let line = without_code_spans(line);
        let t = line.trim_start();
        if let Some(close) = t.strip_prefix('[').and_then(|r| r.find(']')).map(|c| c + 1) {
            if let Some(def) = t[close + 1..].strip_prefix(':') {
                if let Some(target) = def.split_whitespace().next() {
                    out.push((n, target.trim_matches(['<', '>']).to_string()));
                }
                continue;
            }
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            // The target ends at the parenthesis that closes the link (balanced inside).
            let mut depth = 0usize;
            let mut end = after.len();
            for (i, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = i;
                        break;
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            let inner = after[..end].trim();
            let target = inner.split_whitespace().next().unwrap_or("").trim_matches(['<', '>']);
            out.push((n, target.to_string()));
            rest = &after[end.min(after.len())..];
        }
    }
    out
}

/// A heading's id as GitHub makes it, before repeats are numbered.
fn slug(heading: &str) -> String {
    // Links in a heading keep their text only.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        match rest[open..].find("](").map(|m| open + m) {
            Some(mid) if !rest[open + 1..mid].contains('[') => {
                let close = rest[mid..].find(')').map_or(rest.len(), |c| mid + c + 1);
                text.push_str(&rest[..open]);
                text.push_str(&rest[open + 1..mid]);
                rest = &rest[close..];
            }
            _ => {
                text.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The ids of every heading of a Markdown page.
fn anchors(text: &str) -> HashSet<String> {
    let mut ids = HashSet::new();
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    for (_, line) in prose_lines(text) {
        let t = line.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || line.len() - t.len() > 3 {
            continue;
        }
        let Some(heading) = t[hashes..].strip_prefix(' ') else { continue };
        let heading = heading.trim_end().trim_end_matches('#');
        let base = slug(heading);
        let n = seen.entry(base.clone()).or_insert(0);
        ids.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
        *n += 1;
    }
    ids
}

/// `path` with `.` and `..` folded away, or `None` where it climbs above its start.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            _ => return None,
        }
    }
    Some(out)
}

/// The problems of the relative links of `page` (a path relative to `root`).
fn broken_links(root: &Path, page: &str) -> Vec<String> {
    let text = read(&root.join(page));
    let dir = Path::new(page).parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    for (line, target) in links(&text) {
        let at = format!("{page}:{line}: link `{target}`");
        if target.is_empty() {
            problems.push(format!("{at}: empty target"));
            continue;
        }
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let file = if path.is_empty() { PathBuf::from(page) } else { dir.join(path) };
        let Some(file) = normalise(&file) else {
            problems.push(format!("{at}: leads outside the repository"));
            continue;
        };
        let full = root.join(&file);
        if !full.exists() {
            problems.push(format!("{at}: {} does not exist", file.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            if full.extension().is_none_or(|e| e != "md") {
                problems.push(format!("{at}: an anchor into a file that is not Markdown"));
            } else if !anchors(&read(&full)).contains(anchor) {
                problems.push(format!("{at}: {} has no heading with id `{anchor}`", file.display()));
            }
        }
    }
    problems
}

/// The problems of README.md as a front page.
fn front_page_problems(readme: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let words = word_count(readme);
    if words > README_MAX_WORDS {
        problems.push(format!("README.md has {words} words, more than {README_MAX_WORDS}"));
    }
    for (line, n) in long_lines(readme, README_MAX_LINE) {
        problems.push(format!("README.md:{line} has {n} characters, more than {README_MAX_LINE}"));
    }
    let commands: Vec<&str> = first_code_block(readme)
        .iter()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|c| !c.is_empty())
        .collect();
    if commands != FIRST_COMMANDS {
        problems.push(format!("README.md's first code block runs {commands:?}, not {FIRST_COMMANDS:?}"));
    }
    problems
}

/// The pages of `docs/` the index does not link to.
fn unlisted_pages(index: &str, pages: &[String]) -> Vec<String> {
    let listed: HashSet<String> = links(index)
        .into_iter()
        .map(|(_, t)| t.split('#').next().unwrap_or("").trim_start_matches("./").to_string())
        .collect();
    pages.iter().filter(|p| p.as_str() != "README.md" && !listed.contains(p.as_str())).cloned().collect()
}

fn assert_none(problems: Vec<String>) {
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn readme_is_a_front_page() {
    let Some(root) = root() else { return };
    assert_none(front_page_problems(&read(&root.join("README.md"))));
}

#[test]
fn every_page_of_docs_is_in_its_index() {
    let Some(root) = root() else { return };
    let unlisted = unlisted_pages(&read(&root.join("docs/README.md")), &doc_pages(&root));
    assert!(unlisted.is_empty(), "pages in docs/ that docs/README.md does not link to: {unlisted:?}");
}

#[test]
fn relative_links_lead_to_files_and_headings() {
    let Some(root) = root() else { return };
    let mut pages = vec!["README.md".to_string()];
    pages.extend(doc_pages(&root).into_iter().map(|p| format!("docs/{p}")));
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in &pages {
        checked += links(&read(&root.join(page))).len();
        problems.extend(broken_links(&root, page));
    }
    assert!(checked > 20, "only {checked} links found: is the link parser broken?");
    assert_none(problems);
}

// The checks themselves, on pages written to fail them.

#[test]
fn the_checks_fail_on_what_they_are_for() {
    let two_commands = "```sh\ncargo run --example camera_zero_copy   # a comment\ncargo test\n```\n";
    assert!(front_page_problems(two_commands).is_empty());
    let long = format!("{two_commands}{}", "word ".repeat(README_MAX_WORDS));
    assert!(front_page_problems(&long)[0].contains("words"));
    let wide = format!("{two_commands}{}\n", "x".repeat(README_MAX_LINE + 1));
    assert!(front_page_problems(&wide)[0].contains(":5 has 301 characters"));
    assert!(front_page_problems("```sh\ncargo test\n```\n")[0].contains("first code block"));

    let pages = ["README.md".to_string(), "a.md".to_string(), "b.md".to_string()];
    assert_eq!(unlisted_pages("* [a](a.md#x)\n* [b](./b.md)\n", &pages), Vec::<String>::new());
    assert_eq!(unlisted_pages("* [a](a.md)\n```\n[b](b.md)\n```\n", &pages), ["b.md"]);
}

#[test]
fn links_and_heading_ids_follow_markdown_and_github() {
    let text = "see [a](a.md), ![p](img/p.png \"t\") and [c](x.md#h (1))\n`[no](code.md)`\n\
                ```\n[no](block.md)\n```\n[ref]: <r.md#top>\n";
    let found: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(found, ["a.md", "img/p.png", "x.md#h", "r.md#top"]);

    assert_eq!(slug("NvSci on Tegra: what was checked and how"), "nvsci-on-tegra-what-was-checked-and-how");
    assert_eq!(slug("Clips (`--input clip.y4m`)"), "clips---input-clipy4m");
    assert_eq!(slug("Vulkan backend (feature `vulkan`)"), "vulkan-backend-feature-vulkan");
    assert_eq!(slug("See [the guide](g.md) now"), "see-the-guide-now");
    let ids = anchors("# Top\n## Top\n```\n# not a heading\n```\n### snake_case and 2.0\n");
    let want: HashSet<String> = ["top", "top-1", "snake_case-and-20"].map(String::from).into();
    assert_eq!(ids, want);
}

#[test]
fn broken_links_are_found() {
    let dir = std::env::temp_dir().join(format!("nvsci-docs-check-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("docs/a.md"), "# A page\n## Part one\n").unwrap();
    let page = "# Index\n[ok](a.md#part-one) [self](#index) [up](../top.txt) [gone](b.md) \
                [bad anchor](a.md#part-two) [out](../../x.md) [txt anchor](../top.txt#x)\n";
    std::fs::write(dir.join("docs/index.md"), page).unwrap();
    std::fs::write(dir.join("top.txt"), "").unwrap();
    let problems = broken_links(&dir, "docs/index.md");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert!(problems[0].contains("docs/b.md does not exist"));
    assert!(problems[1].contains("no heading with id `part-two`"));
    assert!(problems[2].contains("outside the repository"));
    assert!(problems[3].contains("not Markdown"));
}
