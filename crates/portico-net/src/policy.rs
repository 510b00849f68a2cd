//! Which destinations an outbound request may reach.
//!
//! Everything here is pure and synchronous so it can be exhaustively unit
//! tested and reused by the resolver, the redirect policy and the connector
//! guard without any of them disagreeing about what "blocked" means.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What an upstream server entry is allowed to reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetPolicy {
    /// Opt-in for loopback, RFC 1918, CGNAT, ULA and other non-global
    /// unicast ranges. Cloud metadata, link-local, unspecified, multicast,
    /// broadcast and reserved addresses stay blocked regardless.
    pub allow_private: bool,
    /// What a refusal that `allow_private` would lift tells the user to do; `None`: the setting of
    /// a configured server entry ([`PRIVATE_NETWORK_REMEDY`]).
    private_network_remedy: Option<&'static str>,
}

impl NetPolicy {
    /// Public internet only; the default.
    pub fn public_only() -> Self {
        Self {
            allow_private: false,
            private_network_remedy: None,
        }
    }

    /// Also allow loopback and private networks (for self-hosted upstreams).
    pub fn allow_private_network() -> Self {
        Self {
            allow_private: true,
            private_network_remedy: None,
        }
    }

    /// `allow_private_network()` when `allow`, else `public_only()`.
    pub fn private_network(allow: bool) -> Self {
        if allow {
            Self::allow_private_network()
        } else {
            Self::public_only()
        }
    }

    /// The policy, its refusals of private addresses ending in `remedy` (`"; set X = true in Y to
    /// allow it"`): the setting that lifts them is where the client's configuration lives, which
    /// only its owner knows.
    pub fn with_private_network_remedy(mut self, remedy: &'static str) -> Self {
        self.private_network_remedy = Some(remedy);
        self
    }

    /// What a refusal by `rule` under this policy ends with: that nothing lifts it, or what does.
    pub(crate) fn remedy(&self, rule: BlockRule) -> &'static str {
        if rule.always_blocked() {
            ALWAYS_BLOCKED
        } else {
            self.private_network_remedy
                .unwrap_or(PRIVATE_NETWORK_REMEDY)
        }
    }
}

/// The rule that refused a destination.
///
/// `Display` is the human text used in error messages, phrased to follow
/// "X is …" / "which is …".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockRule {
    /// 169.254.169.254, fd00:ec2::254, fd20:ce::254, 100.100.100.200, 192.0.0.192.
    CloudMetadata,
    /// metadata.google.internal, metadata.goog, instance-data, … (refused by name, before DNS).
    MetadataHostName,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// 0.0.0.0/8, `::`.
    Unspecified,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 240.0.0.0/4 (reserved for future use, never routable).
    Reserved,
    /// 127.0.0.0/8, `::1`.
    Loopback,
    /// 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, deprecated IPv6 site-local fec0::/10.
    PrivateNetwork,
    /// 100.64.0.0/10 (carrier-grade NAT).
    SharedAddressSpace,
    /// fc00::/7.
    UniqueLocal,
    /// Other IANA special-purpose ranges that are not global unicast:
    /// 192.0.0.0/24, 192.0.2.0/24, 192.88.99.0/24, 198.18.0.0/15,
    /// 198.51.100.0/24, 203.0.113.0/24, 100::/64, 2001::/23, 2001:db8::/32,
    /// 3fff::/20, 64:ff9b:1::/48.
    SpecialPurpose,
}

impl BlockRule {
    /// True when `allow_private` cannot lift this rule.
    pub fn always_blocked(self) -> bool {
        match self {
            BlockRule::CloudMetadata
            | BlockRule::MetadataHostName
            | BlockRule::LinkLocal
            | BlockRule::Unspecified
            | BlockRule::Multicast
            | BlockRule::Broadcast
            | BlockRule::Reserved => true,
            BlockRule::Loopback
            | BlockRule::PrivateNetwork
            | BlockRule::SharedAddressSpace
            | BlockRule::UniqueLocal
            | BlockRule::SpecialPurpose => false,
        }
    }
}

