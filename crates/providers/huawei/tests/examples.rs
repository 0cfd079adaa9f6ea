//! Manifests written for huaweicloud-samples' provider apply unchanged: its sample
//! CCENodeClass and the walkthrough's class and NodePool (`examples/`) validate, read into the
//! types, write back exactly what the API server stores, and pass the checks made before a
//! node is created. So does a class that sets every field, with a status.

use karpenter_api::crd::{CORE, Crd};
use karpenter_huawei::CCENodeClass;
use karpenter_huawei::ccenodeclass::{BlockDevice, CRD, LoginMethod, Reserved};
use serde_json::{Value, json};

const UPSTREAM_SAMPLE: &str = include_str!("../examples/ccenodeclass.yaml");
const WALKTHROUGH: &str = include_str!("../examples/cce-elastic-cpu.yaml");

/// Every field of the spec set, and a status as upstream's controller writes one.
const EVERY_FIELD: &str = r#"
apiVersion: karpenter.k8s.huawei/v1alpha1
kind: CCENodeClass
metadata:
  name: everything
spec:
  subnetSelectorTerms:
    - id: 123e4567-e89b-12d3-a456-426614174000
    - name: subnet-b
    - id: 223e4567-e89b-12d3-a456-426614174000
      name: subnet-c
  kubelet:
    maxPods: 128
    kubeReserved: {cpu: 200m, memory: 512Mi, ephemeral-storage: 2Gi, pid: "1000"}
    systemReserved: {cpu: "0.5", memory: 1.5Gi}
  ecsGroupId: 46ebaf04-ca42-48ca-8057-0b96e6126e1b
  imsSelector:
    imsFamily: Ubuntu 22.04
  blockDeviceMappings:
    k8s: {volumeSize: 200, volumeType: ESSD2, iops: 5000}
    root: {volumeSize: 60, volumeType: GPSSD2, iops: 3000, throughput: 125}
    users:
      - {volumeSize: 500, volumeType: SAS}
  runtimeConfiguration:
    type: docker
  login:
    sshKey: cluster-keypair
status:
  subnets:
    - id: 123e4567-e89b-12d3-a456-426614174000
    - id: 9f0c1d7e-5a4b-4c3d-8e2f-1a2b3c4d5e6f
  conditions:
    - type: SubnetsReady
      status: "True"
      reason: SubnetsReady
      message: ""
      lastTransitionTime: "2025-01-01T00:00:00Z"
      observedGeneration: 2
"#;

fn crds() -> Vec<Crd> {
    CORE.iter().copied().chain([CRD]).collect()
}

fn documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple(text).expect("valid YAML")
}

/// The object validates, reads into the types, writes back what the API server stores (the
/// CRD defaults nothing, so exactly the manifest), and passes the create-time checks.
fn applies(object: &Value) -> CCENodeClass {
    let report = karpenter_api::validation::validate_object(&crds(), object).expect("a CRD kind");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let stored = kube_cel::apply_defaults(&CRD.schema(), object);
    let typed: CCENodeClass = serde_json::from_value(object.clone()).expect("reads as the type");
    let written = serde_json::to_value(&typed).unwrap();
    assert_eq!(written, stored);
    assert_eq!(&written, object);
    let again: CCENodeClass = serde_json::from_value(written).unwrap();
    assert_eq!(again, typed);
    assert_eq!(typed.spec.validate_for_create(), Ok(()));
    typed
}

fn disk(size: i32, kind: &str) -> BlockDevice {
    BlockDevice {
        volume_size: size,
        volume_type: kind.into(),
        ..Default::default()
    }
}

#[test]
fn upstreams_sample_applies_unchanged() {
    let docs = documents(UPSTREAM_SAMPLE);
    assert_eq!(docs.len(), 1);
    let class = applies(&docs[0]);
    let spec = &class.spec;
    assert_eq!(
        class.metadata.labels.as_ref().unwrap()["app.kubernetes.io/name"],
        "karpenter-provider-huawei"
    );
    assert_eq!(spec.ims_selector.ims_family, "HCE OS 2.0");
    assert_eq!(
        spec.login.method(),
        Some(LoginMethod::SshKey("<existing-keypair-name>"))
    );
    assert_eq!(spec.runtime(), Some("containerd"));
    let disks = &spec.block_device_mappings;
    assert_eq!(disks.root, disk(120, "SATA"));
    assert_eq!(disks.k8s_or_default(), disk(120, "SAS"));
    assert_eq!(disks.users, [disk(100, "SAS"), disk(100, "SATA")]);
    assert_eq!(spec.ecs_group_id(), None);
    assert!(spec.kubelet.is_none());
}

