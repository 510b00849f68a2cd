//! One JWT access token checked against the rules of `[server.oauth]`, once its key is known: pure
//! and synchronous. What a refused token is told is a short fixed phrase (it goes into
//! `WWW-Authenticate` as it is); the token itself is never logged or echoed.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use serde_json::{Map, Value};

/// Longest token read at all.
pub(crate) const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Longest principal (`sub`) taken: it names the caller in audit records and rate-limit keys.
pub(crate) const MAX_PRINCIPAL_CHARS: usize = 256;

/// Why a token is refused, as the `error_description` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Invalid(pub(crate) &'static str);

/// What every token must satisfy besides its signature.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub issuer: String,
    pub audience: String,
    pub leeway_secs: u64,
    pub principal_claim: String,
}

/// A token whose signature and claims passed: who it is and the scopes it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claims {
    pub principal: String,
    /// `scope` (space-separated) and `scp` (an array, or a string), in order, without repeats.
    pub scopes: Vec<String>,
    /// `exp`, in seconds since the epoch (verified already): a dashboard session made with the
    /// token lasts no longer.
    pub expires_at_secs: Option<u64>,
}

/// The token's header: its algorithm and key id. Anything that is not a compact JWS (three parts,
/// a header naming a known algorithm; `none` is not one) is refused here, before any key is sought.
pub(crate) fn header(token: &str) -> Result<Header, Invalid> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(Invalid("the token is too long"));
    }
    if token.split('.').count() != 3 {
        return Err(Invalid("the token is not a signed JWT"));
    }
    jsonwebtoken::decode_header(token)
        .map_err(|_| Invalid("the token is not a signed JWT with an algorithm Portico accepts"))
}

/// Checks the signature with `key` (for `algorithm`, which the caller took from the header and
/// checked against the allow-list), then `exp`, `nbf`, `iss` and `aud`, then reads the principal and
/// the scopes.
pub(crate) fn verify(
    token: &str,
    key: &DecodingKey,
    algorithm: Algorithm,
    rules: &Rules,
) -> Result<Claims, Invalid> {
    let mut validation = Validation::new(algorithm);
    validation.leeway = rules.leeway_secs;
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.validate_aud = true;
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.set_issuer(&[&rules.issuer]);
    validation.set_audience(&[&rules.audience]);
    let data =
        jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation).map_err(|e| {
            Invalid(match e.kind() {
                ErrorKind::InvalidSignature => "the signature does not verify",
                ErrorKind::ExpiredSignature => "the token has expired",
                ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)",
                ErrorKind::InvalidAudience => "the token is for another audience",
                ErrorKind::InvalidIssuer => "the token is from another issuer",
                ErrorKind::MissingRequiredClaim(claim) => match claim.as_str() {
                    "exp" => "the token has no exp claim",
                    "iss" => "the token has no iss claim",
                    "aud" => "the token has no aud claim",
                    _ => "the token lacks a required claim",
                },
                ErrorKind::InvalidClaimFormat(_) => "a time claim of the token is not a number",
                ErrorKind::InvalidAlgorithm => "the token's algorithm does not fit its key",
                _ => "the token is malformed",
            })
        })?;
    claims(&data.claims, rules)
}

/// The principal and scopes of verified claims. `iss` must be the one string (jsonwebtoken also
/// takes an array containing it).
fn claims(claims: &Map<String, Value>, rules: &Rules) -> Result<Claims, Invalid> {
    if claims.get("iss").and_then(Value::as_str) != Some(rules.issuer.as_str()) {
        return Err(Invalid("the token is from another issuer"));
    }
    let principal = claims
        .get(&rules.principal_claim)
        .and_then(Value::as_str)
        .filter(|p| is_principal(p))
        .ok_or(Invalid(
            "the token's principal claim is missing or not a usable name",
        ))?;
    let mut scopes: Vec<String> = Vec::new();
    let mut add = |text: &str| {
        for scope in text.split_ascii_whitespace() {
            if !scopes.iter().any(|s| s == scope) {
                scopes.push(scope.to_string());
            }
        }
    };
    if let Some(scope) = claims.get("scope").and_then(Value::as_str) {
        add(scope);
    }
    match claims.get("scp") {
        Some(Value::String(scp)) => add(scp),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).for_each(add),
        _ => {}
    }
    Ok(Claims {
        principal: principal.to_string(),
        scopes,
        expires_at_secs: claims.get("exp").and_then(|exp| {
            exp.as_u64()
                .or_else(|| exp.as_f64().filter(|e| *e >= 0.0).map(|e| e as u64))
        }),
    })
}

/// Whether `name` can be a principal: 1 to 256 characters, none of them a control character.
fn is_principal(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_PRINCIPAL_CHARS
        && !name.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules() -> Rules {
        Rules {
            issuer: "https://idp.example".into(),
            audience: "https://portico.example/mcp".into(),
            leeway_secs: 60,
            principal_claim: "sub".into(),
        }
    }

    fn read(value: Value) -> Result<Claims, Invalid> {
        claims(value.as_object().unwrap(), &rules())
    }

    #[test]
    fn scopes_come_from_scope_and_scp_and_the_principal_must_be_a_name() {
        assert_eq!(
            read(json!({"iss": "https://idp.example", "sub": "alice",
                "scope": "a  b a", "scp": ["c", "b", 7]})),
            Ok(Claims {
                principal: "alice".into(),
                scopes: vec!["a".into(), "b".into(), "c".into()],
                expires_at_secs: None,
            })
        );
        assert_eq!(
            read(json!({"iss": "https://idp.example", "sub": "x", "scp": "d e"}))
                .unwrap()
                .scopes,
            ["d", "e"]
        );
        assert!(
            read(json!({"iss": "https://idp.example", "sub": "x"}))
                .unwrap()
                .scopes
                .is_empty()
        );
        for bad in [
            json!({"iss": "https://idp.example"}),
            json!({"iss": "https://idp.example", "sub": ""}),
            json!({"iss": "https://idp.example", "sub": 42}),
            json!({"iss": "https://idp.example", "sub": "a\nb"}),
            json!({"iss": "https://idp.example", "sub": "a".repeat(257)}),
        ] {
            assert_eq!(
                read(bad.clone()),
                Err(Invalid(
                    "the token's principal claim is missing or not a usable name"
                )),
                "{bad}"
            );
        }
        assert_eq!(
            read(json!({"iss": ["https://idp.example"], "sub": "x"})),
            Err(Invalid("the token is from another issuer"))
        );
    }

    #[test]
    fn headers_that_are_not_a_signed_jwt_are_refused_before_any_key_is_sought() {
        for bad in [
            "",
            "abc",
            "a.b",
            "a.b.c.d",
            // {"alg":"none"}
            "eyJhbGciOiJub25lIn0.e30.",
            // {"alg":"XS256"}
            "eyJhbGciOiJYUzI1NiJ9.e30.sig",
        ] {
            assert!(header(bad).is_err(), "{bad}");
        }
        assert_eq!(
            header(&"a".repeat(MAX_TOKEN_BYTES + 1)),
            Err(Invalid("the token is too long"))
        );
        // {"alg":"ES256","kid":"k1"}
        let header = header("eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0.e30.sig").unwrap();
        assert_eq!(header.alg, Algorithm::ES256);
        assert_eq!(header.kid.as_deref(), Some("k1"));
    }
}
