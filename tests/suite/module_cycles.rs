//! No hidden cycles between modules (issue 35.4): in both crates, the modules under one
//! parent depend on each other in one direction only. A file's references to
//! `crate::…` and `super::…` (re-exports followed to the module that defines the item)
//! give the edges; an edge from `a::x::…` to `a::y::…` is an edge `x → y` among the
//! children of `a`. A cycle among siblings fails this test, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path, `[]` for the crate root.
type ModPath = Vec<String>;

/// The modules of one crate: each one's source text.
struct Crate {
    modules: BTreeMap<ModPath, String>,
}

impl Crate {
    fn load(src: &Path) -> Self {
        let mut modules = BTreeMap::new();
        let mut files = Vec::new();
        collect(src, &mut files);
        for file in files {
            let relative = file.strip_prefix(src).unwrap();
            let mut path: ModPath = relative
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            match path.last().map(String::as_str) {
                Some("lib") if path.len() == 1 => path.clear(),
                Some("main") if path.len() == 1 => continue,
                Some("mod") => {
                    path.pop();
                }
                _ => {}
            }
            let text = strip_comments(&std::fs::read_to_string(&file).unwrap());
            modules.insert(path, text);
        }
        Self { modules }
    }

    /// The module `path` names from `base` (following re-exports one step), or the deepest
    /// module on the way.
    fn resolve(&self, base: &ModPath, path: &[String]) -> ModPath {
        let mut at = base.clone();
        for (i, segment) in path.iter().enumerate() {
            let mut child = at.clone();
            child.push(segment.clone());
            if self.modules.contains_key(&child) {
                at = child;
                continue;
            }
            if i == 0 || path.len() > i {
                if let Some(origin) = self.reexport(&at, segment) {
                    return origin;
                }
            }
            break;
        }
        at
    }

    /// Where module `at` re-exports `name` from (`pub use x::…::name` or `pub use
    /// x::{…, name, …}`), as a module.
    fn reexport(&self, at: &ModPath, name: &str) -> Option<ModPath> {
        let text = self.modules.get(at)?;
        for statement in text.split(';') {
            let Some(rest) = statement.trim().strip_prefix("pub use ") else {
                continue;
            };
            for used in use_paths(rest) {
                if used.last().map(String::as_str) != Some(name) || used.len() < 2 {
                    continue;
                }
                let (base, path) = match used[0].as_str() {
                    "crate" => (Vec::new(), &used[1..used.len() - 1]),
                    "super" => (
                        at[..at.len().saturating_sub(1)].to_vec(),
                        &used[1..used.len() - 1],
                    ),
                    "self" => (at.clone(), &used[1..used.len() - 1]),
                    _ => (at.clone(), &used[..used.len() - 1]),
                };
                let mut module = base;
                for segment in path {
                    module.push(segment.clone());
                }
                if self.modules.contains_key(&module) {
                    return Some(module);
                }
            }
        }
        None
    }

    /// Every module each module refers to.
    fn edges(&self) -> BTreeSet<(ModPath, ModPath)> {
        let mut edges = BTreeSet::new();
        for (module, text) in &self.modules {
            for (base, path) in references(module, text) {
                let target = self.resolve(&base, &path);
                if &target != module {
                    edges.insert((module.clone(), target));
                }
            }
        }
        edges
    }
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// `text` without `//` comments (doc comments cite paths that are not dependencies) and
/// without the `#[cfg(test)] mod tests` block at its end, where tests may reach anywhere.
fn strip_comments(text: &str) -> String {
    let code = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    code.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `crate::…` and `super::…` paths `text` (the source of `module`) names, each as the
/// module it starts from and its segments.
fn references(module: &ModPath, text: &str) -> Vec<(ModPath, Vec<String>)> {
    let mut found = Vec::new();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", module[..module.len().saturating_sub(1)].to_vec()),
    ] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            for path in use_paths(rest) {
                found.push((base.clone(), path));
            }
        }
    }
    found
}

/// The paths of a use tree at the start of `text` (`a::b`, `a::{b, c::d}`, `{x, y}`).
fn use_paths(text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    tree(text.trim_start(), Vec::new(), &mut paths);
    paths
}

