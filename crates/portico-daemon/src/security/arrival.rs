//! How a request reached the door, as far as the door may believe it. Behind a balancer that
//! terminates TLS the browser's page is `https://portico.example.com` while the door sees plain
//! HTTP from the balancer's address: `[server] public_url` names that origin, and a balancer listed
//! in `[server] trusted_proxies` may say it per request (`X-Forwarded-Proto`, `X-Forwarded-Host`,
//! or RFC 7239's `Forwarded: proto=..;host=..`) and who the client is (`X-Forwarded-For`). From any
//! other peer those headers are ignored: a client could write anything there.

use std::net::IpAddr;

use axum::http::{HeaderMap, header};
use portico_config::IpRange;

/// What the door believes about one request's way in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Arrival {
    /// Origins the request's page may have besides `http://{Host}`: `[server] public_url`'s, and
    /// the one a trusted proxy reports. Lowercase, without a default port.
    pub(crate) own_origins: Vec<String>,
    /// The browser reached Portico over HTTPS (a trusted proxy says so, or the request's `Origin`
    /// is an https `public_url`): the dashboard's cookie is then `Secure`.
    pub(crate) https: bool,
    /// The client's address: the TCP peer's, or behind trusted proxies the right-most address in
    /// `X-Forwarded-For` that is not one of them.
    pub(crate) client_ip: Option<IpAddr>,
}

/// What a trusted proxy said about the request.
#[derive(Debug, Default, PartialEq, Eq)]
struct Forwarded {
    proto: Option<String>,
    host: Option<String>,
}

impl Arrival {
    /// `peer` is the TCP peer; `public_origin` is `[server] public_url` as an origin. `Err` names a
    /// host a trusted proxy forwarded that `host_allowed` refuses (a 403).
    pub(crate) fn of(
        headers: &HeaderMap,
        peer: Option<IpAddr>,
        public_origin: Option<&str>,
        trusted: &[IpRange],
        host_allowed: impl Fn(&str) -> bool,
    ) -> Result<Arrival, String> {
        let mut arrival = Arrival {
            client_ip: peer,
            ..Arrival::default()
        };
        let origin = headers
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok())
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase());
        if let Some(public) = public_origin {
            arrival.own_origins.push(public.to_string());
            if public.starts_with("https://") && origin.as_deref() == Some(public) {
                arrival.https = true;
            }
        }
        let is_trusted = |ip: IpAddr| trusted.iter().any(|range| range.contains(ip));
        let Some(peer) = peer.filter(|ip| is_trusted(*ip)) else {
            return Ok(arrival);
        };
        arrival.client_ip = Some(client_address(headers, peer, is_trusted));
        let forwarded = forwarded(headers);
        // Anything but `https` (a typo, another scheme) is the plain HTTP the door itself sees.
        let proto = if forwarded.proto.as_deref() == Some("https") {
            "https"
        } else {
            "http"
        };
        let host = match &forwarded.host {
            Some(host) => {
                if !host_allowed(host) {
                    return Err(format!(
                        "the balancer forwarded the host `{host}`, which is not allowed; add it to [server] allowed_hosts (or set [server] public_url to the address browsers use)"
                    ));
                }
                Some(host.clone())
            }
            None => headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(str::to_ascii_lowercase),
        };
        if let Some(host) = host {
            let default_port = if proto == "https" { ":443" } else { ":80" };
            let host = host.strip_suffix(default_port).unwrap_or(&host);
            let own = format!("{proto}://{host}");
            if proto == "https" {
                arrival.https = true;
            }
            if !arrival.own_origins.contains(&own) {
                arrival.own_origins.push(own);
            }
        }
        Ok(arrival)
    }
}

/// The last value of a header that may be repeated or comma-separated: what the nearest proxy
/// (the trusted one) wrote.
fn last_value(headers: &HeaderMap, name: &str) -> Option<String> {
    let value = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .rfind(|v| !v.is_empty())?;
    Some(value.to_ascii_lowercase())
}

/// `X-Forwarded-Proto` and `X-Forwarded-Host`, else `Forwarded`'s last element.
fn forwarded(headers: &HeaderMap) -> Forwarded {
    let proto = last_value(headers, "x-forwarded-proto");
    let host = last_value(headers, "x-forwarded-host");
    if proto.is_some() || host.is_some() {
        return Forwarded { proto, host };
    }
    let Some(element) = last_value(headers, "forwarded") else {
        return Forwarded::default();
    };
    let mut found = Forwarded::default();
    for pair in element.split(';') {
        let Some((name, value)) = pair.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"').to_string();
        match name.trim() {
            "proto" => found.proto = Some(value),
            "host" => found.host = Some(value),
            _ => {}
        }
    }
    found
}

