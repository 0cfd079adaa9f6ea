//! Upstream's AKSNodeClass CEL suite as a table, judged by `karpenter-rs validate`'s machinery
//! (schema, CEL, runtime checks), plus a row for every other bound and rule of the CRD, and
//! the types' defaults against the CRD's.

use karpenter_api::crd::CORE;
use karpenter_api::validation::table::{Case, Expect::*, failures, set};
use karpenter_azure::AKSNodeClass;
use serde_json::{Value, json};

fn aksnc() -> Value {
    json!({
        "apiVersion": "karpenter.azure.com/v1beta1",
        "kind": "AKSNodeClass",
        "metadata": {"name": "default"},
        "spec": {},
    })
}

fn with(pointer: &str, value: Value) -> Value {
    set(aksnc(), pointer, value)
}

const SUBNET: &str = "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/rgname/providers/Microsoft.Network/virtualNetworks/vnet/subnets/subnet";

fn subnet_in(resource_group: &str) -> Value {
    json!(format!(
        "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/{resource_group}/providers/Microsoft.Network/virtualNetworks/vnet/subnets/subnet"
    ))
}

/// A zone override with every required field, as upstream's suite builds them: to VnetDNS
/// (the root zone and external domains in vnetDNSOverrides) or to the cluster's CoreDNS.
fn zone(zone: &str, to_vnet_dns: bool) -> Value {
    json!({
        "zone": zone,
        "queryLogging": "Error",
        "protocol": "PreferUDP",
        "forwardDestination": if to_vnet_dns { "VnetDNS" } else { "ClusterCoreDNS" },
        "forwardPolicy": "Sequential",
        "maxConcurrent": 100,
        "cacheDuration": "1h",
        "serveStaleDuration": "30m",
        "serveStale": "Verify",
    })
}

/// A complete LocalDNS block; `extra` is appended to vnetDNSOverrides.
fn local_dns(extra: Option<Value>) -> Value {
    let mut vnet = vec![zone(".", true), zone("cluster.local", false)];
    vnet.extend(extra);
    json!({
        "mode": "Required",
        "vnetDNSOverrides": vnet,
        "kubeDNSOverrides": [zone(".", false), zone("cluster.local", false)],
    })
}

/// LocalDNS with an extra external-domain override whose `field` is `value`.
fn override_with(field: &str, value: Value) -> Value {
    let mut extra = zone("test.domain", true);
    extra[field] = value;
    with("/spec/localDNS", local_dns(Some(extra)))
}

fn sysctls(values: Value) -> Value {
    with("/spec/linuxOSConfig", json!({"sysctls": values}))
}

fn subnet_cases() -> Vec<Case> {
    let valid = [
        ("vnetSubnetID valid", json!(SUBNET)),
        (
            "vnetSubnetID mixed case",
            json!(
                "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/rgName/providers/Microsoft.Network/virtualNetworks/vnetName/subnets/subnetName"
            ),
        ),
        (
            "vnetSubnetID uppercase subnet",
            json!(
                "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/rgname/providers/Microsoft.Network/virtualNetworks/vnet/subnets/SUBNET"
            ),
        ),
        (
            "vnetSubnetID case-insensitive segments",
            json!(
                "/SUBSCRIPTIONS/1/RESOURCEGROUPS/rg/PROVIDERS/microsoft.network/VIRTUALNETWORKS/v/SUBNETS/s"
            ),
        ),
        (
            "vnetSubnetID long names",
            json!(format!(
                "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{}/subnets/{}",
                "a".repeat(63),
                "b".repeat(63),
                "c".repeat(63)
            )),
        ),
        (
            "vnetSubnetID 90-character resource group",
            subnet_in(&"r".repeat(90)),
        ),
        (
            "vnetSubnetID group my-resource_group",
            subnet_in("my-resource_group"),
        ),
        (
            "vnetSubnetID group starting with a dot",
            subnet_in(".starting.with.dot"),
        ),
        (
            "vnetSubnetID group ending with a hyphen",
            subnet_in("ends-with-hyphen-"),
        ),
        (
            "vnetSubnetID group with parentheses",
            subnet_in("contains.(parentheses)"),
        ),
        (
            "vnetSubnetID group with dots and hyphens",
            subnet_in("valid.name-with-multiple.characters"),
        ),
    ];
    let invalid = [
        (
            "vnetSubnetID without resourceGroups",
            json!(
                "/subscriptions/12345678-1234-1234-1234-123456789012/rgname/providers/Microsoft.Network/virtualNetworks/vnet/subnets/subnet"
            ),
        ),
        (
            "vnetSubnetID other provider",
            json!(
                "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/rgname/providers/Microsoft.Storage/virtualNetworks/vnet/subnets/subnet"
            ),
        ),
        (
            "vnetSubnetID without virtualNetworks",
            json!(
                "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/rgname/providers/Microsoft.Network/subnets/subnet"
            ),
        ),
        (
            "vnetSubnetID group ending with a dot",
            subnet_in("ends.with.dot."),
        ),
        ("vnetSubnetID group with #", subnet_in("invalid#character")),
        (
            "vnetSubnetID group with @*&",
            subnet_in("name@with*unsupported&chars"),
        ),
        (
            "vnetSubnetID 91-character resource group",
            subnet_in(&"r".repeat(91)),
        ),
        ("vnetSubnetID not an ARM id", json!("subnet-id")),
    ];
    let mut cases: Vec<Case> = valid
        .into_iter()
        .map(|(name, id)| (name, with("/spec/vnetSubnetID", id), Valid))
        .collect();
    cases.extend(invalid.into_iter().map(|(name, id)| {
        (
            name,
            with("/spec/vnetSubnetID", id),
            Rejected("spec.vnetSubnetID", ""),
        )
    }));
    cases
}

