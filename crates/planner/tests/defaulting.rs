//! Hand-written manifests are planned as the API server would store them: a pod that gives only
//! limits (the usual way to ask for a GPU) requests what it limits.

use std::path::Path;

use karpenter_cloudprovider::Catalog;
use karpenter_core::instancetype::fake;

const MANIFEST: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.test.sh, kind: TestNodeClass, name: default}
      requirements: []
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml}
spec:
  containers:
    - name: train
      resources:
        limits: {fake.com/vendor-a: "1", cpu: "1"}
status:
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
"#;

#[test]
fn a_pod_with_limits_only_gets_a_node_that_has_them() {
    let catalog = Catalog::new("fake", fake::default_instance_types(), &[]);
    let plan = karpenter_planner::plan(
        Path::new("gpu.yaml"),
        MANIFEST,
        &catalog,
        1_736_164_800,
        Default::default(),
    )
    .unwrap();
    let claims = &plan.provisioning.nodeclaims;
    assert_eq!(claims.len(), 1, "{plan:?}");
    assert_eq!(
        claims[0].instance_types,
        ["gpu-vendor-instance-type"],
        "only the type with vendor-a GPUs"
    );
    // Without defaulting the pod would ask for nothing and fit the cheapest type.
    let requests_only = MANIFEST.replace("limits:", "requests:");
    let plan = karpenter_planner::plan(
        Path::new("gpu.yaml"),
        &requests_only,
        &catalog,
        1_736_164_800,
        Default::default(),
    )
    .unwrap();
    assert_eq!(
        plan.provisioning.nodeclaims[0].instance_types,
        claims[0].instance_types
    );
}
