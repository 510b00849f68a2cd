//! `SafeClient`: the reqwest client with every check wired in.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::redirect;
use url::{Host, Url};

use crate::error::{BlockedAddress, NetError};
use crate::guard::PeerGuardLayer;
use crate::policy::{NetPolicy, classify, host_name_class, parse_ipv4_lenient};
use crate::resolve::{CheckingResolver, HostResolver, SystemResolver};

/// Redirect hops followed before giving up.
pub const MAX_REDIRECTS: usize = 10;

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which requests of a client carry configured headers (API keys, tokens): they must not follow a
/// redirect to another origin, since reqwest keeps such headers across origins (it strips only
/// `Authorization`, cookies and their kin). A redirect policy cannot take headers off a request, so
/// such a hop is refused ([`NetError::CredentialsCrossOrigin`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CredentialScope {
    /// No configured headers: redirects are followed wherever the policy allows.
    #[default]
    Nowhere,
    /// Requests to this origin carry them (requests elsewhere go without, and may be redirected).
    Origin(url::Origin),
    /// Every request carries them.
    Everywhere,
}

impl CredentialScope {
    /// The scope of headers configured for `url`: its origin, or none if `headers_present` is false.
    pub fn for_url(url: &Url, headers_present: bool) -> Self {
        if headers_present {
            CredentialScope::Origin(url.origin())
        } else {
            CredentialScope::Nowhere
        }
    }

    /// Whether a redirect chain that started at `first` may go on to `next`.
    fn allows(&self, first: &Url, next: &Url) -> Result<(), url::Origin> {
        let carried = match self {
            CredentialScope::Nowhere => return Ok(()),
            CredentialScope::Origin(origin) => (first.origin() == *origin).then(|| origin.clone()),
            CredentialScope::Everywhere => Some(first.origin()),
        };
        match carried {
            Some(origin) if next.origin() != origin => Err(origin),
            _ => Ok(()),
        }
    }
}

/// Check a URL without touching DNS: scheme, blocked host names, and IP
/// literals (in any spelling `url` accepts, which it normalises to the
/// address). Host names still have to get past the resolver when used.
pub fn check_url(url: &str, policy: &NetPolicy) -> Result<Url, NetError> {
    let parsed = Url::parse(url).map_err(|source| NetError::InvalidUrl {
        url: url.to_owned(),
        source,
    })?;
    check_parsed_url(&parsed, policy)?;
    Ok(parsed)
}

fn check_parsed_url(url: &Url, policy: &NetPolicy) -> Result<(), NetError> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(NetError::UnsupportedScheme {
                url: url.to_string(),
                scheme: other.to_owned(),
            });
        }
    }
    let blocked = |b: BlockedAddress| NetError::Blocked(b.with_url(url.as_str()).under(policy));
    let host_str = url.host_str().unwrap_or_default();
    let addr = match url.host() {
        None => {
            return Err(NetError::MissingHost {
                url: url.to_string(),
            });
        }
        Some(Host::Ipv4(v4)) => v4.into(),
        Some(Host::Ipv6(v6)) => v6.into(),
        Some(Host::Domain(name)) => {
            if let Some(rule) = host_name_class(name) {
                return Err(blocked(BlockedAddress::name(name, rule)));
            }
            // WHATWG parsing already turned numeric spellings into
            // Host::Ipv4; this only matters if that ever stops being true.
            match parse_ipv4_lenient(name) {
                Some(v4) => v4.into(),
                None => return Ok(()),
            }
        }
    };
    classify(addr, policy).map_err(|rule| blocked(BlockedAddress::literal(host_str, addr, rule)))
}

/// The one outbound HTTP client. Cheap to clone; one per policy.
#[derive(Clone)]
pub struct SafeClient {
    http: reqwest::Client,
    policy: NetPolicy,
    refusals: crate::error::RefusalLog,
    connect_failures: crate::cause::ConnectFailures,
}