fn scalar_cases() -> Vec<Case> {
    vec![
        ("empty spec", aksnc(), Valid),
        ("no spec", set(aksnc(), "/spec", Value::Null), Valid),
        (
            "imageFamily invalid",
            with("/spec/imageFamily", json!("123")),
            Rejected("spec.imageFamily", ""),
        ),
        (
            "imageFamily Ubuntu2404",
            with("/spec/imageFamily", json!("Ubuntu2404")),
            Valid,
        ),
        (
            "fipsMode invalid",
            with("/spec/fipsMode", json!("123")),
            Rejected("spec.fipsMode", ""),
        ),
        (
            "osDiskSizeGB 30",
            with("/spec/osDiskSizeGB", json!(30)),
            Valid,
        ),
        (
            "osDiskSizeGB 128",
            with("/spec/osDiskSizeGB", json!(128)),
            Valid,
        ),
        (
            "osDiskSizeGB 1024",
            with("/spec/osDiskSizeGB", json!(1024)),
            Valid,
        ),
        (
            "osDiskSizeGB 2048",
            with("/spec/osDiskSizeGB", json!(2048)),
            Valid,
        ),
        (
            "osDiskSizeGB 29",
            with("/spec/osDiskSizeGB", json!(29)),
            Rejected("spec.osDiskSizeGB", ""),
        ),
        (
            "osDiskSizeGB 2049",
            with("/spec/osDiskSizeGB", json!(2049)),
            Rejected("spec.osDiskSizeGB", ""),
        ),
        (
            "osDiskSizeGB 4096",
            with("/spec/osDiskSizeGB", json!(4096)),
            Rejected("spec.osDiskSizeGB", ""),
        ),
        (
            "osDiskSizeGB a string",
            with("/spec/osDiskSizeGB", json!("128")),
            Rejected("spec.osDiskSizeGB", ""),
        ),
        ("maxPods 10", with("/spec/maxPods", json!(10)), Valid),
        ("maxPods 250", with("/spec/maxPods", json!(250)), Valid),
        (
            "maxPods 9",
            with("/spec/maxPods", json!(9)),
            Rejected("spec.maxPods", ""),
        ),
        (
            "maxPods 251",
            with("/spec/maxPods", json!(251)),
            Rejected("spec.maxPods", ""),
        ),
        ("artifactStreaming omitted", aksnc(), Valid),
        (
            "artifactStreaming on",
            with("/spec/artifactStreaming", json!({"enabled": true})),
            Valid,
        ),
        (
            "artifactStreaming off",
            with("/spec/artifactStreaming", json!({"enabled": false})),
            Valid,
        ),
        (
            "artifactStreaming not a bool",
            with("/spec/artifactStreaming", json!({"enabled": "yes"})),
            Rejected("spec.artifactStreaming.enabled", ""),
        ),
        (
            "gpu Driver",
            with("/spec/gpu", json!({"mode": "Driver"})),
            Valid,
        ),
        (
            "gpu None",
            with("/spec/gpu", json!({"mode": "None"})),
            Valid,
        ),
        (
            "gpu invalid",
            with("/spec/gpu", json!({"mode": "Invalid"})),
            Rejected("spec.gpu.mode", ""),
        ),
        ("gpu without mode", with("/spec/gpu", json!({})), Valid),
        (
            "security",
            with(
                "/spec/security",
                json!({"encryptionAtHost": true, "trustedLaunch": {"vtpm": true, "secureBoot": false}}),
            ),
            Valid,
        ),
        (
            "security trustedLaunch unknown field",
            with("/spec/security", json!({"trustedLaunch": {"tpm": true}})),
            Rejected("spec.security.trustedLaunch.tpm", ""),
        ),
        (
            "unknown field",
            with("/spec/imageFamilly", json!("Ubuntu")),
            Rejected("spec.imageFamilly", ""),
        ),
    ]
}

