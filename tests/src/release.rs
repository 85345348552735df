//! The previous release, built from its commit: what the mixed-version test runs beside the binary
//! under test.
//!
//! RELEASES.md records each release as a `## vX.Y.Z ...` heading followed (in its section) by a
//! ``Commit: `<40 hex digits>` `` line, newest first; tags do not travel with every clone, so the
//! commit is read from there. `tests/previous-release` checks that commit out into a git worktree
//! under `target/previous-release/<version>/src`, builds its `baton` there with a target directory
//! of its own, and prints the binary's path; [`previous_release`] runs it once per test process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// A release: its version (`0.2.0`), its commit and its built `baton` binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    pub version: String,
    pub commit: String,
    pub bin: PathBuf,
}

/// A release as RELEASES.md records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub version: String,
    pub commit: String,
}

/// The releases a RELEASES.md text records, newest first: each `## vX.Y.Z` heading with the first
/// ``Commit: `...` `` line of its section. Other headings (`## Unreleased`) and sections without a
/// commit line are skipped.
pub fn parse_releases(text: &str) -> Vec<Recorded> {
    let mut out = Vec::new();
    let mut version: Option<String> = None;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            version = release_heading(heading);
        } else if let (Some(v), Some(commit)) = (&version, commit_line(line)) {
            out.push(Recorded {
                version: v.clone(),
                commit,
            });
            version = None;
        }
    }
    out
}

/// `v0.2.0 — 2026-12-07` -> `0.2.0`; anything not starting with `vX.Y.Z` -> None.
fn release_heading(heading: &str) -> Option<String> {
    let word = heading.split_whitespace().next()?;
    let version = word.strip_prefix('v')?;
    let parts: Vec<&str> = version.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit());
    (parts.len() == 3 && parts.iter().all(numeric)).then(|| version.to_string())
}

/// ``Commit: `<40 lowercase hex>` `` -> the commit.
fn commit_line(line: &str) -> Option<String> {
    let rest = line.strip_prefix("Commit:")?.trim_start();
    let inner = rest.strip_prefix('`')?;
    let commit = &inner[..inner.find('`')?];
    let hex = commit.len() == 40 && commit.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
    hex.then(|| commit.to_string())
}

/// The script that builds the previous release.
fn script() -> PathBuf {
    crate::workspace_root()
        .join("tests")
        .join("previous-release")
}

/// The previous release (the newest RELEASES.md records that is not HEAD), built on first use by
/// `tests/previous-release` (minutes when cold, a cargo no-op when built). Panics with the script's
/// output if it fails.
pub fn previous_release() -> Release {
    static BUILT: OnceLock<Release> = OnceLock::new();
    BUILT.get_or_init(build_previous).clone()
}

fn build_previous() -> Release {
    let script = script();
    let mut command = Command::new("bash");
    command.arg(&script).stdin(Stdio::null());
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_for_this_test) {
            command.env_remove(&name);
        }
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{} failed with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        script.display(),
        output.status
    );
    let bin = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    assert!(
        bin.is_file(),
        "{} printed {bin:?}, which is not a file\nstderr:\n{stderr}",
        script.display()
    );
    let recorded = recorded_for(&bin).unwrap_or_else(|| {
        panic!(
            "{} is not under target/previous-release/<a version RELEASES.md records>",
            bin.display()
        )
    });
    Release {
        version: recorded.version,
        commit: recorded.commit,
        bin,
    }
}

/// Whether an environment variable is one cargo or the test runner set for this test process
/// (its package, its binary, the runner's own): the previous release's build must not see them.
/// Build scripts track some (ring's reads `CARGO_MANIFEST_DIR` and `CARGO_PKG_*`), so cargo would
/// rebuild the release here after `.ci/run` built it from a shell, and again after.
fn set_for_this_test(name: &str) -> bool {
    const PREFIXES: [&str; 6] = [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
        "CARGO_TARGET_TMPDIR",
        "NEXTEST",
    ];
    const NAMES: [&str; 3] = [
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || NAMES.contains(&name)
}

/// The release whose directory (`target/previous-release/<version>/...`) holds `bin`.
fn recorded_for(bin: &Path) -> Option<Recorded> {
    let text = std::fs::read_to_string(crate::workspace_root().join("RELEASES.md")).ok()?;
    let mut dirs = bin.ancestors();
    let version = dirs
        .find(|d| d.parent().and_then(Path::file_name) == Some("previous-release".as_ref()))?
        .file_name()?
        .to_str()?
        .to_string();
    parse_releases(&text)
        .into_iter()
        .find(|r| r.version == version)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# Releases\n\n## Unreleased\n\nCommit: `0000000000000000000000000000000000000000`\n\n\
        ## v1.10.0 — 2027-01-02\n\nCommit: `aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa`\n\nText.\n\
        Commit: `bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb`\n\n\
        ## v1.9.0\n\nNo commit line here.\n\n\
        ## v1.8.0 — 2026-01-01\n\nCommit: `cccc`\nCommit: `CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC`\n\
        Commit: `cccccccccccccccccccccccccccccccccccccccc`\n\n\
        ### v0.0.1\n\nCommit: `dddddddddddddddddddddddddddddddddddddddd`\n";

    #[test]
    fn a_sample_yields_each_releases_first_valid_commit_newest_first() {
        let releases = parse_releases(SAMPLE);
        let pairs: Vec<(&str, char)> = releases
            .iter()
            .map(|r| (r.version.as_str(), r.commit.chars().next().unwrap_or('?')))
            .collect();
        // Unreleased is skipped; a second commit line in a section is ignored; a section
        // without one yields nothing; malformed commits are skipped; `###` is not a release.
        assert_eq!(pairs, vec![("1.10.0", 'a'), ("1.8.0", 'c')]);
    }

    #[test]
    fn headings_that_are_not_releases_are_skipped() {
        assert_eq!(release_heading("v0.2.0 — 2026-12-07"), Some("0.2.0".into()));
        assert_eq!(release_heading("v0.2.0"), Some("0.2.0".into()));
        assert_eq!(release_heading("Unreleased"), None);
        assert_eq!(release_heading("v0.2"), None);
        assert_eq!(release_heading("v0.2.x"), None);
        assert_eq!(release_heading("0.2.0"), None);
    }

    #[test]
    fn the_repositorys_releases_name_v0_2_0_at_its_commit() {
        let text = std::fs::read_to_string(crate::workspace_root().join("RELEASES.md"))
            .expect("read RELEASES.md");
        let releases = parse_releases(&text);
        let v020 = releases
            .iter()
            .find(|r| r.version == "0.2.0")
            .unwrap_or_else(|| panic!("RELEASES.md records no v0.2.0: {releases:?}"));
        assert_eq!(v020.commit, "b1d35bd94097a33115ba628ea8b7b94466394d9d");
        let mut versions: Vec<&str> = releases.iter().map(|r| r.version.as_str()).collect();
        versions.dedup();
        assert_eq!(versions.len(), releases.len(), "one entry per release");
    }
}
