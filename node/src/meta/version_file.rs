//! The cluster version a data directory is at, in a file of its own (`CLUSTER_VERSION`), so a
//! binary can refuse a data directory it cannot serve before it opens anything in it. The meta
//! group's replica here writes it when it applies an activation; the meta group's row is the
//! truth, and start-up checks that row too before any group opens.

use crate::error::{Error, Result};
use proto::version::{Binary, ClusterVersion};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The version file of one data directory.
#[derive(Debug, Clone)]
pub struct VersionFile {
    path: PathBuf,
}

impl VersionFile {
    /// The file's name in the data directory.
    pub const FILE_NAME: &str = "CLUSTER_VERSION";

    pub fn in_dir(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join(Self::FILE_NAME),
        }
    }

    /// The version written, if any (none in a fresh data directory or one older binaries made).
    pub fn read(&self) -> Result<Option<ClusterVersion>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.failed("reading", e)),
        };
        let version = text.trim().parse::<u32>().map_err(|_| {
            Error::Internal(format!(
                "{} holds {:?}, not a cluster version",
                self.path.display(),
                text.trim()
            ))
        })?;
        Ok(Some(ClusterVersion(version)))
    }

    /// Writes `version` durably (a whole new file renamed over the old one).
    pub fn write(&self, version: ClusterVersion) -> Result<()> {
        let fresh = self.path.with_extension("new");
        let mut file = std::fs::File::create(&fresh).map_err(|e| self.failed("writing", e))?;
        writeln!(file, "{version}").map_err(|e| self.failed("writing", e))?;
        file.sync_all().map_err(|e| self.failed("syncing", e))?;
        std::fs::rename(&fresh, &self.path).map_err(|e| self.failed("renaming", e))?;
        if let Some(dir) = self.path.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| self.failed("syncing the directory of", e))?;
        }
        Ok(())
    }

    /// Refuses a data directory at a version `binary` does not serve, naming both.
    pub fn check(&self, binary: &Binary) -> Result<()> {
        match self.read()? {
            Some(active) => binary
                .serves(active)
                .map_err(|e| Error::Conflict(format!("{}: {e}", self.path.display()))),
            None => Ok(()),
        }
    }

    fn failed(&self, what: &str, e: std::io::Error) -> Error {
        Error::Internal(format!("{what} {}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::version::VersionRange;

    #[test]
    fn a_data_directory_at_a_version_the_binary_does_not_serve_is_refused() {
        let dir = tempfile::tempdir().expect("succeeds");
        let file = VersionFile::in_dir(dir.path());
        let binary = Binary::this_build(VersionRange {
            min: ClusterVersion(1),
            max: ClusterVersion(2),
        });
        assert_eq!(file.read().expect("succeeds"), None);
        file.check(&binary).expect("succeeds");
        file.write(ClusterVersion(2)).expect("succeeds");
        assert_eq!(file.read().expect("succeeds"), Some(ClusterVersion(2)));
        file.check(&binary).expect("succeeds");
        file.write(ClusterVersion(3)).expect("succeeds");
        let refused = file.check(&binary).expect_err("refused").to_string();
        assert!(
            refused.contains("serves cluster versions 1 to 2, but the cluster is at version 3"),
            "{refused}"
        );
    }
}
