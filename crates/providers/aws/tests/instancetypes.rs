//! The capacity calculator against upstream's published figures: the embedded catalog carries,
//! for every type, the allocatable CPU and memory and the max pods that upstream Karpenter's
//! documentation lists (AL2023, no kubelet overrides). Every type must agree.

use karpenter_aws::ec2nodeclass::{AmiFamily, BlockDevice, BlockDeviceMapping};
use karpenter_aws::instancetype::{
    self, NodeClassSettings, ZoneInfo, catalog, eni_limited_pods, kube_reserved_cpu, name_parts,
};
use karpenter_aws::pricing::{Pricing, SpotPrice};
use karpenter_core::resources::parse_milli;
use serde_json::Value;

const MIB: i64 = 1 << 20;

fn published() -> Vec<Value> {
    serde_json::from_str(include_str!("../data/instance-types.json")).unwrap()
}

fn zones() -> Vec<ZoneInfo> {
    [
        "us-east-1a",
        "us-east-1b",
        "us-east-1c",
        "us-east-1d",
        "us-east-1e",
        "us-east-1f",
    ]
    .iter()
    .enumerate()
    .map(|(i, z)| ZoneInfo {
        zone: z.to_string(),
        zone_id: Some(format!("use1-az{}", i + 1)),
    })
    .collect()
}

