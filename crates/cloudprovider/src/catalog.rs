//! A provider's instance types as the simulator and the dry-run planner launch from them, and
//! the helpers providers build embedded catalogs with.

use std::sync::Arc;

use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL, ZONE_LABEL,
};
use karpenter_core::cloudprovider::{InstanceType, Offering};
use karpenter_core::scheduling::{Requirement, Requirements};

/// A catalog: a provider's instance types, prices and allocatable as its own formula computes
/// them, and the labels it defines.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// The catalog's name (`--catalog NAME`).
    pub name: String,
    /// Every instance type.
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Provider labels pods may require (`karpenter.k8s.aws/instance-family`, …).
    pub provider_labels: Vec<String>,
}

impl Catalog {
    /// A catalog from owned instance types.
    pub fn new(
        name: impl Into<String>,
        instance_types: impl IntoIterator<Item = InstanceType>,
        provider_labels: &[&str],
    ) -> Self {
        Self {
            name: name.into(),
            instance_types: instance_types.into_iter().map(Arc::new).collect(),
            provider_labels: provider_labels.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// The requirements of an embedded catalog's instance type: name, architecture, Linux, the
/// zones and capacity types it is offered in, and the provider's labels (`None`: the label
/// does not exist on this type, as upstream marks labels a type lacks).
pub fn requirements(
    name: &str,
    arch: &str,
    zones: &[String],
    capacity_types: &[&str],
    labels: &[(&str, Option<String>)],
) -> Requirements {
    let mut r: Requirements = [
        Requirement::new(INSTANCE_TYPE_LABEL, Operator::In, &[name]),
        Requirement::new(ARCH_LABEL, Operator::In, &[arch]),
        Requirement::new(OS_LABEL, Operator::In, &["linux"]),
        Requirement::new(ZONE_LABEL, Operator::In, zones),
        Requirement::new(CAPACITY_TYPE_LABEL, Operator::In, capacity_types),
    ]
    .into_iter()
    .collect();
    for (key, value) in labels {
        r.add(match value {
            Some(v) => Requirement::new(key, Operator::In, &[v.as_str()]),
            None => Requirement::new(key, Operator::DoesNotExist, &[] as &[&str]),
        });
    }
    r
}

/// One on-demand offering per zone at `price`: what a catalog without spot prices offers.
pub fn on_demand(zones: &[String], price: f64) -> Vec<Offering> {
    zones
        .iter()
        .map(|z| Offering {
            zone: z.clone(),
            capacity_type: "on-demand".into(),
            price,
            available: true,
            reservation: None,
        })
        .collect()
}
