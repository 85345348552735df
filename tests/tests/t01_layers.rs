//! The workspace's shape holds: no crate's top-level modules import each other in a circle, and
//! each of the node's services uses only the services listed before it in `node::service`.
//!
//! Imports are read from the sources as text (`crate::module`, and `super::module` in a file at
//! the crate's root), tests and comments left out: what the compiler resolves through a `use`
//! of a re-export is seen where the re-export names its module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CRATES: [&str; 8] = [
    "proto", "engine", "cluster", "node", "sim", "ops", "worker", "tests",
];

/// The node's services in the order `node::service` lists them, with the files of each.
const SERVICES: [(&str, &[&str]); 7] = [
    ("Definitions", &["definitions.rs"]),
    ("Workflows", &["workflows.rs", "wait.rs"]),
    ("Tasks", &["tasks.rs", "backlog.rs"]),
    ("Events", &["events"]),
    ("Triggers", &["triggers.rs"]),
    ("Membership", &["membership.rs"]),
    ("Admin", &["admin.rs"]),
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

/// A file's code: without its tests (`#[cfg(test)]` onwards, or a `tests.rs`) and comments.
fn code(path: &Path) -> String {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).expect("readable source");
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifiers that follow `prefix` in `text`.
fn after<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.match_indices(prefix)
        .map(|(i, _)| {
            let rest = &text[i + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

/// A crate's top-level modules and the others each imports.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = std::fs::read_dir(src)
        .expect("a crate's src")
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.ends_with("lib.rs") && !p.ends_with("main.rs"))
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_owned()))
        .collect();
    let mut graph = BTreeMap::new();
    for m in &modules {
        let mut uses = BTreeSet::new();
        let file = src.join(format!("{m}.rs"));
        let at_root: BTreeSet<PathBuf> = [file.clone()].into();
        let mut files = sources(&src.join(m));
        files.extend(sources(&file));
        for f in files {
            let text = code(&f);
            let mut named = after(&text, "crate::");
            if at_root.contains(&f) {
                named.extend(after(&text, "super::"));
            }
            uses.extend(
                named
                    .into_iter()
                    .filter(|n| n != m && modules.contains(*n))
                    .map(str::to_owned),
            );
        }
        graph.insert(m.clone(), uses);
    }
    graph
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
fn no_crate_has_a_circle_of_imports_between_its_modules() {
    for name in CRATES {
        let src = workspace().join(name).join("src");
        let graph = module_graph(&src);
        assert!(
            !graph.is_empty(),
            "{name}: no modules found in {}",
            src.display()
        );
        if let Some(c) = circle(&graph) {
            panic!(
                "{name}: its modules import each other in a circle: {}",
                c.join(" -> ")
            );
        }
    }
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