#[test]
fn allocatable_matches_upstreams_published_figures_for_every_type() {
    let settings = NodeClassSettings::default();
    let pricing = Pricing::embedded();
    let rows = published();
    assert!(rows.len() > 1300);
    let mut wrong = Vec::new();
    for row in &rows {
        let name = row["name"].as_str().unwrap();
        let info = catalog().types.iter().find(|t| t.name == name).unwrap();
        let offered = &catalog().zones[name];
        let Some(it) = instancetype::resolve(
            info,
            "us-east-1",
            offered,
            &zones(),
            &settings,
            &pricing,
            &|_, _, _| false,
        ) else {
            wrong.push(format!("{name}: no offerings"));
            continue;
        };
        let cpu = row["karpenter_allocatable_cpu_millicores"]
            .as_i64()
            .unwrap();
        let mem = row["karpenter_allocatable_memory_mib"].as_i64().unwrap();
        let pods = row["max_pods"].as_i64().unwrap();
        let alloc = it.allocatable();
        if alloc.cpu != cpu || alloc.memory != mem * MIB * 1000 || alloc.pods != pods * 1000 {
            wrong.push(format!(
                "{name}: cpu {}m (published {cpu}m), memory {}Mi (published {mem}Mi), pods {} (published {pods})",
                alloc.cpu,
                alloc.memory / MIB / 1000,
                alloc.pods / 1000
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} types disagree:\n{}",
        wrong.len(),
        rows.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
}

#[test]
fn names_split_into_upstreams_labels() {
    for row in published() {
        let name = row["name"].as_str().unwrap();
        let (category, generation, family, size) = name_parts(name);
        assert_eq!(family.as_deref(), row["family"].as_str(), "{name} family");
        assert_eq!(size.as_deref(), row["size"].as_str(), "{name} size");
        assert_eq!(
            category.as_deref(),
            row["category"].as_str(),
            "{name} category"
        );
        assert_eq!(
            generation.map(|g| g.parse::<i64>().unwrap()),
            row["generation"].as_i64(),
            "{name} generation"
        );
    }
}

/// Upstream's kube-reserved CPU bands, by core count.
#[test]
fn kube_reserved_cpu_bands() {
    for (vcpu, reserved) in [
        (1, 60),
        (2, 70),
        (4, 80),
        (8, 90),
        (16, 110),
        (96, 310),
        (448, 1190),
    ] {
        assert_eq!(kube_reserved_cpu(vcpu), reserved, "{vcpu} vCPUs");
    }
}

fn info(name: &str) -> &'static instancetype::InstanceTypeInfo {
    catalog().types.iter().find(|t| t.name == name).unwrap()
}

fn resolve(name: &str, settings: &NodeClassSettings) -> karpenter_core::instancetype::InstanceType {
    instancetype::resolve(
        info(name),
        "us-east-1",
        &catalog().zones[name],
        &zones(),
        settings,
        &Pricing::embedded(),
        &|_, _, _| false,
    )
    .unwrap()
}

/// Cases after upstream's instance type suite: kubelet overrides, pod density, storage.
#[test]
fn kubelet_settings_shape_capacity_and_overhead() {
    let base = NodeClassSettings::default();
    // m5.xlarge: 4 ENIs × 15 IPs → 58 pods.
    assert_eq!(eni_limited_pods(info("m5.xlarge"), &base), 58);
    let default = resolve("m5.xlarge", &base);
    assert_eq!(default.capacity.pods, 58_000);

    // maxPods wins over the ENI limit, but AL2023's kube-reserved memory still follows the ENI
    // limit (its bootstrap computes it that way).
    let max_pods = NodeClassSettings {
        max_pods: Some(10),
        ..base.clone()
    };
    let it = resolve("m5.xlarge", &max_pods);
    assert_eq!(it.capacity.pods, 10_000);
    assert_eq!(
        it.overhead.kube_reserved.memory,
        default.overhead.kube_reserved.memory
    );
    // Bottlerocket's reservation follows the pod count it runs.
    let bottlerocket = NodeClassSettings {
        ami_family: AmiFamily::Bottlerocket,
        ..max_pods.clone()
    };
    let it = resolve("m5.xlarge", &bottlerocket);
    assert_eq!(
        it.overhead.kube_reserved.memory,
        (11 * 10 + 255) * MIB * 1000
    );

    // podsPerCore caps pods at cores × n, except on Bottlerocket, which ignores it.
    let per_core = NodeClassSettings {
        pods_per_core: Some(4),
        ..base.clone()
    };
    assert_eq!(resolve("m5.xlarge", &per_core).capacity.pods, 16_000);
    let per_core_br = NodeClassSettings {
        ami_family: AmiFamily::Bottlerocket,
        ..per_core.clone()
    };
    assert_eq!(resolve("m5.xlarge", &per_core_br).capacity.pods, 58_000);
    // Windows does not use ENI-limited density.
    let windows = NodeClassSettings {
        ami_family: AmiFamily::Windows2022,
        ..base.clone()
    };
    assert_eq!(resolve("m5.xlarge", &windows).capacity.pods, 110_000);

    // Reserved resources and eviction thresholds from the kubelet block.
    let reserved = NodeClassSettings {
        kube_reserved: [("cpu".into(), "1".into()), ("memory".into(), "1Gi".into())].into(),
        system_reserved: [("memory".into(), "200Mi".into())].into(),
        eviction_hard: [
            ("memory.available".into(), "5%".into()),
            ("nodefs.available".into(), "1Gi".into()),
        ]
        .into(),
        ..base.clone()
    };
    let it = resolve("m5.xlarge", &reserved);
    assert_eq!(it.overhead.kube_reserved.cpu, 1000);
    assert_eq!(it.overhead.kube_reserved.memory, 1024 * MIB * 1000);
    assert_eq!(it.overhead.system_reserved.memory, 200 * MIB * 1000);
    let memory = it.capacity.memory / 1000;
    assert_eq!(
        it.overhead.eviction_threshold.memory,
        ((memory as f64) * 0.05).ceil() as i64 * 1000
    );
    assert_eq!(
        it.overhead.eviction_threshold.ephemeral_storage,
        parse_milli("1Gi").unwrap()
    );

    // Ephemeral storage: the root volume, else the family's device, else 20Gi.
    assert_eq!(
        default.capacity.ephemeral_storage,
        parse_milli("20Gi").unwrap()
    );
    let disk = |device: &str, size: &str, root: bool| BlockDeviceMapping {
        device_name: Some(device.into()),
        ebs: Some(BlockDevice {
            volume_size: Some(size.into()),
            ..Default::default()
        }),
        root_volume: root,
    };
    let root = NodeClassSettings {
        block_device_mappings: vec![
            disk("/dev/xvda", "50Gi", false),
            disk("/dev/xvdc", "200Gi", true),
        ],
        ..base.clone()
    };
    assert_eq!(
        resolve("m5.xlarge", &root).capacity.ephemeral_storage,
        parse_milli("200Gi").unwrap()
    );
    let family_device = NodeClassSettings {
        block_device_mappings: vec![disk("/dev/xvda", "50Gi", false)],
        ..base.clone()
    };
    assert_eq!(
        resolve("m5.xlarge", &family_device)
            .capacity
            .ephemeral_storage,
        parse_milli("50Gi").unwrap()
    );
    let br_default = NodeClassSettings {
        ami_family: AmiFamily::Bottlerocket,
        ..base.clone()
    };
    assert_eq!(
        resolve("m5.xlarge", &br_default).capacity.ephemeral_storage,
        parse_milli("20Gi").unwrap()
    );
    // RAID0 over the instance store uses its size.
    let raid = NodeClassSettings {
        instance_store_raid0: true,
        ..base.clone()
    };
    assert_eq!(
        resolve("m5d.xlarge", &raid).capacity.ephemeral_storage,
        150 * 1_000_000_000 * 1000
    );
    // The eviction threshold is 10% of that storage by default.
    let it = resolve("m5.xlarge", &base);
    assert_eq!(
        it.overhead.eviction_threshold.ephemeral_storage,
        (parse_milli("20Gi").unwrap() / 1000 + 9) / 10 * 1000
    );
}

#[test]
fn gpus_and_labels() {
    use karpenter_api::Operator;
    let base = NodeClassSettings::default();
    let gpu = resolve("p4d.24xlarge", &base);
    assert_eq!(gpu.capacity.get("nvidia.com/gpu"), 8000);
    assert_eq!(gpu.capacity.get("vpc.amazonaws.com/efa"), 4000);
    let has = |it: &karpenter_core::instancetype::InstanceType, key: &str, value: &str| {
        it.requirements.allows(key, value)
    };
    assert!(has(&gpu, "karpenter.k8s.aws/instance-gpu-name", "a100"));
    assert!(has(&gpu, "karpenter.k8s.aws/instance-gpu-count", "8"));
    let cpu_only = resolve("m5.large", &base);
    assert!(
        !cpu_only
            .requirements
            .allows("karpenter.k8s.aws/instance-gpu-count", "1"),
        "a CPU type has no GPU label, so a pod requiring one never lands there"
    );
    let req = cpu_only
        .requirements
        .get("karpenter.k8s.aws/instance-gpu-count");
    assert_eq!(req.map(|r| r.operator()), Some(Operator::DoesNotExist));
    assert!(has(&cpu_only, "karpenter.k8s.aws/instance-family", "m5"));
    assert!(has(&cpu_only, "karpenter.k8s.aws/instance-generation", "5"));
    assert!(has(&cpu_only, "topology.kubernetes.io/region", "us-east-1"));
    assert!(has(&cpu_only, "topology.k8s.aws/zone-id", "use1-az1"));
    assert!(has(
        &cpu_only,
        "karpenter.k8s.aws/instance-capability-flex",
        "false"
    ));
    assert!(has(
        &resolve("m7i-flex.large", &base),
        "karpenter.k8s.aws/instance-capability-flex",
        "true"
    ));
}

#[test]
fn offerings_need_a_price_a_subnet_zone_and_capacity() {
    let mut pricing = Pricing::embedded();
    let subnets = vec![
        ZoneInfo {
            zone: "us-east-1a".into(),
            zone_id: None,
        },
        ZoneInfo {
            zone: "us-east-1b".into(),
            zone_id: None,
        },
    ];
    let settings = NodeClassSettings::default();
    let offered = vec!["us-east-1a".to_string(), "us-east-1c".to_string()];
    let it = instancetype::resolve(
        info("m5.large"),
        "us-east-1",
        &offered,
        &subnets,
        &settings,
        &pricing,
        &|_, _, _| false,
    )
    .unwrap();
    let shown: Vec<(String, String)> = it
        .offerings
        .iter()
        .map(|o| (o.zone.clone(), o.capacity_type.clone()))
        .collect();
    assert_eq!(
        shown,
        vec![("us-east-1a".into(), "on-demand".into())],
        "no spot price yet, and 1b/1c lack either the type or a subnet"
    );

    pricing.update_spot([SpotPrice {
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        price: 0.03,
        timestamp: "2026-11-22T00:00:00Z".into(),
    }]);
    let ice = |t: &str, z: &str, ct: &str| t == "m5.large" && z == "us-east-1a" && ct == "spot";
    let it = instancetype::resolve(
        info("m5.large"),
        "us-east-1",
        &offered,
        &subnets,
        &settings,
        &pricing,
        &ice,
    )
    .unwrap();
    let spot = it
        .offerings
        .iter()
        .find(|o| o.capacity_type == "spot")
        .unwrap();
    assert_eq!(spot.price, 0.03);
    assert!(
        !spot.available,
        "an offering that just failed for capacity is not available"
    );

    let nowhere = vec![ZoneInfo {
        zone: "us-east-1e".into(),
        zone_id: None,
    }];
    assert!(
        instancetype::resolve(
            info("m5.large"),
            "us-east-1",
            &offered,
            &nowhere,
            &settings,
            &pricing,
            &|_, _, _| false
        )
        .is_none()
    );
}
