//! Errors, and recovering our typed refusal from inside reqwest's errors.

use std::error::Error as StdError;
use std::fmt;
use std::net::IpAddr;

use crate::policy::{BlockRule, NetPolicy, embedded_ipv4};

/// Everything that can go wrong on the way out.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("invalid URL {url:?}: {source}")]
    InvalidUrl {
        url: String,
        #[source]
        source: url::ParseError,
    },

    #[error("refused {url}: scheme {scheme:?} is not allowed (only http and https)")]
    UnsupportedScheme { url: String, scheme: String },

    #[error("refused {url}: the URL has no host")]
    MissingHost { url: String },

    /// A destination address or host name is refused by policy.
    #[error(transparent)]
    Blocked(#[from] BlockedAddress),

    #[error("refused {url}: more than {max} redirects")]
    TooManyRedirects { url: String, max: usize },

    /// A redirect would take configured headers (credentials) to another origin than theirs.
    #[error(
        "refused redirect from {from} to {to}: the request carries configured headers meant only for {origin}, and following would send them to another origin; if the service moved, configure its new URL"
    )]
    CredentialsCrossOrigin {
        from: String,
        to: String,
        origin: String,
    },

    #[error("could not build the HTTP client: {0}")]
    Build(#[source] reqwest::Error),

    /// Anything else reqwest reports (DNS failure, connection refused,
    /// timeout, TLS, ...).
    #[error(transparent)]
    Http(reqwest::Error),
}

impl NetError {
    /// The policy refusal, if this error is one.
    pub fn blocked(&self) -> Option<&BlockedAddress> {
        match self {
            NetError::Blocked(blocked) => Some(blocked),
            _ => None,
        }
    }

    /// Our own refusals are raised inside reqwest (redirect policy) and come
    /// back wrapped; this rebuilds them so callers can match on the variant.
    fn clone_refusal(&self) -> Option<NetError> {
        Some(match self {
            NetError::UnsupportedScheme { url, scheme } => NetError::UnsupportedScheme {
                url: url.clone(),
                scheme: scheme.clone(),
            },
            NetError::MissingHost { url } => NetError::MissingHost { url: url.clone() },
            NetError::Blocked(blocked) => NetError::Blocked(blocked.clone()),
            NetError::TooManyRedirects { url, max } => NetError::TooManyRedirects {
                url: url.clone(),
                max: *max,
            },
            NetError::CredentialsCrossOrigin { from, to, origin } => {
                NetError::CredentialsCrossOrigin {
                    from: from.clone(),
                    to: to.clone(),
                    origin: origin.clone(),
                }
            }
            NetError::InvalidUrl { .. } | NetError::Build(_) | NetError::Http(_) => return None,
        })
    }
}

/// Converting a reqwest error digs out a refusal raised by our resolver,
/// redirect policy or connector guard, so `?` on a send yields the typed
/// rule rather than reqwest's generic "error sending request".
impl From<reqwest::Error> for NetError {
    fn from(err: reqwest::Error) -> Self {
        let mut source: Option<&(dyn StdError + 'static)> = Some(&err);
        while let Some(e) = source {
            if let Some(blocked) = e.downcast_ref::<BlockedAddress>() {
                let mut blocked = blocked.clone();
                if let Some(url) = err.url() {
                    blocked.attach_request_url(url);
                }
                return NetError::Blocked(blocked);
            }
            if let Some(refusal) = e
                .downcast_ref::<NetError>()
                .and_then(NetError::clone_refusal)
            {
                return refusal;
            }
            source = e.source();
        }
        NetError::Http(err)
    }
}

/// How the refused address was arrived at; it changes the sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Subject {
    /// Refused by host name alone, no address involved.
    Name,
    /// The URL named the address directly (in some spelling).
    Literal(IpAddr),
    /// The host name resolved to this address.
    Resolved(IpAddr),
    /// The socket ended up connected to this address.
    Connected(IpAddr),
}