fn fips_cases() -> Vec<Case> {
    // Upstream's family × FIPS × Trusted Launch table: (family or none, fipsMode, vTPM, ok).
    let table: [(Option<&str>, Option<&str>, bool, bool); 25] = [
        (Some("Ubuntu"), Some("Disabled"), false, true),
        (Some("Ubuntu"), None, false, true),
        (Some("Ubuntu"), Some("FIPS"), false, true),
        (Some("Ubuntu"), None, true, true),
        (Some("Ubuntu"), Some("FIPS"), true, true),
        (Some("Ubuntu2204"), Some("Disabled"), false, true),
        (Some("Ubuntu2204"), None, false, true),
        (Some("Ubuntu2204"), None, true, true),
        (Some("Ubuntu2204"), Some("FIPS"), true, true),
        (Some("Ubuntu2204"), Some("FIPS"), false, false),
        (Some("Ubuntu2404"), Some("Disabled"), false, true),
        (Some("Ubuntu2404"), None, false, true),
        (Some("Ubuntu2404"), None, true, true),
        (Some("Ubuntu2404"), Some("FIPS"), true, false),
        (Some("Ubuntu2404"), Some("FIPS"), false, false),
        (Some("AzureLinux"), Some("Disabled"), false, true),
        (Some("AzureLinux"), None, false, true),
        (Some("AzureLinux"), Some("FIPS"), false, true),
        (Some("AzureLinux"), None, true, true),
        (Some("AzureLinux"), Some("FIPS"), true, false),
        (None, Some("Disabled"), false, true),
        (None, None, false, true),
        (None, Some("FIPS"), false, true),
        (None, None, true, true),
        (None, Some("FIPS"), true, true),
    ];
    let mut cases: Vec<Case> = table
        .into_iter()
        .map(|(family, fips, vtpm, ok)| {
            let mut object = aksnc();
            if let Some(family) = family {
                object = set(object, "/spec/imageFamily", json!(family));
            }
            if let Some(fips) = fips {
                object = set(object, "/spec/fipsMode", json!(fips));
            }
            if vtpm {
                object = set(
                    object,
                    "/spec/security",
                    json!({"trustedLaunch": {"vtpm": true}}),
                );
            }
            let name: &'static str = Box::leak(
                format!(
                    "family {} fips {} trusted launch {vtpm}",
                    family.unwrap_or("unset"),
                    fips.unwrap_or("unset")
                )
                .into_boxed_str(),
            );
            (name, object, if ok { Valid } else { Rejected("spec", "") })
        })
        .collect();
    let fips = |family: &str, security: Value| {
        set(
            set(
                with("/spec/fipsMode", json!("FIPS")),
                "/spec/imageFamily",
                json!(family),
            ),
            "/spec/security",
            security,
        )
    };
    cases.extend([
        (
            "fips Ubuntu2404 says why",
            fips("Ubuntu2404", json!({})),
            Rejected("spec", "FIPS is not yet supported for Ubuntu2404"),
        ),
        (
            "fips Ubuntu2204 without trusted launch says why",
            fips("Ubuntu2204", json!({})),
            Rejected(
                "spec",
                "TrustedLaunch is required for FIPS support with Ubuntu2204",
            ),
        ),
        (
            "fips Ubuntu2204 with secure boot",
            fips("Ubuntu2204", json!({"trustedLaunch": {"secureBoot": true}})),
            Valid,
        ),
        (
            "fips Ubuntu2204 with trusted launch off",
            fips(
                "Ubuntu2204",
                json!({"trustedLaunch": {"vtpm": false, "secureBoot": false}}),
            ),
            Rejected("spec", "TrustedLaunch is required"),
        ),
        (
            "fips AzureLinux with trusted launch says why",
            fips("AzureLinux", json!({"trustedLaunch": {"secureBoot": true}})),
            Rejected(
                "spec",
                "TrustedLaunch with FIPSMode FIPS is only supported for Ubuntu and Ubuntu2204",
            ),
        ),
    ]);
    cases
}

fn tag_cases() -> Vec<Case> {
    let tags = |k: &str, v: &str| with("/spec/tags", json!({k: v}));
    let mut cases: Vec<Case> = vec![
        (
            "tags valid",
            with(
                "/spec/tags",
                json!({"valid-key": "valid-value", "anotherKey": "anotherValue"}),
            ),
            Valid,
        ),
        (
            "tags at max lengths",
            tags(&"a".repeat(512), &"b".repeat(256)),
            Valid,
        ),
        (
            "tag key too long",
            tags(&"a".repeat(513), "value"),
            Rejected("spec.tags", "tags keys must be less than 512 characters"),
        ),
        (
            "tag value too long",
            tags("valid-key", &"b".repeat(257)),
            Rejected("spec.tags", "tags values must be less than 256 characters"),
        ),
        (
            r"tag key with \",
            tags(r"invalid\key", "value"),
            Rejected("spec.tags", r"tags keys must not contain '\'"),
        ),
        (
            "tag value not a string",
            with("/spec/tags", json!({"k": 1})),
            Rejected("spec.tags[k]", "must be of type string"),
        ),
    ];
    for key in [
        "invalid<key",
        "invalid>key",
        "invalid%key",
        "invalid&key",
        "invalid?key",
    ] {
        cases.push((
            Box::leak(format!("tag key {key}").into_boxed_str()),
            tags(key, "value"),
            Rejected(
                "spec.tags",
                "tags keys must not contain '<', '>', '%', '&', or '?'",
            ),
        ));
    }
    cases
}

fn kubelet_cases() -> Vec<Case> {
    let kubelet = |v: Value| with("/spec/kubelet", v);
    vec![
        (
            "kubelet all fields",
            kubelet(json!({
                "cpuManagerPolicy": "static", "cpuCFSQuota": false, "cpuCFSQuotaPeriod": "200ms",
                "imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 80,
                "topologyManagerPolicy": "single-numa-node", "allowedUnsafeSysctls": ["net.core.somaxconn", "kernel.msg*"],
                "containerLogMaxSize": "10Mi", "containerLogMaxFiles": 10, "podPidsLimit": 4096, "failSwapOn": true,
            })),
            Valid,
        ),
        ("kubelet empty", kubelet(json!({})), Valid),
        (
            "kubelet cpuManagerPolicy invalid",
            kubelet(json!({"cpuManagerPolicy": "dynamic"})),
            Rejected("spec.kubelet.cpuManagerPolicy", ""),
        ),
        (
            "kubelet topologyManagerPolicy invalid",
            kubelet(json!({"topologyManagerPolicy": "strict"})),
            Rejected("spec.kubelet.topologyManagerPolicy", ""),
        ),
        (
            "kubelet topologyManagerPolicy best-effort",
            kubelet(json!({"topologyManagerPolicy": "best-effort"})),
            Valid,
        ),
        (
            "kubelet gc high above low",
            kubelet(json!({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 49})),
            Valid,
        ),
        (
            "kubelet gc high equal to low",
            kubelet(json!({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 50})),
            Rejected(
                "spec.kubelet",
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            ),
        ),
        (
            "kubelet gc high below low",
            kubelet(json!({"imageGCHighThresholdPercent": 10, "imageGCLowThresholdPercent": 60})),
            Rejected(
                "spec.kubelet",
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            ),
        ),
        (
            "kubelet gc high alone",
            kubelet(json!({"imageGCHighThresholdPercent": 0})),
            Valid,
        ),
        (
            "kubelet gc high over 100",
            kubelet(json!({"imageGCHighThresholdPercent": 101})),
            Rejected("spec.kubelet.imageGCHighThresholdPercent", ""),
        ),
        (
            "kubelet gc low negative",
            kubelet(json!({"imageGCLowThresholdPercent": -1})),
            Rejected("spec.kubelet.imageGCLowThresholdPercent", ""),
        ),
        (
            "kubelet containerLogMaxFiles 2",
            kubelet(json!({"containerLogMaxFiles": 2})),
            Valid,
        ),
        (
            "kubelet containerLogMaxFiles 1",
            kubelet(json!({"containerLogMaxFiles": 1})),
            Rejected("spec.kubelet.containerLogMaxFiles", ""),
        ),
        (
            "kubelet containerLogMaxSize 256Ki",
            kubelet(json!({"containerLogMaxSize": "256Ki"})),
            Valid,
        ),
        (
            "kubelet containerLogMaxSize without unit",
            kubelet(json!({"containerLogMaxSize": "50"})),
            Rejected("spec.kubelet.containerLogMaxSize", ""),
        ),
        (
            "kubelet containerLogMaxSize fractional",
            kubelet(json!({"containerLogMaxSize": "1.5Gi"})),
            Rejected("spec.kubelet.containerLogMaxSize", ""),
        ),
        (
            "kubelet allowedUnsafeSysctls not a list",
            kubelet(json!({"allowedUnsafeSysctls": "net.*"})),
            Rejected("spec.kubelet.allowedUnsafeSysctls", ""),
        ),
        (
            "kubelet podPidsLimit -1",
            kubelet(json!({"podPidsLimit": -1})),
            Valid,
        ),
        (
            "kubelet cpuCFSQuotaPeriod not a duration",
            kubelet(json!({"cpuCFSQuotaPeriod": "soon"})),
            NotReady("spec.kubelet.cpuCFSQuotaPeriod", ""),
        ),
        (
            "kubelet unknown field",
            kubelet(json!({"maxPods": 30})),
            Rejected("spec.kubelet.maxPods", ""),
        ),
    ]
}