/// Parses one use tree at the start of `text` below `prefix`; returns what follows it.
fn tree<'a>(text: &'a str, prefix: Vec<String>, paths: &mut Vec<Vec<String>>) -> &'a str {
    let mut path = prefix;
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if let Some(inner) = rest.strip_prefix('{') {
            let mut inner = inner;
            loop {
                inner = inner.trim_start();
                if let Some(after) = inner.strip_prefix('}') {
                    return after;
                }
                if let Some(after) = inner.strip_prefix(',') {
                    inner = after;
                    continue;
                }
                if inner.is_empty() {
                    return inner;
                }
                let before = inner.len();
                inner = tree(inner, path.clone(), paths);
                if inner.len() == before {
                    // Not a path (e.g. `*`): skip one character.
                    inner = &inner[inner.chars().next().map_or(0, char::len_utf8)..];
                }
            }
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            if !path.is_empty() {
                paths.push(path);
            }
            return rest;
        }
        path.push(rest[..end].to_owned());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(after) => rest = after,
            None => {
                paths.push(path);
                return rest;
            }
        }
    }
}

/// For an edge between two modules, the sibling edge it makes under their lowest common
/// ancestor (none when one contains the other).
fn sibling_edge(from: &ModPath, to: &ModPath) -> Option<(ModPath, String, String)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    let (a, b) = (from.get(common)?, to.get(common)?);
    Some((from[..common].to_vec(), a.clone(), b.clone()))
}

/// The cycles among the children of each module, as `parent: a → b → a`.
fn cycles(edges: &BTreeSet<(ModPath, ModPath)>) -> Vec<String> {
    let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, to) in edges {
        if let Some((parent, a, b)) = sibling_edge(from, to) {
            graphs
                .entry(parent)
                .or_default()
                .entry(a)
                .or_default()
                .insert(b);
        }
    }
    let mut found = Vec::new();
    for (parent, graph) in &graphs {
        for start in graph.keys() {
            if let Some(cycle) = path_back(graph, start) {
                let name = if parent.is_empty() {
                    "crate".to_owned()
                } else {
                    parent.join("::")
                };
                let text = format!("{name}: {}", cycle.join(" → "));
                // One report per cycle, from its smallest member.
                if cycle.iter().min() == Some(start) {
                    found.push(text);
                }
            }
        }
    }
    found
}

/// A path from `start` back to it, if there is one (breadth first: the shortest).
fn path_back(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut from: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.to_owned()]);
    while let Some(node) = queue.pop_front() {
        for next in graph.get(&node).into_iter().flatten() {
            if next == start {
                let mut cycle = vec![start.to_owned()];
                let mut at = node.clone();
                while at != start {
                    cycle.insert(1, at.clone());
                    at = from[&at].clone();
                }
                cycle.push(start.to_owned());
                return Some(cycle);
            }
            if !from.contains_key(next) && next != start {
                from.insert(next.clone(), node.clone());
                queue.push_back(next.clone());
            }
        }
    }
    None
}

fn cycles_of(src: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
    cycles(&Crate::load(&root).edges())
}

#[test]
fn the_modules_of_cmdr_have_no_cycles() {
    let found = cycles_of("src");
    assert!(
        found.is_empty(),
        "module cycles in src/:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_modules_of_the_executors_have_no_cycles() {
    let found = cycles_of("executors/src");
    assert!(
        found.is_empty(),
        "module cycles in executors/src/:\n{}",
        found.join("\n")
    );
}

/// The checker finds a cycle where there is one (so a green run means something).
#[test]
fn a_cycle_between_siblings_is_found() {
    let mut modules = BTreeMap::new();
    let path = |p: &str| {
        p.split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect::<ModPath>()
    };
    modules.insert(path(""), "mod a; mod b; pub use b::Thing;".to_owned());
    modules.insert(path("a"), "use crate::Thing;".to_owned());
    modules.insert(path("b"), "use super::a::{x, y::z};".to_owned());
    let found = cycles(&Crate { modules }.edges());
    assert_eq!(found, ["crate: a → b → a"]);
}
