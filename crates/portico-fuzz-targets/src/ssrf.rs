//! The SSRF address and URL classifier, against an independent reading of the same rules.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use portico_net::{
    BlockRule, NetPolicy, address_class, check_url, classify, embedded_ipv4, host_name_class,
    parse_ipv4_lenient,
};

/// What the standard library alone says must never be reached from the public-only policy.
fn std_says_blocked(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_std_blocked(v4),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || v6.to_ipv4_mapped().is_some_and(v4_std_blocked)
        }
    }
}

fn v4_std_blocked(v4: Ipv4Addr) -> bool {
    v4.is_private()
        || v4.is_loopback()
        || v4.is_link_local()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || v4.octets()[0] == 0
        || v4.octets()[0] >= 240
}

fn check_ip(ip: IpAddr) {
    let public = classify(ip, &NetPolicy::public_only());
    if std_says_blocked(ip) {
        assert!(
            public.is_err(),
            "{ip} is not global unicast, yet it is allowed"
        );
    }
    let private = classify(ip, &NetPolicy::allow_private_network());
    match address_class(ip) {
        Some(rule) => {
            assert_eq!(public, Err(rule));
            assert_eq!(private.is_err(), rule.always_blocked(), "{ip}: {rule:?}");
        }
        None => assert!(public.is_ok() && private.is_ok()),
    }
    if let IpAddr::V6(v6) = ip
        && let Some(v4) = embedded_ipv4(v6)
        && let Some(rule) = address_class(IpAddr::V4(v4))
    {
        // A v6 address that stands for a v4 one is at least as blocked.
        let v6_rule = address_class(ip)
            .unwrap_or_else(|| panic!("{ip} embeds {v4} ({rule:?}) but is allowed"));
        if rule.always_blocked() {
            assert!(
                v6_rule.always_blocked(),
                "{ip} embeds {v4} ({rule:?}, always blocked) but only gets {v6_rule:?}"
            );
        }
    }
}

/// The address a URL's host names, read independently of `portico-net`.
fn literal_host(url: &url::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>()
        .ok()
        .or_else(|| parse_ipv4_lenient(bare).map(IpAddr::V4))
}

fn check_text(text: &str) {
    let _ = host_name_class(text);
    if let Some(v4) = parse_ipv4_lenient(text) {
        check_ip(IpAddr::V4(v4));
    }
    if let Ok(ip) = text
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        check_ip(ip);
    }
    let as_url = [
        text.to_string(),
        format!("http://{text}/"),
        format!("https://{text}:443/path"),
    ];
    for candidate in &as_url {
        let public = check_url(candidate, &NetPolicy::public_only());
        let private = check_url(candidate, &NetPolicy::allow_private_network());
        if public.is_ok() {
            assert!(
                private.is_ok(),
                "{candidate}: allowed publicly, refused privately"
            );
        }
        if let Ok(url) = public {
            assert!(
                matches!(url.scheme(), "http" | "https"),
                "{candidate}: a {} URL passed",
                url.scheme()
            );
            if let Some(ip) = literal_host(&url) {
                assert!(
                    !std_says_blocked(ip) && address_class(ip).is_none(),
                    "{candidate}: host {ip} passed the public-only check"
                );
            }
            if let Some(host) = url.host_str() {
                assert_ne!(
                    host_name_class(host),
                    Some(BlockRule::MetadataHostName),
                    "{candidate}: a metadata host name passed"
                );
            }
        }
    }
}

/// `data` as addresses (its first 4 and 16 bytes) and as text: a host, a host with a scheme, a URL.
pub fn ssrf(data: &[u8]) {
    if data.len() >= 4 {
        let v4 = Ipv4Addr::new(data[0], data[1], data[2], data[3]);
        check_ip(IpAddr::V4(v4));
        check_ip(IpAddr::V6(v4.to_ipv6_mapped()));
    }
    if data.len() >= 16 {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&data[..16]);
        check_ip(IpAddr::V6(Ipv6Addr::from(octets)));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        check_text(text);
    }
}
