//! Fleet planning: capacity type order, the override list, AMI per architecture.

use std::sync::Arc;

use karpenter_api::{NodeClaim, NodeSelectorRequirementWithMinValues, Operator};
use karpenter_aws::instancetype::{self, NodeClassSettings, Reservation, ZoneInfo, catalog};
use karpenter_aws::launch::{LaunchImage, LaunchSubnet, MAX_INSTANCE_TYPES, PlanError, plan};
use karpenter_aws::pricing::{Pricing, SpotPrice};
use karpenter_core::instancetype::InstanceType;
use karpenter_core::resources::Resources;
use karpenter_core::scheduling::Requirement;

const ZONES: [&str; 2] = ["us-east-1a", "us-east-1b"];

fn types(spot: bool, unavailable: &dyn Fn(&str, &str, &str) -> bool) -> Vec<Arc<InstanceType>> {
    resolved_types(spot, &[], unavailable)
}

/// Every catalog type in two zones, spot at 40% of on-demand when `spot`, with `reservations`.
fn resolved_types(
    spot: bool,
    reservations: &[Reservation],
    unavailable: &dyn Fn(&str, &str, &str) -> bool,
) -> Vec<Arc<InstanceType>> {
    let mut pricing = Pricing::embedded();
    if spot {
        pricing.update_spot(catalog().types.iter().flat_map(|t| {
            ZONES.iter().map(|z| SpotPrice {
                instance_type: t.name.clone(),
                zone: z.to_string(),
                price: catalog().on_demand[&t.name] * 0.4,
                timestamp: "2026-11-22T00:00:00Z".into(),
            })
        }));
    }
    let subnets: Vec<ZoneInfo> = ZONES
        .iter()
        .map(|z| ZoneInfo {
            zone: z.to_string(),
            zone_id: None,
        })
        .collect();
    catalog()
        .types
        .iter()
        .filter_map(|t| {
            instancetype::resolve_with_reservations(
                t,
                "us-east-1",
                &catalog().zones[&t.name],
                &subnets,
                &NodeClassSettings::default(),
                &pricing,
                reservations,
                unavailable,
            )
        })
        .map(Arc::new)
        .collect()
}

fn subnets() -> Vec<LaunchSubnet> {
    vec![
        LaunchSubnet {
            id: "subnet-a1".into(),
            zone: "us-east-1a".into(),
            available_ips: 10,
        },
        LaunchSubnet {
            id: "subnet-a2".into(),
            zone: "us-east-1a".into(),
            available_ips: 200,
        },
        LaunchSubnet {
            id: "subnet-b".into(),
            zone: "us-east-1b".into(),
            available_ips: 50,
        },
    ]
}

fn image(id: &str, requirements: &[(&str, Operator, &[&str])]) -> LaunchImage {
    LaunchImage {
        id: id.into(),
        requirements: requirements
            .iter()
            .map(|(k, op, v)| Requirement::new(k, *op, v))
            .collect(),
    }
}

fn images() -> Vec<LaunchImage> {
    vec![
        image(
            "ami-amd64",
            &[("kubernetes.io/arch", Operator::In, &["amd64"])],
        ),
        image(
            "ami-arm64",
            &[("kubernetes.io/arch", Operator::In, &["arm64"])],
        ),
    ]
}

fn claim(requirements: &[(&str, Operator, &[&str])], cpu: &str) -> NodeClaim {
    let mut c = NodeClaim::default();
    c.metadata.name = Some("default-x".into());
    c.spec.requirements = requirements
        .iter()
        .map(|(k, op, v)| NodeSelectorRequirementWithMinValues {
            key: k.to_string(),
            operator: *op,
            values: v.iter().map(|s| s.to_string()).collect(),
            min_values: None,
        })
        .collect();
    c.spec.resources.requests = Resources::parse(&[("cpu", cpu)]).to_list();
    c
}

#[test]
fn spot_first_when_allowed_else_on_demand() {
    let t = types(true, &|_, _, _| false);
    let any = claim(&[], "1");
    assert_eq!(
        plan(&any, &t, &subnets(), &images(), &[])
            .unwrap()
            .capacity_type,
        "spot"
    );
    let od = claim(
        &[("karpenter.sh/capacity-type", Operator::In, &["on-demand"])],
        "1",
    );
    assert_eq!(
        plan(&od, &t, &subnets(), &images(), &[])
            .unwrap()
            .capacity_type,
        "on-demand"
    );
    // No spot prices known: on-demand even though spot is allowed.
    let t = types(false, &|_, _, _| false);
    assert_eq!(
        plan(&any, &t, &subnets(), &images(), &[])
            .unwrap()
            .capacity_type,
        "on-demand"
    );
    // Spot everywhere exhausted: on-demand.
    let t = types(true, &|_, _, ct| ct == "spot");
    assert_eq!(
        plan(&any, &t, &subnets(), &images(), &[])
            .unwrap()
            .capacity_type,
        "on-demand"
    );
    let spot_only = claim(
        &[("karpenter.sh/capacity-type", Operator::In, &["spot"])],
        "1",
    );
    assert_eq!(
        plan(&spot_only, &t, &subnets(), &images(), &[]),
        Err(PlanError::NothingFits)
    );
}