impl fmt::Debug for SafeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SafeClient")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl SafeClient {
    /// A client with the system resolver and default settings.
    pub fn new(policy: NetPolicy) -> Result<Self, NetError> {
        Self::builder().policy(policy).build()
    }

    pub fn builder() -> SafeClientBuilder {
        SafeClientBuilder::default()
    }

    pub fn policy(&self) -> &NetPolicy {
        &self.policy
    }

    /// The last address this client refused in its resolver or redirect policy, for callers whose
    /// error passed through a library that dropped the typed cause.
    pub fn last_refusal(&self) -> Option<BlockedAddress> {
        self.refusals.last()
    }

    /// The last refusal of any kind this client made (an address, or configured headers kept from
    /// another origin), as the message to show.
    pub fn last_refusal_message(&self) -> Option<String> {
        self.refusals.last_message()
    }

    /// Why this client's last failed connection failed, in plain words (`connection refused`), for
    /// callers whose error passed through a library that kept only a top-level message.
    pub fn last_connect_failure(&self) -> Option<String> {
        self.connect_failures.last()
    }

    /// [`check_url`] under this client's policy.
    pub fn check_url(&self, url: &str) -> Result<Url, NetError> {
        check_url(url, &self.policy)
    }

    /// The underlying reqwest client, for code that must drive reqwest
    /// itself (rmcp's Streamable HTTP transport, the legacy SSE client).
    ///
    /// Resolution, redirects and every connection are still checked, but
    /// refusals come back buried inside a `reqwest::Error` (an IP-literal
    /// URL is only caught by the connector guard): call
    /// [`SafeClient::check_url`] on the configured URL first for a clear
    /// error, and use [`crate::blocked_in_error_chain`] on transport errors.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A request builder for a checked URL. Send it with
    /// [`SafeClient::send`] (or convert its error with `NetError::from`) to
    /// get refusals back as [`NetError::Blocked`].
    pub fn request(
        &self,
        method: reqwest::Method,
        url: &str,
    ) -> Result<reqwest::RequestBuilder, NetError> {
        let url = self.check_url(url)?;
        Ok(self.http.request(method, url))
    }

    /// Send a request, mapping refusals raised inside reqwest (resolver,
    /// redirect, connection) back to our typed errors.
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, NetError> {
        Ok(request.send().await?)
    }

    pub async fn get(&self, url: &str) -> Result<reqwest::Response, NetError> {
        self.send(self.request(reqwest::Method::GET, url)?).await
    }
}

/// Configures a [`SafeClient`]. The checks themselves are not configurable.
pub struct SafeClientBuilder {
    policy: NetPolicy,
    credentials: CredentialScope,
    resolver: Arc<dyn HostResolver>,
    timeout: Option<Duration>,
    connect_timeout: Duration,
    user_agent: String,
    follow_redirects: bool,
}

impl Default for SafeClientBuilder {
    fn default() -> Self {
        Self {
            policy: NetPolicy::default(),
            credentials: CredentialScope::Nowhere,
            resolver: Arc::new(SystemResolver),
            timeout: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            user_agent: concat!("portico/", env!("CARGO_PKG_VERSION")).to_owned(),
            follow_redirects: true,
        }
    }
}

impl fmt::Debug for SafeClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SafeClientBuilder")
            .field("policy", &self.policy)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("user_agent", &self.user_agent)
            .finish_non_exhaustive()
    }
}

