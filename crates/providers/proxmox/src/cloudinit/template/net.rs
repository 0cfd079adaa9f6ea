//! The network functions (upstream's `pkg/utils/ip`): `cidrhost`, after go-cidr's `Host`, and
//! `cidrslaac`, the EUI-64 address a host autoconfigures from its MAC.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address with its prefix length, as Go's `net.ParseCIDR` reads `addr/len`.
struct Cidr {
    addr: IpAddr,
    ones: u32,
}

impl Cidr {
    fn parse(s: &str) -> Result<Self, String> {
        let invalid = || format!("invalid CIDR address: {s}");
        let (addr, len) = s.split_once('/').ok_or_else(invalid)?;
        let addr: IpAddr = addr.parse().map_err(|_| invalid())?;
        if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        let ones: u32 = len.parse().map_err(|_| invalid())?;
        if ones > bits(addr) {
            return Err(invalid());
        }
        Ok(Self { addr, ones })
    }

    fn network(&self) -> u128 {
        let host_bits = bits(self.addr) - self.ones;
        let mask = if host_bits >= 128 {
            0
        } else {
            !0u128 << host_bits
        };
        as_number(self.addr) & mask
    }
}

fn bits(addr: IpAddr) -> u32 {
    if addr.is_ipv4() { 32 } else { 128 }
}

fn as_number(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// An address as Go's `net.IP.String` prints it (an IPv4-mapped IPv6 address in dotted form).
fn go_string(addr: IpAddr) -> String {
    match addr {
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => a.to_string(),
        },
        IpAddr::V4(a) => a.to_string(),
    }
}

fn from_number(like: IpAddr, n: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(n as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(n)),
    }
}

/// `cidrhost`: the address written in `cidr` when `host` is `None`; otherwise host number
/// `host` of the prefix (negative numbers count back from its last address).
pub fn cidr_host(cidr: &str, host: Option<i64>) -> Result<String, String> {
    let parsed = Cidr::parse(cidr)?;
    let Some(num) = host else {
        return Ok(go_string(parsed.addr));
    };
    let host_bits = bits(parsed.addr) - parsed.ones;
    let max: u128 = if host_bits >= 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    };
    // go-cidr maps -1 to the last address, -2 to the one before, and checks the distance.
    let distance = if num < 0 {
        u128::from(num.unsigned_abs() - 1)
    } else {
        num as u128
    };
    if distance > max {
        return Err(format!(
            "prefix of {} does not accommodate a host numbered {distance}",
            parsed.ones
        ));
    }
    let offset = if num < 0 { max - distance } else { distance };
    Ok(go_string(from_number(
        parsed.addr,
        parsed.network() | offset,
    )))
}

/// The bytes of a MAC address in one of Go's `net.ParseMAC` forms (`00:1a:…`, `00-1a-…`,
/// `001a.2b3c.…`; 6, 8 or 20 bytes).
fn parse_mac(s: &str) -> Result<Vec<u8>, String> {
    let invalid = || format!("address {s}: invalid MAC address");
    let groups: Vec<&str> = if s.len() > 2 && matches!(s.as_bytes()[2], b':' | b'-') {
        let sep = char::from(s.as_bytes()[2]);
        let groups: Vec<&str> = s.split(sep).collect();
        if groups.iter().any(|g| g.len() != 2) {
            return Err(invalid());
        }
        groups
    } else if s.len() > 4 && s.as_bytes()[4] == b'.' {
        let quads: Vec<&str> = s.split('.').collect();
        if quads.iter().any(|q| q.len() != 4) {
            return Err(invalid());
        }
        quads.iter().flat_map(|q| [&q[..2], &q[2..]]).collect()
    } else {
        return Err(invalid());
    };
    if !matches!(groups.len(), 6 | 8 | 20) {
        return Err(invalid());
    }
    groups
        .iter()
        .map(|g| u8::from_str_radix(g, 16).map_err(|_| invalid()))
        .collect()
}

