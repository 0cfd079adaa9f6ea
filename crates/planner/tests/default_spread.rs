//! `plan -f --scheduler-config`: a dump's pods that declare no topology spread get the
//! cluster's default one, their selector deduced from the ReplicaSet and Service the dump
//! holds, as kube-scheduler would.

use std::path::Path;

use karpenter_cloudprovider::Catalog;
use karpenter_core::instancetype::fake;
use karpenter_core::provisioning::scheduling::default_constraints::SchedulerConfiguration;
use serde_json::json;

fn dump(pods: usize) -> String {
    let mut text = String::from(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.test.sh, kind: TestNodeClass, name: default}
      requirements: []
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-5d8f9c, namespace: default, uid: rs-uid}
spec:
  selector: {matchLabels: {app: web, pod-template-hash: 5d8f9c}}
  template: {}
"#,
    );
    for i in 0..pods {
        text.push_str(&format!(
            r#"---
apiVersion: v1
kind: Pod
metadata:
  name: web-{i}
  namespace: default
  labels: {{app: web, pod-template-hash: 5d8f9c}}
  ownerReferences:
  - {{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f9c, uid: rs-uid, controller: true}}
spec:
  containers: [{{name: web, resources: {{requests: {{cpu: 100m}}}}}}]
status:
  conditions: [{{type: PodScheduled, status: "False", reason: Unschedulable}}]
"#
        ));
    }
    text
}

fn plan(config: SchedulerConfiguration) -> karpenter_planner::Plan {
    let mut dump = karpenter_planner::Dump::read(Path::new("dump.yaml"), &dump(3)).unwrap();
    dump.scheduler_config = config;
    let catalog = Catalog::new("fake", fake::default_instance_types(), &[]);
    karpenter_planner::plan_from(&dump, &catalog, 1_736_164_800, Default::default())
}

#[test]
fn a_default_hostname_spread_gives_each_replica_its_own_node() {
    let unconfigured = plan(SchedulerConfiguration::default());
    assert_eq!(
        unconfigured.provisioning.nodeclaims.len(),
        1,
        "without defaults the three small pods share a node: {unconfigured:?}"
    );
    let config = SchedulerConfiguration::from_value(json!({"podTopologySpread": {
        "defaultConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule"}]}}))
    .unwrap();
    let spread = plan(config);
    let claims = &spread.provisioning.nodeclaims;
    assert_eq!(claims.len(), 3, "{spread:?}");
    assert!(claims.iter().all(|c| c.pods.len() == 1));
}
