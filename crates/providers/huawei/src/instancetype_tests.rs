//! Upstream's numeric cases (`pkg/providers/instancetype/{types,instancetype}_test.go`) as
//! tables asserting the same numbers, and the rules around them.

use karpenter_api::labels::CAPACITY_TYPE_ON_DEMAND;

use super::*;
use crate::ccenodeclass::{
    BlockDevice, BlockDeviceMappings, KubeletConfiguration, RuntimeConfiguration,
};
use crate::pricing::MISSING_PRICE;

const REGION: &str = "cn-north-4";
const MI: i64 = MIB * 1000;

fn flavor(name: &str, vcpus: &str, ram: i64) -> Flavor {
    Flavor {
        id: name.into(),
        name: name.into(),
        vcpus: vcpus.into(),
        ram,
        os_extra_specs: None,
    }
}

fn with_specs(mut f: Flavor, specs: FlavorExtraSpec) -> Flavor {
    f.os_extra_specs = Some(specs);
    f
}

fn nics(n: &str) -> FlavorExtraSpec {
    FlavorExtraSpec {
        quota_sub_network_interface_max_num: Some(n.into()),
        ..Default::default()
    }
}

fn sale(status: Option<&str>, az: Option<&str>) -> FlavorExtraSpec {
    FlavorExtraSpec {
        cond_operation_status: status.map(str::to_string),
        cond_operation_az: az.map(str::to_string),
        ..Default::default()
    }
}

fn set(zones: &[&str]) -> BTreeSet<String> {
    zones.iter().map(|z| z.to_string()).collect()
}

fn never(_: &str, _: &str, _: &str) -> bool {
    false
}

fn options_with(runtime: &str) -> InstanceTypeOptions {
    InstanceTypeOptions {
        runtime: runtime.into(),
        ..InstanceTypeOptions::new(REGION)
    }
}

/// The instance type of `flavor` offered in one zone, as upstream's `NewInstanceType` builds it.
fn build(flavor: &Flavor, options: &InstanceTypeOptions) -> InstanceType {
    let zones = set(&["cn-north-4a"]);
    let offerings = offerings(
        &flavor.name,
        &zones,
        &PriceTable::embedded("nowhere"),
        &never,
    );
    instance_type(flavor, &zones, offerings, options).expect("the flavor builds")
}

fn values(r: &Requirements, key: &str) -> Option<Vec<String>> {
    let r = r.get(key).unwrap_or_else(|| panic!("{key} is set"));
    match r.operator() {
        Operator::In => Some(r.values().map(str::to_string).collect()),
        Operator::DoesNotExist => None,
        other => panic!("{key}: unexpected {other:?}"),
    }
}

#[test]
fn default_max_pods_follow_the_memory_tiers() {
    for (memory_mib, pods) in [
        (4096, 20),
        (8191, 20),
        (8192, 40),
        (16384, 60),
        (32768, 80),
        (65535, 80),
        (65536, 110),
        (524_288, 110),
    ] {
        assert_eq!(
            default_max_pods_by_memory(memory_mib),
            pods,
            "{memory_mib} MiB"
        );
    }
}

#[test]
fn supplementary_nics_cap_default_max_pods() {
    let cases = [
        // Upstream's c9.large.2-, c9.xlarge.2- and ac7.2xlarge.1-like flavors.
        (4096, Some("16"), 16),
        (8192, Some("32"), 32),
        (16384, Some("40"), 40),
        // The cap only lowers the tier.
        (4096, Some("64"), 20),
        // Without a usable quota the memory tier stands.
        (16384, None, 60),
        (16384, Some("0"), 60),
        (16384, Some("-3"), 60),
        (16384, Some("many"), 60),
        (16384, Some(" 24 "), 24),
    ];
    for (ram, quota, pods) in cases {
        let f = match quota {
            Some(q) => with_specs(flavor("f", "2", ram), nics(q)),
            None => flavor("f", "2", ram),
        };
        assert_eq!(default_max_pods(&f), pods, "{ram} MiB, quota {quota:?}");
    }
}

#[test]
fn kube_reserved_cpu_by_tier() {
    for (milli, reserved) in [
        (500, 30),
        (1000, 60),
        (2000, 70),
        (3000, 75),
        (4000, 80),
        // 80m + 0.25% of 4000m.
        (8000, 90),
        (16000, 110),
        // 80m + 0.25% of 60000m.
        (64000, 230),
    ] {
        assert_eq!(kube_reserved_cpu_milli(milli), reserved, "{milli}m");
    }
}