/// A destination refused by policy: which host, which address, which rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedAddress {
    url: Option<String>,
    /// The URL originally requested, when the refusal happened on a later
    /// redirect hop whose URL reqwest does not report.
    origin: Option<String>,
    host: String,
    subject: Subject,
    rule: BlockRule,
    redirect: bool,
    /// What the message ends with: that nothing lifts the refusal, or the setting that does,
    /// named by the policy that refused.
    remedy: &'static str,
}

impl BlockedAddress {
    pub(crate) fn name(host: &str, rule: BlockRule) -> Self {
        Self::new(host, Subject::Name, rule)
    }

    pub(crate) fn literal(host: &str, addr: IpAddr, rule: BlockRule) -> Self {
        Self::new(host, Subject::Literal(addr), rule)
    }

    pub(crate) fn resolved(host: &str, addr: IpAddr, rule: BlockRule) -> Self {
        Self::new(host, Subject::Resolved(addr), rule)
    }

    pub(crate) fn connected(host: &str, addr: IpAddr, rule: BlockRule) -> Self {
        Self::new(host, Subject::Connected(addr), rule)
    }

    fn new(host: &str, subject: Subject, rule: BlockRule) -> Self {
        Self {
            url: None,
            origin: None,
            host: host.to_owned(),
            subject,
            rule,
            redirect: false,
            remedy: NetPolicy::public_only().remedy(rule),
        }
    }

    /// The refusal as `policy` words its remedy.
    pub(crate) fn under(mut self, policy: &NetPolicy) -> Self {
        self.remedy = policy.remedy(self.rule);
        self
    }

    pub(crate) fn with_url(mut self, url: &str) -> Self {
        self.url = Some(url.to_owned());
        self
    }

    /// Refusals from the resolver and connector guard only know the host;
    /// reqwest reports the URL of the *original* request. If the hosts
    /// differ, the refused host was reached through a redirect, and naming
    /// the original URL as the refused one would mislead.
    fn attach_request_url(&mut self, url: &url::Url) {
        if self.url.is_some() {
            return;
        }
        let bare = |h: &str| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .trim_end_matches('.')
                .to_ascii_lowercase()
        };
        if url.host_str().map(bare) == Some(bare(&self.host)) {
            self.url = Some(url.to_string());
        } else {
            self.origin = Some(url.to_string());
            self.redirect = true;
        }
    }

    pub(crate) fn via_redirect(mut self) -> Self {
        self.redirect = true;
        self
    }

    /// The rule that refused the destination.
    pub fn rule(&self) -> BlockRule {
        self.rule
    }

    /// The refused address; `None` when the host name alone was refused.
    pub fn addr(&self) -> Option<IpAddr> {
        match self.subject {
            Subject::Name => None,
            Subject::Literal(a) | Subject::Resolved(a) | Subject::Connected(a) => Some(a),
        }
    }

    /// The host as it appeared in the URL (or as handed to the resolver).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The refused URL, when known. Refusals raised inside the resolver only
    /// know the host; converting the reqwest error into [`NetError`] fills
    /// this in when the refused host is the one originally requested.
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// Whether the refused destination was a redirect target rather than
    /// the URL originally requested.
    pub fn is_redirect(&self) -> bool {
        self.redirect
    }
}

/// Renders an address, spelling out the v4 address hidden in a v4-in-v6
/// form unless the standard notation already shows it.
struct ShowAddr(IpAddr);

impl fmt::Display for ShowAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        if let IpAddr::V6(v6) = self.0
            && v6.to_ipv4_mapped().is_none()
            && let Some(v4) = embedded_ipv4(v6)
        {
            write!(f, " (embedding {v4})")?;
        }
        Ok(())
    }
}

