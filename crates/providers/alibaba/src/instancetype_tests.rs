//! Instance types from recorded `DescribeInstanceTypes` and `DescribeAvailableResource`
//! answers (`tests/testdata/`). Upstream has no tests of its instance types; the figures here
//! are worked by hand from its formula (`pkg/providers/instancetype/types.go`) and ACK's
//! published reservation policy, each case saying how.

use std::time::{Duration, Instant};

use karpenter_cloudprovider::unavailable::UnavailableOfferings;

use super::*;
use crate::ecsnodeclass::{KubeletConfiguration, SystemDisk};

const REGION: &str = "cn-hangzhou";

fn page(body: &str) -> DescribeInstanceTypesPage {
    serde_json::from_str(body).expect("the fixture parses")
}

fn fixture_types() -> Vec<EcsInstanceType> {
    [
        include_str!("../tests/testdata/describe-instance-types-1.json"),
        include_str!("../tests/testdata/describe-instance-types-2.json"),
    ]
    .into_iter()
    .flat_map(|body| page(body).instance_types.instance_type)
    .collect()
}

fn answer(body: &str) -> DescribeAvailableResourceAnswer {
    serde_json::from_str(body).expect("the fixture parses")
}

fn availability() -> Availability {
    Availability {
        on_demand: zones_with_stock(&answer(include_str!(
            "../tests/testdata/describe-available-resource-postpaid.json"
        )))
        .unwrap(),
        spot: zones_with_stock(&answer(include_str!(
            "../tests/testdata/describe-available-resource-spot.json"
        )))
        .unwrap(),
    }
}

fn vswitch_zones(zones: &[&str]) -> BTreeSet<String> {
    zones.iter().map(|z| z.to_string()).collect()
}

fn never(_: &str, _: &str, _: &str) -> bool {
    false
}

fn info(name: &str) -> EcsInstanceType {
    fixture_types()
        .into_iter()
        .find(|t| t.instance_type_id == name)
        .unwrap_or_else(|| panic!("{name} is in the fixture"))
}

fn build(options: &InstanceTypeOptions) -> Vec<InstanceType> {
    instance_types(
        &fixture_types(),
        &availability(),
        &vswitch_zones(&["cn-hangzhou-h", "cn-hangzhou-i"]),
        options,
        &PriceTable::embedded(REGION),
        &never,
    )
    .expect("state is complete")
}

fn find<'a>(types: &'a [InstanceType], name: &str) -> &'a InstanceType {
    types
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} is offered"))
}

/// A requirement's values; `None` when the label must not exist.
fn values(t: &InstanceType, key: &str) -> Option<Vec<String>> {
    let r = t
        .requirements
        .get(key)
        .unwrap_or_else(|| panic!("{key} is set"));
    match r.operator() {
        Operator::In => Some(r.values().map(str::to_string).collect()),
        Operator::DoesNotExist => None,
        other => panic!("{key}: unexpected {other:?}"),
    }
}

fn vals(v: &[&str]) -> Option<Vec<String>> {
    Some(v.iter().map(|s| s.to_string()).collect())
}

const MI: i64 = MIB * 1000;

#[test]
fn pages_read_in_the_sdk_shape() {
    let first = page(include_str!(
        "../tests/testdata/describe-instance-types-1.json"
    ));
    assert_eq!(first.next_token.as_deref(), Some("e71d8a535bd9cc11"));
    assert_eq!(first.instance_types.instance_type.len(), 5);
    let g7 = &first.instance_types.instance_type[0];
    assert_eq!(
        (
            g7.instance_type_id.as_str(),
            g7.cpu_core_count,
            g7.memory_size,
            g7.eni_quantity,
            g7.eni_private_ip_address_quantity,
        ),
        ("ecs.g7.large", 2, 8.0, 3, 6)
    );
    let second = page(include_str!(
        "../tests/testdata/describe-instance-types-2.json"
    ));
    assert_eq!(second.next_token.as_deref(), Some(""));
    let nano = &second.instance_types.instance_type[2];
    assert_eq!(nano.memory_size, 0.5);
    assert_eq!(nano.physical_processor_model, None);
}