/// The right-most `X-Forwarded-For` address that is not a trusted proxy (each proxy appends the
/// address it heard from, so everything left of that a client may have written); the peer itself
/// when the header is missing or holds something that is not an address.
fn client_address(
    headers: &HeaderMap,
    peer: IpAddr,
    is_trusted: impl Fn(IpAddr) -> bool,
) -> IpAddr {
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        let Ok(ip) = hop.trim_matches(['[', ']']).parse::<IpAddr>() else {
            return client;
        };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn arrival(
        pairs: &[(&str, &str)],
        peer: &str,
        public: Option<&str>,
    ) -> Result<Arrival, String> {
        let trusted = [
            IpRange::parse("127.0.0.2").unwrap(),
            IpRange::parse("10.0.0.0/8").unwrap(),
        ];
        Arrival::of(&headers(pairs), Some(ip(peer)), public, &trusted, |host| {
            host.starts_with("portico.example.com")
        })
    }

    #[test]
    fn a_trusted_proxy_says_the_origin_and_the_client() {
        let got = arrival(
            &[
                ("host", "127.0.0.1:4200"),
                ("x-forwarded-proto", "https"),
                ("x-forwarded-host", "portico.example.com"),
                ("x-forwarded-for", "6.6.6.6, 203.0.113.7, 10.1.1.1"),
            ],
            "127.0.0.2",
            None,
        )
        .unwrap();
        assert_eq!(got.own_origins, ["https://portico.example.com"]);
        assert!(got.https);
        assert_eq!(got.client_ip, Some(ip("203.0.113.7")));
        // RFC 7239, and a default port left out as browsers do.
        let got = arrival(
            &[
                ("host", "127.0.0.1:4200"),
                ("forwarded", "for=1.2.3.4;proto=http;host=a, for=5.6.7.8;proto=https;host=\"portico.example.com:443\""),
            ],
            "10.9.9.9",
            None,
        )
        .unwrap();
        assert_eq!(got.own_origins, ["https://portico.example.com"]);
        // Without a forwarded host, the Host the proxy passed on.
        let got = arrival(
            &[("host", "127.0.0.1:8443"), ("x-forwarded-proto", "https")],
            "127.0.0.2",
            None,
        )
        .unwrap();
        assert_eq!(got.own_origins, ["https://127.0.0.1:8443"]);
    }

    #[test]
    fn an_untrusted_peer_forwards_nothing() {
        let forged = [
            ("host", "127.0.0.1:4200"),
            ("origin", "https://evil.example"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "evil.example"),
            ("x-forwarded-for", "1.2.3.4"),
            ("forwarded", "proto=https;host=evil.example"),
        ];
        let got = arrival(&forged, "127.0.0.1", None).unwrap();
        assert_eq!(
            got,
            Arrival {
                own_origins: vec![],
                https: false,
                client_ip: Some(ip("127.0.0.1")),
            }
        );
        // A trusted proxy may not name a host the door would refuse in `Host`.
        let refused = arrival(&forged, "127.0.0.2", None).unwrap_err();
        assert!(refused.contains("evil.example"), "{refused}");
    }

    #[test]
    fn public_url_is_an_own_origin_and_https_only_for_its_page() {
        let public = Some("https://portico.example.com");
        let got = arrival(
            &[
                ("host", "127.0.0.1:4200"),
                ("origin", "https://portico.example.com"),
            ],
            "127.0.0.1",
            public,
        )
        .unwrap();
        assert_eq!(got.own_origins, ["https://portico.example.com"]);
        assert!(got.https);
        let local = arrival(
            &[
                ("host", "127.0.0.1:4200"),
                ("origin", "http://127.0.0.1:4200"),
            ],
            "127.0.0.1",
            public,
        )
        .unwrap();
        assert!(!local.https);
    }

    #[test]
    fn the_client_is_the_rightmost_untrusted_hop() {
        let trusted = |ip: IpAddr| IpRange::parse("10.0.0.0/8").unwrap().contains(ip);
        let peer = ip("10.0.0.1");
        let of = |xff: &str| client_address(&headers(&[("x-forwarded-for", xff)]), peer, trusted);
        assert_eq!(of("1.1.1.1, 2.2.2.2"), ip("2.2.2.2"));
        assert_eq!(of("1.1.1.1, 10.0.0.5"), ip("1.1.1.1"));
        assert_eq!(of("10.0.0.9, 10.0.0.5"), ip("10.0.0.9"));
        assert_eq!(of("garbage, 2.2.2.2"), ip("2.2.2.2"));
        assert_eq!(of("2.2.2.2, garbage"), peer);
        assert_eq!(client_address(&HeaderMap::new(), peer, trusted), peer);
    }
}