fn linux_os_cases() -> Vec<Case> {
    let swap = |kubelet: Option<Value>| {
        let object = with("/spec/linuxOSConfig", json!({"swapFileSize": "1500Mi"}));
        match kubelet {
            Some(k) => set(object, "/spec/kubelet", k),
            None => object,
        }
    };
    const SWAP: &str =
        "kubelet.failSwapOn must be set to false when linuxOSConfig.swapFileSize is specified";
    let mut cases: Vec<Case> = vec![
        (
            "sysctls rmem default above max",
            sysctls(json!({"netCoreRmemDefault": 1_048_576, "netCoreRmemMax": 212_992})),
            Rejected(
                "spec.linuxOSConfig.sysctls",
                "netCoreRmemDefault must be <= netCoreRmemMax",
            ),
        ),
        (
            "sysctls rmem default below max",
            sysctls(json!({"netCoreRmemDefault": 212_992, "netCoreRmemMax": 1_048_576})),
            Valid,
        ),
        (
            "sysctls wmem default above max",
            sysctls(json!({"netCoreWmemDefault": 1_048_576, "netCoreWmemMax": 212_992})),
            Rejected(
                "spec.linuxOSConfig.sysctls",
                "netCoreWmemDefault must be <= netCoreWmemMax",
            ),
        ),
        (
            "sysctls wmem default below max",
            sysctls(json!({"netCoreWmemDefault": 212_992, "netCoreWmemMax": 1_048_576})),
            Valid,
        ),
        (
            "sysctls rmem default alone",
            sysctls(json!({"netCoreRmemDefault": 1_048_576})),
            Valid,
        ),
        (
            "sysctls port range",
            sysctls(json!({"netIPv4IPLocalPortRange": "32768 60999"})),
            Valid,
        ),
        (
            "sysctls port range at minimum",
            sysctls(json!({"netIPv4IPLocalPortRange": "1024 32768"})),
            Valid,
        ),
        (
            "sysctls port range first below 1024",
            sysctls(json!({"netIPv4IPLocalPortRange": "500 65535"})),
            Rejected(
                "spec.linuxOSConfig.sysctls",
                "first port must be in [1024, 60999]",
            ),
        ),
        (
            "sysctls port range last above 65535",
            sysctls(json!({"netIPv4IPLocalPortRange": "1024 70000"})),
            Rejected(
                "spec.linuxOSConfig.sysctls",
                "last port must be in [32768, 65535]",
            ),
        ),
        (
            "sysctls port range first above 60999",
            sysctls(json!({"netIPv4IPLocalPortRange": "61000 65535"})),
            Rejected(
                "spec.linuxOSConfig.sysctls",
                "first port must be in [1024, 60999]",
            ),
        ),
        (
            "sysctls port range last below 32768",
            sysctls(json!({"netIPv4IPLocalPortRange": "1024 30000"})),
            Rejected(
                "spec.linuxOSConfig.sysctls",
                "last port must be in [32768, 65535]",
            ),
        ),
        (
            "sysctls port range reversed",
            sysctls(json!({"netIPv4IPLocalPortRange": "60000 32768"})),
            Rejected(
                "spec.linuxOSConfig.sysctls",
                "first port must be <= last port",
            ),
        ),
        (
            "sysctls port range malformed",
            sysctls(json!({"netIPv4IPLocalPortRange": "1024-65535"})),
            Rejected("spec.linuxOSConfig.sysctls.netIPv4IPLocalPortRange", ""),
        ),
        (
            "sysctls without port range",
            sysctls(json!({"netCoreSomaxconn": 8192})),
            Valid,
        ),
        (
            "sysctls gc thresh1 above thresh2",
            sysctls(
                json!({"netIPv4NeighDefaultGcThresh1": 80_000, "netIPv4NeighDefaultGcThresh2": 512}),
            ),
            Rejected(
                "spec.linuxOSConfig.sysctls",
                "netIPv4NeighDefaultGcThresh1 must be <= netIPv4NeighDefaultGcThresh2",
            ),
        ),
        (
            "sysctls gc thresh2 above thresh3",
            sysctls(
                json!({"netIPv4NeighDefaultGcThresh2": 90_000, "netIPv4NeighDefaultGcThresh3": 1024}),
            ),
            Rejected(
                "spec.linuxOSConfig.sysctls",
                "netIPv4NeighDefaultGcThresh2 must be <= netIPv4NeighDefaultGcThresh3",
            ),
        ),
        (
            "sysctls gc thresholds ordered",
            sysctls(
                json!({"netIPv4NeighDefaultGcThresh1": 128, "netIPv4NeighDefaultGcThresh2": 512, "netIPv4NeighDefaultGcThresh3": 1024}),
            ),
            Valid,
        ),
        (
            "sysctls gc thresh1 alone",
            sysctls(json!({"netIPv4NeighDefaultGcThresh1": 80_000})),
            Valid,
        ),
        (
            "sysctls gc thresholds equal",
            sysctls(
                json!({"netIPv4NeighDefaultGcThresh1": 1024, "netIPv4NeighDefaultGcThresh2": 1024, "netIPv4NeighDefaultGcThresh3": 1024}),
            ),
            Valid,
        ),
        (
            "sysctls tcp tw reuse",
            sysctls(json!({"netIPv4TCPTwReuse": true})),
            Valid,
        ),
        (
            "sysctls unknown",
            sysctls(json!({"netCoreBusyPoll": 50})),
            Rejected("spec.linuxOSConfig.sysctls.netCoreBusyPoll", ""),
        ),
        (
            "swap without failSwapOn",
            swap(None),
            Rejected("spec", SWAP),
        ),
        (
            "swap with failSwapOn true",
            swap(Some(json!({"failSwapOn": true}))),
            Rejected("spec", SWAP),
        ),
        (
            "swap with failSwapOn false",
            swap(Some(json!({"failSwapOn": false}))),
            Valid,
        ),
        (
            "failSwapOn false without linuxOSConfig",
            with("/spec/kubelet", json!({"failSwapOn": false})),
            Valid,
        ),
        (
            "swapFileSize without unit",
            set(
                swap(Some(json!({"failSwapOn": false}))),
                "/spec/linuxOSConfig/swapFileSize",
                json!("2048"),
            ),
            Rejected("spec.linuxOSConfig.swapFileSize", ""),
        ),
        (
            "transparent huge pages",
            with(
                "/spec/linuxOSConfig",
                json!({"transparentHugePageEnabled": "madvise", "transparentHugePageDefrag": "defer+madvise"}),
            ),
            Valid,
        ),
        (
            "transparentHugePageEnabled invalid",
            with(
                "/spec/linuxOSConfig",
                json!({"transparentHugePageEnabled": "defer"}),
            ),
            Rejected("spec.linuxOSConfig.transparentHugePageEnabled", ""),
        ),
        (
            "transparentHugePageDefrag invalid",
            with(
                "/spec/linuxOSConfig",
                json!({"transparentHugePageDefrag": "sometimes"}),
            ),
            Rejected("spec.linuxOSConfig.transparentHugePageDefrag", ""),
        ),
    ];
    // Every bounded sysctl: its bounds are accepted, one past either is not.
    for (field, min, max) in [
        ("fsAioMaxNr", 65_536, 6_553_500),
        ("fsFileMax", 8_192, 12_000_500),
        ("fsInotifyMaxUserWatches", 781_250, 2_097_152),
        ("fsNrOpen", 8_192, 20_000_500),
        ("kernelThreadsMax", 20, 513_785),
        ("netCoreNetdevMaxBacklog", 1_000, 3_240_000),
        ("netCoreOptmemMax", 20_480, 4_194_304),
        ("netCoreRmemDefault", 212_992, 134_217_728),
        ("netCoreRmemMax", 212_992, 134_217_728),
        ("netCoreSomaxconn", 4_096, 3_240_000),
        ("netCoreWmemDefault", 212_992, 134_217_728),
        ("netCoreWmemMax", 212_992, 134_217_728),
        ("netIPv4NeighDefaultGcThresh1", 128, 80_000),
        ("netIPv4NeighDefaultGcThresh2", 512, 90_000),
        ("netIPv4NeighDefaultGcThresh3", 1_024, 100_000),
        ("netIPv4TCPFinTimeout", 5, 120),
        ("netIPv4TCPKeepaliveIntvl", 10, 90),
        ("netIPv4TCPKeepaliveProbes", 1, 15),
        ("netIPv4TCPKeepaliveTime", 30, 432_000),
        ("netIPv4TCPMaxSynBacklog", 128, 3_240_000),
        ("netIPv4TCPMaxTwBuckets", 8_000, 1_440_000),
        ("netNetfilterNfConntrackBuckets", 65_536, 524_288),
        ("netNetfilterNfConntrackMax", 131_072, 2_097_152),
        ("vmMaxMapCount", 65_530, 262_144),
        ("vmSwappiness", 0, 100),
        ("vmVfsCachePressure", 0, 100),
    ] {
        let path: &'static str =
            Box::leak(format!("spec.linuxOSConfig.sysctls.{field}").into_boxed_str());
        let name = |what: &str| -> &'static str {
            Box::leak(format!("sysctl {field} {what}").into_boxed_str())
        };
        cases.push((name("at minimum"), sysctls(json!({field: min})), Valid));
        cases.push((name("at maximum"), sysctls(json!({field: max})), Valid));
        cases.push((
            name("below minimum"),
            sysctls(json!({field: min - 1})),
            Rejected(path, ""),
        ));
        cases.push((
            name("above maximum"),
            sysctls(json!({field: max + 1})),
            Rejected(path, ""),
        ));
    }
    cases
}

