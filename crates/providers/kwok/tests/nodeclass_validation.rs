//! KWOKNodeClass manifests as `karpenter-rs validate` judges them.

use karpenter_api::crd::CORE;
use karpenter_api::validation::table::{Expect::*, failures};
use serde_json::json;

#[test]
fn kwok_nodeclass_cases() {
    let cases = vec![
        // KWOKNodeClass.
        (
            "kwok nodeclass",
            json!({"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}, "spec": {"nodeRegistrationDelay": "30s"}}),
            Valid,
        ),
        (
            "kwok nodeclass without spec",
            json!({"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}),
            Valid,
        ),
        (
            "kwok nodeclass bad delay",
            json!({"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}, "spec": {"nodeRegistrationDelay": "soon"}}),
            Rejected("spec.nodeRegistrationDelay", "duration"),
        ),
    ];
    let crds: Vec<_> = CORE.iter().chain(karpenter_kwok::CRDS).copied().collect();
    let failures = failures(&crds, cases);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
