//! Instance types from the Resource SKUs fixture (`testdata/resource-skus-eastus.json`).

use super::*;
use crate::catalog;
use crate::pricing::{Prices, parse_page};
use crate::skus;

const REGION: &str = "eastus";

fn fixture() -> Vec<ResourceSku> {
    skus::parse_page(include_str!("../testdata/resource-skus-eastus.json"))
        .expect("the fixture parses")
        .value
}

fn supported() -> BTreeMap<String, ResourceSku> {
    supported_skus(fixture(), REGION)
}

fn never(_: &str, _: &str, _: &str) -> bool {
    false
}

fn build(options: &InstanceTypeOptions) -> Vec<InstanceType> {
    instance_types(
        supported().values(),
        REGION,
        options,
        &PriceTable::embedded(),
        &never,
    )
}

fn names(types: &[InstanceType]) -> Vec<&str> {
    types.iter().map(|t| t.name.as_str()).collect()
}

fn find<'a>(types: &'a [InstanceType], name: &str) -> &'a InstanceType {
    types
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} is offered"))
}

/// A requirement's values; `None` when the label must not exist.
fn values(t: &InstanceType, key: &str) -> Option<Vec<String>> {
    let r = t.requirements.get(key).expect("every label is set");
    match r.operator() {
        Operator::In => Some(r.values().map(str::to_string).collect()),
        Operator::DoesNotExist => None,
        other => panic!("{key}: unexpected {other:?}"),
    }
}

fn vals(v: &[&str]) -> Option<Vec<String>> {
    Some(v.iter().map(|s| s.to_string()).collect())
}

#[test]
fn refresh_keeps_only_sizes_aks_can_run() {
    let kept: Vec<String> = supported().into_keys().collect();
    assert_eq!(
        kept,
        [
            "Standard_B20ms",
            "Standard_D128ds_v6",
            "Standard_D2_v2",
            "Standard_D2pls_v5",
            "Standard_D2s_v3",
            "Standard_D2s_v7",
            "Standard_NC24ads_A100_v4",
            "Standard_NC6s_v3",
            "Standard_NV4ads_V710_v5",
        ]
    );
    // Why each of the others is left out.
    let all = fixture();
    for (name, reason) in [
        ("Premium_LRS", "a disk, not a VM size"),
        ("Standard_B1s", "restricted by AKS"),
        ("Standard_E64is_v3", "restricted by the provider"),
        ("Standard_M8-2ms", "constrained vCPUs"),
        ("Standard_DC8s_v3", "confidential"),
        ("Standard_DS1_v2", "one vCPU"),
        ("Standard_B2ts_v2", "1 GiB of memory"),
        ("Standard_F2s_v2", "a Location restriction"),
        (
            "Standard_NG8ads_V620_v1",
            "a GPU outside the supported list",
        ),
        ("Standard_D4_Weird", "a size name that does not parse"),
    ] {
        assert!(
            all.iter().any(|s| s.name == name),
            "{name} is in the fixture"
        );
        assert!(!supported().contains_key(name), "{name}: {reason}");
    }
    // Location restrictions are per region.
    assert!(supported_skus(fixture(), "westus2").contains_key("Standard_F2s_v2"));
}

