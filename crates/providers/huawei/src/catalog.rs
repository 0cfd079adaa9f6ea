//! The `huawei` catalog: a few dozen ECS flavors CCE users run (c7, c9, m7, ac7 and the Kunpeng
//! kc1) in cn-north-4, built by the provider's own [`instancetype::instance_types`] with a
//! default CCENodeClass — CCE's kube- and system-reserved memory and CPU, the kubelet's
//! eviction thresholds, the ephemeral storage of a 100 GiB k8s data disk, pods by the memory
//! tier (the data states no supplementary-NIC quota), the `karpenter.k8s.huawei/instance-*`
//! labels. Every flavor is offered on demand in every zone the data lists, at the embedded
//! price in CNY; those prices are estimates, not Huawei list prices (`data/README.md` says how
//! each was derived).

use karpenter_api::labels::ARCH_ARM64;
use karpenter_cloudprovider::Catalog;

use crate::instancetype::{self, Flavor, FlavorExtraSpec, InstanceTypeOptions};
pub use crate::instancetype::{
    LABELS, default_max_pods_by_memory, kube_reserved_cpu_milli, kube_reserved_memory_mib,
    system_reserved_memory_mib,
};
use crate::pricing::{self, PriceTable};

/// The catalog's region (the embedded data's).
pub const REGION: &str = pricing::EMBEDDED_REGION;

/// The embedded flavors as `ListFlavors` would describe them, and the zones they sell in.
pub fn embedded_flavors() -> (Vec<Flavor>, Vec<String>) {
    let data = pricing::embedded_data();
    let flavors = data
        .flavors
        .into_iter()
        .map(|f| Flavor {
            id: f.name.clone(),
            name: f.name,
            vcpus: f.vcpus.to_string(),
            ram: f.ram_mib,
            os_extra_specs: Some(FlavorExtraSpec {
                // ECS names Kunpeng flavors' architecture as Kubernetes does (`arm64`).
                ecs_instance_architecture: (f.architecture == ARCH_ARM64)
                    .then(|| ARCH_ARM64.to_string()),
                ..Default::default()
            }),
        })
        .collect();
    (flavors, data.zones)
}

/// The `huawei` catalog (prices in CNY per hour): the embedded flavors built as the provider
/// builds instance types, with a default CCENodeClass.
pub fn catalog() -> Catalog {
    let (flavors, zones) = embedded_flavors();
    let types = instancetype::instance_types(
        &flavors,
        &zones,
        &InstanceTypeOptions::new(REGION),
        &PriceTable::embedded(REGION),
        &|_, _, _| false,
    )
    .expect("the embedded Huawei Cloud catalog has flavors");
    Catalog::new("huawei", types, &LABELS).with_currency("CNY")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use karpenter_api::labels::{ARCH_LABEL, ZONE_LABEL};
    use karpenter_core::instancetype::InstanceType;

    use super::*;

    const MI: i64 = (1 << 20) * 1000;

    fn find(catalog: &Catalog, name: &str) -> Arc<InstanceType> {
        catalog
            .instance_types
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} is in the catalog"))
            .clone()
    }

    #[test]
    fn the_catalog_holds_the_embedded_flavors_in_every_zone() {
        let catalog = catalog();
        assert_eq!(catalog.name, "huawei");
        assert_eq!(catalog.instance_types.len(), 33);
        assert_eq!(catalog.provider_labels.len(), LABELS.len());
        for t in &catalog.instance_types {
            let zones: Vec<&str> = t.offerings.iter().map(|o| o.zone.as_str()).collect();
            assert_eq!(
                zones,
                ["cn-north-4a", "cn-north-4b", "cn-north-4c", "cn-north-4g"],
                "{}",
                t.name
            );
            assert!(t.offerings.iter().all(|o| o.capacity_type == "on-demand"));
            assert!(
                t.offerings.iter().all(|o| o.price > 0.0 && o.price < 100.0),
                "{} is priced from the table, not at the missing price",
                t.name
            );
            assert!(t.requirements.allows(ZONE_LABEL, "cn-north-4g"));
        }
    }

    /// Hand-computed allocatable of a default CCENodeClass (containerd, 100 GiB k8s disk):
    ///
    /// * c7.large.2 (2 vCPUs, 4096 MiB): 20 pods (memory tier); CPU 2000m − (60 + 10)m;
    ///   memory 4096 − 600 (500 + 5 × 20) − 500 (400 + 4096 × 25 / 1024) − 100 = 2896 MiB.
    /// * c9.4xlarge.4 (16 vCPUs, 65536 MiB): 110 pods; CPU 16000m − (60 + 10 + 10 + 30)m;
    ///   memory 65536 − 1050 (500 + 5 × 110) − 2000 (400 + 1600) − 100 = 62386 MiB.
    /// * m7.2xlarge.8 (8 vCPUs, 65536 MiB): CPU 8000m − (60 + 10 + 10 + 10)m, memory as above.
    #[test]
    fn flavors_get_cces_allocatable() {
        let catalog = catalog();
        // (flavor, pods, allocatable CPU m, allocatable memory MiB, price)
        let cases = [
            ("c7.large.2", 20, 1930, 2896, 0.407698),
            ("c9.4xlarge.4", 110, 15_890, 62_386, 4.186),
            ("m7.2xlarge.8", 110, 7910, 62_386, 2.784885),
            ("kc1.large.2", 20, 1930, 2896, 0.266933),
        ];
        for (name, pods, cpu, memory, price) in cases {
            let t = find(&catalog, name);
            let allocatable = t.allocatable();
            assert_eq!(allocatable.pods, pods * 1000, "{name} pods");
            assert_eq!(allocatable.cpu, cpu, "{name} cpu");
            assert_eq!(allocatable.memory, memory * MI, "{name} memory");
            // The k8s disk's kubernetes LV less the 10% nodefs threshold (upstream's figure).
            assert_eq!(
                allocatable.ephemeral_storage, 9_413_845_387_000,
                "{name} storage"
            );
            assert_eq!(t.offerings[0].price, price, "{name} price");
        }
        assert!(
            find(&catalog, "kc1.large.2")
                .requirements
                .allows(ARCH_LABEL, "arm64")
        );
        assert!(
            find(&catalog, "c7.large.2")
                .requirements
                .allows(ARCH_LABEL, "amd64")
        );
        assert!(
            find(&catalog, "c9.large.4")
                .requirements
                .allows("karpenter.k8s.huawei/instance-memory", "8192")
        );
    }
}
