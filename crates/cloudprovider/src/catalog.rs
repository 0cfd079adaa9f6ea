//! A provider's instance types as the simulator and the dry-run planner launch from them.

use std::sync::Arc;

use karpenter_core::cloudprovider::InstanceType;

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
