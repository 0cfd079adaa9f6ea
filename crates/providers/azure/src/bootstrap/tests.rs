use base64::Engine;

use super::*;
use crate::catalog;

fn options() -> Options {
    Options {
        cluster_endpoint: "https://cluster.hcp.eastus.azmk8s.io:443".into(),
        ca_bundle: "Y2EK".into(),
        tls_bootstrap_token: "abcdef.0123456789abcdef".into(),
        kubernetes_version: "1.33.2".into(),
        tenant_id: "tenant".into(),
        subscription_id: "sub".into(),
        location: "eastus".into(),
        node_resource_group: "MC_rg_cluster_eastus".into(),
        subnet_id: "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes".into(),
        max_pods: 250,
        overhead: catalog::overhead(2, 8.0),
        ..Default::default()
    }
}

#[test]
fn invalid_options_name_the_field() {
    let missing = |field| Err(Error::Missing { field });
    let invalid = |field, value: &str, expected| {
        Err(Error::Invalid {
            field,
            value: value.into(),
            expected,
        })
    };
    let cases: Vec<(Options, Result<(), Error>)> = vec![
        (options(), Ok(())),
        (
            Options {
                tls_bootstrap_token: String::new(),
                ..options()
            },
            missing("tls_bootstrap_token"),
        ),
        (
            Options {
                ca_bundle: String::new(),
                ..options()
            },
            missing("ca_bundle"),
        ),
        (
            Options {
                tenant_id: String::new(),
                ..options()
            },
            missing("tenant_id"),
        ),
        (
            Options {
                subscription_id: String::new(),
                ..options()
            },
            missing("subscription_id"),
        ),
        (
            Options {
                location: String::new(),
                ..options()
            },
            missing("location"),
        ),
        (
            Options {
                node_resource_group: String::new(),
                ..options()
            },
            missing("node_resource_group"),
        ),
        (
            Options {
                cluster_endpoint: String::new(),
                ..options()
            },
            missing("cluster_endpoint"),
        ),
        (
            Options {
                cluster_endpoint: "cluster:443".into(),
                ..options()
            },
            invalid(
                "cluster_endpoint",
                "cluster:443",
                "a URL with a host (https://<fqdn>:443)",
            ),
        ),
        (
            Options {
                kubernetes_version: "v1.33.2".into(),
                ..options()
            },
            invalid(
                "kubernetes_version",
                "v1.33.2",
                "a version MAJOR.MINOR.PATCH",
            ),
        ),
        (
            Options {
                subnet_id: "nodes".into(),
                ..options()
            },
            invalid("subnet_id", "nodes", "a subnet's ARM id"),
        ),
    ];
    for (options, want) in cases {
        assert_eq!(script(&options).map(|_| ()), want);
    }
}

#[test]
fn errors_read_as_sentences() {
    let missing = Error::Missing { field: "ca_bundle" };
    assert_eq!(
        missing.to_string(),
        "bootstrap option ca_bundle is required"
    );
    let invalid = Error::Invalid {
        field: "subnet_id",
        value: "x".into(),
        expected: "a subnet's ARM id",
    };
    assert_eq!(
        invalid.to_string(),
        "bootstrap option subnet_id is \"x\", not a subnet's ARM id"
    );
}

#[test]
fn custom_data_is_the_script_in_base64() {
    let options = options();
    let encoded = custom_data(&options).unwrap();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    assert_eq!(
        String::from_utf8(decoded).unwrap(),
        script(&options).unwrap()
    );
}

/// Upstream's "Azure CNI node labels and agentbaker network plugin" table, plus kubenet.
#[test]
fn node_network_plugins() {
    let cases = [
        ("azure", "", "", "azure"),
        ("azure", "overlay", "", "none"),
        ("none", "", "", "none"),
        ("azure", "overlay", "cilium", "none"),
        ("azure", "", "cilium", "none"),
        ("azure", "", "azure", "azure"),
        ("kubenet", "", "", "azure"),
    ];
    for (plugin, plugin_mode, dataplane, want) in cases {
        let network = Network {
            plugin: plugin.into(),
            plugin_mode: plugin_mode.into(),
            dataplane: dataplane.into(),
            policy: String::new(),
        };
        assert_eq!(network.node_network_plugin(), want, "{network:?}");
    }
}

#[test]
fn max_pods_by_network() {
    let network = |plugin: &str, plugin_mode: &str| Network {
        plugin: plugin.into(),
        plugin_mode: plugin_mode.into(),
        ..Default::default()
    };
    let cases = [
        (network("azure", "overlay"), None, 250),
        (network("none", ""), None, 250),
        (network("azure", ""), None, 30),
        (network("kubenet", ""), None, 110),
        (network("azure", "overlay"), Some(15), 15),
    ];
    for (network, node_class, want) in cases {
        assert_eq!(
            network.max_pods(node_class),
            want,
            "{network:?} {node_class:?}"
        );
    }
    assert_eq!(Network::default().default_max_pods(), 250);
}

#[test]
fn architectures() {
    for arch in [Arch::Amd64, Arch::Arm64] {
        assert_eq!(Arch::parse(arch.as_str()), Some(arch));
    }
    assert_eq!(Arch::parse("x64"), None);
}