impl fmt::Display for BlockedAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.url, &self.origin) {
            (Some(url), _) if self.redirect => write!(f, "refused redirect to {url}: ")?,
            (Some(url), _) => write!(f, "refused {url}: ")?,
            (None, Some(origin)) => write!(f, "refused a redirect from {origin}: ")?,
            (None, None) => write!(f, "refused connection to {}: ", self.host)?,
        }
        let host = &self.host;
        let rule = self.rule;
        match self.subject {
            Subject::Name => write!(f, "{host} is {rule}")?,
            Subject::Literal(addr) => {
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                if bare.parse::<IpAddr>() == Ok(addr) {
                    write!(f, "{} is {rule}", ShowAddr(addr))?;
                } else {
                    write!(f, "{host} is {}, which is {rule}", ShowAddr(addr))?;
                }
            }
            Subject::Resolved(addr) => {
                write!(f, "{host} resolves to {}, which is {rule}", ShowAddr(addr))?;
            }
            Subject::Connected(addr) => {
                write!(f, "{host} connected to {}, which is {rule}", ShowAddr(addr))?;
            }
        }
        f.write_str(self.remedy)
    }
}

impl StdError for BlockedAddress {}

/// Find our refusal anywhere in an error's `source()` chain.
///
/// reqwest wraps whatever our resolver, redirect policy or connector guard
/// returned, several layers deep; this recovers it so the caller can show
/// which rule fired. Use it on errors from [`crate::SafeClient::http`]
/// (e.g. surfaced by an MCP transport); `SafeClient`'s own helpers already
/// return [`NetError::Blocked`].
pub fn blocked_in_error_chain<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a BlockedAddress> {
    let mut source = Some(err);
    while let Some(e) = source {
        if let Some(blocked) = e.downcast_ref::<BlockedAddress>() {
            return Some(blocked);
        }
        // `#[error(transparent)]` skips the wrapped value in `source()`, so
        // the variant has to be opened by hand.
        if let Some(NetError::Blocked(blocked)) = e.downcast_ref::<NetError>() {
            return Some(blocked);
        }
        source = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn resolved_refusal_reads_as_specified() {
        let e =
            BlockedAddress::resolved("evil.test", ip("169.254.169.254"), BlockRule::CloudMetadata)
                .with_url("http://evil.test/");
        assert_eq!(
            e.to_string(),
            "refused http://evil.test/: evil.test resolves to 169.254.169.254, \
             which is a cloud metadata address (always blocked)"
        );
    }

    #[test]
    fn private_refusal_carries_the_fix() {
        let e = BlockedAddress::literal("127.0.0.1", ip("127.0.0.1"), BlockRule::Loopback)
            .with_url("http://127.0.0.1:8080/mcp");
        assert_eq!(
            e.to_string(),
            "refused http://127.0.0.1:8080/mcp: 127.0.0.1 is a loopback address; \
             set allow_private_network = true on this server entry to allow it"
        );
    }

    #[test]
    fn other_spellings_and_embedded_addresses_are_explained() {
        let e = BlockedAddress::literal(
            "[64:ff9b::a9fe:a9fe]",
            ip("64:ff9b::a9fe:a9fe"),
            BlockRule::CloudMetadata,
        );
        assert_eq!(
            e.to_string(),
            "refused connection to [64:ff9b::a9fe:a9fe]: 64:ff9b::a9fe:a9fe \
             (embedding 169.254.169.254) is a cloud metadata address (always blocked)"
        );
        let e = BlockedAddress::literal(
            "0xa9fea9fe",
            ip("169.254.169.254"),
            BlockRule::CloudMetadata,
        );
        assert!(
            e.to_string()
                .contains("0xa9fea9fe is 169.254.169.254, which is a cloud metadata address"),
            "{e}"
        );
    }

    #[test]
    fn name_and_redirect_refusals() {
        let e = BlockedAddress::name("metadata.google.internal", BlockRule::MetadataHostName)
            .with_url("http://metadata.google.internal/")
            .via_redirect();
        assert_eq!(
            e.to_string(),
            "refused redirect to http://metadata.google.internal/: metadata.google.internal \
             is a cloud metadata host name (always blocked)"
        );
        assert_eq!(e.addr(), None);
        assert!(e.is_redirect());
    }

    #[test]
    fn request_url_is_attached_only_when_it_names_the_refused_host() {
        let blocked = || {
            BlockedAddress::resolved(
                "metadata-alias.test",
                ip("169.254.169.254"),
                BlockRule::CloudMetadata,
            )
        };
        let mut same = blocked();
        same.attach_request_url(&"http://Metadata-Alias.test./x".parse().unwrap());
        assert_eq!(same.url(), Some("http://metadata-alias.test./x"));
        assert!(!same.is_redirect());

        let mut hop = blocked();
        hop.attach_request_url(&"http://127.0.0.1:9/start".parse().unwrap());
        assert_eq!(hop.url(), None);
        assert!(hop.is_redirect());
        assert_eq!(
            hop.to_string(),
            "refused a redirect from http://127.0.0.1:9/start: metadata-alias.test resolves \
             to 169.254.169.254, which is a cloud metadata address (always blocked)"
        );
    }

    #[test]
    fn chain_walk_finds_the_refusal_through_wrappers() {
        #[derive(Debug)]
        struct Wrapper(Box<dyn StdError + Send + Sync>);
        impl fmt::Display for Wrapper {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("wrapper")
            }
        }
        impl StdError for Wrapper {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&*self.0)
            }
        }

        let blocked =
            BlockedAddress::literal("10.0.0.1", ip("10.0.0.1"), BlockRule::PrivateNetwork);
        let direct = Wrapper(Box::new(Wrapper(Box::new(blocked.clone()))));
        assert_eq!(blocked_in_error_chain(&direct), Some(&blocked));

        let via_net_error = Wrapper(Box::new(NetError::Blocked(blocked.clone())));
        assert_eq!(blocked_in_error_chain(&via_net_error), Some(&blocked));

        let unrelated = Wrapper(Box::new(std::io::Error::other("nope")));
        assert_eq!(blocked_in_error_chain(&unrelated), None);
    }
}

