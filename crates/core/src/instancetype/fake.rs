//! The instance types of upstream's fake cloud provider, which its unit tests and scheduling
//! benchmark use: type `i` has `i+1` vCPUs, `2(i+1)` GiB, `10(i+1)` pods and five offerings.

use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL, ZONE_LABEL,
};

use super::{InstanceType, Offering, Overhead};
use crate::resources::Resources;
use crate::scheduling::{Requirement, Requirements};

/// The label the fake types use for their size class (`small` up to 4 vCPU, else `large`).
pub const SIZE_LABEL: &str = "size";
/// A label only large fake types define.
pub const SPECIAL_LABEL: &str = "special";
/// A label holding the vCPU count, for numeric requirements.
pub const INTEGER_LABEL: &str = "integer";

/// The fake provider's own well-known labels.
pub const PROVIDER_LABELS: [&str; 3] = [SIZE_LABEL, SPECIAL_LABEL, INTEGER_LABEL];

/// The resource names of the fake GPUs.
pub const GPU_VENDOR_A: &str = "fake.com/vendor-a";
/// The second fake GPU vendor.
pub const GPU_VENDOR_B: &str = "fake.com/vendor-b";

/// The fake provider's labels as the scheduler option wants them.
pub fn provider_labels() -> Vec<String> {
    PROVIDER_LABELS.iter().map(|s| s.to_string()).collect()
}

/// Upstream's price for a shape: 0.1 per vCPU, 0.1 per GB of memory, 1.0 per fake GPU kind.
pub fn price_from_resources(resources: &Resources) -> f64 {
    let gpus = [GPU_VENDOR_A, GPU_VENDOR_B]
        .iter()
        .filter(|g| resources.get(g) != 0)
        .count() as f64;
    0.1 * (resources.cpu as f64 / 1000.0) + 0.1 * (resources.memory as f64 / 1000.0) / 1e9 + gpus
}

/// A fake instance type, with upstream's defaults: 4 vCPU, 4 GiB, 5 pods, amd64, Linux,
/// Windows and Darwin, and five offerings (spot in zones 1–2, on-demand in zones 1–3) priced
/// by [`price_from_resources`].
#[derive(Clone, Debug)]
pub struct FakeInstanceType {
    /// The name.
    pub name: String,
    /// Resources; cpu, memory and pods default when zero.
    pub resources: Resources,
    /// The architecture.
    pub arch: String,
    /// The operating systems.
    pub operating_systems: Vec<String>,
    /// Offerings; the default five when empty.
    pub offerings: Vec<Offering>,
}

impl FakeInstanceType {
    /// A type named `name` with the defaults.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            resources: Resources::new(),
            arch: "amd64".into(),
            operating_systems: vec!["darwin".into(), "linux".into(), "windows".into()],
            offerings: Vec::new(),
        }
    }

    /// Sets resources (parsed quantities).
    pub fn resources(mut self, pairs: &[(&str, &str)]) -> Self {
        self.resources = Resources::parse(pairs);
        self
    }

    /// Sets the architecture.
    pub fn arch(mut self, arch: &str) -> Self {
        self.arch = arch.into();
        self
    }

    /// Sets the operating systems.
    pub fn operating_systems(mut self, os: &[&str]) -> Self {
        self.operating_systems = os.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Sets the offerings as `(capacity type, zone, price)`; availability defaults to true.
    pub fn offerings(mut self, offerings: &[(&str, &str, f64)]) -> Self {
        self.offerings = offerings
            .iter()
            .map(|(ct, zone, price)| Offering {
                zone: zone.to_string(),
                capacity_type: ct.to_string(),
                price: *price,
                available: true,
                reservation: None,
            })
            .collect();
        self
    }

    /// Builds it.
    pub fn build(self) -> InstanceType {
        let mut resources = self.resources;
        for (name, default) in [
            ("cpu", 4000),
            ("memory", (4i64 << 30) * 1000),
            ("pods", 5000),
        ] {
            if resources.get(name) == 0 {
                resources.set(name, default);
            }
        }
        let price = price_from_resources(&resources);
        let offerings = if self.offerings.is_empty() {
            [
                ("spot", "test-zone-1"),
                ("spot", "test-zone-2"),
                ("on-demand", "test-zone-1"),
                ("on-demand", "test-zone-2"),
                ("on-demand", "test-zone-3"),
            ]
            .into_iter()
            .map(|(ct, zone)| Offering {
                zone: zone.into(),
                capacity_type: ct.into(),
                price,
                available: true,
                reservation: None,
            })
            .collect()
        } else {
            self.offerings
        };
        let available: Vec<&Offering> = offerings.iter().filter(|o| o.available).collect();
        let zones: Vec<&str> = available.iter().map(|o| o.zone.as_str()).collect();
        let capacity_types: Vec<&str> =
            available.iter().map(|o| o.capacity_type.as_str()).collect();
        let large = resources.cpu > 4000 && resources.memory > (8i64 << 30) * 1000;
        let mut requirements: Requirements = [
            Requirement::new(INSTANCE_TYPE_LABEL, Operator::In, &[self.name.as_str()]),
            Requirement::new(ARCH_LABEL, Operator::In, &[self.arch.as_str()]),
            Requirement::new(OS_LABEL, Operator::In, &self.operating_systems),
            Requirement::new(ZONE_LABEL, Operator::In, &zones),
            Requirement::new(CAPACITY_TYPE_LABEL, Operator::In, &capacity_types),
            Requirement::new(
                SIZE_LABEL,
                Operator::In,
                &[if large { "large" } else { "small" }],
            ),
            Requirement::new(
                INTEGER_LABEL,
                Operator::In,
                &[(resources.cpu / 1000).to_string()],
            ),
        ]
        .into_iter()
        .collect();
        requirements.add(if large {
            Requirement::new(SPECIAL_LABEL, Operator::In, &["optional"])
        } else {
            Requirement::new::<&str>(SPECIAL_LABEL, Operator::DoesNotExist, &[])
        });
        let overhead = Overhead {
            kube_reserved: Resources::parse(&[("cpu", "100m"), ("memory", "10Mi")]),
            ..Default::default()
        };
        InstanceType::new(self.name, requirements, offerings, resources, overhead)
    }
}

