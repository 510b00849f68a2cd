//! `[server] listen` and `portico serve --listen`: an IP address and port, or `localhost:PORT`,
//! which means loopback (127.0.0.1) and never what a resolver might map the name to, so it can
//! never open the door on every interface.

use std::net::{Ipv4Addr, SocketAddr};

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

#[cfg(test)]
mod tests {
    use super::*;

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