#[test]
fn the_walkthroughs_class_and_node_pool_apply_unchanged() {
    let docs = documents(WALKTHROUGH);
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
    let class = applies(&docs[0]);
    let spec = &class.spec;
    assert_eq!(
        spec.subnet_selector_terms[0].id.as_deref(),
        Some("30abcb7b-ddeb-4a93-9e83-0b21f59b07a3")
    );
    assert_eq!(spec.ims_selector.ims_family, "Huawei Cloud EulerOS 2.0");
    let disks = &spec.block_device_mappings;
    assert_eq!(disks.root, disk(40, "SSD"));
    assert_eq!(disks.k8s_or_default(), disk(100, "SSD"));
    assert_eq!(
        spec.login.method(),
        Some(LoginMethod::Password {
            username: "root",
            password: "<salted-and-encrypted-password>"
        })
    );
    assert_eq!(spec.runtime(), Some("containerd"));
    // The walkthrough spells out what CCE would do anyway; left out, the node is the same and
    // so is the hash: the k8s disk aside, which upstream hashes as written.
    let mut spare = docs[0].clone();
    let fields = spare["spec"].as_object_mut().unwrap();
    fields.remove("runtimeConfiguration");
    fields["login"]["userPassword"]
        .as_object_mut()
        .unwrap()
        .remove("username");
    let spare = applies(&spare);
    assert_eq!(spare.hash(), class.hash());
    assert_eq!(
        spare.spec.block_device_mappings.k8s_or_default(),
        disk(100, "SSD")
    );
    // The NodePool names the class by the CRD's group and kind.
    let reference = &docs[1]["spec"]["template"]["spec"]["nodeClassRef"];
    assert_eq!(reference["group"], CRD.group());
    assert_eq!(reference["kind"], CRD.kind());
    assert_eq!(reference["name"], docs[0]["metadata"]["name"]);
}

#[test]
fn a_class_with_every_field_round_trips() {
    let docs = documents(EVERY_FIELD);
    let class = applies(&docs[0]);
    let spec = &class.spec;
    assert_eq!(
        spec.subnet_selector_terms[2].name.as_deref(),
        Some("subnet-c")
    );
    assert_eq!(
        spec.ecs_group_id(),
        Some("46ebaf04-ca42-48ca-8057-0b96e6126e1b")
    );
    assert_eq!(spec.runtime(), Some("docker"));
    let disks = &spec.block_device_mappings;
    assert_eq!(
        (disks.root.iops, disks.root.throughput),
        (Some(3000), Some(125))
    );
    assert_eq!(disks.k8s_or_default().iops, Some(5000));
    let kubelet = spec.kubelet.as_ref().unwrap();
    assert_eq!(kubelet.max_pods, Some(128));
    assert_eq!(
        kubelet.reserved().unwrap(),
        (
            Reserved {
                cpu_milli: Some(200),
                memory_mib: Some(512),
                storage_gib: Some(2),
                pid: Some(1000)
            },
            Reserved {
                cpu_milli: Some(500),
                memory_mib: Some(1536),
                ..Default::default()
            },
        )
    );
    let status = class.status.as_ref().unwrap();
    assert_eq!(status.subnets.len(), 2);
    assert_eq!(status.conditions[0].type_, "SubnetsReady");
    assert_eq!(status.conditions[0].observed_generation, Some(2));
}

/// The type reads only what it knows; unknown fields are the schema's to refuse, which
/// `validate` reports and an API server prunes.
#[test]
fn unknown_fields_are_refused_by_the_schema() {
    let mut object = documents(UPSTREAM_SAMPLE).remove(0);
    object["spec"]["securityGroupSelectorTerms"] = json!([{"id": "sg-1"}]);
    object["spec"]["login"]["password"] = json!("plain");
    let report = karpenter_api::validation::validate_object(&crds(), &object).unwrap();
    let mut paths: Vec<&str> = report.problems.iter().map(|p| p.path.as_str()).collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        ["spec.login.password", "spec.securityGroupSelectorTerms"],
        "{:?}",
        report.problems
    );
    assert!(report.problems.iter().all(|p| p.message == "unknown field"));
}
