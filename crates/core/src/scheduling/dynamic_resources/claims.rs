//! Which ResourceClaims a pod uses: named directly, or generated from a template and named in
//! the pod's status once kube-controller-manager made them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PodResourceClaimStatus, PodSpec};
use karpenter_api::dra::ResourceClaim;

use super::DeviceInventory;

/// A pod's reference to a claim, as scheduling resolves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimReference {
    /// The claim `namespace/name`.
    Claim(String),
    /// A template reference whose claim was not needed (the pod's status names none): nothing
    /// to allocate.
    NotNeeded,
}

/// The claims of a pod in `namespace`, in the order of its `spec.resourceClaims`.
pub fn claim_references(
    namespace: &str,
    spec: Option<&PodSpec>,
    statuses: &[PodResourceClaimStatus],
) -> Vec<ClaimReference> {
    let Some(refs) = spec.and_then(|s| s.resource_claims.as_ref()) else {
        return Vec::new();
    };
    refs.iter()
        .map(|r| {
            let name = r.resource_claim_name.clone().or_else(|| {
                statuses
                    .iter()
                    .find(|s| s.name == r.name)
                    .and_then(|s| s.resource_claim_name.clone())
            });
            match name {
                Some(name) => ClaimReference::Claim(format!("{namespace}/{name}")),
                None => ClaimReference::NotNeeded,
            }
        })
        .collect()
}

/// The claims `references` name, or why one cannot be read (upstream's message).
pub fn resolve_claims(
    inventory: &DeviceInventory,
    references: &[ClaimReference],
) -> Result<Vec<Arc<ResourceClaim>>, String> {
    references
        .iter()
        .filter_map(|r| match r {
            ClaimReference::Claim(key) => Some(key),
            ClaimReference::NotNeeded => None,
        })
        .map(|key| {
            inventory
                .claims
                .get(key)
                .cloned()
                .ok_or_else(|| format!("resourceclaim {key:?} not found"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(reference: serde_json::Value) -> PodSpec {
        serde_json::from_value(json!({"containers": [], "resourceClaims": [reference]})).unwrap()
    }

    fn status(name: &str, claim: Option<&str>) -> PodResourceClaimStatus {
        PodResourceClaimStatus {
            name: name.into(),
            resource_claim_name: claim.map(str::to_string),
        }
    }

    // Upstream's scheduling/dra_internal_test.go › resourceClaimName.
    #[test]
    fn a_reference_resolves_as_upstream() {
        let direct = spec(json!({"name": "ref", "resourceClaimName": "claim-a"}));
        let template = spec(json!({"name": "ref", "resourceClaimTemplateName": "t"}));
        let cases: [(&str, &PodSpec, Vec<PodResourceClaimStatus>, ClaimReference); 4] = [
            (
                "a direct ResourceClaimName",
                &direct,
                vec![],
                ClaimReference::Claim("ns/claim-a".into()),
            ),
            (
                "a template's generated name from pod status",
                &template,
                vec![status("ref", Some("generated-a"))],
                ClaimReference::Claim("ns/generated-a".into()),
            ),
            (
                "a template whose generated name is nil",
                &template,
                vec![status("ref", None)],
                ClaimReference::NotNeeded,
            ),
            (
                "no matching status entry",
                &template,
                vec![status("other", Some("x"))],
                ClaimReference::NotNeeded,
            ),
        ];
        for (case, spec, statuses, expected) in cases {
            assert_eq!(
                claim_references("ns", Some(spec), &statuses),
                vec![expected],
                "{case}"
            );
        }
    }

    #[test]
    fn a_missing_claim_is_named() {
        let inventory = DeviceInventory::default();
        let err = resolve_claims(&inventory, &[ClaimReference::Claim("default/late".into())]);
        assert_eq!(err.unwrap_err(), "resourceclaim \"default/late\" not found");
        assert!(
            resolve_claims(&inventory, &[ClaimReference::NotNeeded])
                .unwrap()
                .is_empty()
        );
    }
}