fn local_dns_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = vec![
        ("localDNS omitted", aksnc(), Valid),
        (
            "localDNS complete",
            with("/spec/localDNS", local_dns(None)),
            Valid,
        ),
        (
            "localDNS mode invalid",
            set(
                with("/spec/localDNS", local_dns(None)),
                "/spec/localDNS/mode",
                json!("invalid-string"),
            ),
            Rejected("spec.localDNS.mode", ""),
        ),
        (
            "localDNS mode empty",
            set(
                with("/spec/localDNS", local_dns(None)),
                "/spec/localDNS/mode",
                json!(""),
            ),
            Rejected("spec.localDNS.mode", ""),
        ),
        (
            "localDNS mode missing",
            set(
                with("/spec/localDNS", local_dns(None)),
                "/spec/localDNS/mode",
                Value::Null,
            ),
            Rejected("spec.localDNS.mode", ""),
        ),
        (
            "localDNS overrides missing",
            with("/spec/localDNS", json!({"mode": "Disabled"})),
            Rejected("spec.localDNS.", ""),
        ),
        (
            "localDNS forwardDestination ClusterCoreDNS for an external domain",
            override_with("forwardDestination", json!("ClusterCoreDNS")),
            Rejected(
                "spec.localDNS.vnetDNSOverrides",
                "external domains cannot be forwarded to ClusterCoreDNS",
            ),
        ),
        (
            "localDNS forwardDestination VnetDNS",
            override_with("forwardDestination", json!("VnetDNS")),
            Valid,
        ),
        (
            "localDNS protocol ForceTCP with Immediate",
            {
                let mut extra = zone("test.domain", true);
                extra["protocol"] = json!("ForceTCP");
                extra["serveStale"] = json!("Immediate");
                with("/spec/localDNS", local_dns(Some(extra)))
            },
            Valid,
        ),
        (
            "localDNS maxConcurrent -1",
            override_with("maxConcurrent", json!(-1)),
            Rejected("spec.localDNS.vnetDNSOverrides[2].maxConcurrent", ""),
        ),
        (
            "localDNS maxConcurrent -100",
            override_with("maxConcurrent", json!(-100)),
            Rejected("spec.localDNS.vnetDNSOverrides[2].maxConcurrent", ""),
        ),
        (
            "localDNS field missing",
            override_with("serveStale", Value::Null),
            Rejected("spec.localDNS.vnetDNSOverrides[2].serveStale", ""),
        ),
        (
            "localDNS zone empty",
            override_with("zone", json!("")),
            Rejected("spec.localDNS.vnetDNSOverrides[2].zone", ""),
        ),
        (
            "localDNS zone malformed",
            override_with("zone", json!("-bad.zone")),
            Rejected("spec.localDNS.vnetDNSOverrides[2].zone", ""),
        ),
        (
            "localDNS zone too long",
            override_with(
                "zone",
                json!(format!("{}.com", vec!["a".repeat(60); 5].join("."))),
            ),
            Rejected("spec.localDNS.vnetDNSOverrides[2].zone", ""),
        ),
        (
            "localDNS zone fully qualified",
            override_with("zone", json!("example.com.")),
            Valid,
        ),
        (
            "localDNS cacheDuration not a duration",
            override_with("cacheDuration", json!("1d")),
            Rejected("spec.localDNS.vnetDNSOverrides[2].cacheDuration", ""),
        ),
        (
            "localDNS duplicate vnet zones",
            {
                let mut object = with("/spec/localDNS", local_dns(Some(zone("example.com", true))));
                object["spec"]["localDNS"]["vnetDNSOverrides"]
                    .as_array_mut()
                    .unwrap()
                    .push(zone("example.com", true));
                object
            },
            Rejected("spec.localDNS.vnetDNSOverrides[3]", "duplicate"),
        ),
        (
            "localDNS duplicate kube zones",
            {
                let mut object = with("/spec/localDNS", local_dns(None));
                let kube = object["spec"]["localDNS"]["kubeDNSOverrides"]
                    .as_array_mut()
                    .unwrap();
                kube.push(zone("test.com", false));
                kube.push(zone("test.com", false));
                object
            },
            Rejected("spec.localDNS.kubeDNSOverrides[3]", "duplicate"),
        ),
        (
            "localDNS too many overrides",
            {
                let mut object = with("/spec/localDNS", local_dns(None));
                let vnet = object["spec"]["localDNS"]["vnetDNSOverrides"]
                    .as_array_mut()
                    .unwrap();
                vnet.extend((0..99).map(|i| zone(&format!("z{i}.example.com"), true)));
                object
            },
            Rejected("spec.localDNS.vnetDNSOverrides", ""),
        ),
    ];
    for (field, values) in [("mode", &["Preferred", "Required", "Disabled"][..])] {
        for value in values {
            cases.push((
                Box::leak(format!("localDNS {field} {value}").into_boxed_str()),
                set(
                    with("/spec/localDNS", local_dns(None)),
                    &format!("/spec/localDNS/{field}"),
                    json!(value),
                ),
                Valid,
            ));
        }
    }
    for (field, values) in [
        ("queryLogging", &["Error", "Log"][..]),
        ("protocol", &["PreferUDP"][..]),
        ("forwardPolicy", &["Sequential", "RoundRobin", "Random"][..]),
        ("serveStale", &["Verify", "Immediate", "Disable"][..]),
        (
            "cacheDuration",
            &["1h", "30m", "60s", "1h30m", "2h15m30s"][..],
        ),
        (
            "serveStaleDuration",
            &["1h", "30m", "60s", "1h30m", "2h15m30s"][..],
        ),
    ] {
        for value in values {
            cases.push((
                Box::leak(format!("localDNS {field} {value}").into_boxed_str()),
                override_with(field, json!(value)),
                Valid,
            ));
        }
        for bad in ["invalid-string", ""] {
            if field.ends_with("Duration") && bad.is_empty() {
                continue;
            }
            let path: &'static str =
                Box::leak(format!("spec.localDNS.vnetDNSOverrides[2].{field}").into_boxed_str());
            cases.push((
                Box::leak(format!("localDNS {field} {bad:?}").into_boxed_str()),
                override_with(field, json!(bad)),
                Rejected(path, ""),
            ));
        }
    }
    for (field, bad) in [
        ("forwardDestination", "invalid-string"),
        ("forwardDestination", ""),
        ("protocol", "invalid-string"),
        ("protocol", ""),
    ] {
        let path: &'static str =
            Box::leak(format!("spec.localDNS.vnetDNSOverrides[2].{field}").into_boxed_str());
        cases.push((
            Box::leak(format!("localDNS {field} {bad:?} again").into_boxed_str()),
            override_with(field, json!(bad)),
            Rejected(path, ""),
        ));
    }
    for value in [0, 1, 100, 1000] {
        cases.push((
            Box::leak(format!("localDNS maxConcurrent {value}").into_boxed_str()),
            override_with("maxConcurrent", json!(value)),
            Valid,
        ));
    }
    // Required zones, in both lists.
    let required = "must contain required zones '.' and 'cluster.local'";
    let dns = |vnet: Vec<Value>, kube: Vec<Value>| {
        with(
            "/spec/localDNS",
            json!({"mode": "Required", "vnetDNSOverrides": vnet, "kubeDNSOverrides": kube}),
        )
    };
    cases.extend([
        (
            "vnetDNSOverrides without the root zone",
            dns(
                vec![zone("cluster.local", false)],
                vec![zone(".", false), zone("cluster.local", false)],
            ),
            Rejected("spec.localDNS.vnetDNSOverrides", required),
        ),
        (
            "vnetDNSOverrides without cluster.local",
            dns(
                vec![zone(".", true)],
                vec![zone(".", false), zone("cluster.local", false)],
            ),
            Rejected("spec.localDNS.vnetDNSOverrides", required),
        ),
        (
            "kubeDNSOverrides without the root zone",
            dns(
                vec![zone(".", true), zone("cluster.local", false)],
                vec![zone("cluster.local", false)],
            ),
            Rejected("spec.localDNS.kubeDNSOverrides", required),
        ),
        (
            "kubeDNSOverrides without cluster.local",
            dns(
                vec![zone(".", true), zone("cluster.local", false)],
                vec![zone(".", false)],
            ),
            Rejected("spec.localDNS.kubeDNSOverrides", required),
        ),
        (
            "root zone to ClusterCoreDNS from vnetDNSOverrides",
            dns(
                vec![zone(".", false), zone("cluster.local", false)],
                vec![zone(".", false), zone("cluster.local", false)],
            ),
            Rejected(
                "spec.localDNS.vnetDNSOverrides",
                "root zone '.' cannot be forwarded to ClusterCoreDNS from vnetDNSOverrides",
            ),
        ),
        (
            "cluster.local to VnetDNS",
            dns(
                vec![zone(".", true), zone("cluster.local", true)],
                vec![zone(".", false), zone("cluster.local", false)],
            ),
            Rejected(
                "spec.localDNS.vnetDNSOverrides[1]",
                "'cluster.local' cannot be forwarded to VnetDNS",
            ),
        ),
        (
            "svc.cluster.local to VnetDNS",
            dns(
                vec![
                    zone(".", true),
                    zone("cluster.local", false),
                    zone("svc.cluster.local", true),
                ],
                vec![zone(".", false), zone("cluster.local", false)],
            ),
            Rejected(
                "spec.localDNS.vnetDNSOverrides[2]",
                "'cluster.local' cannot be forwarded to VnetDNS",
            ),
        ),
        (
            "cluster.local to VnetDNS from kubeDNSOverrides",
            dns(
                vec![zone(".", true), zone("cluster.local", false)],
                vec![zone(".", false), zone("cluster.local", true)],
            ),
            Rejected(
                "spec.localDNS.kubeDNSOverrides[1]",
                "'cluster.local' cannot be forwarded to VnetDNS",
            ),
        ),
        (
            "root zone to VnetDNS from kubeDNSOverrides",
            dns(
                vec![zone(".", true), zone("cluster.local", false)],
                vec![zone(".", true), zone("cluster.local", false)],
            ),
            Valid,
        ),
    ]);
    // Protocol and serve-stale combinations.
    for (protocol, serve_stale, ok) in [
        ("ForceTCP", "Verify", false),
        ("ForceTCP", "Immediate", true),
        ("ForceTCP", "Disable", true),
        ("PreferUDP", "Verify", true),
    ] {
        let mut extra = zone("example.com", true);
        extra["protocol"] = json!(protocol);
        extra["serveStale"] = json!(serve_stale);
        cases.push((
            Box::leak(format!("localDNS {protocol} with {serve_stale}").into_boxed_str()),
            with("/spec/localDNS", local_dns(Some(extra))),
            if ok {
                Valid
            } else {
                Rejected(
                    "spec.localDNS.vnetDNSOverrides[2]",
                    "serveStale Verify cannot be used with protocol ForceTCP",
                )
            },
        ));
    }
    cases
}

