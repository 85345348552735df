//! The replicated secrets store: each value sealed under the operator's key on the node that
//! takes it, then proposed to the meta group, so the log, snapshots and stores hold only sealed
//! bytes; names listed and existence told, values never answered. The node that makes an HTTP
//! call opens the values the call names ([`Secrets::reveal`]), just before it is made.

use crate::access::caller;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::secrets::{reveal, RevealError, SecretsKeys};
use engine::HttpRequest;
use proto::limits::{SECRETS_MAX, SECRET_BYTES_MAX};
use proto::model::secret::SealedSecret;
use proto::record::{MetaCommand, MetaOutcome};
use std::sync::Arc;

/// The store, and the keys this node seals and opens with.
pub struct Secrets {
    host: Arc<Host>,
    keys: Option<Arc<SecretsKeys>>,
}

impl Secrets {
    pub(crate) fn new(host: Arc<Host>, keys: Option<Arc<SecretsKeys>>) -> Arc<Self> {
        Arc::new(Self { host, keys })
    }

    /// Stores `value` as the secret `name`, sealed, replacing what the name held.
    pub async fn put(&self, name: &str, value: &str) -> Result<()> {
        check_name(name)?;
        if value.len() > SECRET_BYTES_MAX {
            return Err(Error::TooLarge(format!(
                "the secret is {} bytes, over the limit of {SECRET_BYTES_MAX}",
                value.len()
            )));
        }
        let keys = self.keys.as_ref().ok_or_else(no_key)?;
        let (key_id, sealed) = keys
            .seal(name, value.as_bytes())
            .map_err(|e| Error::Internal(e.to_string()))?;
        let secret = SealedSecret {
            name: name.to_owned(),
            key_id,
            sealed,
            update_time: self.host.clock.now_ms(),
            updated_by: caller::current(),
        };
        match self
            .host
            .propose_meta(MetaCommand::PutSecret(secret))
            .await?
        {
            MetaOutcome::Applied => Ok(()),
            MetaOutcome::Full => Err(Error::TooLarge(format!(
                "the secrets store holds {SECRETS_MAX} secrets already"
            ))),
            other => Err(Error::Conflict(format!("secret not stored: {other:?}"))),
        }
    }

    pub async fn delete(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let command = MetaCommand::DeleteSecret {
            name: name.to_owned(),
        };
        match self.host.propose_meta(command).await? {
            MetaOutcome::Applied => Ok(()),
            _ => Err(Error::NotFound(format!("No such secret: {name}"))),
        }
    }

    /// The names of every secret, sorted.
    pub async fn names(&self) -> Result<Vec<String>> {
        self.host.catch_up_meta().await?;
        Ok(self.host.defs.secret_names())
    }

    pub async fn exists(&self, name: &str) -> Result<bool> {
        check_name(name)?;
        self.host.catch_up_meta().await?;
        Ok(self.host.defs.secret(name).is_some())
    }

    /// Fills the `${workflow.secrets.NAME}` placeholders of `request` with the values this
    /// node's replica holds, opened with its keys.
    pub fn reveal(&self, request: &mut HttpRequest) -> std::result::Result<(), RevealError> {
        if !reveal::names_secrets(request) {
            return Ok(());
        }
        let value = |name: &str| {
            let keys = self.keys.as_ref().ok_or(crate::secrets::SealError::NoKey)?;
            let secret = self.host.defs.secret(name);
            let secret = secret.ok_or_else(|| RevealError::Missing(name.to_owned()))?;
            let value = keys.open(&secret)?;
            Ok(String::from_utf8_lossy(&value).into_owned())
        };
        reveal::fill_request(request, &value)
    }
}

fn no_key() -> Error {
    Error::Conflict(crate::secrets::SealError::NoKey.to_string())
}

/// A secret's name: a name (`proto::check::name`) without `}`, which would end its placeholder.
fn check_name(name: &str) -> Result<()> {
    proto::check::name("secret name", name)?;
    if name.contains('}') {
        return Err(Error::Invalid(format!(
            "secret name {name:?} must not contain '}}'"
        )));
    }
    Ok(())
}
