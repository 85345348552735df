//! The workspace's shape holds: in no crate do the modules of one folder (the crate's root, or a
//! module's folder) import each other in a circle, and each of the node's services uses only the
//! services listed before it in `node::service`.
//!
//! Imports are read from the sources as text (paths starting `crate::`, `super::` or `self::`,
//! with one level of `{..}` groups), tests and comments left out: what the compiler resolves
//! through a `use` of a re-export is seen where the re-export names its module. A module that
//! uses its parent's items, or its own children, is not a circle; two siblings that use each
//! other (directly or through other siblings) are.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CRATES: [&str; 8] = [
    "proto", "engine", "cluster", "node", "sim", "ops", "worker", "tests",
];

/// The node's services in the order `node::service` lists them, with the files of each.
const SERVICES: [(&str, &[&str]); 10] = [
    ("Access", &["access.rs"]),
    ("Secrets", &["secrets.rs"]),
    ("Definitions", &["definitions.rs", "schemas.rs"]),
    ("Workflows", &["workflows.rs", "wait.rs", "dsl.rs"]),
    ("Tasks", &["tasks.rs", "backlog.rs"]),
    ("Events", &["events"]),
    ("Triggers", &["triggers.rs"]),
    ("Membership", &["membership.rs"]),
    ("Admin", &["admin.rs"]),
    ("A2a", &["a2a.rs"]),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is in the workspace")
        .to_path_buf()
}

/// Every `.rs` file at `path` (a file, or a folder and everything in it).
fn sources(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out
}

/// A file's code: without its tests (`#[cfg(test)]` onwards, or a `tests.rs` or `*_tests.rs`) and
/// comments.
fn code(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == "tests.rs" || name.ends_with("_tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).expect("readable source");
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A module's path in its crate, from its file (`a/b.rs` and `a/b/mod.rs` are `a::b`).
type ModPath = Vec<String>;

fn module_path(src: &Path, file: &Path) -> ModPath {
    let rel = file
        .strip_prefix(src)
        .expect("a file of the crate")
        .with_extension("");
    let mut path: ModPath = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if path
        .last()
        .is_some_and(|l| ["mod", "lib", "main"].contains(&l.as_str()))
    {
        path.pop();
    }
    path
}

/// The paths `text` names from `crate::`, `super::` or `self::`, as segments (a `{a, b::c}` group
/// gives one path per item).
fn named_paths(text: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for head in ["crate::", "super::", "self::"] {
        for (i, _) in text.match_indices(head) {
            if text[..i]
                .chars()
                .next_back()
                .is_some_and(|c| ident(c) || c == ':')
            {
                continue;
            }
            let mut segments = vec![head.trim_end_matches(':').to_owned()];
            let mut rest = &text[i + head.len()..];
            loop {
                if let Some(group) = rest.strip_prefix('{') {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    for item in group.split(',') {
                        let item = item.split(" as ").next().unwrap_or("").trim();
                        let mut path = segments.clone();
                        path.extend(item.split("::").map(|s| s.trim().to_owned()));
                        out.push(path);
                    }
                    break;
                }
                let end = rest.find(|c: char| !ident(c)).unwrap_or(rest.len());
                segments.push(rest[..end].to_owned());
                match rest[end..].strip_prefix("::") {
                    Some(more) => rest = more,
                    None => {
                        out.push(segments);
                        break;
                    }
                }
            }
        }
    }
    out
}

/// The module a path named in module `at` resolves to: the longest prefix that is a module.
fn resolve(at: &ModPath, path: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let (mut base, mut rest) = match path[0].as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (at.clone(), &path[1..]),
        _ => (at[..at.len().saturating_sub(1)].to_vec(), &path[1..]),
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    let mut full = base;
    full.extend(rest.iter().cloned());
    while !full.is_empty() && !modules.contains(&full) {
        full.pop();
    }
    (!full.is_empty() && &full != at).then_some(full)
}

/// For every folder of a crate (its root included): the folder's modules and the siblings each
/// imports, a module counting with everything below it.
fn folder_graphs(src: &Path) -> BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> {
    let files = sources(src);
    let modules: BTreeSet<ModPath> = files.iter().map(|f| module_path(src, f)).collect();
    let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let at = module_path(src, file);
        let text = code(file);
        for target in named_paths(&text)
            .iter()
            .filter_map(|p| resolve(&at, p, &modules))
        {
            let shared = at.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if shared < at.len() && shared < target.len() {
                let graph = graphs.entry(at[..shared].to_vec()).or_default();
                let uses = graph.entry(at[shared].clone()).or_default();
                uses.insert(target[shared].clone());
            }
        }
    }
    graphs
}

/// A path of imports that comes back to where it started, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == at) {
            let mut c = path[i..].to_vec();
            c.push(at.to_owned());
            return Some(c);
        }
        if done.contains(at) {
            return None;
        }
        path.push(at.to_owned());
        for next in graph.get(at).into_iter().flatten() {
            if let Some(c) = walk(graph, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(at.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| walk(graph, m, &mut Vec::new(), &mut done))
}

#[test]
fn no_folder_of_any_crate_has_a_circle_of_imports_between_its_modules() {
    for name in CRATES {
        let src = workspace().join(name).join("src");
        assert!(
            sources(&src).len() > 1,
            "{name}: no modules found in {}",
            src.display()
        );
        let graphs = folder_graphs(&src);
        for (folder, graph) in &graphs {
            if let Some(c) = circle(graph) {
                panic!(
                    "{name}: the modules of {} import each other in a circle: {}",
                    if folder.is_empty() {
                        "the crate's root".to_owned()
                    } else {
                        folder.join("::")
                    },
                    c.join(" -> ")
                );
            }
        }
    }
}

#[test]
fn imports_are_read_through_groups_and_relative_paths() {
    let modules: BTreeSet<ModPath> = [vec!["a"], vec!["b"], vec!["b", "c"], vec!["b", "d"]]
        .into_iter()
        .map(|m| m.into_iter().map(str::to_owned).collect())
        .collect();
    let at: ModPath = vec!["b".to_owned(), "c".to_owned()];
    let text = "use super::{d::Thing, Other};\nuse crate::a::f;\nx::crate::no;";
    let found: BTreeSet<ModPath> = named_paths(text)
        .iter()
        .filter_map(|p| resolve(&at, p, &modules))
        .collect();
    let expected: BTreeSet<ModPath> = [vec!["a"], vec!["b"], vec!["b", "d"]]
        .into_iter()
        .map(|m| m.into_iter().map(str::to_owned).collect())
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn a_circle_is_found_where_there_is_one() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        circle(&graph),
        Some(
            vec!["a", "b", "c", "a"]
                .into_iter()
                .map(str::to_owned)
                .collect()
        )
    );
}

#[test]
fn each_service_uses_only_the_services_before_it() {
    let dir = workspace().join("node/src/service");
    for (rank, (service, files)) in SERVICES.iter().enumerate() {
        let text: String = files
            .iter()
            .flat_map(|f| sources(&dir.join(f)))
            .map(|f| code(&f))
            .collect();
        for (later, _) in &SERVICES[rank + 1..] {
            let used = text.match_indices(later).any(|(i, _)| {
                let before = text[..i].chars().next_back();
                let after = text[i + later.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            assert!(
                !used,
                "the {service} service uses {later}, a service listed after it"
            );
        }
    }
}
