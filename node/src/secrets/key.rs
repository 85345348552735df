//! The operator's secrets keys (`baton server --secrets-key-file FILE`): 256-bit AES-GCM keys,
//! one per line as 64 hex digits (`openssl rand -hex 32`). The first line seals what is stored
//! from now on; every line opens what it sealed, so a key is rotated by putting the new one
//! first, storing each secret again, then dropping the old line. Each sealed value is bound to
//! its secret's name (the additional data), so a value moved under another name does not open.

use proto::model::secret::SealedSecret;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};
use std::path::Path;

/// Most keys a key file holds (the current one and those being rotated out).
pub const SECRETS_KEYS_MAX: usize = 8;

/// Why a secret could not be sealed or opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("this node has no secrets key: start it with --secrets-key-file")]
    NoKey,
    #[error("the secret {name:?} was sealed under key {key_id}, which this node's key file does not hold")]
    UnknownKey { name: String, key_id: String },
    #[error("the secret {name:?} does not open under key {key_id}: it was altered")]
    Altered { name: String, key_id: String },
    #[error("the system's random generator failed")]
    Random,
}

/// The keys, the sealing one first. Its `Debug` shows the keys' ids, never a key.
pub struct SecretsKeys {
    keys: Vec<(String, LessSafeKey)>,
    random: SystemRandom,
}

impl std::fmt::Debug for SecretsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("SecretsKeys").field("ids", &ids).finish()
    }
}

impl SecretsKeys {
    /// Reads the key file at `path`: its lines of 64 hex digits (blank lines and `#` comments
    /// skipped), at least one and at most [`SECRETS_KEYS_MAX`].
    pub fn read_file(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("secrets key file {shown}: {e}"))?;
        let lines = text.lines().map(str::trim);
        let lines: Vec<&str> = lines
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        if lines.is_empty() || lines.len() > SECRETS_KEYS_MAX {
            return Err(format!(
                "secrets key file {shown} must hold 1 to {SECRETS_KEYS_MAX} keys, one per line as 64 hex digits (openssl rand -hex 32)"
            ));
        }
        let keys = lines.iter().enumerate().map(|(i, line)| {
            parse_hex(line).ok_or_else(|| {
                format!("secrets key file {shown}, key {}: not 64 hex digits", i + 1)
            })
        });
        Self::new(&keys.collect::<Result<Vec<_>, _>>()?)
    }

    /// The keys `keys`, the first sealing.
    pub fn new(keys: &[[u8; 32]]) -> Result<Self, String> {
        let keys = keys.iter().map(|bytes| {
            let key = UnboundKey::new(&AES_256_GCM, bytes).map_err(|_| "an unusable key")?;
            Ok((key_id(bytes), LessSafeKey::new(key)))
        });
        Ok(Self {
            keys: keys.collect::<Result<_, &str>>()?,
            random: SystemRandom::new(),
        })
    }

    /// The id of the key that seals.
    pub fn sealing_id(&self) -> &str {
        &self.keys[0].0
    }

    /// `value` sealed for the secret `name` under the first key: the nonce, then the
    /// ciphertext and tag.
    pub fn seal(&self, name: &str, value: &[u8]) -> Result<(String, Vec<u8>), SealError> {
        let (id, key) = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| SealError::Random)?;
        let mut sealed = value.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(name.as_bytes()),
            &mut sealed,
        )
        .map_err(|_| SealError::Random)?;
        Ok((id.clone(), [&nonce[..], &sealed].concat()))
    }

    /// The value of `secret`, opened under the key that sealed it.
    pub fn open(&self, secret: &SealedSecret) -> Result<Vec<u8>, SealError> {
        let name = secret.name.clone();
        let key_id = secret.key_id.clone();
        let Some((_, key)) = self.keys.iter().find(|(id, _)| *id == secret.key_id) else {
            return Err(SealError::UnknownKey { name, key_id });
        };
        let altered = || SealError::Altered {
            name: secret.name.clone(),
            key_id: secret.key_id.clone(),
        };
        if secret.sealed.len() < NONCE_LEN {
            return Err(altered());
        }
        let (nonce, sealed) = secret.sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| altered())?;
        let mut opened = sealed.to_vec();
        let value = key
            .open_in_place(nonce, Aad::from(name.as_bytes()), &mut opened)
            .map_err(|_| altered())?;
        Ok(value.to_vec())
    }
}

/// A key's id: the first 8 bytes of its SHA-256, in hex (it names the key, it cannot rebuild it).
fn key_id(key: &[u8; 32]) -> String {
    let digest = Sha256::digest(key);
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex(line: &str) -> Option<[u8; 32]> {
    if line.len() != 64 || !line.is_ascii() {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&line[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(keys: &SecretsKeys, name: &str, value: &str) -> SealedSecret {
        let (key_id, sealed) = keys.seal(name, value.as_bytes()).expect("sealed");
        SealedSecret {
            name: name.into(),
            key_id,
            sealed,
            update_time: 0,
            updated_by: "test".into(),
        }
    }

    #[test]
    fn a_value_opens_under_its_key_and_name_only() {
        let keys = SecretsKeys::new(&[[7; 32]]).expect("keys");
        let secret = sealed(&keys, "stripe", "sk_live_1");
        assert!(!secret.sealed.windows(9).any(|w| w == b"sk_live_1"));
        assert_eq!(keys.open(&secret).expect("opens"), b"sk_live_1");
        let again = sealed(&keys, "stripe", "sk_live_1");
        assert_ne!(again.sealed, secret.sealed, "a fresh nonce each time");

        let moved = SealedSecret {
            name: "other".into(),
            ..secret.clone()
        };
        assert!(matches!(keys.open(&moved), Err(SealError::Altered { .. })));
        let mut flipped = secret.clone();
        flipped.sealed[20] ^= 1;
        assert!(matches!(
            keys.open(&flipped),
            Err(SealError::Altered { .. })
        ));
        let other = SecretsKeys::new(&[[8; 32]]).expect("keys");
        assert!(matches!(
            other.open(&secret),
            Err(SealError::UnknownKey { .. })
        ));
        let shown = format!("{keys:?}");
        assert!(
            shown.contains(keys.sealing_id()) && !shown.contains("7, 7"),
            "{shown}"
        );
    }

    #[test]
    fn a_rotated_file_seals_with_its_first_key_and_opens_with_all() {
        let old = SecretsKeys::new(&[[1; 32]]).expect("keys");
        let secret = sealed(&old, "db", "pw");
        let rotated = SecretsKeys::new(&[[2; 32], [1; 32]]).expect("keys");
        assert_eq!(rotated.open(&secret).expect("opens"), b"pw");
        assert_ne!(sealed(&rotated, "db", "pw").key_id, secret.key_id);
    }

    #[test]
    fn a_key_file_is_lines_of_hex() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("key");
        let hex = "00".repeat(31) + "ff";
        std::fs::write(&path, format!("# current\n{hex}\n\n")).expect("write");
        let keys = SecretsKeys::read_file(&path).expect("read");
        assert_eq!(keys.keys.len(), 1);
        std::fs::write(&path, "abc\n").expect("write");
        let refused = SecretsKeys::read_file(&path).expect_err("not a key");
        assert!(refused.contains("64 hex digits"), "{refused}");
        std::fs::write(&path, "").expect("write");
        assert!(SecretsKeys::read_file(&path).is_err());
    }
}