#[test]
fn stock_is_read_from_status_categories_as_upstream() {
    let a = availability();
    let zones = |map: &ZonesByType, name: &str| -> Vec<String> {
        map.get(name)
            .map(|z| z.iter().cloned().collect())
            .unwrap_or_default()
    };
    let cases: [(&str, &[&str], &[&str]); 8] = [
        // Zone j is closed without stock: nothing in it counts, even a type listed WithStock.
        (
            "ecs.g7.large",
            &["cn-hangzhou-h", "cn-hangzhou-i", "cn-hangzhou-k"],
            &["cn-hangzhou-i"],
        ),
        // ClosedWithStock still has stock.
        ("ecs.c7.16xlarge", &["cn-hangzhou-h", "cn-hangzhou-i"], &[]),
        // WithoutStock in h.
        ("ecs.g8y.large", &["cn-hangzhou-i"], &["cn-hangzhou-i"]),
        ("ecs.g7a.large", &["cn-hangzhou-i"], &[]),
        // ClosedWithoutStock in i.
        ("ecs.gn6i-c4g1.xlarge", &["cn-hangzhou-h"], &[]),
        (
            "ecs.t6-c1m1.large",
            &["cn-hangzhou-i", "cn-hangzhou-k"],
            &["cn-hangzhou-i", "cn-hangzhou-k"],
        ),
        ("ecs.re6.52xlarge", &["cn-hangzhou-i"], &[]),
        ("ecs.t5-lc2m1.nano", &["cn-hangzhou-h"], &[]),
    ];
    for (name, on_demand, spot) in cases {
        assert_eq!(zones(&a.on_demand, name), on_demand, "{name} on demand");
        assert_eq!(zones(&a.spot, name), spot, "{name} spot");
    }
    assert_eq!(
        a.zones().into_iter().collect::<Vec<_>>(),
        ["cn-hangzhou-h", "cn-hangzhou-i", "cn-hangzhou-k"],
        "offerings go to the zones of the on-demand answer that have stock"
    );
    assert_eq!(
        zones_with_stock(&answer(
            r#"{"RequestId": "r-1", "AvailableZones": {"AvailableZone": []}}"#
        )),
        Err(InstanceTypesError::NoZones {
            request_id: "r-1".into()
        })
    );
    // Without a StatusCategory, Status decides.
    let legacy = answer(
        r#"{"AvailableZones": {"AvailableZone": [{"ZoneId": "z", "Status": "Available",
            "AvailableResources": {"AvailableResource": [{"Type": "InstanceType",
            "SupportedResources": {"SupportedResource": [
              {"Value": "ecs.a", "Status": "Available"}, {"Value": "ecs.b", "Status": "SoldOut"}]}}]}}]}}"#,
    );
    assert_eq!(
        zones_with_stock(&legacy)
            .unwrap()
            .into_keys()
            .collect::<Vec<_>>(),
        ["ecs.a"]
    );
}

/// Capacity and allocatable on a cluster with neither Terway nor Flannel (110 pods).
///
/// * CPU: ACK reserves 60m of the first core, 10m of the second, 5m each of the third and
///   fourth, 0.25% of the rest.
/// * Memory: the VM keeps ceil(6.5%) in MiB; ACK reserves min(11 × pods + 255, 25% of the VM's
///   memory) MiB, and upstream 200 MiB more.
#[test]
fn allocatable_is_acks() {
    let types = build(&InstanceTypeOptions::new(REGION));
    // (type, capacity memory MiB, allocatable CPU m, allocatable memory MiB)
    let cases = [
        // 8192 − ceil(532.48) = 7659; 1465 + 200 reserved → 5994. 70m of 2 cores.
        ("ecs.g7.large", 7659, 1930, 5994),
        // 131072 − 8520 = 122552; − 1665 → 120887. 80m + 0.25% of 60 cores = 230m.
        ("ecs.c7.16xlarge", 122_552, 63_770, 120_887),
        // 15360 − ceil(998.4) = 14361; − 1665 → 12696. 80m of 4 cores.
        ("ecs.gn6i-c4g1.xlarge", 14_361, 3920, 12_696),
        // 2048 − ceil(133.12) = 1914; a quarter (512) + 200 reserved → 1202.
        ("ecs.t6-c1m1.large", 1914, 1930, 1202),
        // 0.5 GiB: 512 − ceil(33.28) = 478; 128 + 200 reserved → 150. 60m of one core.
        ("ecs.t5-lc2m1.nano", 478, 940, 150),
        // 1536 GiB: 1572864 − ceil(102236.16) = 1470627; − 1665 → 1468962.
        // 80m + 0.25% of 204 cores = 590m.
        ("ecs.re6.52xlarge", 1_470_627, 207_410, 1_468_962),
    ];
    for (name, capacity_mib, cpu, memory_mib) in cases {
        let t = find(&types, name);
        assert_eq!(t.capacity.memory, capacity_mib * MI, "{name} capacity");
        assert_eq!(t.allocatable().cpu, cpu, "{name} cpu");
        assert_eq!(t.allocatable().memory, memory_mib * MI, "{name} memory");
        assert_eq!(t.allocatable().pods, 110_000, "{name} pods");
        assert_eq!(
            t.capacity.ephemeral_storage,
            20 * GIB * 1000,
            "{name}: the default 20Gi system disk"
        );
        assert_eq!(
            t.overhead.system_reserved,
            Resources::new(),
            "upstream puts it all in kube-reserved"
        );
    }
}

