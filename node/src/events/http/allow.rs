//! Which hosts HTTP tasks may reach.
//!
//! `--http-allow HOST[,HOST...]` names them: an exact host name (`api.example.com`), a suffix
//! pattern (`*.example.com`: any name below `example.com`, not `example.com` itself), an IP
//! address (`10.0.0.7`, `::1` or `[::1]`), or `*` (any host); each optionally with `:PORT`
//! (`[::1]:8080` for IPv6), which then must be the port the URI names or implies. Without the
//! flag every host is allowed. Either way a link-local address (169.254.0.0/16, fe80::/10) or
//! a cloud metadata address (AWS's fd00:ec2::254, Alibaba's 100.100.100.200) is refused unless an
//! IP entry names it exactly: a workflow definition must not read the node's cloud credentials.
//! That address check runs on every address a host name resolves to, when the connection is
//! made, so a name cannot be pointed at a refused address after the host was checked.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The flag that sets the allow list, named in refusals.
pub const ALLOW_FLAG: &str = "--http-allow";

/// The cloud metadata addresses outside the link-local ranges.
const METADATA: [IpAddr; 2] = [
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
];

/// What one entry of the list matches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Any,
    Host(String),
    /// `*.example.com`, kept as `.example.com`.
    Suffix(String),
    Ip(IpAddr),
}

/// One entry of `--http-allow`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    pattern: Pattern,
    port: Option<u16>,
}

/// The parsed `--http-allow` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList {
    entries: Vec<Entry>,
}

impl std::str::FromStr for AllowList {
    type Err = String;

    /// Parses `HOST[,HOST...]`; the error names the entry that is wrong.
    fn from_str(s: &str) -> Result<Self, String> {
        let entries = s
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(entry)
            .collect::<Result<Vec<_>, _>>()?;
        if entries.is_empty() {
            return Err("the list of allowed hosts is empty".into());
        }
        Ok(Self { entries })
    }
}

/// One entry: `PATTERN` or `PATTERN:PORT`.
fn entry(text: &str) -> Result<Entry, String> {
    let bad = |why: &str| format!("'{text}' {why}");
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Entry {
            pattern: Pattern::Ip(ip),
            port: None,
        });
    }
    let (raw, port) = split_port(text).map_err(|why| bad(&why))?;
    let host = normalize(raw);
    let pattern = if raw == "*" {
        Pattern::Any
    } else if let Some(ip) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Pattern::Ip(ip.parse().map_err(|_| bad("is not an IPv6 address"))?)
    } else if let Ok(ip) = host.parse::<IpAddr>() {
        Pattern::Ip(ip)
    } else if let Some(suffix) = host.strip_prefix("*.") {
        Pattern::Suffix(format!(".{}", name(suffix).map_err(|why| bad(&why))?))
    } else {
        Pattern::Host(name(&host).map_err(|why| bad(&why))?)
    };
    Ok(Entry { pattern, port })
}

/// `host` and its port, if the entry names one.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let colon = match text.rfind(':') {
        Some(i) if !text[..i].contains(':') || text[..i].ends_with(']') => i,
        _ => return Ok((text, None)),
    };
    let port = text[colon + 1..]
        .parse::<u16>()
        .map_err(|_| "has a port that is not a number from 0 to 65535".to_owned())?;
    Ok((&text[..colon], Some(port)))
}

/// A host name as URIs carry it: lower case, no trailing dot.
fn normalize(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// A host name of letters, digits, `-`, `_` and dots.
fn name(host: &str) -> Result<String, String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    if host.is_empty() || !host.chars().all(ok) || host.split('.').any(str::is_empty) {
        return Err("is not a host name, *.suffix, IP address or *".into());
    }
    Ok(host.to_owned())
}

impl AllowList {
    /// Whether a call to `host` (a name or an IP address, as the URI gives it) on `port` is
    /// allowed.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = normalize(host.trim_start_matches('[').trim_end_matches(']'));
        let ip = host.parse::<IpAddr>().ok().map(canonical);
        self.entries.iter().any(|e| {
            let matched = match &e.pattern {
                Pattern::Any => true,
                Pattern::Host(h) => *h == host,
                Pattern::Suffix(s) => ip.is_none() && host.ends_with(s.as_str()),
                Pattern::Ip(allowed) => ip == Some(canonical(*allowed)),
            };
            matched && e.port.is_none_or(|p| p == port)
        })
    }

    /// Whether an IP entry names `ip` exactly (what lets a guarded address be reached).
    fn names(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        let named = |e: &Entry| matches!(e.pattern, Pattern::Ip(a) if canonical(a) == ip);
        self.entries.iter().any(named)
    }
}

/// IPv4 addresses written as IPv6 (`::ffff:a.b.c.d`) as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// Whether `ip` is link-local or a cloud metadata address.
pub fn is_guarded(ip: IpAddr) -> bool {
    let ip = canonical(ip);
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    link_local || METADATA.contains(&ip)
}

/// Whether `ip` may be connected to under `allow` (the list, or `None` without the flag).
pub fn address_allowed(allow: Option<&AllowList>, ip: IpAddr) -> bool {
    !is_guarded(ip) || allow.is_some_and(|a| a.names(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> AllowList {
        s.parse().expect("a valid list")
    }

    #[test]
    fn names_suffixes_addresses_and_ports_match_as_written() {
        let l = list("api.example.com, *.corp.example, 10.0.0.7, [::1]:8080, Cache.Local.:6379");
        assert!(l.allows("api.example.com", 443));
        assert!(l.allows("API.example.com.", 80));
        assert!(!l.allows("example.com", 443));
        assert!(l.allows("a.b.corp.example", 80));
        assert!(!l.allows("corp.example", 80));
        assert!(!l.allows("evilcorp.example", 80));
        assert!(l.allows("10.0.0.7", 1));
        assert!(l.allows("[::1]", 8080));
        assert!(!l.allows("[::1]", 8081));
        assert!(l.allows("cache.local", 6379));
        assert!(!l.allows("cache.local", 6380));
        assert!(!l.allows("127.0.0.1", 80));
        assert!(list("*").allows("anything.at.all", 1));
        assert!(list("::ffff:10.0.0.9").allows("10.0.0.9", 80));
        assert!(list("localhost:9000").allows("localhost", 9000));
    }

    #[test]
    fn bad_entries_are_named() {
        for (bad, want) in [
            ("", "empty"),
            (" , ", "empty"),
            ("a b", "'a b'"),
            ("host:http", "port"),
            ("host:70000", "port"),
            ("*.", "'*.'"),
            ("[zz]:1", "IPv6"),
            ("a..b", "'a..b'"),
        ] {
            let err = bad.parse::<AllowList>().expect_err(bad);
            assert!(err.contains(want), "{bad}: {err}");
        }
    }

    #[test]
    fn link_local_and_metadata_addresses_need_an_entry_naming_them() {
        let metadata: IpAddr = "169.254.169.254".parse().expect("ip");
        let mapped: IpAddr = "::ffff:169.254.169.254".parse().expect("ip");
        for ip in [
            metadata,
            mapped,
            "fe80::1".parse().expect("ip"),
            METADATA[0],
            METADATA[1],
        ] {
            assert!(is_guarded(ip), "{ip}");
            assert!(!address_allowed(None, ip), "{ip}");
            assert!(!address_allowed(Some(&list("*")), ip), "{ip}");
        }
        assert!(address_allowed(Some(&list("169.254.169.254")), mapped));
        for ip in ["127.0.0.1", "10.1.2.3", "::1", "93.184.216.34"] {
            assert!(address_allowed(None, ip.parse().expect("ip")), "{ip}");
        }
    }
}