#[test]
fn overrides_are_cheapest_first_capped_and_in_the_roomiest_subnet() {
    let t = types(true, &|_, _, _| false);
    let p = plan(&claim(&[], "1"), &t, &subnets(), &images(), &[]).unwrap();
    let all: Vec<_> = p.by_image.values().flatten().collect();
    let distinct: std::collections::BTreeSet<_> =
        all.iter().map(|o| o.instance_type.as_str()).collect();
    assert_eq!(distinct.len(), MAX_INSTANCE_TYPES);
    for o in &all {
        assert!(
            o.subnet_id == "subnet-a2" || o.subnet_id == "subnet-b",
            "{o:?}"
        );
        assert_eq!(o.subnet_id == "subnet-a2", o.zone == "us-east-1a");
    }
    for list in p.by_image.values() {
        assert!(list.windows(2).all(|w| w[0].price <= w[1].price));
    }
    // Every type kept is at most as expensive as every type dropped.
    let max_kept = all.iter().map(|o| o.price).fold(0.0, f64::max);
    let fits_cheaper_dropped = t
        .iter()
        .filter(|it| !distinct.contains(it.name.as_str()))
        .any(|it| {
            it.offerings
                .iter()
                .any(|o| o.capacity_type == "spot" && o.price < max_kept)
                && Resources::parse(&[("cpu", "1")]).fits(it.allocatable())
        });
    assert!(!fits_cheaper_dropped);
    // Both architectures, each with its AMI.
    assert!(p.by_image.keys().any(|k| k.image == "ami-amd64"));
    // One template per pod count: every override in a group has that many pods.
    for (key, list) in &p.by_image {
        let pods = &key.pods;
        for o in list {
            let it = t.iter().find(|it| it.name == o.instance_type).unwrap();
            assert_eq!(it.capacity.pods / 1000, *pods);
        }
    }
}

#[test]
fn types_no_image_boots_are_left_out() {
    let t = types(true, &|_, _, _| false);
    let amd_only = vec![image(
        "ami-amd64",
        &[("kubernetes.io/arch", Operator::In, &["amd64"])],
    )];
    let p = plan(&claim(&[], "1"), &t, &subnets(), &amd_only, &[]).unwrap();
    assert!(p.by_image.keys().all(|k| k.image == "ami-amd64"));
    let arm = claim(&[("kubernetes.io/arch", Operator::In, &["arm64"])], "1");
    let err = plan(&arm, &t, &subnets(), &amd_only, &[]);
    assert!(
        matches!(err, Err(PlanError::NoImage(ref m)) if m.ends_with("(arm64)")),
        "{err:?}"
    );
}

#[test]
fn requirements_and_requests_narrow_the_overrides() {
    let t = types(true, &|_, _, _| false);
    let c = claim(
        &[
            ("karpenter.k8s.aws/instance-family", Operator::In, &["m5"]),
            ("topology.kubernetes.io/zone", Operator::In, &["us-east-1b"]),
        ],
        "7950m",
    );
    let p = plan(&c, &t, &subnets(), &images(), &[]).unwrap();
    let all: Vec<_> = p.by_image.values().flatten().collect();
    assert!(!all.is_empty());
    for o in all {
        assert!(o.instance_type.starts_with("m5."), "{}", o.instance_type);
        assert_ne!(
            o.instance_type, "m5.2xlarge",
            "8 vCPUs leave 7910m allocatable"
        );
        assert_eq!(o.zone, "us-east-1b");
    }
    // An offering marked unavailable is skipped.
    let t = types(true, &|name, zone, ct| {
        name == "m5.4xlarge" && zone == "us-east-1b" && ct == "spot"
    });
    let p = plan(&c, &t, &subnets(), &images(), &[]).unwrap();
    assert!(
        p.by_image
            .values()
            .flatten()
            .all(|o| o.instance_type != "m5.4xlarge")
    );
}

fn reservation(id: &str, instance_type: &str, zone: &str, available: i64) -> Reservation {
    Reservation {
        id: id.into(),
        instance_type: instance_type.into(),
        zone: zone.into(),
        available,
    }
}