#[test]
fn pods_follow_the_kubelet_settings_then_the_cni() {
    let g7 = info("ecs.g7.large");
    let c7 = info("ecs.c7.16xlarge");
    let options = |cni, max_pods, pods_per_core| InstanceTypeOptions {
        cni,
        max_pods,
        pods_per_core,
        ..InstanceTypeOptions::new(REGION)
    };
    // (type, options, pods, allocatable memory MiB)
    let cases = [
        (&g7, options(Cni::Other, None, None), 110, 7659 - 1665),
        // Terway: (3 − 1) ENIs × 6 addresses + 3 host-network pods = 15; 11 × 15 + 255 = 420.
        (&g7, options(Cni::Terway, None, None), 15, 7659 - 620),
        // (8 − 1) × 30 + 3 = 213; 11 × 213 + 255 = 2598.
        (&c7, options(Cni::Terway, None, None), 213, 122_552 - 2798),
        // Flannel: 256 pods would reserve 3071 MiB, capped at a quarter of 8192.
        (&g7, options(Cni::Flannel, None, None), 256, 7659 - 2248),
        // maxPods wins over the CNI.
        (
            &g7,
            options(Cni::Terway, Some(64), None),
            64,
            7659 - (11 * 64 + 255 + 200),
        ),
        // podsPerCore caps it: 10 × 2 vCPUs.
        (
            &g7,
            options(Cni::Other, None, Some(10)),
            20,
            7659 - (11 * 20 + 255 + 200),
        ),
        (
            &g7,
            options(Cni::Other, Some(8), Some(10)),
            8,
            7659 - (11 * 8 + 255 + 200),
        ),
        // 0 is no cap.
        (&g7, options(Cni::Flannel, None, Some(0)), 256, 7659 - 2248),
    ];
    for (info, options, pods, memory_mib) in cases {
        let t = instance_type(info, offering_in("z"), &options).unwrap();
        let label = format!("{} {:?}", info.instance_type_id, options);
        assert_eq!(t.capacity.pods, pods * 1000, "{label}");
        assert_eq!(t.allocatable().memory, memory_mib * MI, "{label}");
    }
}

fn offering_in(zone: &str) -> Vec<Offering> {
    vec![Offering {
        zone: zone.into(),
        capacity_type: CAPACITY_TYPE_ON_DEMAND.into(),
        price: 1.0,
        available: true,
        reservation: None,
    }]
}

#[test]
fn terway_clusters_drop_types_with_few_eni_addresses() {
    let names = |cni| -> Vec<String> {
        supported_types(fixture_types(), cni)
            .into_iter()
            .map(|t| t.instance_type_id)
            .collect()
    };
    assert_eq!(names(Cni::Other).len(), 9);
    assert_eq!(names(Cni::Flannel).len(), 9);
    // (ENIs − 1) × addresses: g7a 6, gn6i 10, t6 2, t5 0 — fewer than 11.
    assert_eq!(
        names(Cni::Terway),
        [
            "ecs.g7.large",
            "ecs.c7.16xlarge",
            "ecs.g8y.large",
            "ecs.re6.52xlarge",
            "ecs.g9i.large"
        ]
    );
    assert_eq!(Cni::from_ack("terway-eniip"), Cni::Terway);
    assert_eq!(Cni::from_ack("Flannel"), Cni::Flannel);
    // Terway's other modes are not the ENI-IP formula's.
    assert_eq!(Cni::from_ack("terway-eni"), Cni::Other);
    assert_eq!(Cni::from_ack(""), Cni::Other);
}

