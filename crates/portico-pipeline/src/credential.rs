//! The one hash of a credential no token check identified: A2A task ownership on a door without
//! tokens keys on it (a door with tokens keys everything on the client they identify).

/// The identity a credential (an `Authorization` header's value) stands for: a short hash, so the
/// secret itself is never kept, logged or compared.
///
/// Spellings the door's token check accepts as the same token (`bearer`, extra spaces around the
/// token) are one identity: the hash is of the canonical `Bearer <token>`, or a client could take a
/// fresh identity (a fresh rate-limit bucket) per spelling.
pub fn credential_identity(credential: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let canonical = canonical_credential(credential);
    let hash = Sha256::digest(&canonical);
    let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("key:{hex}")
}

/// `Bearer <token>` with the scheme's case and the whitespace around the token normalised; any other
/// credential as it is, less surrounding whitespace.
fn canonical_credential(credential: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let credential = credential.trim_ascii();
    match credential.split_at_checked(6) {
        Some((scheme, rest))
            if scheme.eq_ignore_ascii_case(b"bearer")
                && rest.first().is_some_and(u8::is_ascii_whitespace) =>
        {
            let mut canonical = b"Bearer ".to_vec();
            canonical.extend_from_slice(rest.trim_ascii());
            std::borrow::Cow::Owned(canonical)
        }
        _ => std::borrow::Cow::Borrowed(credential),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_bearer_token_are_one_identity() {
        let canonical = credential_identity(b"Bearer s3cret");
        for spelling in [
            &b"Bearer   s3cret"[..],
            b"bearer s3cret",
            b"BEARER s3cret  ",
            b"Bearer\ts3cret",
            b" Bearer s3cret",
        ] {
            assert_eq!(
                credential_identity(spelling),
                canonical,
                "{}",
                String::from_utf8_lossy(spelling)
            );
        }
        assert_ne!(credential_identity(b"Bearer s3cre"), canonical);
        assert_ne!(credential_identity(b"Bearers3cret"), canonical);
        assert_ne!(credential_identity(b"Basic s3cret"), canonical);
    }
}
