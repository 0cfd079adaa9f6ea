//! Instance types from hand-made `ListFlavors`, `ListServerAzInfo` and
//! `ListOnDemandResourceRatings` answers (`tests/testdata/`, shaped after huaweicloud-sdk-go-v3's
//! models: `Flavor`, `FlavorExtraSpec`, `ListServerAzInfo`, `DemandProductRatingResult`), run
//! through the public API as the provider runs them: parse, price, build for a NodeClass.

use std::collections::BTreeSet;

use karpenter_api::Operator;
use karpenter_core::instancetype::InstanceType;
use karpenter_huawei::CCENodeClassSpec;
use karpenter_huawei::instancetype::{
    self, InstanceTypeOptions, ListFlavorsResponse, ListServerAzInfoResponse,
};
use karpenter_huawei::pricing::{self, MISSING_PRICE, PriceTable};

const REGION: &str = "cn-north-4";
const MI: i64 = (1 << 20) * 1000;

fn flavors() -> ListFlavorsResponse {
    serde_json::from_slice(include_bytes!("testdata/list-flavors.json")).expect("flavors parse")
}

fn zones() -> Vec<String> {
    let answer: ListServerAzInfoResponse =
        serde_json::from_slice(include_bytes!("testdata/list-server-az-info.json"))
            .expect("zones parse");
    answer.zone_ids()
}

fn prices() -> PriceTable {
    let ratings = pricing::parse_ratings(include_bytes!(
        "testdata/list-on-demand-resource-ratings.json"
    ))
    .expect("ratings parse");
    PriceTable::from_ratings(REGION, ratings)
}

fn never(_: &str, _: &str, _: &str) -> bool {
    false
}

fn build(options: &InstanceTypeOptions) -> Vec<InstanceType> {
    instancetype::instance_types(&flavors().flavors, &zones(), options, &prices(), &never)
        .expect("flavors are known")
}

fn find<'a>(types: &'a [InstanceType], name: &str) -> &'a InstanceType {
    types
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} is offered"))
}

fn zones_of(t: &InstanceType) -> Vec<&str> {
    t.offerings.iter().map(|o| o.zone.as_str()).collect()
}

#[test]
fn flavors_sell_where_their_statuses_say() {
    let types = build(&InstanceTypeOptions::new(REGION));
    let all = ["cn-north-4a", "cn-north-4b", "cn-north-4c", "cn-north-4g"];
    let cases: [(&str, &[&str]); 10] = [
        // cn-north-4c(sellout) in the per-zone list.
        ("c7.large.2", &["cn-north-4a", "cn-north-4b", "cn-north-4g"]),
        ("c7.xlarge.2", &all),
        ("c9.large.4", &all),
        ("c9.4xlarge.4", &all),
        (
            "kc1.large.2",
            &["cn-north-4a", "cn-north-4b", "cn-north-4c"],
        ),
        ("kc1.xlarge.4", &all),
        ("s6.large.2", &all),
        // Withdrawn region-wide, sold in 4b.
        ("m7.xlarge.8", &["cn-north-4b"]),
        // Open beta everywhere but 4c (full-width separators).
        (
            "ac7.large.2",
            &["cn-north-4a", "cn-north-4b", "cn-north-4g"],
        ),
        ("p2s.2xlarge.8", &["cn-north-4a"]),
    ];
    for (name, expected) in cases {
        let t = find(&types, name);
        assert_eq!(zones_of(t), expected, "{name}");
        let zone_values: BTreeSet<&str> = t
            .requirements
            .get("topology.kubernetes.io/zone")
            .unwrap()
            .values()
            .collect();
        assert_eq!(
            zone_values,
            expected.iter().copied().collect(),
            "{name} zone label"
        );
    }
    assert!(
        types.iter().all(|t| t.name != "c6.large.2"),
        "a flavor sold out everywhere is not offered"
    );
    assert_eq!(types.len(), 10);
}