#[test]
fn node_class_filters() {
    let base = InstanceTypeOptions::default();
    let cases: [(&str, InstanceTypeOptions, &[&str], &[&str]); 8] = [
        (
            "defaults: the AMD GPU needs a driver the node cannot install",
            base.clone(),
            &[
                "Standard_D2s_v3",
                "Standard_NC24ads_A100_v4",
                "Standard_NC6s_v3",
            ],
            &["Standard_NV4ads_V710_v5"],
        ),
        (
            "GPU mode None: every supported GPU",
            InstanceTypeOptions {
                gpu_mode: GpuMode::None,
                ..base.clone()
            },
            &["Standard_NV4ads_V710_v5", "Standard_NC24ads_A100_v4"],
            &[],
        ),
        (
            "AzureLinux: only GPUs with AzureLinux drivers",
            InstanceTypeOptions {
                image_family: "AzureLinux".into(),
                gpu_mode: GpuMode::None,
                ..base.clone()
            },
            &[
                "Standard_NC24ads_A100_v4",
                "Standard_NC6s_v3",
                "Standard_D2s_v3",
            ],
            &["Standard_NV4ads_V710_v5"],
        ),
        (
            "an unknown image family: no GPUs",
            InstanceTypeOptions {
                image_family: "Windows2022".into(),
                ..base.clone()
            },
            &["Standard_D2s_v3"],
            &["Standard_NC24ads_A100_v4", "Standard_NC6s_v3"],
        ),
        (
            "encryption at host",
            InstanceTypeOptions {
                encryption_at_host: true,
                ..base.clone()
            },
            &["Standard_D2s_v3"],
            &["Standard_D2_v2"],
        ),
        (
            "trusted launch: generation 2 without TrustedLaunchDisabled",
            InstanceTypeOptions {
                trusted_launch: true,
                ..base.clone()
            },
            &["Standard_D2s_v3", "Standard_D2pls_v5"],
            &["Standard_D2_v2", "Standard_NC24ads_A100_v4"],
        ),
        (
            "LocalDNS: 4 vCPUs or more",
            InstanceTypeOptions {
                local_dns: true,
                ..base.clone()
            },
            &["Standard_B20ms", "Standard_NC6s_v3"],
            &["Standard_D2s_v3", "Standard_D2_v2", "Standard_D2pls_v5"],
        ),
        (
            "artifact streaming: no arm64",
            InstanceTypeOptions {
                artifact_streaming: true,
                ..base.clone()
            },
            &["Standard_D2s_v3"],
            &["Standard_D2pls_v5"],
        ),
    ];
    for (case, options, included, excluded) in cases {
        let types = build(&options);
        let got = names(&types);
        for name in included {
            assert!(got.contains(name), "{case}: {name} included");
        }
        for name in excluded {
            assert!(!got.contains(name), "{case}: {name} excluded");
        }
    }
}

#[test]
fn allocatable_as_upstream() {
    let types = build(&InstanceTypeOptions::default());
    let d2s = find(&types, "Standard_D2s_v3");
    // 8 GiB less ceil(7.5%) = 7,945,689,497 bytes; less 1843 MiB kube-reserved and the 750 MiB
    // eviction threshold = 5,226,731,929 bytes. The catalog computes the same.
    assert_eq!(d2s.capacity.memory, 7_945_689_497 * 1000);
    assert_eq!(d2s.allocatable().memory, 5_226_731_929 * 1000);
    assert_eq!(d2s.allocatable().cpu, 1900);
    assert_eq!(d2s.allocatable().pods, 250_000);
    assert_eq!(d2s.capacity.ephemeral_storage, 128_000_000_000 * 1000);
    let catalog = catalog::catalog();
    let from_catalog = catalog
        .instance_types
        .iter()
        .find(|t| t.name == "Standard_D2s_v3")
        .expect("in the catalog");
    assert_eq!(from_catalog.allocatable(), d2s.allocatable());

    // Upstream's suite, with the VM overhead off: capacity is the SKU's memory.
    let no_overhead = InstanceTypeOptions {
        vm_memory_overhead_percent: 0.0,
        max_pods: 110,
        os_disk_size_gb: 64,
        ..InstanceTypeOptions::default()
    };
    let types = build(&no_overhead);
    let d2 = find(&types, "Standard_D2_v2");
    assert_eq!(d2.capacity.cpu, 2000);
    assert_eq!(d2.capacity.memory, 7 * (1 << 30) * 1000);
    assert_eq!(d2.capacity.pods, 110_000);
    assert_eq!(d2.capacity.ephemeral_storage, 64_000_000_000 * 1000);
    assert_eq!(d2.capacity.get("nvidia.com/gpu"), 0);
    let a100 = find(&types, "Standard_NC24ads_A100_v4");
    assert_eq!(a100.capacity.cpu, 24_000);
    assert_eq!(a100.capacity.memory, 220 * (1 << 30) * 1000);
    assert_eq!(a100.capacity.get("nvidia.com/gpu"), 1000);
    assert_eq!(a100.capacity.get("amd.com/gpu"), 0);
    // 24 vCPUs: 60 + 40 + 2×20 + 20×10 = 340m; 220 GiB: 2.6 + 6.72 + 1.84 GiB = 11427 MiB.
    assert_eq!(a100.overhead.kube_reserved.cpu, 340);
    assert_eq!(
        a100.overhead.kube_reserved.memory,
        11_427 * (1 << 20) * 1000
    );

    let amd = build(&InstanceTypeOptions {
        gpu_mode: GpuMode::None,
        ..InstanceTypeOptions::default()
    });
    let v710 = find(&amd, "Standard_NV4ads_V710_v5");
    assert_eq!(v710.capacity.get("amd.com/gpu"), 1000);
    assert_eq!(v710.capacity.get("nvidia.com/gpu"), 0);
}

