//! Upstream's v1beta1 → v1 EC2NodeClass conversion (its webhook's cases), as a table: a
//! v1beta1 class, the v1 spec fields and annotations it must become, and the result must
//! validate as a v1 EC2NodeClass.

use karpenter_api::crd::CORE;
use karpenter_api::validation::validate_object;
use karpenter_aws::ec2nodeclass::conversion::{
    ALIAS_VERSION_ANNOTATION, UBUNTU_COMPATIBILITY_ANNOTATION, convert_v1beta1,
};
use serde_json::{Value, json};

fn v1beta1(spec: Value) -> Value {
    let mut base = json!({
        "role": "KarpenterNodeRole-test",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
    });
    json_patch_merge(&mut base, spec);
    json!({"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "metadata": {"name": "default"}, "spec": base})
}

fn json_patch_merge(base: &mut Value, patch: Value) {
    for (k, v) in patch.as_object().unwrap() {
        base[k] = v.clone();
    }
}

/// Name, v1beta1 spec, annotations; the v1 amiFamily, amiSelectorTerms and Ubuntu
/// compatibility annotation expected.
type Case = (
    &'static str,
    Value,
    Value,
    Option<&'static str>,
    Value,
    Option<&'static str>,
);

#[test]
fn upstream_conversion_cases() {
    let cases: Vec<Case> = vec![
        (
            "AL2 without terms",
            json!({"amiFamily": "AL2"}),
            json!({}),
            None,
            json!([{"alias": "al2@latest"}]),
            None,
        ),
        (
            "AL2023 without terms",
            json!({"amiFamily": "AL2023"}),
            json!({}),
            None,
            json!([{"alias": "al2023@latest"}]),
            None,
        ),
        (
            "Bottlerocket pinned by annotation",
            json!({"amiFamily": "Bottlerocket"}),
            json!({ALIAS_VERSION_ANNOTATION: "v1.20.0"}),
            None,
            json!([{"alias": "bottlerocket@v1.20.0"}]),
            None,
        ),
        (
            "AL2023 with an id term",
            json!({"amiFamily": "AL2023", "amiSelectorTerms": [{"id": "ami-123"}]}),
            json!({}),
            Some("AL2023"),
            json!([{"id": "ami-123"}]),
            None,
        ),
        (
            "Custom with name and owner",
            json!({"amiFamily": "Custom", "amiSelectorTerms": [{"name": "my-ami-*", "owner": "self"}]}),
            json!({}),
            Some("Custom"),
            json!([{"name": "my-ami-*", "owner": "self"}]),
            None,
        ),
        (
            "Ubuntu with tag terms",
            json!({"amiFamily": "Ubuntu", "amiSelectorTerms": [{"tags": {"os": "ubuntu"}}]}),
            json!({}),
            Some("AL2"),
            json!([{"tags": {"os": "ubuntu"}}]),
            Some("amiFamily,blockDeviceMappings"),
        ),
        (
            "Ubuntu without terms",
            json!({"amiFamily": "Ubuntu", "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "50Gi"}}]}),
            json!({}),
            Some("AL2"),
            json!([{"id": "ami-placeholder"}]),
            Some("amiFamily,incompatible"),
        ),
    ];
    let crds: Vec<_> = CORE.iter().chain(karpenter_aws::CRDS).copied().collect();
    for (name, spec, annotations, family, terms, compatibility) in cases {
        let mut object = v1beta1(spec);
        object["metadata"]["annotations"] = annotations;
        let converted = convert_v1beta1(&object).unwrap_or_else(|e| panic!("{name}: {e}"));
        let v1 = &converted.object;
        assert_eq!(v1["apiVersion"], "karpenter.k8s.aws/v1", "{name}");
        assert_eq!(v1["spec"]["amiFamily"].as_str(), family, "{name}");
        assert_eq!(v1["spec"]["amiSelectorTerms"], terms, "{name}");
        assert_eq!(
            v1["metadata"]["annotations"][UBUNTU_COMPATIBILITY_ANNOTATION].as_str(),
            compatibility,
            "{name}"
        );
        assert!(
            v1["metadata"]["annotations"]
                .get(ALIAS_VERSION_ANNOTATION)
                .is_none(),
            "{name}: the alias-version annotation is consumed"
        );
        // Everything else carries over.
        assert_eq!(v1["spec"]["role"], "KarpenterNodeRole-test", "{name}");
        assert_eq!(
            v1["spec"]["subnetSelectorTerms"], object["spec"]["subnetSelectorTerms"],
            "{name}"
        );
        let report = validate_object(&crds, v1).unwrap();
        assert!(report.problems.is_empty(), "{name}: {:?}", report.problems);
        assert!(converted.changes[0].starts_with("apiVersion"), "{name}");
    }
}

#[test]
fn ubuntu_gets_its_root_volume_only_when_none_was_given() {
    let converted = convert_v1beta1(&v1beta1(
        json!({"amiFamily": "Ubuntu", "amiSelectorTerms": [{"id": "ami-1"}]}),
    ))
    .unwrap();
    assert_eq!(
        converted.object["spec"]["blockDeviceMappings"],
        json!([{"deviceName": "/dev/sda1", "rootVolume": true, "ebs": {"encrypted": true, "volumeType": "gp3", "volumeSize": "20Gi"}}])
    );
}

#[test]
fn status_keeps_what_was_resolved() {
    let mut object = v1beta1(json!({"amiFamily": "AL2023"}));
    object["status"] = json!({
        "subnets": [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}],
        "securityGroups": [{"id": "sg-1", "name": "nodes"}],
        "amis": [{"id": "ami-1", "name": "al2023", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 1}]}],
        "instanceProfile": "profile",
        "conditions": [{"type": "Ready", "status": "True"}],
    });
    let converted = convert_v1beta1(&object).unwrap();
    assert_eq!(
        converted.object["status"],
        json!({
            "subnets": [{"id": "subnet-1", "zone": "us-east-1a"}],
            "securityGroups": [{"id": "sg-1", "name": "nodes"}],
            "amis": [{"id": "ami-1", "name": "al2023", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}],
            "instanceProfile": "profile",
        })
    );
}

#[test]
fn only_v1beta1_ec2nodeclasses_convert() {
    let mut v1 = v1beta1(json!({"amiFamily": "AL2023"}));
    v1["apiVersion"] = json!("karpenter.k8s.aws/v1");
    assert!(convert_v1beta1(&v1).is_err());
    let mut other = v1beta1(json!({}));
    other["kind"] = json!("NodePool");
    assert!(convert_v1beta1(&other).is_err());
}