#[test]
fn labels_are_upstreams() {
    let types = build(&InstanceTypeOptions::new(REGION));
    type Case<'a> = (&'a str, &'a str, Option<Vec<String>>);
    let cases: Vec<Case> = vec![
        ("ecs.g7.large", INSTANCE_TYPE_LABEL, vals(&["ecs.g7.large"])),
        ("ecs.g7.large", ARCH_LABEL, vals(&["amd64"])),
        ("ecs.g7.large", OS_LABEL, vals(&["linux"])),
        ("ecs.g7.large", REGION_LABEL, vals(&["cn-hangzhou"])),
        ("ecs.g7.large", WINDOWS_BUILD_LABEL, None),
        ("ecs.g7.large", LABEL_INSTANCE_CATEGORY, vals(&["g"])),
        ("ecs.g7.large", LABEL_INSTANCE_FAMILY, vals(&["ecs.g7"])),
        ("ecs.g7.large", LABEL_INSTANCE_GENERATION, vals(&["7"])),
        ("ecs.g7.large", LABEL_INSTANCE_SIZE, vals(&["large"])),
        ("ecs.g7.large", LABEL_INSTANCE_CPU, vals(&["2"])),
        ("ecs.g7.large", LABEL_INSTANCE_CPU_MODEL, vals(&["intel"])),
        ("ecs.g7.large", LABEL_INSTANCE_MEMORY, vals(&["8192"])),
        ("ecs.g7.large", LABEL_INSTANCE_GPU_NAME, None),
        ("ecs.g7.large", LABEL_INSTANCE_GPU_MANUFACTURER, None),
        ("ecs.g7.large", LABEL_INSTANCE_GPU_COUNT, None),
        ("ecs.g7.large", LABEL_INSTANCE_GPU_MEMORY, None),
        ("ecs.g8y.large", ARCH_LABEL, vals(&["arm64"])),
        // Neither AMD nor Intel: upstream sets the label, empty.
        ("ecs.g8y.large", LABEL_INSTANCE_CPU_MODEL, vals(&[""])),
        ("ecs.g7a.large", LABEL_INSTANCE_CPU_MODEL, vals(&["amd"])),
        (
            "ecs.gn6i-c4g1.xlarge",
            LABEL_INSTANCE_CATEGORY,
            vals(&["gn"]),
        ),
        (
            "ecs.gn6i-c4g1.xlarge",
            LABEL_INSTANCE_GENERATION,
            vals(&["6"]),
        ),
        (
            "ecs.gn6i-c4g1.xlarge",
            LABEL_INSTANCE_FAMILY,
            vals(&["ecs.gn6i-c4g1"]),
        ),
        (
            "ecs.gn6i-c4g1.xlarge",
            LABEL_INSTANCE_MEMORY,
            vals(&["15360"]),
        ),
        (
            "ecs.gn6i-c4g1.xlarge",
            LABEL_INSTANCE_GPU_NAME,
            vals(&["nvidia-t4"]),
        ),
        (
            "ecs.gn6i-c4g1.xlarge",
            LABEL_INSTANCE_GPU_MANUFACTURER,
            vals(&["NVIDIA"]),
        ),
        (
            "ecs.gn6i-c4g1.xlarge",
            LABEL_INSTANCE_GPU_COUNT,
            vals(&["1"]),
        ),
        (
            "ecs.gn6i-c4g1.xlarge",
            LABEL_INSTANCE_GPU_MEMORY,
            vals(&["16"]),
        ),
        ("ecs.t6-c1m1.large", LABEL_INSTANCE_CATEGORY, vals(&["t"])),
        (
            "ecs.t6-c1m1.large",
            LABEL_INSTANCE_FAMILY,
            vals(&["ecs.t6-c1m1"]),
        ),
        ("ecs.t5-lc2m1.nano", LABEL_INSTANCE_MEMORY, vals(&["512"])),
        // No PhysicalProcessorModel: no label.
        ("ecs.t5-lc2m1.nano", LABEL_INSTANCE_CPU_MODEL, None),
        // Upstream's fmt.Sprint would write 1.572864e+06, not a label value; a whole number
        // is written whole.
        (
            "ecs.re6.52xlarge",
            LABEL_INSTANCE_MEMORY,
            vals(&["1572864"]),
        ),
    ];
    for (name, key, expected) in cases {
        assert_eq!(values(find(&types, name), key), expected, "{name} {key}");
    }
    let gn6i = find(&types, "ecs.gn6i-c4g1.xlarge");
    assert_eq!(gn6i.capacity.get(RESOURCE_NVIDIA_GPU), 1000);
    assert_eq!(gn6i.capacity.get(RESOURCE_AMD_GPU), 0);
    assert_eq!(gn6i.capacity.get(RESOURCE_ALIYUN_ENI), 1000);
    assert_eq!(
        find(&types, "ecs.c7.16xlarge")
            .capacity
            .get(RESOURCE_ALIYUN_ENI),
        7000
    );
    assert_eq!(
        find(&types, "ecs.t5-lc2m1.nano")
            .capacity
            .get(RESOURCE_ALIYUN_ENI),
        0,
        "one ENI: none to spare"
    );
    let amd_gpu = EcsInstanceType {
        gpu_amount: 2,
        gpu_spec: "AMD Instinct MI308X".into(),
        ..info("ecs.g7.large")
    };
    let c = capacity(&amd_gpu, &InstanceTypeOptions::new(REGION));
    assert_eq!(
        (c.get(RESOURCE_AMD_GPU), c.get(RESOURCE_NVIDIA_GPU)),
        (2000, 0)
    );
    assert_eq!(gpu_name("NVIDIA A10*2/24GB"), "nvidia-a10-2-24gb");
}