#[test]
fn pods_follow_memory_and_supplementary_nics() {
    let types = build(&InstanceTypeOptions::new(REGION));
    for (name, pods) in [
        // (memory tier, NIC quota)
        ("c7.large.2", 16),    // 20, 16
        ("c7.xlarge.2", 32),   // 40, 32
        ("c9.4xlarge.4", 110), // 110, 128
        ("kc1.xlarge.4", 32),  // 60, 32
        ("m7.xlarge.8", 32),   // 80, 32
        ("s6.large.2", 20),    // 20, no quota
        ("p2s.2xlarge.8", 110),
    ] {
        assert_eq!(find(&types, name).capacity.pods, pods * 1000, "{name}");
    }
}

#[test]
fn offerings_carry_bss_prices_or_the_missing_price() {
    let types = build(&InstanceTypeOptions::new(REGION));
    for (name, price) in [
        ("c7.large.2", 0.46),
        ("c7.xlarge.2", 0.92),
        ("kc1.large.2", 0.3),
        // No `amount`: the list price.
        ("s6.large.2", 0.35),
        ("m7.xlarge.8", 0.7),
        // Not in the answer: offered, but last.
        ("c9.large.4", MISSING_PRICE),
        ("p2s.2xlarge.8", MISSING_PRICE),
    ] {
        let t = find(&types, name);
        assert!(
            t.offerings
                .iter()
                .all(|o| o.price == price && o.capacity_type == "on-demand" && o.available),
            "{name}"
        );
    }
}

#[test]
fn failed_launches_make_offerings_unavailable() {
    let unavailable = |name: &str, zone: &str, capacity_type: &str| {
        name == "c7.large.2" && zone == "cn-north-4a" && capacity_type == "on-demand"
    };
    let types = instancetype::instance_types(
        &flavors().flavors,
        &zones(),
        &InstanceTypeOptions::new(REGION),
        &prices(),
        &unavailable,
    )
    .unwrap();
    let c7 = find(&types, "c7.large.2");
    let available: Vec<(&str, bool)> = c7
        .offerings
        .iter()
        .map(|o| (o.zone.as_str(), o.available))
        .collect();
    assert_eq!(
        available,
        [
            ("cn-north-4a", false),
            ("cn-north-4b", true),
            ("cn-north-4g", true)
        ]
    );
    assert!(
        find(&types, "c7.xlarge.2")
            .offerings
            .iter()
            .all(|o| o.available)
    );
}

#[test]
fn labels_are_upstreams() {
    let types = build(&InstanceTypeOptions::new(REGION));
    let kc1 = find(&types, "kc1.large.2");
    assert!(kc1.requirements.allows("kubernetes.io/arch", "arm64"));
    assert!(!kc1.requirements.allows("kubernetes.io/arch", "amd64"));
    assert!(
        kc1.requirements
            .allows("karpenter.k8s.huawei/instance-cpu", "2")
    );
    assert!(
        kc1.requirements
            .allows("karpenter.k8s.huawei/instance-memory", "4096")
    );
    assert!(
        kc1.requirements
            .allows("topology.kubernetes.io/region", REGION)
    );
    assert!(
        find(&types, "c7.large.2")
            .requirements
            .allows("kubernetes.io/arch", "amd64")
    );

    // Upstream reads no GPU from the flavor: a GPU flavor has no GPU labels or resources.
    let gpu = find(&types, "p2s.2xlarge.8");
    for key in [
        "karpenter.k8s.huawei/instance-gpu-name",
        "karpenter.k8s.huawei/instance-gpu-count",
        "karpenter.k8s.huawei/instance-gpu-manufacturer",
        "karpenter.k8s.huawei/instance-gpu-memory",
        "karpenter.k8s.huawei/instance-size",
    ] {
        assert_eq!(
            gpu.requirements.get(key).map(|r| r.operator()),
            Some(Operator::DoesNotExist),
            "{key}"
        );
    }
    assert_eq!(gpu.capacity.get("nvidia.com/gpu"), 0);
}

