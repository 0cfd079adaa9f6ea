//! Instance-type catalogs the simulator can launch from.

mod clouds;

use std::sync::Arc;

use karpenter_core::cloudprovider::InstanceType;
pub use karpenter_core::cloudprovider::kwok::{KWOK_LABELS, instance_types as kwok};

/// The catalogs built in.
pub const CATALOGS: [&str; 4] = ["kwok", "aws", "azure", "alibaba"];

/// A catalog: its instance types and the labels its provider defines.
#[derive(Clone, Debug)]
pub struct Catalog {
    /// The catalog's name.
    pub name: String,
    /// Every instance type.
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Provider labels pods may require.
    pub provider_labels: Vec<String>,
}

/// Why a catalog is not available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown catalog {0:?}; available: {list}", list = CATALOGS.join(", "))]
pub struct UnknownCatalog(pub String);

/// Loads a built-in catalog by name.
pub fn load(name: &str) -> Result<Catalog, UnknownCatalog> {
    match name {
        "kwok" => Ok(catalog(name, kwok(), &KWOK_LABELS)),
        "aws" => Ok(catalog(name, clouds::aws(), &clouds::AWS_LABELS)),
        "azure" => Ok(catalog(name, clouds::azure(), &clouds::AZURE_LABELS)),
        "alibaba" => Ok(catalog(name, clouds::alibaba(), &clouds::ALIBABA_LABELS)),
        other => Err(UnknownCatalog(other.into())),
    }
}

fn catalog(name: &str, types: Vec<InstanceType>, labels: &[&str]) -> Catalog {
    Catalog {
        name: name.into(),
        instance_types: types.into_iter().map(Arc::new).collect(),
        provider_labels: labels.iter().map(|s| s.to_string()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_catalogs_are_refused() {
        assert!(load("nope").is_err());
        assert_eq!(load("kwok").unwrap().instance_types.len(), 144);
    }
}