fn status_cases() -> Vec<Case> {
    vec![
        (
            "status",
            with(
                "/status",
                json!({
                    "images": [{"id": "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/2022.10.03",
                        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}],
                    "kubernetesVersion": "1.33.2",
                    "localDNSState": "Enabled",
                    "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}],
                }),
            ),
            Valid,
        ),
        (
            "status image without requirements",
            with("/status/images", json!([{"id": "x"}])),
            Rejected("status.images[0].requirements", ""),
        ),
        (
            "status localDNSState invalid",
            with("/status/localDNSState", json!("Preferred")),
            Rejected("status.localDNSState", ""),
        ),
        (
            "status condition without reason",
            with(
                "/status/conditions",
                json!([{"type": "Ready", "status": "True", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]),
            ),
            Rejected("status.conditions[0].reason", ""),
        ),
    ]
}

#[test]
fn upstream_aksnodeclass_cases() {
    let cases: Vec<Case> = [
        subnet_cases(),
        scalar_cases(),
        fips_cases(),
        tag_cases(),
        kubelet_cases(),
        linux_os_cases(),
        local_dns_cases(),
        status_cases(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let crds: Vec<_> = CORE.iter().chain(karpenter_azure::CRDS).copied().collect();
    let failures = failures(&crds, cases);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn aksnodeclasses_are_unknown_without_the_provider() {
    assert!(karpenter_api::validation::validate_object(&CORE, &aksnc()).is_none());
}

/// The Rust types' serde defaults must be the CRD's defaults: an object read by the provider
/// must mean what the API server stored.
#[test]
fn type_defaults_match_crd_defaults() {
    let schema = karpenter_azure::aksnodeclass::CRD.schema();
    for object in [
        aksnc(),
        with("/spec/kubelet", json!({})),
        with("/spec/gpu", json!({})),
        with(
            "/spec/kubelet",
            json!({"cpuManagerPolicy": "static", "failSwapOn": false}),
        ),
    ] {
        let defaulted = kube_cel::apply_defaults(&schema, &object);
        let typed: AKSNodeClass = serde_json::from_value(object.clone()).unwrap();
        assert_eq!(
            typed,
            serde_json::from_value::<AKSNodeClass>(defaulted.clone()).unwrap(),
            "{object}"
        );
        // And serialized, the type writes out what the API server would have stored.
        let mut written = serde_json::to_value(&typed).unwrap();
        written.as_object_mut().unwrap().remove("status");
        assert_eq!(written["spec"], defaulted["spec"], "{object}");
    }
    let defaulted = kube_cel::apply_defaults(&schema, &with("/spec/kubelet", json!({})));
    assert_eq!(defaulted["spec"]["imageFamily"], "Ubuntu");
    assert_eq!(defaulted["spec"]["osDiskSizeGB"], 128);
    assert_eq!(
        defaulted["spec"]["kubelet"],
        json!({"cpuManagerPolicy": "none", "cpuCFSQuota": true, "cpuCFSQuotaPeriod": "100ms",
            "topologyManagerPolicy": "none", "containerLogMaxSize": "50Mi", "containerLogMaxFiles": 5})
    );
}

/// What `karpenter-rs convert` does with a v1alpha2 manifest: the v1beta1 object validates.
#[test]
fn v1alpha2_converts_to_a_valid_v1beta1() {
    let mut object = with("/spec/imageFamily", json!("AzureLinux"));
    object["apiVersion"] = json!("karpenter.azure.com/v1alpha2");
    let conversion = karpenter_azure::REGISTRATION
        .conversions
        .iter()
        .find(|c| c.from_api_version == "karpenter.azure.com/v1alpha2" && c.kind == "AKSNodeClass")
        .expect("a v1alpha2 conversion is registered");
    let converted = (conversion.convert)(&object).unwrap();
    let crds: Vec<_> = CORE.iter().chain(karpenter_azure::CRDS).copied().collect();
    let report = karpenter_api::validation::validate_object(&crds, &converted.object).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// The CRD serves v1alpha2 as upstream's does: deprecated, not stored, the same schema, no
/// conversion webhook (the API server only relabels `apiVersion`).
#[test]
fn the_crd_serves_v1alpha2_deprecated_and_stores_v1beta1() {
    let crd = karpenter_azure::aksnodeclass::CRD;
    assert_eq!(crd.version(), "v1beta1");
    assert_eq!(crd.api_version(), "karpenter.azure.com/v1beta1");
    assert!(crd.serves("v1alpha2"));
    let definition = crd.definition();
    assert!(definition["spec"].get("conversion").is_none());
    let versions = definition["spec"]["versions"].as_array().unwrap();
    let summary: Vec<_> = versions
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap(),
                v["served"] == true,
                v["storage"] == true,
                v["deprecated"] == true,
                v["deprecationWarning"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "v1alpha2",
                true,
                false,
                true,
                Some("use v1beta1.AKSNodeClass instead")
            ),
            ("v1beta1", true, true, false, None),
        ]
    );
    for field in ["schema", "additionalPrinterColumns", "subresources"] {
        assert_eq!(versions[0][field], versions[1][field], "{field}");
    }
}

/// `karpenter-rs validate` judges a v1alpha2 manifest by the schema the API server would.
#[test]
fn v1alpha2_manifests_are_validated_like_v1beta1() {
    let crds: Vec<_> = CORE.iter().chain(karpenter_azure::CRDS).copied().collect();
    let v1alpha2 =
        |object: Value| set(object, "/apiVersion", json!("karpenter.azure.com/v1alpha2"));
    let report = karpenter_api::validation::validate_object(
        &crds,
        &v1alpha2(with("/spec/imageFamily", json!("AzureLinux"))),
    )
    .expect("v1alpha2 is served");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let report = karpenter_api::validation::validate_object(
        &crds,
        &v1alpha2(with("/spec/imageFamily", json!("123"))),
    )
    .unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert_eq!(report.problems[0].path, "spec.imageFamily");
    // An apiVersion the CRD does not serve is not an AKSNodeClass.
    let unserved = set(
        aksnc(),
        "/apiVersion",
        json!("karpenter.azure.com/v1alpha1"),
    );
    assert!(karpenter_api::validation::validate_object(&crds, &unserved).is_none());
}
