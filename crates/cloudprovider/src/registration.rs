//! What a provider crate declares about itself, without any cloud code: the registry in the
//! binary collects one [`Registration`] per provider and derives from them the CRDs it
//! prints, the kinds `validate` and `convert` know, and the catalogs `simulate` and `plan`
//! launch from.

use karpenter_api::convert::{Conversion, ConvertError};
use karpenter_api::crd::{Crd, GroupKind};
use serde_json::Value;

use crate::catalog::Catalog;

/// Converts a provider's older NodeClass version to the one served now (upstream's
/// conversion webhook, done offline by `karpenter-rs convert`).
#[derive(Clone, Copy, Debug)]
pub struct NodeClassConversion {
    /// The `apiVersion` converted from (`karpenter.k8s.aws/v1beta1`).
    pub from_api_version: &'static str,
    /// The kind converted.
    pub kind: &'static str,
    /// The conversion.
    pub convert: fn(&Value) -> Result<Conversion, ConvertError>,
}

/// One provider, as its crate's pure part declares it.
#[derive(Clone, Copy, Debug)]
pub struct Registration {
    /// The provider's name: `--cloud-provider NAME` and `--catalog NAME`.
    pub name: &'static str,
    /// The NodeClass a NodePool of this provider names (its group is also the domain of the
    /// provider's labels, which `convert` infers the provider from).
    pub node_class: GroupKind,
    /// The NodeClass CRDs this binary ships for the provider (empty until the provider's
    /// NodeClass is implemented).
    pub crds: &'static [Crd],
    /// Conversions of the provider's older NodeClass versions.
    pub conversions: &'static [NodeClassConversion],
    /// The provider's instance types for the simulator and the planner.
    pub catalog: Option<fn() -> Catalog>,
    /// Its static NodeClass drift: the reason a NodeClaim has drifted from a NodeClass of the
    /// provider's kind, written as JSON, by the hash the claim recorded at launch (what its
    /// `is_drifted` checks first) — what `plan --nodepools` asks of a proposed NodeClass.
    /// `None` for a NodeClass without a static hash.
    pub static_drift: Option<fn(&Value, &karpenter_api::NodeClaim) -> Option<&'static str>>,
}