#[test]
fn kube_reserved_as_upstream_tax_tables() {
    // Upstream's tax calculator cases: (vCPUs, GiB) → (millicores, MiB).
    for (vcpus, gib, cpu, mib) in [
        (4, 7.0, 140, 1638),
        (2, 8.0, 100, 1843),
        (3, 64.0, 120, 5611),
    ] {
        let o = catalog::overhead(vcpus, gib);
        assert_eq!(o.kube_reserved.cpu, cpu, "{vcpus} vCPUs");
        assert_eq!(o.kube_reserved.memory, mib * (1 << 20) * 1000, "{gib} GiB");
        assert_eq!(o.eviction_threshold.memory, 750 * (1 << 20) * 1000);
        assert_eq!(o.system_reserved, Resources::new());
    }
}

#[test]
fn labels_as_upstream() {
    let types = build(&InstanceTypeOptions::default());
    let d2 = find(&types, "Standard_D2_v2");
    let a100 = find(&types, "Standard_NC24ads_A100_v4");
    let d2s = find(&types, "Standard_D2s_v3");
    let arm = find(&types, "Standard_D2pls_v5");
    let cases: [(&InstanceType, &str, Option<Vec<String>>); 31] = [
        (d2, LABEL_SKU_NAME, vals(&["Standard_D2_v2"])),
        (d2, INSTANCE_TYPE_LABEL, vals(&["Standard_D2_v2"])),
        (d2, LABEL_SKU_HYPERV_GENERATION, vals(&["1"])),
        (d2, LABEL_SKU_VERSION, vals(&["2"])),
        (d2, LABEL_SKU_CPU, vals(&["2"])),
        (d2, LABEL_SKU_MEMORY, vals(&["7168"])),
        (d2, AKS_LABEL_MEMORY, vals(&["7168"])),
        (d2, LABEL_SKU_STORAGE_PREMIUM_CAPABLE, vals(&["false"])),
        (d2, LABEL_SKU_STORAGE_EPHEMERAL_OS_MAX_SIZE, None),
        (d2, LABEL_SKU_GPU_COUNT, vals(&["0"])),
        (d2, LABEL_SKU_GPU_MANUFACTURER, None),
        (d2, LABEL_SKU_GPU_NAME, None),
        (a100, LABEL_SKU_HYPERV_GENERATION, vals(&["2"])),
        (a100, LABEL_SKU_VERSION, vals(&["4"])),
        (a100, LABEL_SKU_CPU, vals(&["24"])),
        (a100, LABEL_SKU_MEMORY, vals(&["225280"])),
        (a100, LABEL_SKU_FAMILY, vals(&["N"])),
        (a100, LABEL_SKU_SERIES, vals(&["NCads_v4"])),
        (a100, LABEL_SKU_GPU_COUNT, vals(&["1"])),
        (a100, LABEL_SKU_GPU_MANUFACTURER, vals(&["nvidia"])),
        (a100, LABEL_SKU_GPU_NAME, vals(&["A100"])),
        (
            a100,
            LABEL_SKU_STORAGE_EPHEMERAL_OS_MAX_SIZE,
            vals(&["274"]),
        ),
        (d2s, LABEL_SKU_HYPERV_GENERATION, vals(&["1", "2"])),
        (d2s, LABEL_SKU_SERIES, vals(&["Ds_v3"])),
        (d2s, LABEL_SKU_ACCELERATED_NETWORKING, vals(&["true"])),
        (d2s, ARCH_LABEL, vals(&["amd64"])),
        (d2s, REGION_LABEL, vals(&["eastus"])),
        (d2s, AKS_LABEL_OS_SKU, vals(&["Ubuntu"])),
        (d2s, AKS_LABEL_FIPS_ENABLED, None),
        (
            d2s,
            AKS_LABEL_SCALE_SET_PRIORITY,
            vals(&["regular", "spot"]),
        ),
        (arm, ARCH_LABEL, vals(&["arm64"])),
    ];
    for (t, key, expected) in cases {
        assert_eq!(values(t, key), expected, "{} {key}", t.name);
    }
    let fips = build(&InstanceTypeOptions {
        fips: true,
        image_family: "AzureLinux".into(),
        ..InstanceTypeOptions::default()
    });
    let d2s = find(&fips, "Standard_D2s_v3");
    assert_eq!(values(d2s, AKS_LABEL_FIPS_ENABLED), vals(&["true"]));
    assert_eq!(values(d2s, AKS_LABEL_OS_SKU), vals(&["AzureLinux"]));
    // Every provider label is set on every type, as a value or as must-not-exist.
    for t in &types {
        for key in AZURE_LABELS {
            assert!(t.requirements.has(key), "{} lacks {key}", t.name);
        }
    }
}