impl fmt::Display for BlockRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BlockRule::CloudMetadata => "a cloud metadata address",
            BlockRule::MetadataHostName => "a cloud metadata host name",
            BlockRule::LinkLocal => "a link-local address",
            BlockRule::Unspecified => "an unspecified (\"this network\") address",
            BlockRule::Multicast => "a multicast address",
            BlockRule::Broadcast => "the broadcast address",
            BlockRule::Reserved => "a reserved address (240.0.0.0/4)",
            BlockRule::Loopback => "a loopback address",
            BlockRule::PrivateNetwork => "a private network address",
            BlockRule::SharedAddressSpace => "a shared address space (carrier-grade NAT) address",
            BlockRule::UniqueLocal => "a unique local IPv6 address",
            BlockRule::SpecialPurpose => "a special-purpose, non-global address",
        })
    }
}

/// The end of a refusal nothing lifts.
const ALWAYS_BLOCKED: &str = " (always blocked)";

/// The end of a refusal that `allow_private_network` on the configured entry would lift.
pub(crate) const PRIVATE_NETWORK_REMEDY: &str =
    "; set allow_private_network = true on this server entry to allow it";

/// Decide whether `ip` may be connected to under `policy`.
pub fn classify(ip: IpAddr, policy: &NetPolicy) -> Result<(), BlockRule> {
    match address_class(ip) {
        None => Ok(()),
        Some(rule) if policy.allow_private && !rule.always_blocked() => Ok(()),
        Some(rule) => Err(rule),
    }
}

/// The rule an address falls under, independent of policy; `None` for
/// ordinary global unicast.
pub fn address_class(ip: IpAddr) -> Option<BlockRule> {
    match ip {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => v6_class(v6),
    }
}

const V4_METADATA: [Ipv4Addr; 3] = [
    // AWS, Azure, GCP, OCI, DigitalOcean, OpenStack, ...
    Ipv4Addr::new(169, 254, 169, 254),
    // Alibaba Cloud; sits inside 100.64/10 so the CGNAT opt-in must not expose it.
    Ipv4Addr::new(100, 100, 100, 200),
    // Oracle Cloud Classic; inside 192.0.0.0/24, same reasoning.
    Ipv4Addr::new(192, 0, 0, 192),
];

const V6_METADATA: [Ipv6Addr; 2] = [
    // AWS IMDS over IPv6 (Nitro); inside fc00::/7, so the ULA opt-in must not expose it.
    Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254),
    // GCP metadata server on IPv6-only VMs.
    Ipv6Addr::new(0xfd20, 0x00ce, 0, 0, 0, 0, 0, 0x0254),
];

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    let net = Ipv6Addr::new(
        net[0], net[1], net[2], net[3], net[4], net[5], net[6], net[7],
    );
    (u128::from(ip) & mask) == (u128::from(net) & mask)
}

fn v4_class(ip: Ipv4Addr) -> Option<BlockRule> {
    // Order matters: metadata addresses live inside ranges that the opt-in
    // would otherwise lift, so they are matched first.
    if V4_METADATA.contains(&ip) {
        return Some(BlockRule::CloudMetadata);
    }
    let rule = if in_v4(ip, [0, 0, 0, 0], 8) {
        BlockRule::Unspecified
    } else if in_v4(ip, [169, 254, 0, 0], 16) {
        BlockRule::LinkLocal
    } else if in_v4(ip, [224, 0, 0, 0], 4) {
        BlockRule::Multicast
    } else if ip == Ipv4Addr::BROADCAST {
        BlockRule::Broadcast
    } else if in_v4(ip, [240, 0, 0, 0], 4) {
        BlockRule::Reserved
    } else if in_v4(ip, [127, 0, 0, 0], 8) {
        BlockRule::Loopback
    } else if in_v4(ip, [10, 0, 0, 0], 8)
        || in_v4(ip, [172, 16, 0, 0], 12)
        || in_v4(ip, [192, 168, 0, 0], 16)
    {
        BlockRule::PrivateNetwork
    } else if in_v4(ip, [100, 64, 0, 0], 10) {
        BlockRule::SharedAddressSpace
    } else if in_v4(ip, [192, 0, 0, 0], 24)
        || in_v4(ip, [192, 0, 2, 0], 24)
        || in_v4(ip, [192, 88, 99, 0], 24)
        || in_v4(ip, [198, 18, 0, 0], 15)
        || in_v4(ip, [198, 51, 100, 0], 24)
        || in_v4(ip, [203, 0, 113, 0], 24)
    {
        BlockRule::SpecialPurpose
    } else {
        return None;
    };
    Some(rule)
}

