//! `[server] listen` and `portico serve --listen`: an IP address and port, or `localhost:PORT`,
//! which means loopback (127.0.0.1) and never what a resolver might map the name to, so it can
//! never open the door on every interface. Also what the door may be reached by behind a balancer:
//! `[server] public_url` and `[server] trusted_proxies`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The address to bind for `text`, or `None` when it is neither `IP:PORT` nor `localhost:PORT`.
pub fn listen_address(text: &str) -> Option<SocketAddr> {
    let text = text.trim();
    if let Ok(address) = text.parse() {
        return Some(address);
    }
    let (host, port) = text.rsplit_once(':')?;
    if !host.eq_ignore_ascii_case("localhost") {
        return None;
    }
    Some(SocketAddr::from((
        Ipv4Addr::LOCALHOST,
        port.parse::<u16>().ok()?,
    )))
}

/// `[server] public_url` as the origin browsers send for it (`scheme://host[:port]`, lowercase, a
/// default port left out), or why it is not one.
pub fn public_origin(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text.trim()).map_err(|e| format!("it is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "its scheme is `{}`, not http or https",
            url.scheme()
        ));
    }
    if url.host().is_none() {
        return Err("it has no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("it carries a user name or password".into());
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(
            "it has a path, query or fragment; Portico is served at the root of its address".into(),
        );
    }
    Ok(url.origin().ascii_serialization().to_ascii_lowercase())
}

/// One `[server] trusted_proxies` entry: an IP address, or a range in CIDR notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpRange {
    network: IpAddr,
    prefix: u8,
}

impl IpRange {
    /// `10.0.0.0/8`, `fd00::/8` or a single address; `None` for anything else (host bits set past
    /// the prefix are allowed and ignored, as most tools do).
    pub fn parse(text: &str) -> Option<IpRange> {
        let text = text.trim();
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address.parse().ok()?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok()?,
            Some(_) => return None,
            None => max,
        };
        (prefix <= max).then_some(IpRange { network, prefix })
    }

    /// Whether `ip` is in the range (an IPv4-mapped IPv6 address counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let bits = |prefix: u8, width: u32| -> u128 {
            if prefix == 0 {
                0
            } else {
                (u128::MAX << (width - u32::from(prefix))) & (u128::MAX >> (128 - width))
            }
        };
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = bits(self.prefix, 32);
                u128::from(u32::from(net)) & mask == u128::from(u32::from(ip)) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = bits(self.prefix, 128);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_url_is_an_origin_and_nothing_more() {
        assert_eq!(
            public_origin("https://Portico.Example.com/").unwrap(),
            "https://portico.example.com"
        );
        assert_eq!(
            public_origin("https://portico.example.com:443").unwrap(),
            "https://portico.example.com"
        );
        assert_eq!(
            public_origin("http://127.0.0.1:8443").unwrap(),
            "http://127.0.0.1:8443"
        );
        for (bad, why) in [
            ("ftp://portico.example.com", "scheme"),
            ("portico.example.com", "not a URL"),
            ("https://portico.example.com/portico", "path"),
            ("https://portico.example.com/?a=1", "query"),
            ("https://user:pw@portico.example.com", "password"),
        ] {
            let error = public_origin(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn trusted_proxies_are_addresses_or_cidr_ranges() {
        let range = IpRange::parse("10.0.0.0/8").unwrap();
        assert!(range.contains("10.200.3.4".parse().unwrap()));
        assert!(range.contains("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!range.contains("11.0.0.1".parse().unwrap()));
        assert!(!range.contains("::1".parse().unwrap()));
        let one = IpRange::parse("127.0.0.2").unwrap();
        assert!(one.contains("127.0.0.2".parse().unwrap()));
        assert!(!one.contains("127.0.0.1".parse().unwrap()));
        let v6 = IpRange::parse("fd00::/8").unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()));
        assert!(!v6.contains("fe80::1".parse().unwrap()));
        assert!(
            IpRange::parse("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        for bad in [
            "10.0.0.0/33",
            "10.0.0.0/",
            "proxy.internal",
            "10.0.0.0/8/1",
            "::/129",
        ] {
            assert!(IpRange::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn localhost_is_loopback_and_other_names_are_refused() {
        let at = |text| listen_address(text).map(|a| a.to_string());
        assert_eq!(at("localhost:4200").as_deref(), Some("127.0.0.1:4200"));
        assert_eq!(at("LOCALHOST:0").as_deref(), Some("127.0.0.1:0"));
        assert_eq!(at("127.0.0.1:4200").as_deref(), Some("127.0.0.1:4200"));
        assert_eq!(at("[::1]:4200").as_deref(), Some("[::1]:4200"));
        for refused in [
            "localhost",
            "localhost:",
            "localhost:99999",
            "example.com:80",
            ":4200",
            "4200",
        ] {
            assert_eq!(at(refused), None, "{refused}");
        }
    }
}
