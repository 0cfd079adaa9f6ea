//! Manifests written for the cloudpilot-ai provider apply unchanged: upstream's example
//! ECSNodeClass and the NodePool beside it validate, and the ECSNodeClass reads into the types
//! and writes back exactly what the API server would store (the manifest plus the CRD's
//! defaults). So does a class that sets every field.

use karpenter_alibaba::ECSNodeClass;
use karpenter_api::crd::CORE;
use serde_json::{Value, json};

/// Upstream's `examples/nodepool/ecsnodeclass.yaml` and `nodepool.yaml`, their comments left
/// out.
const UPSTREAM_EXAMPLE: &str = r#"
apiVersion: karpenter.k8s.alibabacloud/v1alpha1
kind: ECSNodeClass
metadata:
  name: defaultnodeclass
spec:
  vSwitchSelectorTerms:
    - tags:
        karpenter.sh/discovery: "cluster-demonstration"
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: "cluster-demonstration"
  systemDisk:
    categories:
      - cloud
      - cloud_efficiency
      - cloud_ssd
      - cloud_essd
      - cloud_auto
      - cloud_essd_entry
    volumeSize: 60Gi
  imageSelectorTerms:
    - alias: ContainerOS
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: ecsnodepool
spec:
  disruption:
    budgets:
      - nodes: 95%
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: kubernetes.io/os
          operator: In
          values: ["linux"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot"]
      nodeClassRef:
        group: "karpenter.k8s.alibabacloud"
        kind: ECSNodeClass
        name: defaultnodeclass
"#;

/// Every field of the spec set, and a status as upstream's controller writes one.
const EVERY_FIELD: &str = r##"
apiVersion: karpenter.k8s.alibabacloud/v1alpha1
kind: ECSNodeClass
metadata:
  name: everything
spec:
  vSwitchSelectorTerms:
    - id: vsw-bp1abc
    - tags:
        karpenter.sh/discovery: my-cluster
        zone: "*"
  vSwitchSelectionPolicy: balanced
  securityGroupSelectorTerms:
    - id: sg-bp1abc
    - name: k8s-nodes
    - tags:
        karpenter.sh/discovery: my-cluster
  imageSelectorTerms:
    - id: aliyun_3_x64_20G_alibase_20240819.vhd
    - id: m-bp1abc
  kubeletConfiguration:
    clusterDNS: ["192.168.0.10"]
    maxPods: 64
    podsPerCore: 8
    systemReserved: {cpu: 100m, memory: 200Mi, ephemeral-storage: 1Gi, pid: "1000"}
    kubeReserved: {cpu: 200m, memory: 400Mi}
    evictionHard: {memory.available: 5%, nodefs.available: 10%}
    evictionSoft: {memory.available: 10%}
    evictionSoftGracePeriod: {memory.available: 1m30s}
    evictionMaxPodGracePeriod: 120
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
    cpuCFSQuota: false
  systemDisk:
    categories: [cloud_essd, cloud_auto]
    volumeSize: 1Ti
    size: 40
    performanceLevel: PL1
  dataDisks:
    - volumeSize: 100Gi
      device: /dev/xvdb
    - volumeSize: 20Gi
  dataDiskCategories: [cloud_essd, cloud_efficiency]
  formatDataDisk: true
  tags:
    team: platform
    cost-center: ""
  resourceGroupId: rg-acfm2abc
  userData: |
    #!/bin/bash
    echo "hello" > /tmp/hello
  password: "Passw0rd!"
  keyPairName: my-key_pair
  passwordInherit: false
status:
  vSwitches:
    - id: vsw-bp1abc
      zoneID: cn-hangzhou-h
  securityGroups:
    - id: sg-bp1abc
      name: k8s-nodes
  images:
    - id: m-bp1abc
      name: ContainerOS 3.3
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: [amd64]
  conditions:
    - type: Ready
      status: "True"
      reason: Ready
      message: ""
      lastTransitionTime: "2025-01-01T00:00:00Z"
      observedGeneration: 1
"##;

fn crds() -> Vec<karpenter_api::crd::Crd> {
    CORE.iter()
        .chain(karpenter_alibaba::CRDS)
        .copied()
        .collect()
}

fn documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple(text).expect("valid YAML")
}

