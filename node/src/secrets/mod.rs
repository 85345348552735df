//! Secrets, in two stores. The replicated store (`/api/secrets`): values sealed under the
//! operator's key ([`key`]) before they are proposed, kept by the meta group, opened only by the
//! node that makes an HTTP call naming them ([`reveal`]). The secrets directory ([`files`]):
//! files each node reads at start, which Serverless Workflow documents read as `$secrets`.

pub mod files;
pub mod key;
pub mod reveal;

pub use files::SecretFiles;
pub use key::{SealError, SecretsKeys};
pub use reveal::RevealError;