#[test]
fn names_give_category_and_generation() {
    let cases = [
        ("ecs.g7.large", Some(("g", "7"))),
        ("ecs.gn5i-c16g1.4xlarge", Some(("gn", "5"))),
        ("ecs.re6p-13tb2.26xlarge", Some(("re", "6"))),
        ("ecs.re-2tb6.xlarge", Some(("re", "6"))),
        ("ecs.ebmg7.32xlarge", Some(("ebmg", "7"))),
        ("m5.large", None),
        ("ecs.xlarge", None),
    ];
    for (name, expected) in cases {
        let got = category_and_generation(name);
        let got = got.as_ref().map(|(c, g)| (c.as_str(), g.as_str()));
        assert_eq!(got, expected, "{name}");
    }
    assert_eq!(family_and_size("ecs.g7"), None);
}

/// The offerings of a type with both kinds of stock, as upstream's `createOfferings` makes
/// them: every zone of the on-demand answer × {on-demand, spot}, priced from the table.
#[test]
fn offerings_span_zones_and_capacity_types() {
    let a = availability();
    let mut prices = PriceTable::embedded(REGION);
    let vswitches = vswitch_zones(&["cn-hangzhou-h", "cn-hangzhou-i"]);
    let offered = |prices: &PriceTable, unavailable: Unavailable<'_>| {
        offerings("ecs.g7.large", &a, &vswitches, prices, unavailable)
            .into_iter()
            .map(|o| (o.zone, o.capacity_type, o.price, o.available))
            .collect::<Vec<_>>()
    };
    let o = |zone: &str, ct: &str, price: f64, available: bool| {
        (zone.to_string(), ct.to_string(), price, available)
    };
    // Before a spot refresh, spot is priced as on demand.
    assert_eq!(
        offered(&prices, &never),
        [
            o("cn-hangzhou-h", "on-demand", 0.52325, true),
            // No spot stock in h.
            o("cn-hangzhou-h", "spot", 0.52325, false),
            o("cn-hangzhou-i", "on-demand", 0.52325, true),
            o("cn-hangzhou-i", "spot", 0.52325, true),
            // Stock, but the NodeClass has no vSwitch in k.
            o("cn-hangzhou-k", "on-demand", 0.52325, false),
            o("cn-hangzhou-k", "spot", 0.52325, false),
        ]
    );
    // After it, spot only where it has a price.
    prices
        .update_spot(
            REGION,
            [(
                "ecs.g7.large".to_string(),
                [("cn-hangzhou-i".to_string(), 0.1046)].into(),
            )]
            .into(),
        )
        .unwrap();
    let cache = UnavailableOfferings::default();
    let now = Instant::now();
    cache.mark("ecs.g7.large", "cn-hangzhou-i", "spot", now);
    let unavailable = |t: &str, z: &str, c: &str| cache.is_unavailable(t, z, c, now);
    assert_eq!(
        offered(&prices, &unavailable),
        [
            o("cn-hangzhou-h", "on-demand", 0.52325, true),
            // A launch just failed for lack of spot capacity.
            o("cn-hangzhou-i", "on-demand", 0.52325, true),
            o("cn-hangzhou-i", "spot", 0.1046, false),
            o("cn-hangzhou-k", "on-demand", 0.52325, false),
        ]
    );
    let later = now + Duration::from_secs(180);
    let unavailable = |t: &str, z: &str, c: &str| cache.is_unavailable(t, z, c, later);
    assert!(
        offered(&prices, &unavailable).contains(&o("cn-hangzhou-i", "spot", 0.1046, true)),
        "back after upstream's three minutes"
    );
}