#[test]
fn reserved_capacity_comes_first_in_the_reservations_the_claim_allows() {
    let reservations = vec![
        reservation("cr-small", "m5.xlarge", "us-east-1a", 1),
        reservation("cr-big", "m5.xlarge", "us-east-1a", 5),
        reservation("cr-empty", "c5.xlarge", "us-east-1b", 0),
    ];
    let t = resolved_types(true, &reservations, &|_, _, _| false);
    // One reserved offering per reservation (as upstream), carrying its id, its room and
    // the label the scheduler pins NodeClaims to it with.
    let m5 = t.iter().find(|t| t.name == "m5.xlarge").unwrap();
    let reserved: Vec<_> = m5
        .offerings
        .iter()
        .filter(|o| o.capacity_type == "reserved")
        .map(|o| (o.zone.as_str(), o.available, o.reservation.clone()))
        .collect();
    let of = |id: &str, capacity| {
        Some(karpenter_core::instancetype::Reservation {
            id: id.into(),
            capacity,
            label: "karpenter.k8s.aws/capacity-reservation-id".into(),
        })
    };
    assert_eq!(
        reserved,
        [
            ("us-east-1a", true, of("cr-small", 1)),
            ("us-east-1a", true, of("cr-big", 5))
        ]
    );
    // A full reservation is listed unavailable: its nodes keep their price.
    let c5 = t.iter().find(|t| t.name == "c5.xlarge").unwrap();
    let full: Vec<_> = c5
        .offerings
        .iter()
        .filter(|o| o.capacity_type == "reserved")
        .map(|o| (o.available, o.reservation.clone()))
        .collect();
    assert_eq!(full, [(false, of("cr-empty", 0))]);
    assert!(
        m5.offerings
            .iter()
            .filter(|o| o.capacity_type != "reserved")
            .all(|o| o.reservation.is_none())
    );
    // A claim the scheduler did not pin may use either reservation: one template each.
    let p = plan(&claim(&[], "1"), &t, &subnets(), &images(), &reservations).unwrap();
    assert_eq!(p.capacity_type, "reserved");
    let keys: Vec<_> = p
        .by_image
        .keys()
        .map(|k| k.reservation.as_deref())
        .collect();
    assert_eq!(keys, [Some("cr-big"), Some("cr-small")]);
    assert!(
        p.by_image
            .values()
            .flatten()
            .all(|o| o.instance_type == "m5.xlarge" && o.zone == "us-east-1a"),
        "{:?}",
        p.by_image
    );

    // A claim that wants on-demand or spot does not use the reservation.
    let od = claim(
        &[(
            "karpenter.sh/capacity-type",
            Operator::In,
            &["spot", "on-demand"],
        )],
        "1",
    );
    assert_eq!(
        plan(&od, &t, &subnets(), &images(), &reservations)
            .unwrap()
            .capacity_type,
        "spot"
    );
    // Nor does a claim whose requests the reserved type cannot hold.
    let big = claim(&[], "8");
    assert_ne!(
        plan(&big, &t, &subnets(), &images(), &reservations)
            .unwrap()
            .capacity_type,
        "reserved"
    );
    // The scheduler's decision (or the user's): the claim names the reservations it may use.
    let pinned = claim(
        &[(
            "karpenter.k8s.aws/capacity-reservation-id",
            Operator::In,
            &["cr-small"],
        )],
        "1",
    );
    let p = plan(&pinned, &t, &subnets(), &images(), &reservations).unwrap();
    assert_eq!(
        p.by_image.keys().next().unwrap().reservation.as_deref(),
        Some("cr-small")
    );
    // An exhausted reservation offers nothing.
    let c5 = claim(
        &[(
            "node.kubernetes.io/instance-type",
            Operator::In,
            &["c5.xlarge"],
        )],
        "1",
    );
    assert_eq!(
        plan(&c5, &t, &subnets(), &images(), &reservations)
            .unwrap()
            .capacity_type,
        "spot"
    );
}

#[test]
fn gpu_types_boot_the_gpu_variant_and_cpu_types_the_standard_one() {
    let t = types(true, &|_, _, _| false);
    let variants = vec![
        image(
            "ami-nvidia",
            &[
                ("kubernetes.io/arch", Operator::In, &["amd64"]),
                (
                    "karpenter.k8s.aws/instance-gpu-manufacturer",
                    Operator::In,
                    &["nvidia"],
                ),
            ],
        ),
        image(
            "ami-standard",
            &[
                ("kubernetes.io/arch", Operator::In, &["amd64"]),
                (
                    "karpenter.k8s.aws/instance-gpu-count",
                    Operator::DoesNotExist,
                    &[],
                ),
                (
                    "karpenter.k8s.aws/instance-accelerator-count",
                    Operator::DoesNotExist,
                    &[],
                ),
            ],
        ),
    ];
    let gpu = claim(
        &[(
            "karpenter.k8s.aws/instance-family",
            Operator::In,
            &["g4dn", "g5"],
        )],
        "1",
    );
    let p = plan(&gpu, &t, &subnets(), &variants, &[]).unwrap();
    assert!(
        p.by_image.keys().all(|k| k.image == "ami-nvidia"),
        "{:?}",
        p.by_image.keys().collect::<Vec<_>>()
    );
    let cpu = claim(
        &[("karpenter.k8s.aws/instance-family", Operator::In, &["m5"])],
        "1",
    );
    let p = plan(&cpu, &t, &subnets(), &variants, &[]).unwrap();
    assert!(p.by_image.keys().all(|k| k.image == "ami-standard"));
    // A Neuron type boots neither.
    let inf = claim(
        &[("karpenter.k8s.aws/instance-family", Operator::In, &["inf2"])],
        "1",
    );
    assert!(matches!(
        plan(&inf, &t, &subnets(), &variants, &[]),
        Err(PlanError::NoImage(_))
    ));
}