fn v6_class(ip: Ipv6Addr) -> Option<BlockRule> {
    if V6_METADATA.contains(&ip) {
        return Some(BlockRule::CloudMetadata);
    }
    if ip.is_unspecified() {
        return Some(BlockRule::Unspecified);
    }
    if ip.is_loopback() {
        return Some(BlockRule::Loopback);
    }
    if in_v6(ip, [0xff00, 0, 0, 0, 0, 0, 0, 0], 8) {
        return Some(BlockRule::Multicast);
    }
    if in_v6(ip, [0xfe80, 0, 0, 0, 0, 0, 0, 0], 10) {
        return Some(BlockRule::LinkLocal);
    }
    // A v6 address that tunnels or translates to a v4 one is exactly as
    // dangerous as that v4 address, so it inherits its class.
    if let Some(rule) = embedded_ipv4(ip).and_then(v4_class) {
        return Some(rule);
    }
    if in_v6(ip, [0xfc00, 0, 0, 0, 0, 0, 0, 0], 7) {
        return Some(BlockRule::UniqueLocal);
    }
    if in_v6(ip, [0xfec0, 0, 0, 0, 0, 0, 0, 0], 10) {
        return Some(BlockRule::PrivateNetwork);
    }
    if in_v6(ip, [0x0100, 0, 0, 0, 0, 0, 0, 0], 64)
        || in_v6(ip, [0x2001, 0, 0, 0, 0, 0, 0, 0], 23)
        || in_v6(ip, [0x2001, 0x0db8, 0, 0, 0, 0, 0, 0], 32)
        || in_v6(ip, [0x3fff, 0, 0, 0, 0, 0, 0, 0], 20)
        || in_v6(ip, [0x0064, 0xff9b, 0x0001, 0, 0, 0, 0, 0], 48)
    {
        return Some(BlockRule::SpecialPurpose);
    }
    None
}

/// The IPv4 address an IPv6 address stands for, if it is one of the
/// v4-in-v6 forms a network stack may route to that v4 destination:
/// IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64
/// (64:ff9b::/96 and the local-use 64:ff9b:1::/48), 6to4 (2002::/16) and
/// Teredo (2001::/32, client address).
pub fn embedded_ipv4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let bits = u128::from(ip);
    let low32 = Ipv4Addr::from(bits as u32);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    // `::` and `::1` are their own v6 classes, not 0.0.0.0 / 0.0.0.1.
    if bits >> 32 == 0 && bits > 1 {
        return Some(low32);
    }
    if in_v6(ip, [0x0064, 0xff9b, 0, 0, 0, 0, 0, 0], 96)
        || in_v6(ip, [0x0064, 0xff9b, 0x0001, 0, 0, 0, 0, 0], 48)
    {
        return Some(low32);
    }
    if in_v6(ip, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        return Some(Ipv4Addr::from((bits >> 80) as u32));
    }
    if in_v6(ip, [0x2001, 0, 0, 0, 0, 0, 0, 0], 32) {
        // RFC 4380: the client's public address is stored bit-inverted.
        return Some(Ipv4Addr::from(!(bits as u32)));
    }
    None
}

/// Host names that reach a cloud metadata service without naming its
/// address. Matched exactly or as a parent domain, after lower-casing and
/// dropping a trailing dot.
const METADATA_NAMES: [&str; 5] = [
    "metadata.google.internal",
    "metadata.goog",
    "instance-data.ec2.internal",
    "metadata.tencentyun.com",
    "metadata.azure.internal",
];

/// Single-label names that search domains turn into a metadata host
/// (GCP resolves bare `metadata`, EC2 resolves `instance-data`).
const METADATA_LABELS: [&str; 2] = ["metadata", "instance-data"];

/// Refuse a host name by name alone, before any DNS lookup.
pub fn host_name_class(host: &str) -> Option<BlockRule> {
    let host = normalize_host_name(host);
    let by_suffix = METADATA_NAMES.iter().any(|name| {
        host == *name
            || host
                .strip_suffix(name)
                .is_some_and(|rest| rest.ends_with('.'))
    });
    if by_suffix || METADATA_LABELS.contains(&host.as_str()) {
        Some(BlockRule::MetadataHostName)
    } else {
        None
    }
}