#[test]
fn ephemeral_os_disk_sizes() {
    let skus = supported();
    let cases = [
        ("Standard_B20ms", Some((32, DiskPlacement::CacheDisk))),
        ("Standard_D128ds_v6", Some((7559, DiskPlacement::NvmeDisk))),
        // NVMe, but the OS disk may not be placed there: the cache disk.
        (
            "Standard_NC24ads_A100_v4",
            Some((274, DiskPlacement::CacheDisk)),
        ),
        ("Standard_D2s_v3", Some((53, DiskPlacement::CacheDisk))),
        // No ephemeral OS disk support, whatever its disks.
        ("Standard_D2_v2", None),
    ];
    for (name, expected) in cases {
        assert_eq!(max_ephemeral_os_disk(&skus[name]), expected, "{name}");
    }
    let resource_disk_only = ResourceSku {
        capabilities: [
            ("EphemeralOSDiskSupported", "True"),
            ("CachedDiskBytes", "0"),
            ("MaxResourceVolumeMB", "81920"),
        ]
        .into_iter()
        .map(|(n, v)| skus::Capability {
            name: n.into(),
            value: Some(v.into()),
        })
        .collect(),
        ..ResourceSku::default()
    };
    assert_eq!(
        max_ephemeral_os_disk(&resource_disk_only),
        Some((85, DiskPlacement::ResourceDisk))
    );
}

fn offering<'a>(t: &'a InstanceType, zone: &str, capacity_type: &str) -> &'a Offering {
    t.offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == capacity_type)
        .unwrap_or_else(|| panic!("{} has {zone} {capacity_type}", t.name))
}

#[test]
fn offerings_per_zone_and_capacity_type() {
    let types = build(&InstanceTypeOptions::default());
    let zones = |name: &str| {
        let mut z: Vec<String> = find(&types, name)
            .offerings
            .iter()
            .map(|o| o.zone.clone())
            .collect();
        z.dedup();
        z
    };
    // Every zone, and regional placement.
    assert_eq!(
        zones("Standard_D2s_v3"),
        ["eastus-1", "eastus-2", "eastus-3", "0"]
    );
    // Zone 3 is restricted.
    assert_eq!(zones("Standard_D2_v2"), ["eastus-1", "eastus-2", "0"]);
    // No zones: regional only.
    assert_eq!(zones("Standard_NC6s_v3"), ["0"]);
    let nc6 = find(&types, "Standard_NC6s_v3");
    assert_eq!(values(nc6, LABEL_PLACEMENT_SCOPE), vals(&["regional"]));
    assert_eq!(values(nc6, ZONE_LABEL), vals(&["0"]));
    let d2s = find(&types, "Standard_D2s_v3");
    assert_eq!(d2s.offerings.len(), 8);
    assert!(d2s.offerings.iter().all(|o| o.available));
    assert_eq!(
        values(d2s, LABEL_PLACEMENT_SCOPE),
        vals(&["regional", "zonal"])
    );
    assert_eq!(
        values(d2s, CAPACITY_TYPE_LABEL),
        vals(&["on-demand", "spot"])
    );
    // Ultra SSDs in zones 2 and 3.
    assert_eq!(values(d2s, LABEL_ULTRA_SSD), vals(&["false", "true"]));
    assert_eq!(
        values(find(&types, "Standard_D2_v2"), LABEL_ULTRA_SSD),
        vals(&["false"])
    );
    // Before a price refresh, spot is priced as on demand.
    assert_eq!(offering(d2s, "eastus-1", "on-demand").price, 0.096);
    assert_eq!(offering(d2s, "eastus-1", "spot").price, 0.096);

    // Not low priority capable: spot offerings exist but are unavailable.
    let b20 = find(&types, "Standard_B20ms");
    assert!(!offering(b20, "eastus-1", "spot").available);
    assert!(offering(b20, "eastus-1", "on-demand").available);
    assert_eq!(values(b20, CAPACITY_TYPE_LABEL), vals(&["on-demand"]));
}