#[test]
fn a_default_node_class_gets_cces_reservations() {
    let spec: CCENodeClassSpec = serde_json::from_value(serde_json::json!({
        "subnetSelectorTerms": [{"id": "7bd7a3a0-5a6e-4d6d-9f7e-0f0c3c6a2b11"}],
        "imsSelector": {"imsFamily": "Huawei Cloud EulerOS 2.0"},
        "blockDeviceMappings": {"root": {"volumeSize": 50, "volumeType": "GPSSD"}},
        "login": {"sshKey": "KeyPair-karpenter"}
    }))
    .unwrap();
    let options = InstanceTypeOptions::for_node_class(&spec, REGION).unwrap();
    assert_eq!(options, InstanceTypeOptions::new(REGION));
    let types = build(&options);
    let c7 = find(&types, "c7.xlarge.2");
    // 4000m less 60 + 10 + 10; 8192 MiB less 700 kube, 600 system, 100 eviction.
    assert_eq!(c7.allocatable().cpu, 3920);
    assert_eq!(c7.allocatable().memory, 6792 * MI);
    assert_eq!(c7.allocatable().ephemeral_storage, 9_413_845_387_000);
}

#[test]
fn the_node_class_kubelet_runtime_and_disk_take_over() {
    let spec: CCENodeClassSpec = serde_json::from_value(serde_json::json!({
        "subnetSelectorTerms": [{"name": "karpenter-nodes"}],
        "kubelet": {
            "maxPods": 64,
            "kubeReserved": {"cpu": "100m", "memory": "512Mi"},
            "systemReserved": {"memory": "256Mi", "pid": "1000"}
        },
        "imsSelector": {"imsFamily": "Huawei Cloud EulerOS 2.0"},
        "blockDeviceMappings": {
            "root": {"volumeSize": 50, "volumeType": "GPSSD"},
            "k8s": {"volumeSize": 120, "volumeType": "GPSSD"}
        },
        "runtimeConfiguration": {"type": "docker"},
        "login": {"sshKey": "KeyPair-karpenter"}
    }))
    .unwrap();
    let options = InstanceTypeOptions::for_node_class(&spec, REGION).unwrap();
    let types = build(&options);
    let c7 = find(&types, "c7.xlarge.2");
    assert_eq!(c7.capacity.pods, 64_000, "maxPods beats the NIC cap");
    assert_eq!(c7.allocatable().cpu, 3900);
    assert_eq!(c7.allocatable().memory, (8192 - 512 - 256 - 100) * MI);
    // A 120 GiB k8s disk: upstream's 12274824Ki less its 10% threshold.
    assert_eq!(c7.allocatable().ephemeral_storage, 11_312_477_780_000);

    // Docker's larger per-pod reservation shows where the NodeClass leaves memory to CCE.
    let spec: CCENodeClassSpec = serde_json::from_value(serde_json::json!({
        "runtimeConfiguration": {"type": "docker"}
    }))
    .unwrap();
    let types = build(&InstanceTypeOptions::for_node_class(&spec, REGION).unwrap());
    // 8192 less 500 + 20 × 40, 600, 100.
    assert_eq!(find(&types, "c7.xlarge.2").allocatable().memory, 6192 * MI);
}

#[test]
fn the_ratings_request_covers_the_flavors_and_a_refusal_names_one() {
    let flavors = flavors().flavors;
    let to_price = pricing::flavors_to_price(&flavors, &BTreeSet::new());
    assert_eq!(to_price.len(), 11);
    let batches: Vec<_> = pricing::price_batches(&to_price).collect();
    assert_eq!(batches.len(), 1);
    let body = pricing::ratings_request("0a1b2c3d4e5f60718293a4b5c6d7e8f9", REGION, batches[0]);
    let specs: Vec<&str> = body["product_infos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["resource_spec"].as_str().unwrap())
        .collect();
    assert_eq!(specs[0], "ac7.large.2.linux");
    assert!(specs.contains(&"p2s.2xlarge.8.linux"));

    let refused = pricing::unsupported_resource_spec_in_body(include_bytes!(
        "testdata/bss-product-not-found.json"
    ))
    .expect("product not found");
    assert_eq!(refused, "p2s.2xlarge.8.linux");
    let (kept, removed) = pricing::without_resource_spec(batches[0], &refused);
    assert_eq!(kept.len(), 10);
    assert_eq!(
        removed.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        ["p2s.2xlarge.8"]
    );
}

#[test]
fn without_flavors_there_are_no_instance_types() {
    assert_eq!(
        instancetype::instance_types(
            &[],
            &zones(),
            &InstanceTypeOptions::new(REGION),
            &prices(),
            &never
        ),
        Err(instancetype::InstanceTypesError::NoInstanceTypes)
    );
}