/// `cidrslaac`: the stateless autoconfigured (modified EUI-64) address of `mac` in the IPv6
/// prefix `cidr`, written with the prefix length. Host bits beyond the prefix's last whole
/// byte come from the MAC, as upstream fills them; prefixes longer than /112 are refused.
pub fn slaac(mac: &str, cidr: &str) -> Result<String, String> {
    let parsed = Cidr::parse(cidr)?;
    let hw = parse_mac(mac)?;
    if parsed.ones > 112 {
        return Err("slaac generator requires a mask of /64 to /112".to_string());
    }
    if parsed.addr.is_ipv4() {
        return Err(format!(
            "slaac generator requires an IPv6 prefix, got {cidr}"
        ));
    }
    let mut ip = parsed.network().to_be_bytes();
    let mut eui64 = ip;
    eui64[8..11].copy_from_slice(&hw[0..3]);
    eui64[11] = 0xff;
    eui64[12] = 0xfe;
    eui64[13..16].copy_from_slice(&hw[3..6]);
    eui64[8] ^= 0x02;
    let first = (parsed.ones / 8) as usize;
    ip[first..].copy_from_slice(&eui64[first..]);
    Ok(format!(
        "{}/{}",
        go_string(IpAddr::V6(Ipv6Addr::from(ip))),
        parsed.ones
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrhost_numbers_hosts_from_either_end() {
        for (cidr, host, want) in [
            ("192.168.1.5/24", None, "192.168.1.5"),
            ("192.168.1.5/24", Some(15), "192.168.1.15"),
            ("10.12.112.0/20", Some(16), "10.12.112.16"),
            ("192.168.1.0/24", Some(-1), "192.168.1.255"),
            ("192.168.1.0/24", Some(-256), "192.168.1.0"),
            ("192.168.1.0/24", Some(0), "192.168.1.0"),
            ("2001:db8:1::128/64", None, "2001:db8:1::128"),
            ("2001:db8:1::/64", Some(1), "2001:db8:1::1"),
            ("::ffff:10.0.0.0/120", Some(7), "10.0.0.7"),
            ("0.0.0.0/0", Some(-1), "255.255.255.255"),
        ] {
            assert_eq!(cidr_host(cidr, host).unwrap(), want, "{cidr} {host:?}");
        }
        for (cidr, host, err) in [
            (
                "192.168.1.0/24",
                Some(256),
                "prefix of 24 does not accommodate a host numbered 256",
            ),
            (
                "192.168.1.0/24",
                Some(-257),
                "prefix of 24 does not accommodate a host numbered 256",
            ),
            ("192.168.1.0", None, "invalid CIDR address: 192.168.1.0"),
            (
                "192.168.1.0/33",
                None,
                "invalid CIDR address: 192.168.1.0/33",
            ),
            ("nonsense/8", None, "invalid CIDR address: nonsense/8"),
        ] {
            assert_eq!(cidr_host(cidr, host).unwrap_err(), err, "{cidr} {host:?}");
        }
    }

    #[test]
    fn slaac_fills_the_host_bits_from_the_mac() {
        for (mac, cidr, want) in [
            (
                "00:1A:2B:3C:4D:5E",
                "2001:db8:1::/64",
                "2001:db8:1:0:21a:2bff:fe3c:4d5e/64",
            ),
            (
                "00:1A:2B:3C:4D:5E",
                "2001:db8:1:2:3::/80",
                "2001:db8:1:2:3:2bff:fe3c:4d5e/80",
            ),
            (
                "00:1A:2B:3C:4D:5E",
                "2001:db8:1:2:3::/88",
                "2001:db8:1:2:3:ff:fe3c:4d5e/88",
            ),
            (
                "00:1A:2B:3C:4D:5E",
                "2001:db8:1:2:3::/112",
                "2001:db8:1:2:3::4d5e/112",
            ),
            (
                "00:11:22:33:44:55",
                "2001:db8:1::128/64",
                "2001:db8:1:0:211:22ff:fe33:4455/64",
            ),
            (
                "00-11-22-33-44-55",
                "2001:db8::/64",
                "2001:db8::211:22ff:fe33:4455/64",
            ),
            (
                "0011.2233.4455",
                "2001:db8::/64",
                "2001:db8::211:22ff:fe33:4455/64",
            ),
        ] {
            assert_eq!(slaac(mac, cidr).unwrap(), want, "{mac} {cidr}");
        }
        assert_eq!(
            slaac("00:11:22:33:44:55", "2001:db8::/120").unwrap_err(),
            "slaac generator requires a mask of /64 to /112"
        );
        assert_eq!(
            slaac("00:11:22:33:44", "2001:db8::/64").unwrap_err(),
            "address 00:11:22:33:44: invalid MAC address"
        );
        assert!(slaac("00:11:22:33:44:55", "10.0.0.0/8").is_err());
    }
}