pub(crate) fn normalize_host_name(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Parse an IPv4 address the way `inet_aton(3)` and WHATWG URL host parsing
/// do: one to four dot-separated parts, each decimal, `0x` hex or
/// leading-zero octal, with the last part filling the remaining bytes, and
/// an optional trailing dot. `0xA9FE.0xA9FE`, `0251.0376.0251.0376`,
/// `0xa9fea9fe` and `2852039166` all yield 169.254.169.254.
///
/// The resolver applies this to every host name it is handed because the
/// system resolver accepts these spellings too; `url` already normalises
/// them in http(s) URLs, so this is the second line, not the first.
pub fn parse_ipv4_lenient(host: &str) -> Option<Ipv4Addr> {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut numbers = Vec::with_capacity(parts.len());
    for part in &parts {
        numbers.push(parse_ipv4_part(part)?);
    }
    let (last, leading) = numbers.split_last()?;
    let mut value: u64 = 0;
    for (i, n) in leading.iter().enumerate() {
        if *n > 255 {
            return None;
        }
        value |= n << (8 * (3 - i));
    }
    let room = 8 * (4 - leading.len() as u32);
    if *last >= (1u64 << room) {
        return None;
    }
    value |= last;
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

fn parse_ipv4_part(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    // WHATWG treats a bare "0x" as zero.
    if digits.is_empty() {
        return Some(0);
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    // Digits only, so the sole failure left is overflow: too big to be an
    // address part anyway.
    u64::from_str_radix(digits, radix)
        .ok()
        .filter(|n| *n <= u64::from(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: NetPolicy = NetPolicy {
        allow_private: false,
        private_network_remedy: None,
    };
    const OPEN: NetPolicy = NetPolicy {
        allow_private: true,
        private_network_remedy: None,
    };

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// Blocked under both policies, with this rule.
    fn always(s: &str, rule: BlockRule) {
        assert_eq!(classify(ip(s), &STRICT), Err(rule), "{s} strict");
        assert_eq!(classify(ip(s), &OPEN), Err(rule), "{s} allow_private");
    }

    /// Blocked by default with this rule, allowed with the opt-in.
    fn opt_in(s: &str, rule: BlockRule) {
        assert_eq!(classify(ip(s), &STRICT), Err(rule), "{s} strict");
        assert_eq!(classify(ip(s), &OPEN), Ok(()), "{s} allow_private");
    }

    fn allowed(s: &str) {
        assert_eq!(classify(ip(s), &STRICT), Ok(()), "{s} strict");
        assert_eq!(classify(ip(s), &OPEN), Ok(()), "{s} allow_private");
    }

    #[test]
    fn cloud_metadata_is_always_blocked() {
        always("169.254.169.254", BlockRule::CloudMetadata);
        always("100.100.100.200", BlockRule::CloudMetadata);
        always("192.0.0.192", BlockRule::CloudMetadata);
        always("fd00:ec2::254", BlockRule::CloudMetadata);
        always("fd20:ce::254", BlockRule::CloudMetadata);
    }

    #[test]
    fn link_local_is_always_blocked() {
        always("169.254.0.1", BlockRule::LinkLocal);
        always("169.254.170.2", BlockRule::LinkLocal);
        always("169.254.255.255", BlockRule::LinkLocal);
        always("fe80::1", BlockRule::LinkLocal);
        always("febf:ffff::1", BlockRule::LinkLocal);
    }

    #[test]
    fn unspecified_is_always_blocked() {
        always("0.0.0.0", BlockRule::Unspecified);
        always("0.1.2.3", BlockRule::Unspecified);
        always("::", BlockRule::Unspecified);
    }

    #[test]
    fn multicast_broadcast_reserved_are_always_blocked() {
        always("224.0.0.1", BlockRule::Multicast);
        always("239.255.255.250", BlockRule::Multicast);
        always("ff02::1", BlockRule::Multicast);
        always("ff05::1:3", BlockRule::Multicast);
        always("255.255.255.255", BlockRule::Broadcast);
        always("240.0.0.1", BlockRule::Reserved);
        always("255.255.255.254", BlockRule::Reserved);
    }

    #[test]
    fn loopback_needs_opt_in() {
        opt_in("127.0.0.1", BlockRule::Loopback);
        opt_in("127.255.255.254", BlockRule::Loopback);
        opt_in("::1", BlockRule::Loopback);
    }

    #[test]
    fn private_ranges_need_opt_in() {
        opt_in("10.0.0.1", BlockRule::PrivateNetwork);
        opt_in("10.255.255.255", BlockRule::PrivateNetwork);
        opt_in("172.16.0.1", BlockRule::PrivateNetwork);
        opt_in("172.31.255.255", BlockRule::PrivateNetwork);
        opt_in("192.168.1.1", BlockRule::PrivateNetwork);
        opt_in("fec0::1", BlockRule::PrivateNetwork);
        opt_in("100.64.0.1", BlockRule::SharedAddressSpace);
        opt_in("100.127.255.255", BlockRule::SharedAddressSpace);
        opt_in("fc00::1", BlockRule::UniqueLocal);
        opt_in("fd12:3456:789a::1", BlockRule::UniqueLocal);
    }

    #[test]
    fn special_purpose_needs_opt_in() {
        for s in [
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "100::1",
            "2001:db8::1",
            "2001:2::1",
            "3fff::1",
            "64:ff9b:1::808:808",
        ] {
            opt_in(s, BlockRule::SpecialPurpose);
        }
    }

    #[test]
    fn range_edges_are_not_over_blocked() {
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.167.255.255",
            "192.169.0.0",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "fbff:ffff::1",
            "2a00:1450:4001::1",
        ] {
            allowed(s);
        }
    }

    #[test]
    fn ipv4_mapped_ipv6_inherits_the_v4_class() {
        always("::ffff:169.254.169.254", BlockRule::CloudMetadata);
        always("::ffff:a9fe:a9fe", BlockRule::CloudMetadata);
        always("::ffff:169.254.1.1", BlockRule::LinkLocal);
        always("::ffff:0.0.0.0", BlockRule::Unspecified);
        always("::ffff:224.0.0.1", BlockRule::Multicast);
        always("::ffff:255.255.255.255", BlockRule::Broadcast);
        opt_in("::ffff:127.0.0.1", BlockRule::Loopback);
        opt_in("::ffff:10.1.2.3", BlockRule::PrivateNetwork);
        opt_in("::ffff:100.64.1.1", BlockRule::SharedAddressSpace);
        allowed("::ffff:8.8.8.8");
    }

    #[test]
    fn ipv4_compatible_ipv6_inherits_the_v4_class() {
        always("::169.254.169.254", BlockRule::CloudMetadata);
        opt_in("::127.0.0.1", BlockRule::Loopback);
        opt_in("::10.0.0.1", BlockRule::PrivateNetwork);
        always("::0.0.0.2", BlockRule::Unspecified);
    }

    #[test]
    fn nat64_inherits_the_v4_class() {
        always("64:ff9b::169.254.169.254", BlockRule::CloudMetadata);
        always("64:ff9b::a9fe:a9fe", BlockRule::CloudMetadata);
        always("64:ff9b::a9fe:101", BlockRule::LinkLocal);
        opt_in("64:ff9b::7f00:1", BlockRule::Loopback);
        opt_in("64:ff9b::c0a8:101", BlockRule::PrivateNetwork);
        // The local-use prefix is itself special-purpose, but an embedded
        // metadata address must still win over the opt-in.
        always("64:ff9b:1::a9fe:a9fe", BlockRule::CloudMetadata);
        allowed("64:ff9b::808:808");
    }

    #[test]
    fn six_to_four_and_teredo_inherit_the_v4_class() {
        always("2002:a9fe:a9fe::1", BlockRule::CloudMetadata);
        opt_in("2002:7f00:1::", BlockRule::Loopback);
        opt_in("2002:c0a8:101::1", BlockRule::PrivateNetwork);
        allowed("2002:808:808::1");
        // Teredo client 169.254.169.254, stored inverted: !0xa9fea9fe = 0x56015601.
        always(
            "2001:0:4136:e378:8000:63bf:5601:5601",
            BlockRule::CloudMetadata,
        );
        opt_in(
            "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
            BlockRule::SpecialPurpose,
        );
    }

    #[test]
    fn embedded_ipv4_extraction() {
        let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        let v4 = |s: &str| Some(s.parse::<Ipv4Addr>().unwrap());
        assert_eq!(embedded_ipv4(v6("::ffff:1.2.3.4")), v4("1.2.3.4"));
        assert_eq!(embedded_ipv4(v6("::1.2.3.4")), v4("1.2.3.4"));
        assert_eq!(embedded_ipv4(v6("64:ff9b::1.2.3.4")), v4("1.2.3.4"));
        assert_eq!(embedded_ipv4(v6("2002:102:304::")), v4("1.2.3.4"));
        assert_eq!(embedded_ipv4(v6("::")), None);
        assert_eq!(embedded_ipv4(v6("::1")), None);
        assert_eq!(embedded_ipv4(v6("2606:4700::1")), None);
    }

    #[test]
    fn rules_report_whether_opt_in_lifts_them() {
        assert!(BlockRule::CloudMetadata.always_blocked());
        assert!(BlockRule::LinkLocal.always_blocked());
        assert!(!BlockRule::Loopback.always_blocked());
        let policy = NetPolicy::public_only();
        assert_eq!(policy.remedy(BlockRule::CloudMetadata), " (always blocked)");
        assert!(
            policy
                .remedy(BlockRule::PrivateNetwork)
                .contains("set allow_private_network = true on this server entry to allow it")
        );
        let web = policy.with_private_network_remedy("; set web = true to allow it");
        assert_eq!(
            web.remedy(BlockRule::Loopback),
            "; set web = true to allow it"
        );
        assert_eq!(web.remedy(BlockRule::CloudMetadata), " (always blocked)");
        assert_eq!(BlockRule::Loopback.to_string(), "a loopback address");
    }

    #[test]
    fn metadata_host_names_are_refused_by_name() {
        for name in [
            "metadata.google.internal",
            "METADATA.Google.Internal.",
            "foo.metadata.google.internal",
            "metadata.goog",
            "metadata",
            "instance-data",
            "instance-data.ec2.internal",
            "metadata.tencentyun.com",
        ] {
            assert_eq!(
                host_name_class(name),
                Some(BlockRule::MetadataHostName),
                "{name}"
            );
        }
        for name in [
            "example.com",
            "notmetadata.google.internal",
            "metadata.google.internal.example.com",
            "metadata.example.com",
            "xmetadata.goog",
        ] {
            assert_eq!(host_name_class(name), None, "{name}");
        }
    }

    #[test]
    fn lenient_ipv4_accepts_inet_aton_spellings() {
        let md = Some(Ipv4Addr::new(169, 254, 169, 254));
        assert_eq!(parse_ipv4_lenient("169.254.169.254"), md);
        assert_eq!(parse_ipv4_lenient("169.254.169.254."), md);
        // Two parts mean a.bcd: the first must fit a byte, so this is no address.
        assert_eq!(parse_ipv4_lenient("0xA9FE.0xA9FE"), None);
        assert_eq!(parse_ipv4_lenient("0xA9.0xFE.0xA9FE"), md);
        assert_eq!(parse_ipv4_lenient("0xa9fea9fe"), md);
        assert_eq!(parse_ipv4_lenient("0XA9FEA9FE"), md);
        assert_eq!(parse_ipv4_lenient("0251.0376.0251.0376"), md);
        assert_eq!(parse_ipv4_lenient("2852039166"), md);
        assert_eq!(parse_ipv4_lenient("025177524776"), md);
        assert_eq!(parse_ipv4_lenient("169.16689662"), md);
        assert_eq!(parse_ipv4_lenient("0xa9.254.0251.0xfe"), md);
        assert_eq!(
            parse_ipv4_lenient("127.1"),
            Some(Ipv4Addr::new(127, 0, 0, 1))
        );
        assert_eq!(parse_ipv4_lenient("0x"), Some(Ipv4Addr::UNSPECIFIED));
        assert_eq!(parse_ipv4_lenient("0"), Some(Ipv4Addr::UNSPECIFIED));
    }

    #[test]
    fn lenient_ipv4_rejects_names_and_overflow() {
        for s in [
            "",
            ".",
            "example.com",
            "1.2.3.4.5",
            "256.1.1.1",
            "1.2.3.256",
            "1.2.65536",
            "4294967296",
            "0x1g",
            "09",
            "1..2",
            "99999999999999999999999",
            "1.2.3.4..",
            "-1",
            "+1",
        ] {
            assert_eq!(parse_ipv4_lenient(s), None, "{s:?}");
        }
        assert_eq!(parse_ipv4_lenient("4294967295"), Some(Ipv4Addr::BROADCAST));
    }
}
