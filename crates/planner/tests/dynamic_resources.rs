//! `plan -f --ignore-dra-requests=false`: a dump's ResourceClaims, DeviceClasses and
//! ResourceSlices are read, and pods' claims are allocated by the round's own code.

use std::path::Path;

use karpenter_cloudprovider::Catalog;
use karpenter_core::instancetype::fake;

const DUMP: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.test.sh, kind: TestNodeClass, name: default}
      requirements: []
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: shared}
spec:
  driver: gpu.example.com
  allNodes: true
  pool: {name: shared, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceSlice
metadata: {name: beta}
spec:
  driver: gpu.example.com
  allNodes: true
  pool: {name: beta, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-1, basic: {}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one, namespace: default}
spec:
  devices:
    requests: [{name: req, exactly: {deviceClassName: gpu}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two, namespace: default}
spec:
  devices:
    requests: [{name: req, exactly: {deviceClassName: gpu}}]
"#;

fn pod(name: &str, claim: &str) -> String {
    format!(
        r#"---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, uid: {name}-uid}}
spec:
  resourceClaims: [{{name: gpu, resourceClaimName: {claim}}}]
  containers: [{{name: app, resources: {{claims: [{{name: gpu}}]}}}}]
status:
  conditions: [{{type: PodScheduled, status: "False", reason: Unschedulable}}]
"#
    )
}

fn plan(ignore_dra_requests: bool) -> karpenter_planner::Plan {
    let text = format!("{DUMP}{}{}", pod("a", "one"), pod("b", "two"));
    let mut dump = karpenter_planner::Dump::read(Path::new("dump.yaml"), &text).unwrap();
    dump.ignore_dra_requests = ignore_dra_requests;
    let catalog = Catalog::new("fake", fake::default_instance_types(), &[]);
    karpenter_planner::plan_from(&dump, &catalog, 1_736_164_800, Default::default())
}

#[test]
fn claims_are_allocated_against_the_dumps_devices_when_asked() {
    let ignored = plan(true);
    assert!(ignored.provisioning.nodeclaims.is_empty());
    assert_eq!(ignored.provisioning.unschedulable.len(), 2, "{ignored:?}");
    let simulated = plan(false);
    // One GPU in the cluster (the v1beta1 slice is not read): one pod gets it.
    assert_eq!(simulated.provisioning.nodeclaims.len(), 1, "{simulated:?}");
    assert_eq!(
        simulated.provisioning.unschedulable.len(),
        1,
        "{simulated:?}"
    );
}
