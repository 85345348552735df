//! Golden bytes: every encoding Baton defines, at every cluster version this build serves, kept
//! under `{crate}/tests/golden/v{version}/{format}/{sample}.bin`. Each crate lists its samples
//! (this one in `samples.rs`, `cluster` its own) and calls [`check`], which holds two things:
//!
//! - each sample encoded today equals the newest golden file of its format and name, so an
//!   encoding that changes without a new cluster version (`crate::version::FEATURES`) fails;
//! - every golden file of every served version decodes with today's reader of its format.
//!
//! `BATON_BLESS=1` writes today's bytes as the golden files of the newest version this build
//! serves: for a format that starts at a new version, never to paper over a change to one a
//! release has written. Test support only (a test, or the `golden` feature): it reads files.

#[cfg(test)]
mod samples;

use crate::version::VersionRange;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A format's reader: whether bytes decode.
pub type Reader = fn(&[u8]) -> Result<(), String>;

/// One encoded sample: its format, its name, its bytes today, and the reader of its format.
pub struct Sample {
    pub format: &'static str,
    pub name: String,
    pub bytes: Vec<u8>,
    pub read: Reader,
}

/// The name of an enum sample: its variant, as `Debug` spells it.
pub fn variant(value: &impl std::fmt::Debug) -> String {
    let debug = format!("{value:?}");
    let end = debug.find([' ', '(', '{']).unwrap_or(debug.len());
    debug[..end].to_string()
}

/// Checks `samples` against the golden files under `crate_dir` (see the module's text); panics
/// with every difference.
pub fn check(crate_dir: &str, samples: &[Sample]) {
    let root = Path::new(crate_dir).join("tests/golden");
    let blessing = std::env::var_os("BATON_BLESS").is_some();
    let mut problems = Vec::new();
    for sample in samples {
        match newest_golden(&root, sample) {
            Some((_, golden)) if golden == sample.bytes => {}
            _ if blessing => bless(&root, sample),
            Some((version, _)) => problems.push(format!(
                "{}/{} differs from its golden bytes of version {version}",
                sample.format, sample.name
            )),
            None => problems.push(format!(
                "{}/{} has no golden bytes",
                sample.format, sample.name
            )),
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nAn encoding changed without a new cluster version. Give the change a version in \
         proto::version::FEATURES, write the old format until it is active and keep its reader; \
         then BATON_BLESS=1 writes the new version's golden bytes.",
        problems.join("\n")
    );
    let read = decode_all(&root, samples);
    assert!(read >= samples.len(), "only {read} golden files were read");
}

fn served() -> std::ops::RangeInclusive<u32> {
    VersionRange::BUILD.min.0..=VersionRange::BUILD.max.0
}

fn file(root: &Path, version: u32, sample: &Sample) -> PathBuf {
    let name = format!("{}.bin", sample.name);
    root.join(format!("v{version}"))
        .join(sample.format)
        .join(name)
}

/// The newest golden file of `sample`'s format and name, with its version.
fn newest_golden(root: &Path, sample: &Sample) -> Option<(u32, Vec<u8>)> {
    served().rev().find_map(|v| {
        let bytes = std::fs::read(file(root, v, sample)).ok()?;
        Some((v, bytes))
    })
}

fn bless(root: &Path, sample: &Sample) {
    let path = file(root, VersionRange::BUILD.max.0, sample);
    let dir = path.parent().expect("a format directory");
    std::fs::create_dir_all(dir).expect("golden directory");
    std::fs::write(path, &sample.bytes).expect("golden file written");
}

/// Decodes every golden file of every served version with its format's reader; how many.
fn decode_all(root: &Path, samples: &[Sample]) -> usize {
    let readers: BTreeMap<&str, Reader> = samples.iter().map(|s| (s.format, s.read)).collect();
    let mut read = 0;
    for version in served() {
        let Ok(formats) = std::fs::read_dir(root.join(format!("v{version}"))) else {
            continue;
        };
        for format in formats.flatten() {
            let name = format.file_name().to_string_lossy().into_owned();
            let reader = readers
                .get(name.as_str())
                .unwrap_or_else(|| panic!("v{version}/{name}: no reader for this format"));
            for file in std::fs::read_dir(format.path())
                .expect("format directory")
                .flatten()
            {
                let bytes = std::fs::read(file.path()).expect("golden file");
                if let Err(e) = reader(&bytes) {
                    panic!("{}: {e}", file.path().display());
                }
                read += 1;
            }
        }
    }
    read
}