/// Upstream's `TestNewInstanceType_UsesCCEMemoryReservationModel` and
/// `…KubeReservedUsesMemoryTierDefaultPodCount`: system-reserved 400 MiB + 25 MiB per GiB,
/// kube-reserved 500 MiB + 5 (containerd) or 20 (docker) MiB per pod of the memory tier,
/// 100 MiB eviction.
#[test]
fn memory_reservations_follow_cces_model() {
    let c6 = flavor("c6.large.2", "2", 8192);
    let c9 = with_specs(flavor("c9.large.2", "2", 4096), nics("16"));
    // (flavor, runtime, pods, system-reserved, kube-reserved, allocatable memory; MiB)
    let cases = [
        (&c6, RUNTIME_CONTAINERD, 40, 600, 700, 6792),
        (&c6, RUNTIME_DOCKER, 40, 600, 1300, 6192),
        // 16 pods by the NIC cap, yet kube-reserved counts the tier's 20.
        (&c9, RUNTIME_CONTAINERD, 16, 500, 600, 2896),
        (&c9, RUNTIME_DOCKER, 16, 500, 900, 2596),
    ];
    for (f, runtime, pods, system, kube, allocatable) in cases {
        let it = build(f, &options_with(runtime));
        let what = format!("{} on {runtime}", f.name);
        assert_eq!(it.capacity.pods, pods * 1000, "{what}: pods");
        assert_eq!(
            it.overhead.system_reserved.memory,
            system * MI,
            "{what}: system"
        );
        assert_eq!(it.overhead.kube_reserved.memory, kube * MI, "{what}: kube");
        assert_eq!(
            it.overhead.eviction_threshold.memory,
            100 * MI,
            "{what}: eviction"
        );
        assert_eq!(
            it.allocatable().memory,
            allocatable * MI,
            "{what}: allocatable"
        );
    }
}

/// Upstream's `TestNewInstanceType_UsesK8SDataVolumeForEphemeralStorage`: capacity, eviction
/// threshold and allocatable of the kubernetes LV's ext4 filesystem by k8s disk size.
#[test]
fn ephemeral_storage_is_the_kubernetes_lv_filesystem() {
    let c6 = flavor("c6.large.2", "2", 8192);
    // (GiB, capacity KiB, eviction bytes, allocatable bytes)
    let cases: [(i64, i64, i64, i64); 7] = [
        (100, 10_214_676, 1_045_982_837, 9_413_845_387),
        (120, 12_274_824, 1_256_941_996, 11_312_477_780),
        (150, 15_371_208, 1_574_011_722, 14_166_105_270),
        (190, 19_430_032, 1_989_635_306, 17_906_717_462),
        (230, 23_558_544, 2_412_394_941, 21_711_554_115),
        (320, 32_843_536, 3_363_178_136, 30_268_602_728),
        (450, 46_125_908, 4_723_293_049, 42_509_636_743),
    ];
    for (gib, capacity_kib, eviction, allocatable) in cases {
        let options = InstanceTypeOptions {
            kubernetes_volume_gib: gib,
            ..InstanceTypeOptions::new(REGION)
        };
        let it = build(&c6, &options);
        assert_eq!(
            it.capacity.ephemeral_storage,
            capacity_kib * 1024 * 1000,
            "{gib} GiB"
        );
        assert_eq!(
            it.overhead.eviction_threshold.ephemeral_storage,
            eviction * 1000,
            "{gib} GiB eviction"
        );
        assert_eq!(
            it.allocatable().ephemeral_storage,
            allocatable * 1000,
            "{gib} GiB allocatable"
        );
        assert_eq!(
            it.overhead.kube_reserved.ephemeral_storage, 0,
            "CCE reserves no disk"
        );
    }
    assert_eq!(ext4_size_bytes(0), 0);
    assert_eq!(ephemeral_storage_bytes(0), 0);
}

fn node_class(kubelet: Option<KubeletConfiguration>) -> CCENodeClassSpec {
    CCENodeClassSpec {
        kubelet,
        ..Default::default()
    }
}