#[test]
fn unavailable_offerings_narrow_the_requirements() {
    let skus = supported();
    // Zones 2 and 3 (where Ultra SSDs are) failed for both capacity types; zone 1 for spot.
    let unavailable = |_: &str, zone: &str, capacity_type: &str| {
        zone == "eastus-2" || zone == "eastus-3" || (zone == "eastus-1" && capacity_type == "spot")
    };
    let d2s = instance_type(
        &skus["Standard_D2s_v3"],
        REGION,
        &InstanceTypeOptions::default(),
        &PriceTable::embedded(),
        &unavailable,
    )
    .expect("offered");
    assert_eq!(d2s.offerings.len(), 8, "unavailable offerings are kept");
    assert!(!offering(&d2s, "eastus-1", "spot").available);
    assert!(offering(&d2s, "eastus-1", "on-demand").available);
    assert_eq!(values(&d2s, ZONE_LABEL), vals(&["0", "eastus-1"]));
    assert_eq!(
        values(&d2s, CAPACITY_TYPE_LABEL),
        vals(&["on-demand", "spot"])
    );
    assert_eq!(values(&d2s, LABEL_ULTRA_SSD), vals(&["false"]));
}

#[test]
fn prices_come_from_the_table_and_unknown_sizes_pay_the_penalty() {
    let skus = supported();
    let mut prices = PriceTable::embedded();
    let pages = [
        parse_page(include_str!("../testdata/retail-prices-eastus-1.json")).expect("parses"),
        parse_page(include_str!("../testdata/retail-prices-eastus-2.json")).expect("parses"),
    ];
    prices.update(&pages);
    let build_one = |name: &str| {
        instance_type(
            &skus[name],
            REGION,
            &InstanceTypeOptions::default(),
            &prices,
            &never,
        )
        .expect("offered")
    };
    let d2s = build_one("Standard_D2s_v3");
    assert_eq!(offering(&d2s, "eastus-2", "on-demand").price, 0.096);
    assert_eq!(offering(&d2s, "eastus-2", "spot").price, 0.0192);
    // The refresh has no price for it: the penalty, but still available.
    let d2 = build_one("Standard_D2_v2");
    let od = offering(&d2, "eastus-1", "on-demand");
    assert_eq!(od.price, MISSING_PRICE);
    assert!(od.available);

    // A size upstream does not know pays the penalty even when a price is known.
    assert!(!catalog::is_known_sku("Standard_D2s_v7"));
    let mut known = Prices::default();
    known.on_demand.insert("Standard_D2s_v7".into(), 0.1);
    known.spot.insert("Standard_D2s_v7".into(), 0.02);
    let v7 = instance_type(
        &skus["Standard_D2s_v7"],
        REGION,
        &InstanceTypeOptions::default(),
        &PriceTable::new(known),
        &never,
    )
    .expect("offered");
    assert!(
        v7.offerings
            .iter()
            .all(|o| o.price == MISSING_PRICE && o.available)
    );
}

#[test]
fn zone_labels() {
    assert_eq!(zone_label("EastUS", "2"), "eastus-2");
    assert_eq!(kube_arch("x64"), "amd64");
    assert_eq!(kube_arch("Arm64"), "arm64");
    assert_eq!(kube_arch("riscv"), "riscv");
    assert_eq!(os_sku(""), "Ubuntu");
    assert_eq!(os_sku("Ubuntu2404"), "Ubuntu");
    assert_eq!(os_sku("AzureLinux"), "AzureLinux");
}
