//! The network interfaces a launch template attaches, as upstream decides them:
//!
//! - the EC2NodeClass's `networkInterfaces`, when set, each as written (`efa-only` ones carry
//!   no addresses, public IP or connection tracking);
//! - else, for a NodeClaim that requests `vpc.amazonaws.com/efa`, one EFA interface per EFA
//!   the type has, one per network card (device 0 on card 0, device 1 on the others);
//! - else one primary interface.
//!
//! Each addressed interface gets `ipPrefixCount` prefixes (IPv4, or IPv6 in an IPv6 cluster),
//! in an IPv6 cluster a primary IPv6 address, and the connection-tracking timeouts. The primary
//! interface is always there, with the security groups, as upstream writes it: a RunInstances
//! call that names interface 0 (the validation dry run) is merged with it, whereas groups on the
//! template itself and an interface in the call are a combination EC2 rejects.

use crate::ec2nodeclass::{ConnectionTracking, NetworkInterface};

/// One interface in a launch template.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchTemplateInterface {
    /// The network card (absent: card 0).
    pub network_card_index: Option<i32>,
    /// The device index on its card.
    pub device_index: i32,
    /// `interface`, `efa` or `efa-only` (absent: `interface`).
    pub interface_type: Option<String>,
    /// A public IPv4 address on it.
    pub associate_public_ip: Option<bool>,
    /// IPv4 `/28` prefixes to assign (pod addresses, IPv4 clusters).
    pub ipv4_prefix_count: Option<i32>,
    /// IPv6 `/80` prefixes to assign (pod addresses, IPv6 clusters).
    pub ipv6_prefix_count: Option<i32>,
    /// IPv6 addresses to assign.
    pub ipv6_address_count: Option<i32>,
    /// Make the first IPv6 address the primary one (IPv6 clusters).
    pub primary_ipv6: Option<bool>,
    /// Its security groups.
    pub security_groups: Vec<String>,
    /// Connection tracking timeouts.
    pub connection_tracking: Option<ConnectionTracking>,
}

/// What decides the interfaces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InterfaceInputs<'a> {
    /// The EC2NodeClass's `networkInterfaces`.
    pub spec: &'a [NetworkInterface],
    /// EFA interfaces to attach when the NodeClaim requests EFA (the type's EFA count), else 0.
    pub efa_count: i64,
    /// Whether the cluster is IPv6.
    pub ipv6: bool,
    /// `ipPrefixCount`.
    pub ip_prefix_count: Option<i32>,
    /// `associatePublicIPAddress`.
    pub associate_public_ip: Option<bool>,
    /// The resolved security groups.
    pub security_groups: &'a [String],
    /// `connectionTracking`.
    pub connection_tracking: Option<&'a ConnectionTracking>,
}

/// The connection tracking to send: none when no timeout is set.
fn tracking(ct: Option<&ConnectionTracking>) -> Option<ConnectionTracking> {
    ct.filter(|c| {
        c.tcp_established_timeout.is_some()
            || c.udp_stream_timeout.is_some()
            || c.udp_timeout.is_some()
    })
    .cloned()
}

/// An addressed interface: prefixes, IPv6 and connection tracking per the cluster's family.
fn addressed(
    inputs: &InterfaceInputs<'_>,
    mut ni: LaunchTemplateInterface,
) -> LaunchTemplateInterface {
    if inputs.ipv6 {
        ni.ipv6_prefix_count = inputs.ip_prefix_count;
        ni.ipv6_address_count = Some(1);
        ni.primary_ipv6 = Some(true);
    } else {
        ni.ipv4_prefix_count = inputs.ip_prefix_count;
    }
    ni.associate_public_ip = inputs.associate_public_ip;
    ni.connection_tracking = tracking(inputs.connection_tracking);
    ni
}