impl SafeClientBuilder {
    pub fn policy(mut self, policy: NetPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Which requests carry configured headers, whose redirects must stay on their origin.
    pub fn credentials(mut self, scope: CredentialScope) -> Self {
        self.credentials = scope;
        self
    }

    /// Replace the name resolver (tests map names to chosen addresses).
    /// Whatever it returns is still checked.
    pub fn resolver(mut self, resolver: Arc<dyn HostResolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Total deadline per request, body included. Unset by default because
    /// SSE and streamable-HTTP responses are legitimately long-lived.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Deadline for establishing a connection (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// Hand redirects back to the caller instead of following them (OAuth token and registration
    /// requests must not be redirected, RFC 9700 §4.11; the caller reads `Location` itself).
    pub fn follow_redirects(mut self, follow: bool) -> Self {
        self.follow_redirects = follow;
        self
    }

    pub fn build(self) -> Result<SafeClient, NetError> {
        let policy = self.policy;
        let refusals = crate::error::RefusalLog::default();
        let connect_failures = crate::cause::ConnectFailures::default();
        let redirect_policy = if self.follow_redirects {
            let policy = policy.clone();
            let refusals = refusals.clone();
            let credentials = self.credentials;
            redirect::Policy::custom(move |attempt| {
                check_redirect(attempt, &policy, &credentials, &refusals)
            })
        } else {
            redirect::Policy::none()
        };
        let mut builder = reqwest::Client::builder()
            // A proxy would resolve and connect on our behalf, out of reach
            // of every check below; environment proxies are ignored too.
            .no_proxy()
            .dns_resolver(Arc::new(CheckingResolver {
                inner: self.resolver,
                policy: policy.clone(),
                refusals: refusals.clone(),
            }))
            .redirect(redirect_policy)
            .connector_layer(PeerGuardLayer {
                policy: policy.clone(),
                failures: connect_failures.clone(),
            })
            .connect_timeout(self.connect_timeout)
            .user_agent(self.user_agent);
        if let Some(timeout) = self.timeout {
            builder = builder.timeout(timeout);
        }
        let http = builder.build().map_err(NetError::Build)?;
        Ok(SafeClient {
            http,
            policy,
            refusals,
            connect_failures,
        })
    }
}

/// Each hop is re-checked here (scheme, names, IP literals) before reqwest
/// follows it; host names then meet the checking resolver on connect.
fn check_redirect(
    attempt: redirect::Attempt<'_>,
    policy: &NetPolicy,
    credentials: &CredentialScope,
    refusals: &crate::error::RefusalLog,
) -> redirect::Action {
    // `previous` starts with the original URL and gains one entry per hop,
    // so this lets exactly MAX_REDIRECTS hops through.
    if attempt.previous().len() > MAX_REDIRECTS {
        let url = attempt.url().to_string();
        return attempt.error(NetError::TooManyRedirects {
            url,
            max: MAX_REDIRECTS,
        });
    }
    if let Some(first) = attempt.previous().first()
        && let Err(origin) = credentials.allows(first, attempt.url())
    {
        let error = NetError::CredentialsCrossOrigin {
            from: attempt.previous().last().unwrap_or(first).to_string(),
            to: attempt.url().to_string(),
            origin: origin.ascii_serialization(),
        };
        tracing::debug!("{error}");
        refusals.record_other(&error);
        return attempt.error(error);
    }
    match check_parsed_url(attempt.url(), policy) {
        Ok(()) => attempt.follow(),
        Err(NetError::Blocked(blocked)) => {
            tracing::debug!(%blocked, "refusing redirect");
            let blocked = blocked.via_redirect();
            refusals.record(&blocked);
            attempt.error(blocked)
        }
        Err(other) => attempt.error(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::BlockRule;

    fn strict() -> NetPolicy {
        NetPolicy::default()
    }

    fn rule(url: &str, policy: &NetPolicy) -> BlockRule {
        match check_url(url, policy) {
            Err(NetError::Blocked(b)) => b.rule(),
            other => panic!("{url}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn numeric_spellings_of_metadata_are_normalised_and_refused() {
        for url in [
            "http://169.254.169.254/latest/meta-data",
            "http://0xa9fea9fe/",
            "http://0XA9FEA9FE/",
            "http://2852039166/",
            "http://0251.0376.0251.0376/",
            "http://0xA9.0xFE.0xA9.0xFE/",
            "http://169.254.43518/",
            "http://0xa9.16689662/",
            "http://169.254.169.254./",
            "https://[::ffff:169.254.169.254]/",
            "https://[::ffff:a9fe:a9fe]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[64:ff9b::169.254.169.254]/",
            "http://[::169.254.169.254]/",
            "http://[fd00:ec2::254]/latest/meta-data",
            "http://100.100.100.200/",
        ] {
            let allow = NetPolicy::allow_private_network();
            assert_eq!(rule(url, &strict()), BlockRule::CloudMetadata, "{url}");
            assert_eq!(rule(url, &allow), BlockRule::CloudMetadata, "{url}");
        }
    }

    #[test]
    fn numeric_spellings_of_loopback_are_refused_by_default() {
        for url in [
            "http://127.1/",
            "http://0x7f000001/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://[::1]:8080/",
            "http://[::ffff:127.0.0.1]/",
            "http://[64:ff9b::7f00:1]/",
        ] {
            assert_eq!(rule(url, &strict()), BlockRule::Loopback, "{url}");
            assert!(
                check_url(url, &NetPolicy::allow_private_network()).is_ok(),
                "{url}"
            );
        }
    }

    #[test]
    fn malformed_numeric_hosts_are_rejected_not_resolved() {
        // A host that ends in a number must be a valid IPv4 address under
        // WHATWG, so these never reach DNS as names.
        for url in [
            "http://0xA9FE.0xA9FE/",
            "http://256.1.1.1/",
            "http://1.2.3.4.5/",
        ] {
            assert!(
                matches!(check_url(url, &strict()), Err(NetError::InvalidUrl { .. })),
                "{url}: {:?}",
                check_url(url, &strict())
            );
        }
    }

    #[test]
    fn every_always_blocked_class_survives_the_opt_in() {
        let allow = NetPolicy::allow_private_network();
        for (url, expected) in [
            ("http://169.254.1.1/", BlockRule::LinkLocal),
            ("http://[fe80::1]/", BlockRule::LinkLocal),
            ("http://0.0.0.0:8080/", BlockRule::Unspecified),
            ("http://[::]/", BlockRule::Unspecified),
            ("http://224.0.0.251/", BlockRule::Multicast),
            ("http://[ff02::fb]/", BlockRule::Multicast),
            ("http://255.255.255.255/", BlockRule::Broadcast),
            ("http://240.1.2.3/", BlockRule::Reserved),
        ] {
            assert_eq!(rule(url, &strict()), expected, "{url}");
            assert_eq!(rule(url, &allow), expected, "{url}");
        }
    }

    #[test]
    fn every_opt_in_class_is_refused_by_default_only() {
        let allow = NetPolicy::allow_private_network();
        for (url, expected) in [
            ("http://10.1.2.3/", BlockRule::PrivateNetwork),
            ("http://172.20.0.1/", BlockRule::PrivateNetwork),
            ("http://192.168.0.10/", BlockRule::PrivateNetwork),
            ("http://100.64.0.1/", BlockRule::SharedAddressSpace),
            ("http://[fd12::1]/", BlockRule::UniqueLocal),
            ("http://198.18.0.1/", BlockRule::SpecialPurpose),
        ] {
            assert_eq!(rule(url, &strict()), expected, "{url}");
            assert!(check_url(url, &allow).is_ok(), "{url}");
        }
    }

    #[test]
    fn metadata_names_are_refused_without_dns() {
        for url in [
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://METADATA.GOOGLE.INTERNAL./",
            "https://metadata.goog/",
            "http://metadata/",
            "http://instance-data/latest/",
            // url percent-decodes and IDNA-maps hosts before we look at them.
            "http://metadata%2Egoogle%2Einternal/",
            "http://\u{ff4d}etadata.google.internal/",
        ] {
            let err = check_url(url, &NetPolicy::allow_private_network()).unwrap_err();
            let blocked = err.blocked().unwrap_or_else(|| panic!("{url}: {err}"));
            assert_eq!(blocked.rule(), BlockRule::MetadataHostName, "{url}");
            assert!(err.to_string().contains("(always blocked)"), "{err}");
        }
    }

    #[test]
    fn only_http_and_https() {
        for url in [
            "file:///etc/passwd",
            "ftp://example.com/",
            "gopher://example.com:70/",
            "ws://example.com/",
            "data:text/plain,hi",
            "javascript:alert(1)",
        ] {
            match check_url(url, &NetPolicy::allow_private_network()) {
                Err(NetError::UnsupportedScheme { .. }) => {}
                other => panic!("{url}: {other:?}"),
            }
        }
        assert!(check_url("https://example.com/", &strict()).is_ok());
        assert!(check_url("HTTP://Example.COM/x", &strict()).is_ok());
    }

    #[test]
    fn error_names_the_url_address_and_rule() {
        let err = check_url("http://0xa9fea9fe/latest/meta-data", &strict()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "refused http://169.254.169.254/latest/meta-data: 169.254.169.254 is a cloud \
             metadata address (always blocked)"
        );
        let err = check_url("http://10.0.0.7:9000/mcp", &strict()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "refused http://10.0.0.7:9000/mcp: 10.0.0.7 is a private network address; \
             set allow_private_network = true on this server entry to allow it"
        );
    }

    #[test]
    fn builder_settings_are_kept() {
        let client = SafeClient::builder()
            .policy(NetPolicy::allow_private_network())
            .timeout(Duration::from_secs(3))
            .user_agent("test-agent")
            .build()
            .unwrap();
        assert!(client.policy().allow_private);
        assert!(
            !SafeClient::new(NetPolicy::default())
                .unwrap()
                .policy()
                .allow_private
        );
    }
}