/// The most recent refusal made inside a client's resolver or redirect policy.
///
/// Refusals there surface as a `reqwest::Error` whose source is the typed [`BlockedAddress`], but
/// libraries that wrap reqwest (rmcp's transports) often keep only the top-level message, which then
/// says "error following redirect" or "dns error" without the rule. Each client keeps its last refusal
/// so the caller can still tell the user which rule refused which address.
#[derive(Debug, Clone, Default)]
pub(crate) struct RefusalLog(std::sync::Arc<std::sync::Mutex<Option<Refusal>>>);

#[derive(Debug, Clone)]
enum Refusal {
    Blocked(BlockedAddress),
    /// Another refusal of the redirect policy (credentials leaving their origin), as its message.
    Other(String),
}

impl RefusalLog {
    pub(crate) fn record(&self, refusal: &BlockedAddress) {
        self.set(Refusal::Blocked(refusal.clone()));
    }

    pub(crate) fn record_other(&self, refusal: &NetError) {
        self.set(Refusal::Other(refusal.to_string()));
    }

    fn set(&self, refusal: Refusal) {
        if let Ok(mut last) = self.0.lock() {
            *last = Some(refusal);
        }
    }

    /// The last refusal, if it was of an address.
    pub(crate) fn last(&self) -> Option<BlockedAddress> {
        match self.0.lock().ok()?.as_ref()? {
            Refusal::Blocked(blocked) => Some(blocked.clone()),
            Refusal::Other(_) => None,
        }
    }

    /// The last refusal of any kind, as the user should read it.
    pub(crate) fn last_message(&self) -> Option<String> {
        match self.0.lock().ok()?.as_ref()? {
            Refusal::Blocked(blocked) => Some(blocked.to_string()),
            Refusal::Other(message) => Some(message.clone()),
        }
    }
}