/// `n` fake instance types named `fake-it-0` … as upstream's `fake.InstanceTypes(n)`: type `i`
/// has `i+1` vCPUs, `2(i+1)` GiB and `10(i+1)` pods.
pub fn instance_types(n: usize) -> Vec<InstanceType> {
    (1..=n as i64)
        .map(|k| {
            FakeInstanceType::new(&format!("fake-it-{}", k - 1))
                .resources(&[
                    ("cpu", &k.to_string()),
                    ("memory", &format!("{}Gi", 2 * k)),
                    ("pods", &(10 * k).to_string()),
                ])
                .build()
        })
        .collect()
}

/// The fake provider's catalog when a test sets none (upstream's `GetInstanceTypes` default).
pub fn default_instance_types() -> Vec<InstanceType> {
    vec![
        FakeInstanceType::new("default-instance-type").build(),
        FakeInstanceType::new("small-instance-type")
            .resources(&[("cpu", "2"), ("memory", "2Gi")])
            .build(),
        FakeInstanceType::new("gpu-vendor-instance-type")
            .resources(&[(GPU_VENDOR_A, "2")])
            .build(),
        FakeInstanceType::new("gpu-vendor-b-instance-type")
            .resources(&[(GPU_VENDOR_B, "2")])
            .build(),
        FakeInstanceType::new("arm-instance-type")
            .arch("arm64")
            .operating_systems(&["ios", "linux", "windows", "darwin"])
            .resources(&[("cpu", "16"), ("memory", "128Gi")])
            .build(),
        FakeInstanceType::new("single-pod-instance-type")
            .resources(&[("pods", "1")])
            .build(),
    ]
}

/// Every combination of 1–64 vCPU, 1–128 GiB, three zones, two capacity types, two operating
/// systems and two architectures, one offering each (upstream's `InstanceTypesAssorted`).
pub fn instance_types_assorted() -> Vec<InstanceType> {
    let mut out = Vec::new();
    for cpu in [1, 2, 4, 8, 16, 32, 64] {
        for mem in [1, 2, 4, 8, 16, 32, 64, 128] {
            for zone in ["test-zone-1", "test-zone-2", "test-zone-3"] {
                for ct in ["spot", "on-demand"] {
                    for os in ["linux", "windows"] {
                        for arch in ["amd64", "arm64"] {
                            let resources =
                                [("cpu", cpu.to_string()), ("memory", format!("{mem}Gi"))];
                            let pairs: Vec<(&str, &str)> =
                                resources.iter().map(|(n, v)| (*n, v.as_str())).collect();
                            let price = price_from_resources(&Resources::parse(&pairs));
                            out.push(
                                FakeInstanceType::new(&format!(
                                    "{cpu}-cpu-{mem}-mem-{arch}-{os}-{zone}-{ct}"
                                ))
                                .arch(arch)
                                .operating_systems(&[os])
                                .resources(&pairs)
                                .offerings(&[(ct, zone, price)])
                                .build(),
                            );
                        }
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_upstreams_catalog() {
        let types = instance_types(400);
        assert_eq!(types.len(), 400);
        let first = &types[0];
        assert_eq!(first.name, "fake-it-0");
        assert_eq!(first.allocatable().cpu, 900);
        assert_eq!(first.allocatable().memory, 2038 * (1 << 20) * 1000);
        assert!((first.offerings[0].price - 0.3147483648).abs() < 1e-12);
        assert!((types[399].offerings[0].price - 125.89934592).abs() < 1e-9);
        assert!(types[4].requirements.allows(SIZE_LABEL, "large"));
        assert!(!types[3].requirements.allows(SPECIAL_LABEL, "optional"));
        let zone3 =
            Requirements::from_iter([Requirement::new(ZONE_LABEL, Operator::In, &["test-zone-3"])]);
        assert!(
            first
                .compatible_offerings(&zone3)
                .all(|o| o.capacity_type == "on-demand"),
            "no spot in zone 3"
        );
    }
}