/// The class validates, reads into the types, and writes back what the API server stores.
fn round_trips(object: &Value) {
    let report = karpenter_api::validation::validate_object(&crds(), object).expect("a CRD kind");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let stored = kube_cel::apply_defaults(&karpenter_alibaba::ecsnodeclass::CRD.schema(), object);
    let typed: ECSNodeClass = serde_json::from_value(object.clone()).expect("reads as the type");
    let written = serde_json::to_value(&typed).unwrap();
    assert_eq!(written, stored);
    let again: ECSNodeClass = serde_json::from_value(written).unwrap();
    assert_eq!(again, typed);
}

#[test]
fn upstreams_example_applies_unchanged() {
    let docs = documents(UPSTREAM_EXAMPLE);
    assert_eq!(docs.len(), 2);
    for doc in &docs {
        let report = karpenter_api::validation::validate_object(&crds(), doc).expect("a CRD kind");
        assert!(
            report.problems.is_empty(),
            "{}: {:?}",
            report.kind,
            report.problems
        );
    }
    round_trips(&docs[0]);
    let class: ECSNodeClass = serde_json::from_value(docs[0].clone()).unwrap();
    let spec = &class.spec;
    assert_eq!(
        spec.alias().map(|a| a.to_string()).as_deref(),
        Some("ContainerOS@latest")
    );
    let disk = spec.system_disk.as_ref().unwrap();
    assert_eq!(disk.gib(), 60);
    assert_eq!(disk.performance_level, "PL0", "the CRD's default");
    // The NodePool names the class by the registration's group and kind.
    let registration = karpenter_alibaba::REGISTRATION.node_class;
    let reference = &docs[1]["spec"]["template"]["spec"]["nodeClassRef"];
    assert_eq!(reference["group"], registration.group);
    assert_eq!(reference["kind"], registration.kind);
}

#[test]
fn a_class_with_every_field_round_trips() {
    let docs = documents(EVERY_FIELD);
    round_trips(&docs[0]);
    // Nothing to default here: it is written back exactly as given.
    let typed: ECSNodeClass = serde_json::from_value(docs[0].clone()).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), docs[0]);
    let status = typed.status.as_ref().unwrap();
    assert_eq!(status.v_switches[0].zone_id, "cn-hangzhou-h");
    assert_eq!(
        status.images[0].requirements[0].values,
        Some(vec!["amd64".into()])
    );
    assert_eq!(status.conditions[0].observed_generation, Some(1));
    assert_eq!(typed.spec.tags["cost-center"], "");
    assert_eq!(
        typed
            .spec
            .kubelet_configuration
            .as_ref()
            .unwrap()
            .eviction_soft_grace_period()["memory.available"],
        std::time::Duration::from_secs(90)
    );
}

/// The type reads only what it knows; unknown fields are the schema's to refuse (as the AWS and
/// Azure classes do), which `validate` reports and an API server prunes.
#[test]
fn unknown_fields_are_refused_by_the_schema() {
    let mut object = documents(UPSTREAM_EXAMPLE).remove(0);
    object["spec"]["instanceTypes"] = json!(["ecs.g7.large"]);
    object["spec"]["systemDisk"]["encrypted"] = json!(true);
    let report = karpenter_api::validation::validate_object(&crds(), &object).unwrap();
    let mut paths: Vec<&str> = report.problems.iter().map(|p| p.path.as_str()).collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        ["spec.instanceTypes", "spec.systemDisk.encrypted"],
        "{:?}",
        report.problems
    );
    assert!(report.problems.iter().all(|p| p.message == "unknown field"));
}