/// The interfaces to attach: never none.
pub fn network_interfaces(inputs: &InterfaceInputs<'_>) -> Vec<LaunchTemplateInterface> {
    let groups = inputs.security_groups.to_vec();
    if !inputs.spec.is_empty() {
        return inputs
            .spec
            .iter()
            .map(|n| {
                let base = LaunchTemplateInterface {
                    network_card_index: Some(n.network_card_index),
                    device_index: n.device_index,
                    interface_type: Some(n.interface_type.clone()),
                    security_groups: groups.clone(),
                    ..Default::default()
                };
                if n.interface_type == "efa-only" {
                    base
                } else {
                    addressed(inputs, base)
                }
            })
            .collect();
    }
    if inputs.efa_count > 0 {
        return (0..inputs.efa_count)
            .map(|card| {
                addressed(
                    inputs,
                    LaunchTemplateInterface {
                        network_card_index: Some(card as i32),
                        device_index: if card == 0 { 0 } else { 1 },
                        interface_type: Some("efa".into()),
                        security_groups: groups.clone(),
                        ..Default::default()
                    },
                )
            })
            .collect();
    }
    vec![addressed(
        inputs,
        LaunchTemplateInterface {
            device_index: 0,
            security_groups: groups,
            ..Default::default()
        },
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups() -> Vec<String> {
        vec!["sg-1".into(), "sg-2".into()]
    }

    /// Upstream's default: one primary interface carrying the security groups, even with
    /// nothing else to say (a connection tracking block without timeouts sends nothing).
    #[test]
    fn a_plain_node_gets_the_primary_interface_with_its_groups() {
        let g = groups();
        let primary = [LaunchTemplateInterface {
            device_index: 0,
            security_groups: g.clone(),
            ..Default::default()
        }];
        let inputs = InterfaceInputs {
            security_groups: &g,
            ..Default::default()
        };
        assert_eq!(network_interfaces(&inputs), primary);
        let empty = ConnectionTracking::default();
        let inputs = InterfaceInputs {
            security_groups: &g,
            connection_tracking: Some(&empty),
            ..Default::default()
        };
        assert_eq!(network_interfaces(&inputs), primary);
    }

    /// After upstream's launch template suite: ipPrefixCount goes on the primary interface as
    /// IPv4 prefixes, or as IPv6 prefixes with a primary IPv6 address in an IPv6 cluster.
    #[test]
    fn prefixes_public_ip_and_ipv6_on_the_primary_interface() {
        let g = groups();
        let ct = ConnectionTracking {
            tcp_established_timeout: Some(60),
            udp_stream_timeout: Some(30),
            udp_timeout: None,
        };
        let ipv4 = network_interfaces(&InterfaceInputs {
            security_groups: &g,
            ip_prefix_count: Some(2),
            associate_public_ip: Some(false),
            connection_tracking: Some(&ct),
            ..Default::default()
        });
        assert_eq!(
            ipv4,
            [LaunchTemplateInterface {
                device_index: 0,
                ipv4_prefix_count: Some(2),
                associate_public_ip: Some(false),
                security_groups: g.clone(),
                connection_tracking: Some(ct.clone()),
                ..Default::default()
            }]
        );
        let ipv6 = network_interfaces(&InterfaceInputs {
            security_groups: &g,
            ip_prefix_count: Some(1),
            ipv6: true,
            ..Default::default()
        });
        assert_eq!(
            ipv6,
            [LaunchTemplateInterface {
                device_index: 0,
                ipv6_prefix_count: Some(1),
                ipv6_address_count: Some(1),
                primary_ipv6: Some(true),
                security_groups: g.clone(),
                ..Default::default()
            }]
        );
    }

    /// After upstream's EFA cases: one EFA interface per card, device 0 then 1.
    #[test]
    fn efa_requests_get_one_efa_interface_per_card() {
        let g = groups();
        let out = network_interfaces(&InterfaceInputs {
            security_groups: &g,
            efa_count: 4,
            ..Default::default()
        });
        let shape: Vec<(Option<i32>, i32, Option<&str>)> = out
            .iter()
            .map(|n| {
                (
                    n.network_card_index,
                    n.device_index,
                    n.interface_type.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (Some(0), 0, Some("efa")),
                (Some(1), 1, Some("efa")),
                (Some(2), 1, Some("efa")),
                (Some(3), 1, Some("efa")),
            ]
        );
        assert!(out.iter().all(|n| n.security_groups == g));
    }

    /// The NodeClass's interfaces win over the EFA count; `efa-only` ones carry no addresses,
    /// public IP or connection tracking.
    #[test]
    fn the_node_classs_interfaces_as_written() {
        let g = groups();
        let spec = vec![
            NetworkInterface {
                network_card_index: 0,
                device_index: 0,
                interface_type: "interface".into(),
            },
            NetworkInterface {
                network_card_index: 0,
                device_index: 1,
                interface_type: "efa-only".into(),
            },
        ];
        let ct = ConnectionTracking {
            udp_timeout: Some(60),
            ..Default::default()
        };
        let out = network_interfaces(&InterfaceInputs {
            spec: &spec,
            efa_count: 8,
            ipv6: true,
            ip_prefix_count: Some(3),
            associate_public_ip: Some(true),
            security_groups: &g,
            connection_tracking: Some(&ct),
        });
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].ipv6_prefix_count, Some(3));
        assert_eq!(out[0].primary_ipv6, Some(true));
        assert_eq!(out[0].associate_public_ip, Some(true));
        assert_eq!(out[0].connection_tracking, Some(ct));
        assert_eq!(
            out[1],
            LaunchTemplateInterface {
                network_card_index: Some(0),
                device_index: 1,
                interface_type: Some("efa-only".into()),
                security_groups: g.clone(),
                ..Default::default()
            }
        );
    }
}