#[test]
fn requirements_span_the_available_offerings() {
    let types = build(&InstanceTypeOptions::new(REGION));
    let g7 = find(&types, "ecs.g7.large");
    assert_eq!(
        values(g7, ZONE_LABEL),
        vals(&["cn-hangzhou-h", "cn-hangzhou-i"])
    );
    assert_eq!(
        values(g7, LABEL_TOPOLOGY_ZONE_ID),
        vals(&["cn-hangzhou-h", "cn-hangzhou-i"])
    );
    assert_eq!(
        values(g7, CAPACITY_TYPE_LABEL),
        vals(&["on-demand", "spot"])
    );
    let c7 = find(&types, "ecs.c7.16xlarge");
    assert_eq!(values(c7, CAPACITY_TYPE_LABEL), vals(&["on-demand"]));
    // Stock only in k, where the NodeClass has no vSwitch: listed, but nothing to launch.
    let nothing = instance_types(
        &[info("ecs.t6-c1m1.large")],
        &availability(),
        &vswitch_zones(&["cn-hangzhou-h"]),
        &InstanceTypeOptions::new(REGION),
        &PriceTable::embedded(REGION),
        &never,
    )
    .unwrap();
    assert_eq!(nothing.len(), 1);
    assert!(nothing[0].offerings.iter().all(|o| !o.available));
    // An empty set of zones: no node can satisfy a zone requirement.
    assert_eq!(values(&nothing[0], ZONE_LABEL), None);
    assert!(
        nothing[0]
            .requirements
            .get(LABEL_TOPOLOGY_ZONE_ID)
            .is_none(),
        "no zone id without an available offering"
    );
}

#[test]
fn types_without_a_price_are_not_offered() {
    let names = |prices: &PriceTable| -> Vec<String> {
        instance_types(
            &fixture_types(),
            &availability(),
            &vswitch_zones(&["cn-hangzhou-h", "cn-hangzhou-i"]),
            &InstanceTypeOptions::new(REGION),
            prices,
            &never,
        )
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect()
    };
    let embedded = PriceTable::embedded(REGION);
    assert!(embedded.on_demand("ecs.g9i.large").is_none());
    assert!(!names(&embedded).contains(&"ecs.g9i.large".to_string()));
    assert_eq!(names(&embedded).len(), 8);
    let mut refreshed = embedded.clone();
    refreshed
        .update_on_demand(REGION, [("ecs.g9i.large".to_string(), 0.55)].into())
        .unwrap();
    assert_eq!(names(&refreshed).len(), 9, "g9i is priced now");
    // The refresh replaced the on-demand table: the others keep only their spot stand-ins.
    let types = instance_types(
        &fixture_types(),
        &availability(),
        &vswitch_zones(&["cn-hangzhou-i"]),
        &InstanceTypeOptions::new(REGION),
        &refreshed,
        &never,
    )
    .unwrap();
    let kinds = |name: &str| -> BTreeSet<String> {
        find(&types, name)
            .offerings
            .iter()
            .map(|o| o.capacity_type.clone())
            .collect()
    };
    // Spot stand-ins come from the embedded table only, as upstream's: g9i has none.
    assert_eq!(kinds("ecs.g9i.large"), ["on-demand".to_string()].into());
    assert_eq!(kinds("ecs.g7.large"), ["spot".to_string()].into());
    // After a spot refresh that does not price g7a, it has no price of either kind.
    refreshed
        .update_spot(
            REGION,
            [(
                "ecs.g7.large".to_string(),
                [("cn-hangzhou-i".to_string(), 0.1)].into(),
            )]
            .into(),
        )
        .unwrap();
    assert_eq!(
        names(&refreshed),
        ["ecs.g7.large", "ecs.g9i.large"],
        "only what has a price is offered"
    );
}