fn reserved(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Upstream's `TestNewInstanceType_UsesConfiguredEphemeralStorageReservations` and
/// `…UsesExplicitMaxPods`; and the NodeClass replacing CCE's figures key by key.
#[test]
fn the_node_class_overrides_reservations_and_pods() {
    let spec = node_class(Some(KubeletConfiguration {
        max_pods: Some(48),
        kube_reserved: reserved(&[("ephemeral-storage", "2Gi"), ("cpu", "200m")]),
        system_reserved: reserved(&[("ephemeral-storage", "1Gi"), ("pid", "1000")]),
    }));
    let options = InstanceTypeOptions::for_node_class(&spec, REGION).unwrap();
    assert_eq!(options.max_pods, Some(48));
    assert!(
        !options.system_reserved.contains_key("pid"),
        "pid is no schedulable resource"
    );
    let it = build(&flavor("c6.large.2", "2", 8192), &options);
    assert_eq!(it.capacity.pods, 48_000);
    assert_eq!(it.overhead.kube_reserved.ephemeral_storage, 2 * GIB * 1000);
    assert_eq!(it.overhead.system_reserved.ephemeral_storage, GIB * 1000);
    assert_eq!(
        it.overhead.eviction_threshold.ephemeral_storage, 1_045_982_837_000,
        "the threshold stays a share of the capacity"
    );
    assert_eq!(it.overhead.kube_reserved.cpu, 200, "cpu replaced");
    assert_eq!(it.overhead.kube_reserved.memory, 700 * MI, "memory kept");

    // Memory set explicitly replaces CCE's model.
    let spec = node_class(Some(KubeletConfiguration {
        kube_reserved: reserved(&[("memory", "1Gi")]),
        system_reserved: reserved(&[("memory", "0")]),
        ..Default::default()
    }));
    let options = InstanceTypeOptions::for_node_class(&spec, REGION).unwrap();
    let it = build(&flavor("c6.large.2", "2", 8192), &options);
    assert_eq!(it.allocatable().memory, (8192 - 1024 - 100) * MI);
    assert_eq!(it.overhead.kube_reserved.cpu, 70);
}

#[test]
fn a_reservation_that_is_no_quantity_is_an_error_naming_it() {
    let spec = node_class(Some(KubeletConfiguration {
        system_reserved: reserved(&[("memory", "lots")]),
        ..Default::default()
    }));
    let err = InstanceTypeOptions::for_node_class(&spec, REGION).unwrap_err();
    assert!(matches!(
        &err,
        InstanceTypesError::Reservation { field: "systemReserved", key, value, .. }
            if key == "memory" && value == "lots"
    ));
    assert!(
        err.to_string()
            .starts_with("spec.kubelet.systemReserved[memory]: \"lots\"")
    );
}

/// Upstream's `TestNormalizedRuntimeType`, and the k8s disk size: set, unset, or zero.
#[test]
fn runtime_and_disk_default_as_upstream() {
    let runtime = |type_: Option<Option<&str>>| CCENodeClassSpec {
        runtime_configuration: type_.map(|t| RuntimeConfiguration {
            type_: t.map(str::to_string),
        }),
        ..Default::default()
    };
    for (spec, expected) in [
        (runtime(None), "containerd"),
        (runtime(Some(None)), "containerd"),
        (runtime(Some(Some(""))), "containerd"),
        (runtime(Some(Some("docker"))), "docker"),
    ] {
        let options = InstanceTypeOptions::for_node_class(&spec, REGION).unwrap();
        assert_eq!(
            options.runtime, expected,
            "{:?}",
            spec.runtime_configuration
        );
    }
    let disk = |size: Option<i32>| CCENodeClassSpec {
        block_device_mappings: BlockDeviceMappings {
            k8s: size.map(|volume_size| BlockDevice {
                volume_size,
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    for (spec, gib) in [
        (disk(None), 100),
        (disk(Some(0)), 100),
        (disk(Some(120)), 120),
    ] {
        let options = InstanceTypeOptions::for_node_class(&spec, REGION).unwrap();
        assert_eq!(options.kubernetes_volume_gib, gib);
    }
    assert_eq!(
        InstanceTypeOptions::for_node_class(&CCENodeClassSpec::default(), REGION).unwrap(),
        InstanceTypeOptions::new(REGION)
    );
}

/// Upstream's `TestParseCondOperationAZ`.
#[test]
fn per_zone_statuses_parse_with_any_separator() {
    let got = parse_cond_operation_az(
        "cn-south-2b(normal), cn-south-1c(sellout),cn-south-1e(obt)，cn-south-1f(promotion); cn-south-1g(abandon)",
    );
    let expected: BTreeMap<String, String> = [
        ("cn-south-2b", "normal"),
        ("cn-south-1c", "sellout"),
        ("cn-south-1e", "obt"),
        ("cn-south-1f", "promotion"),
        ("cn-south-1g", "abandon"),
    ]
    .into_iter()
    .map(|(z, s)| (z.to_string(), s.to_string()))
    .collect();
    assert_eq!(got, expected);

    // Full-width parentheses and semicolons, a bare zone, an empty part, a repeated zone.
    let got = parse_cond_operation_az("az1（sellout）；az2, ,az3(normal) ,az3( sellout )");
    let got: Vec<(&str, &str)> = got.iter().map(|(z, s)| (z.as_str(), s.as_str())).collect();
    assert_eq!(got, [("az1", "sellout"), ("az2", ""), ("az3", "sellout")]);
    assert!(parse_cond_operation_az("").is_empty());
    assert!(parse_cond_operation_az("(normal)").is_empty());
}

/// Upstream's `TestCondOperationStatusAvailable*`: statuses match as spelled.
#[test]
fn sale_statuses() {
    for (status, sells) in [
        ("normal", true),
        ("promotion", true),
        ("obt", true),
        ("", true),
        (" normal ", true),
        ("abandon", false),
        ("sellout", false),
        ("obt_sellout", false),
        (" sellout", false),
        // Non-canonical spellings fall to the permissive default.
        ("ABANDON", true),
        ("private", true),
    ] {
        assert_eq!(status_sells(status), sells, "{status:?}");
    }
}

/// Upstream's `TestResolveOfferingZones_*`.
#[test]
fn per_zone_statuses_override_the_region_wide_one() {
    // (universe, region-wide status, per-zone statuses, zones sold in)
    type Case<'a> = (
        &'a [&'a str],
        Option<&'a str>,
        Option<&'a str>,
        &'a [&'a str],
    );
    let cases: [Case; 6] = [
        (
            &[
                "cn-south-2b",
                "cn-south-1c",
                "cn-south-1e",
                "cn-south-1f",
                "cn-south-1g",
            ],
            Some("abandon"),
            Some(
                "cn-south-2b(normal), cn-south-1c(sellout), cn-south-1e(obt), cn-south-1f(promotion)",
            ),
            &["cn-south-1e", "cn-south-1f", "cn-south-2b"],
        ),
        (
            &["cn-south-2b", "cn-south-1c", "cn-south-1e"],
            Some("normal"),
            Some("cn-south-1c(sellout)"),
            &["cn-south-1e", "cn-south-2b"],
        ),
        (
            &["cn-south-1c", "cn-south-1e"],
            Some("sellout"),
            Some("cn-south-1e(normal)"),
            &["cn-south-1e"],
        ),
        // No status at all: sells everywhere.
        (&["a", "b"], None, None, &["a", "b"]),
        // An empty status is normal.
        (&["a", "b"], Some(""), Some(""), &["a", "b"]),
        // A zone only the override names is added.
        (&["a"], Some("normal"), Some("z(obt)"), &["a", "z"]),
    ];
    for (universe, status, az, expected) in cases {
        let specs = sale(status, az);
        let got = offering_zones(&set(universe), Some(&specs));
        assert_eq!(got, set(expected), "{status:?} {az:?}");
    }
    assert_eq!(offering_zones(&set(&["a"]), None), set(&["a"]));
}

#[test]
fn the_zone_universe_adds_zones_named_by_flavors() {
    let flavors = [
        with_specs(
            flavor("a", "2", 4096),
            sale(None, Some("cn-north-4z(sellout)")),
        ),
        flavor("b", "2", 4096),
    ];
    let zones = ["cn-north-4a".to_string(), String::new()];
    assert_eq!(
        zone_universe(&flavors, &zones),
        set(&["cn-north-4a", "cn-north-4z"])
    );
    let by_flavor = offering_zones_by_flavor(&flavors, &zones);
    assert_eq!(by_flavor["a"], set(&["cn-north-4a"]));
    assert_eq!(by_flavor["b"], set(&["cn-north-4a", "cn-north-4z"]));
}

/// Upstream's `TestComputeRequirementsLeavesZonesUnsetWhenOfferingsAreEmpty`, and the labels
/// upstream sets.
#[test]
fn requirements_carry_upstreams_labels() {
    let c3 = flavor("c3.large", "2", 8192);
    let r = requirements(&c3, &BTreeSet::new(), "cn-south-1");
    assert!(
        r.get(ZONE_LABEL).is_none(),
        "no zone requirement without zones"
    );
    assert_eq!(values(&r, REGION_LABEL), Some(vec!["cn-south-1".into()]));
    assert_eq!(values(&r, OS_LABEL), Some(vec!["linux".into()]));

    let kc1 = with_specs(
        flavor("kc1.xlarge.4", "4", 16384),
        FlavorExtraSpec {
            ecs_instance_architecture: Some("arm64".into()),
            ..Default::default()
        },
    );
    let r = requirements(&kc1, &set(&["b", "a"]), REGION);
    let cases: [(&str, Option<&[&str]>); 15] = [
        (INSTANCE_TYPE_LABEL, Some(&["kc1.xlarge.4"])),
        (ARCH_LABEL, Some(&["arm64"])),
        (OS_LABEL, Some(&["linux"])),
        (REGION_LABEL, Some(&[REGION])),
        (ZONE_LABEL, Some(&["a", "b"])),
        (CAPACITY_TYPE_LABEL, Some(&["on-demand"])),
        (WINDOWS_BUILD_LABEL, None),
        (LABEL_INSTANCE_CPU, Some(&["4"])),
        (LABEL_INSTANCE_MEMORY, Some(&["16384"])),
        (LABEL_INSTANCE_SIZE, None),
        (LABEL_INSTANCE_NETWORK_BANDWIDTH, None),
        (LABEL_INSTANCE_GPU_NAME, None),
        (LABEL_INSTANCE_GPU_MANUFACTURER, None),
        (LABEL_INSTANCE_GPU_COUNT, None),
        (LABEL_INSTANCE_GPU_MEMORY, None),
    ];
    for (key, expected) in cases {
        let expected = expected.map(|v| v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(values(&r, key), expected, "{key}");
    }
    assert_eq!(flavor("x", "2", 1).architecture(), "amd64");
}

/// Upstream's `TestCreateOfferings_*`: the table's price, the missing price, and the
/// unavailable offerings.
#[test]
fn offerings_are_priced_and_marked_unavailable() {
    let prices = PriceTable::new(REGION, "CNY", [("c6.large.2".to_string(), 0.42)]);
    let zones = set(&["cn-north-4a", "cn-north-4b"]);
    let unavailable = |name: &str, zone: &str, capacity_type: &str| {
        name == "c6.large.2" && zone == "cn-north-4a" && capacity_type == CAPACITY_TYPE_ON_DEMAND
    };
    let got = offerings("c6.large.2", &zones, &prices, &unavailable);
    let got: Vec<(&str, &str, f64, bool)> = got
        .iter()
        .map(|o| {
            (
                o.zone.as_str(),
                o.capacity_type.as_str(),
                o.price,
                o.available,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("cn-north-4a", "on-demand", 0.42, false),
            ("cn-north-4b", "on-demand", 0.42, true),
        ]
    );
    let unpriced = offerings("c7.large.2", &zones, &prices, &never);
    assert!(
        unpriced
            .iter()
            .all(|o| o.price == MISSING_PRICE && o.available)
    );
    assert!(offerings("c7.large.2", &BTreeSet::new(), &prices, &never).is_empty());
}

fn names(types: &[InstanceType]) -> Vec<&str> {
    types.iter().map(|t| t.name.as_str()).collect()
}

fn zones_of(t: &InstanceType) -> Vec<&str> {
    t.offerings.iter().map(|o| o.zone.as_str()).collect()
}

/// Upstream's `TestList*`: offerings from per-zone statuses alone, from the AZ list alone, and
/// none for a flavor sold out region-wide.
#[test]
fn instance_types_offer_where_flavors_sell() {
    let prices = PriceTable::new(REGION, "CNY", [("c6.large.2".to_string(), 0.42)]);
    let options = InstanceTypeOptions::new(REGION);

    let only_override = [with_specs(
        flavor("c6.large.2", "2", 4096),
        sale(Some("normal"), Some("cn-north-4a(normal)")),
    )];
    let types = instance_types(&only_override, &[], &options, &prices, &never).unwrap();
    assert_eq!(names(&types), ["c6.large.2"]);
    assert_eq!(zones_of(&types[0]), ["cn-north-4a"]);
    assert_eq!(types[0].offerings[0].price, 0.42);

    let az_list = ["cn-north-4a".to_string()];
    let flavors = [
        with_specs(flavor("c6.large.2", "2", 4096), sale(Some("normal"), None)),
        with_specs(flavor("c7.large.2", "2", 4096), sale(Some("sellout"), None)),
    ];
    let types = instance_types(&flavors, &az_list, &options, &prices, &never).unwrap();
    assert_eq!(
        names(&types),
        ["c6.large.2"],
        "the sold-out flavor has no offering"
    );
    assert_eq!(zones_of(&types[0]), ["cn-north-4a"]);

    assert_eq!(
        instance_types(&[], &az_list, &options, &prices, &never),
        Err(InstanceTypesError::NoInstanceTypes)
    );
}

#[test]
fn instance_types_skip_bad_and_repeated_flavors() {
    let zones = ["z".to_string()];
    let options = InstanceTypeOptions::new(REGION);
    let prices = PriceTable::embedded("nowhere");
    let flavors = [
        flavor("b.large.2", "2", 4096),
        flavor("bad.large.2", "", 4096),
        flavor("nan.large.2", "two", 4096),
        flavor("a.large.2", "2", 4096),
        // Listed again: the later listing counts.
        flavor("b.large.2", "4", 8192),
    ];
    let types = instance_types(&flavors, &zones, &options, &prices, &never).unwrap();
    assert_eq!(names(&types), ["a.large.2", "b.large.2"]);
    assert_eq!(types[1].capacity.cpu, 4000);
    assert_eq!(types[1].capacity.memory, 8192 * MI);
}

#[test]
fn architectures_are_the_kubelets_words() {
    let arch = |word: Option<&str>| {
        with_specs(
            flavor("f", "2", 4096),
            FlavorExtraSpec {
                ecs_instance_architecture: word.map(str::to_string),
                ..Default::default()
            },
        )
        .architecture()
        .to_string()
    };
    for (ecs, kubelet) in [
        (None, "amd64"),
        (Some("x86"), "amd64"),
        (Some("x86_64"), "amd64"),
        (Some("arm64"), "arm64"),
        (Some("arm"), "arm64"),
        (Some("riscv64"), "riscv64"),
    ] {
        assert_eq!(arch(ecs), kubelet, "{ecs:?}");
    }
}

#[test]
fn answers_read_in_the_sdk_shape() {
    let page: ListFlavorsResponse = serde_json::from_str(
        r#"{"flavors": [{"id": "c7.large.2", "name": "c7.large.2", "vcpus": "2", "ram": 4096,
            "disk": "0", "swap": "", "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": false,
            "rxtx_factor": 1, "os-flavor-access:is_public": true, "links": [],
            "os_extra_specs": {"ecs:performancetype": "computingv3", "cond:operation:status": "normal",
              "cond:operation:az": "cn-north-4a(normal)", "quota:sub_network_interface_max_num": "16",
              "ecs:instance_architecture": "x86"}},
           {"id": "x", "name": "x", "vcpus": 4, "ram": 8192, "os_extra_specs": null}]}"#,
    )
    .unwrap();
    assert_eq!(page.flavors.len(), 2);
    let c7 = &page.flavors[0];
    assert_eq!((c7.vcpus.as_str(), c7.ram), ("2", 4096));
    assert_eq!(c7.supplementary_nics(), Some(16));
    assert_eq!(
        c7.architecture(),
        "amd64",
        "ECS's x86 is what the kubelet calls amd64"
    );
    assert_eq!(
        page.flavors[1].vcpus, "4",
        "a numeric vcpus reads as its text"
    );
    assert_eq!(page.flavors[1].os_extra_specs, None);
    let empty: ListFlavorsResponse = serde_json::from_str("{}").unwrap();
    assert!(empty.flavors.is_empty());

    let zones: ListServerAzInfoResponse = serde_json::from_str(
        r#"{"availability_zones": [
            {"availability_zone_id": "cn-north-4a", "type": "core", "mode": "az", "alias": "AZ1",
             "public_border_group": "center", "az_group_ids": ["g1"], "category": 0},
            {"availability_zone_id": "cn-north-4b"}]}"#,
    )
    .unwrap();
    assert_eq!(zones.zone_ids(), ["cn-north-4a", "cn-north-4b"]);
    assert_eq!(zones.availability_zones[0].type_.as_deref(), Some("core"));
}
