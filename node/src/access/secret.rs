//! Access keys' ids and secrets, their password hashes, and token-signing keys. Secrets are
//! drawn from the operating system's generator; a secret's hash is Argon2id with its default
//! cost (19 MiB, two passes) and a random salt, checked in constant time.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use base64::Engine;
use rand::RngCore;

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes
}

/// A fresh identifier: 16 random bytes as 32 hex digits (applications, keys, signing keys).
pub fn new_id() -> String {
    random::<16>().iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh access key secret: 32 random bytes, base64url without padding.
pub fn new_secret() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random::<32>())
}

/// A fresh token-signing secret (HS256 wants at least its 32-byte output).
pub fn new_signing_secret() -> Vec<u8> {
    random::<32>().to_vec()
}

/// The Argon2id hash of `secret`, as a PHC string.
pub fn hash(secret: &str) -> Result<String, String> {
    let salt = SaltString::encode_b64(&random::<16>()).map_err(|e| e.to_string())?;
    Argon2::default()
        .hash_password(secret.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether `secret` is the one `phc` is the hash of.
pub fn matches(secret: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(secret.as_bytes(), &parsed)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_matches_its_hash_only() {
        let secret = new_secret();
        let phc = hash(&secret).expect("hashes");
        assert!(phc.starts_with("$argon2id$"), "{phc}");
        assert!(!phc.contains(&secret));
        assert!(matches(&secret, &phc));
        assert!(!matches(&new_secret(), &phc));
        assert!(!matches(&secret, "not a hash"));
        assert_ne!(hash(&secret).expect("hashes"), phc, "salted");
    }

    #[test]
    fn ids_and_secrets_are_fresh() {
        assert_eq!(new_id().len(), 32);
        assert_ne!(new_id(), new_id());
        assert_eq!(new_secret().len(), 43);
        assert_ne!(new_secret(), new_secret());
    }
}