#[test]
fn listing_needs_types_stock_and_vswitches() {
    let types = fixture_types();
    let a = availability();
    let zones = vswitch_zones(&["cn-hangzhou-h"]);
    let options = InstanceTypeOptions::new(REGION);
    let prices = PriceTable::embedded(REGION);
    let list = |types: &[EcsInstanceType], a: &Availability, zones: &BTreeSet<String>| {
        instance_types(types, a, zones, &options, &prices, &never).map(|t| t.len())
    };
    assert_eq!(
        list(&[], &a, &zones),
        Err(InstanceTypesError::NoInstanceTypes)
    );
    let no_on_demand = Availability {
        on_demand: ZonesByType::new(),
        ..a.clone()
    };
    assert_eq!(
        list(&types, &no_on_demand, &zones),
        Err(InstanceTypesError::NoOnDemandOfferings)
    );
    let no_spot = Availability {
        spot: ZonesByType::new(),
        ..a.clone()
    };
    assert_eq!(
        list(&types, &no_spot, &zones),
        Err(InstanceTypesError::NoSpotOfferings)
    );
    assert_eq!(
        list(&types, &a, &BTreeSet::new()),
        Err(InstanceTypesError::NoVSwitches)
    );
    assert_eq!(list(&types, &a, &zones), Ok(8));
}

#[test]
fn node_class_settings_shape_the_types() {
    let spec = ECSNodeClassSpec {
        kubelet_configuration: Some(KubeletConfiguration {
            max_pods: Some(40),
            pods_per_core: Some(4),
            kube_reserved: [("memory".to_string(), "5Gi".to_string())].into(),
            ..Default::default()
        }),
        system_disk: Some(SystemDisk {
            volume_size: Some("100G".into()),
            size: Some(60),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = InstanceTypeOptions::for_node_class(&spec, REGION, Cni::Terway, 0.065);
    assert_eq!(options.max_pods, Some(40));
    assert_eq!(options.pods_per_core, Some(4));
    assert_eq!(options.cni, Cni::Terway);
    let t = instance_type(&info("ecs.g7.large"), offering_in("z"), &options).unwrap();
    // min(40, 4 × 2).
    assert_eq!(t.capacity.pods, 8000);
    // volumeSize wins over size, and is a decimal quantity as written.
    assert_eq!(t.capacity.ephemeral_storage, 100_000_000_000 * 1000);
    // kubeReserved is not applied: upstream's nodes do not get it.
    assert_eq!(t.allocatable().memory, (7659 - (11 * 8 + 255 + 200)) * MI);

    let sized_only = ECSNodeClassSpec {
        system_disk: Some(SystemDisk {
            size: Some(60),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = InstanceTypeOptions::for_node_class(&sized_only, REGION, Cni::Other, 0.065);
    let t = instance_type(&info("ecs.g7.large"), offering_in("z"), &options).unwrap();
    assert_eq!(
        t.capacity.ephemeral_storage,
        60 * GIB * 1000,
        "the disk is launched at `size` when volumeSize is unset (upstream launches 20 GiB and counts 20)"
    );
    // Another VM overhead setting.
    let options = InstanceTypeOptions {
        vm_memory_overhead_percent: 0.1,
        ..InstanceTypeOptions::new(REGION)
    };
    let t = instance_type(&info("ecs.g7.large"), offering_in("z"), &options).unwrap();
    assert_eq!(t.capacity.memory, (8192 - 820) * MI);
}

#[test]
fn memory_reads_as_upstream_writes_it() {
    assert_eq!(memory_bytes(8.0), 8 * GIB);
    assert_eq!(memory_bytes(0.5), GIB / 2);
    assert_eq!(memory_bytes(1.5), 3 * GIB / 2);
    // 0.6 GiB is 644245094.4 bytes; the quantity rounds up.
    assert_eq!(memory_bytes(0.6), 644_245_095);
    assert_eq!(memory_capacity_bytes(0, 0.065), 0);
    assert_eq!(float32_label(8192.0), "8192");
    assert_eq!(float32_label(0.6 * 1024.0), "614.4");
    assert_eq!(float32_label(22.5), "22.5");
    assert_eq!(kube_reserved_cpu_milli(500), 0, "under a core, nothing");
}
