//! The v1beta1 → v1 EC2NodeClass conversion as a table: a v1beta1 class (upstream's conversion
//! test cases, and the shapes seen in real clusters), the v1 fields it must become, the change
//! notes it must give, and whether the result validates as a v1 EC2NodeClass.

use karpenter_api::convert::ConvertError;
use karpenter_api::crd::CORE;
use karpenter_api::validation::{Problem, validate_object};
use karpenter_aws::ec2nodeclass::conversion::{
    ALIAS_VERSION_ANNOTATION, UBUNTU_COMPATIBILITY_ANNOTATION, convert_v1beta1,
};
use serde_json::{Value, json};

/// A v1beta1 class as most clusters had one: a node role and discovery-tag selectors, patched
/// with `spec` (a `null` removes the field).
fn v1beta1(spec: Value, annotations: Value) -> Value {
    let mut base = json!({
        "role": "KarpenterNodeRole-my-cluster",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "my-cluster"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "my-cluster"}}],
    });
    for (k, v) in spec.as_object().unwrap() {
        if v.is_null() {
            base.as_object_mut().unwrap().remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    let mut metadata = json!({"name": "default"});
    if !annotations.is_null() {
        metadata["annotations"] = annotations;
    }
    json!({"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "metadata": metadata, "spec": base})
}

fn problems(object: &Value) -> Vec<Problem> {
    let crds: Vec<_> = CORE.iter().chain(karpenter_aws::CRDS).copied().collect();
    validate_object(&crds, object)
        .expect("a v1 EC2NodeClass is known")
        .problems
}

const UBUNTU_ROOT: &str = r#"[{"deviceName": "/dev/sda1", "rootVolume": true, "ebs": {"encrypted": true, "volumeType": "gp3", "volumeSize": "20Gi"}}]"#;

struct Case {
    name: &'static str,
    /// The v1beta1 spec patch and annotations.
    spec: Value,
    annotations: Value,
    /// JSON pointers into the v1 object and their values (`null`: absent).
    expect: Vec<(&'static str, Value)>,
    /// Substrings some change note must contain.
    notes: &'static [&'static str],
    /// `None` when the result is a valid v1 EC2NodeClass, else part of the problem it has.
    problem: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    let ubuntu_root: Value = serde_json::from_str(UBUNTU_ROOT).unwrap();
    vec![
        Case {
            name: "AL2 with a role and tag selectors and no amiSelectorTerms",
            spec: json!({"amiFamily": "AL2"}),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", Value::Null),
                ("/spec/amiSelectorTerms", json!([{"alias": "al2@latest"}])),
                ("/spec/role", json!("KarpenterNodeRole-my-cluster")),
                (
                    "/spec/subnetSelectorTerms",
                    json!([{"tags": {"karpenter.sh/discovery": "my-cluster"}}]),
                ),
                (
                    "/spec/securityGroupSelectorTerms",
                    json!([{"tags": {"karpenter.sh/discovery": "my-cluster"}}]),
                ),
                ("/metadata/annotations", Value::Null),
            ],
            notes: &[
                "spec.amiFamily AL2 with no amiSelectorTerms → spec.amiSelectorTerms [{alias: al2@latest}]",
                "v1 defaults httpPutResponseHopLimit to 1",
            ],
            problem: None,
        },
        Case {
            name: "AL2023 without terms (upstream)",
            spec: json!({"amiFamily": "AL2023"}),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", Value::Null),
                (
                    "/spec/amiSelectorTerms",
                    json!([{"alias": "al2023@latest"}]),
                ),
            ],
            notes: &[
                "spec.amiFamily AL2023 with no amiSelectorTerms → spec.amiSelectorTerms [{alias: al2023@latest}]",
            ],
            problem: None,
        },
        Case {
            name: "AL2023 pinned by the alias-version annotation (upstream)",
            spec: json!({"amiFamily": "AL2023"}),
            annotations: json!({ALIAS_VERSION_ANNOTATION: "v20240807", "team": "platform"}),
            expect: vec![
                (
                    "/spec/amiSelectorTerms",
                    json!([{"alias": "al2023@v20240807"}]),
                ),
                ("/metadata/annotations", json!({"team": "platform"})),
            ],
            notes: &["[{alias: al2023@v20240807}] (the version"],
            problem: None,
        },
        Case {
            name: "AL2023 with amiSelectorTerms [{id: ami-123}] (upstream: family and terms kept)",
            spec: json!({"amiFamily": "AL2023", "amiSelectorTerms": [{"id": "ami-123"}]}),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", json!("AL2023")),
                ("/spec/amiSelectorTerms", json!([{"id": "ami-123"}])),
            ],
            notes: &[],
            problem: None,
        },
        Case {
            name: "Bottlerocket without terms",
            spec: json!({"amiFamily": "Bottlerocket"}),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", Value::Null),
                (
                    "/spec/amiSelectorTerms",
                    json!([{"alias": "bottlerocket@latest"}]),
                ),
            ],
            notes: &["[{alias: bottlerocket@latest}]"],
            problem: None,
        },
        Case {
            name: "Bottlerocket pinned by the alias-version annotation",
            spec: json!({"amiFamily": "Bottlerocket"}),
            annotations: json!({ALIAS_VERSION_ANNOTATION: "v1.20.3"}),
            expect: vec![
                (
                    "/spec/amiSelectorTerms",
                    json!([{"alias": "bottlerocket@v1.20.3"}]),
                ),
                ("/metadata/annotations", Value::Null),
            ],
            notes: &[],
            problem: None,
        },
        Case {
            name: "Bottlerocket with tag terms",
            spec: json!({"amiFamily": "Bottlerocket", "amiSelectorTerms": [{"tags": {"os": "bottlerocket"}}]}),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", json!("Bottlerocket")),
                (
                    "/spec/amiSelectorTerms",
                    json!([{"tags": {"os": "bottlerocket"}}]),
                ),
            ],
            notes: &[],
            problem: None,
        },
        Case {
            name: "Windows2022 without terms",
            spec: json!({"amiFamily": "Windows2022"}),
            annotations: Value::Null,
            expect: vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "windows2022@latest"}]),
            )],
            notes: &[],
            problem: None,
        },
        Case {
            name: "Windows2019 pinned: v1 allows only latest",
            spec: json!({"amiFamily": "Windows2019"}),
            annotations: json!({ALIAS_VERSION_ANNOTATION: "v20240807"}),
            expect: vec![(
                "/spec/amiSelectorTerms",
                json!([{"alias": "windows2019@v20240807"}]),
            )],
            notes: &["only windows2019@latest for Windows"],
            problem: Some(
                "spec.amiSelectorTerms[0].alias: windows families may only specify version 'latest'",
            ),
        },
        Case {
            name: "Custom with name and owner terms",
            spec: json!({"amiFamily": "Custom", "amiSelectorTerms": [{"name": "my-ami-*", "owner": "self"}], "userData": "#!/bin/bash\n"}),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", json!("Custom")),
                (
                    "/spec/amiSelectorTerms",
                    json!([{"name": "my-ami-*", "owner": "self"}]),
                ),
                ("/spec/userData", json!("#!/bin/bash\n")),
            ],
            notes: &["karpenter.sh/unregistered:NoExecute"],
            problem: None,
        },
        Case {
            name: "Custom with the alias-version annotation: removed, unused",
            spec: json!({"amiFamily": "Custom", "amiSelectorTerms": [{"id": "ami-0123456789abcdef"}]}),
            annotations: json!({ALIAS_VERSION_ANNOTATION: "v20240807"}),
            expect: vec![("/metadata/annotations", Value::Null)],
            notes: &["v1-alias-version removed"],
            problem: None,
        },
        Case {
            name: "Custom without terms: v1 requires them",
            spec: json!({"amiFamily": "Custom"}),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", json!("Custom")),
                ("/spec/amiSelectorTerms", Value::Null),
            ],
            notes: &["a Custom class needs terms", "will not validate"],
            problem: Some("spec.amiSelectorTerms: required value is missing"),
        },
        Case {
            name: "no amiFamily: Custom",
            spec: json!({"amiSelectorTerms": [{"id": "ami-0123456789abcdef"}]}),
            annotations: Value::Null,
            expect: vec![("/spec/amiFamily", json!("Custom"))],
            notes: &["spec.amiFamily missing (v1beta1 required it) → Custom"],
            problem: None,
        },
        Case {
            name: "Ubuntu with terms (upstream)",
            spec: json!({"amiFamily": "Ubuntu", "amiSelectorTerms": [{"id": "ami-0123456789abcdef"}]}),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", json!("AL2")),
                (
                    "/spec/amiSelectorTerms",
                    json!([{"id": "ami-0123456789abcdef"}]),
                ),
                ("/spec/blockDeviceMappings", ubuntu_root.clone()),
                (
                    "/metadata/annotations",
                    json!({UBUNTU_COMPATIBILITY_ANNOTATION: "amiFamily,blockDeviceMappings"}),
                ),
            ],
            notes: &[
                "spec.amiFamily Ubuntu → AL2",
                "Ubuntu's default root volume",
            ],
            problem: None,
        },
        Case {
            name: "Ubuntu with terms and its own block devices (upstream)",
            spec: json!({
                "amiFamily": "Ubuntu",
                "amiSelectorTerms": [{"id": "ami-0123456789abcdef"}],
                "blockDeviceMappings": [{"deviceName": "/dev/sdb1", "rootVolume": true, "ebs": {"encrypted": false, "volumeType": "gp2", "volumeSize": "40Gi"}}],
            }),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", json!("AL2")),
                (
                    "/spec/blockDeviceMappings",
                    json!([{"deviceName": "/dev/sdb1", "rootVolume": true, "ebs": {"encrypted": false, "volumeType": "gp2", "volumeSize": "40Gi"}}]),
                ),
                (
                    "/metadata/annotations/compatibility.karpenter.k8s.aws~1v1beta1-ubuntu",
                    json!("amiFamily"),
                ),
            ],
            notes: &[],
            problem: None,
        },
        Case {
            name: "Ubuntu without terms: placeholder, marked incompatible (upstream)",
            spec: json!({"amiFamily": "Ubuntu"}),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", json!("AL2")),
                ("/spec/amiSelectorTerms", json!([{"id": "ami-placeholder"}])),
                ("/spec/blockDeviceMappings", ubuntu_root),
                (
                    "/metadata/annotations/compatibility.karpenter.k8s.aws~1v1beta1-ubuntu",
                    json!("amiFamily,blockDeviceMappings,incompatible"),
                ),
            ],
            notes: &["placeholder term [{id: ami-placeholder}]"],
            problem: None,
        },
        Case {
            name: "every v1beta1 field carries over (upstream)",
            spec: json!({
                "amiFamily": "AL2023",
                "role": null,
                "instanceProfile": "KarpenterNodeInstanceProfile",
                "subnetSelectorTerms": [{"id": "subnet-0123456789abcdef"}, {"tags": {"Name": "private-*"}}],
                "securityGroupSelectorTerms": [{"id": "sg-0123456789abcdef"}, {"name": "nodes"}, {"tags": {"team": "a"}}],
                "amiSelectorTerms": [{"name": "al2023-ami-*", "owner": "amazon"}, {"tags": {"team": "a"}}],
                "associatePublicIPAddress": true,
                "userData": "[settings]\n",
                "tags": {"team": "a", "karpenter.sh/managed-by": "my-cluster"},
                "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {
                    "deleteOnTermination": true, "encrypted": true, "iops": 3000, "kmsKeyID": "arn:aws:kms:us-east-1:111122223333:key/k",
                    "snapshotID": "snap-0123456789abcdef", "throughput": 125, "volumeSize": "100Gi", "volumeType": "gp3",
                }}],
                "instanceStorePolicy": "RAID0",
                "detailedMonitoring": true,
                "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 2, "httpTokens": "required"},
                "context": "cr-0123456789abcdef",
            }),
            annotations: Value::Null,
            expect: vec![
                ("/spec/amiFamily", json!("AL2023")),
                ("/spec/role", Value::Null),
                (
                    "/spec/instanceProfile",
                    json!("KarpenterNodeInstanceProfile"),
                ),
                (
                    "/spec/subnetSelectorTerms",
                    json!([{"id": "subnet-0123456789abcdef"}, {"tags": {"Name": "private-*"}}]),
                ),
                (
                    "/spec/securityGroupSelectorTerms",
                    json!([{"id": "sg-0123456789abcdef"}, {"name": "nodes"}, {"tags": {"team": "a"}}]),
                ),
                (
                    "/spec/amiSelectorTerms",
                    json!([{"name": "al2023-ami-*", "owner": "amazon"}, {"tags": {"team": "a"}}]),
                ),
                ("/spec/associatePublicIPAddress", json!(true)),
                ("/spec/userData", json!("[settings]\n")),
                (
                    "/spec/tags",
                    json!({"team": "a", "karpenter.sh/managed-by": "my-cluster"}),
                ),
                ("/spec/blockDeviceMappings/0/ebs/iops", json!(3000)),
                (
                    "/spec/blockDeviceMappings/0/ebs/kmsKeyID",
                    json!("arn:aws:kms:us-east-1:111122223333:key/k"),
                ),
                (
                    "/spec/blockDeviceMappings/0/ebs/snapshotID",
                    json!("snap-0123456789abcdef"),
                ),
                ("/spec/blockDeviceMappings/0/ebs/throughput", json!(125)),
                ("/spec/blockDeviceMappings/0/ebs/volumeSize", json!("100Gi")),
                ("/spec/instanceStorePolicy", json!("RAID0")),
                ("/spec/detailedMonitoring", json!(true)),
                (
                    "/spec/metadataOptions",
                    json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 2, "httpTokens": "required"}),
                ),
                ("/spec/context", json!("cr-0123456789abcdef")),
            ],
            notes: &[],
            problem: None,
        },
        Case {
            name: "metadataOptions without a hop limit keep v1beta1's 2",
            spec: json!({"amiFamily": "AL2023", "metadataOptions": {"httpTokens": "required"}}),
            annotations: Value::Null,
            expect: vec![(
                "/spec/metadataOptions",
                json!({"httpTokens": "required", "httpPutResponseHopLimit": 2}),
            )],
            notes: &["spec.metadataOptions.httpPutResponseHopLimit set to 2"],
            problem: None,
        },
        Case {
            name: "fields v1beta1 lacks are dropped",
            spec: json!({
                "amiFamily": "AL2023",
                "kubelet": {"maxPods": 110},
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "my-cluster"}, "name": "x"}],
                "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 100}}],
            }),
            annotations: Value::Null,
            expect: vec![
                ("/spec/kubelet", Value::Null),
                (
                    "/spec/subnetSelectorTerms",
                    json!([{"tags": {"karpenter.sh/discovery": "my-cluster"}}]),
                ),
                (
                    "/spec/blockDeviceMappings",
                    json!([{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}}]),
                ),
            ],
            notes: &[
                "spec.kubelet removed: not a v1beta1 EC2NodeClass field",
                "spec.subnetSelectorTerms[0].name removed",
                "spec.blockDeviceMappings[0].ebs.volumeInitializationRate removed",
            ],
            problem: None,
        },
        Case {
            name: "a tag v1 reserves",
            spec: json!({"amiFamily": "AL2", "tags": {"eks:eks-cluster-name": "my-cluster"}}),
            annotations: Value::Null,
            expect: vec![("/spec/tags", json!({"eks:eks-cluster-name": "my-cluster"}))],
            notes: &["v1 reserves eks:eks-cluster-name"],
            problem: Some("spec.tags: tag contains a restricted tag matching eks:eks-cluster-name"),
        },
    ]
}

#[test]
fn upstream_conversion_table() {
    for case in cases() {
        let name = case.name;
        let object = v1beta1(case.spec, case.annotations);
        let converted = convert_v1beta1(&object).unwrap_or_else(|e| panic!("{name}: {e}"));
        let v1 = &converted.object;
        assert_eq!(v1["apiVersion"], "karpenter.k8s.aws/v1", "{name}");
        assert_eq!(v1["kind"], "EC2NodeClass", "{name}");
        assert_eq!(v1["metadata"]["name"], "default", "{name}");
        assert_eq!(
            converted.changes[0], "apiVersion: karpenter.k8s.aws/v1beta1 → karpenter.k8s.aws/v1",
            "{name}"
        );
        for (pointer, expected) in &case.expect {
            let got = v1.pointer(pointer).cloned().unwrap_or(Value::Null);
            assert_eq!(&got, expected, "{name}: {pointer}");
        }
        for note in case.notes {
            assert!(
                converted.changes.iter().any(|c| c.contains(note)),
                "{name}: no note contains {note:?}: {:#?}",
                converted.changes
            );
        }
        let problems: Vec<String> = problems(v1).iter().map(ToString::to_string).collect();
        match case.problem {
            None => assert!(problems.is_empty(), "{name}: {problems:?}"),
            Some(problem) => assert!(
                problems.iter().any(|p| p.contains(problem)),
                "{name}: expected {problem:?} in {problems:?}"
            ),
        }
    }
}

#[test]
fn unchanged_fields_get_no_note() {
    // An AL2023 class with terms and explicit metadata options: only the apiVersion changes.
    let object = v1beta1(
        json!({
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"id": "ami-123"}],
            "metadataOptions": {"httpPutResponseHopLimit": 1},
        }),
        Value::Null,
    );
    let converted = convert_v1beta1(&object).unwrap();
    assert_eq!(
        converted.changes,
        ["apiVersion: karpenter.k8s.aws/v1beta1 → karpenter.k8s.aws/v1"]
    );
    let mut expected = object.clone();
    expected["apiVersion"] = json!("karpenter.k8s.aws/v1");
    assert_eq!(converted.object, expected);
}

#[test]
fn status_carries_over_as_upstream_copies_it() {
    let mut object = v1beta1(json!({"amiFamily": "AL2023"}), Value::Null);
    let ready = json!({"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2024-08-01T00:00:00Z", "observedGeneration": 1});
    object["status"] = json!({
        "subnets": [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}],
        "securityGroups": [{"id": "sg-1", "name": "nodes"}],
        "amis": [{"id": "ami-1", "name": "al2023", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 1}]}],
        "instanceProfile": "profile",
        "conditions": [ready.clone()],
        "notAField": true,
    });
    let converted = convert_v1beta1(&object).unwrap();
    assert_eq!(
        converted.object["status"],
        json!({
            "subnets": [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}],
            "securityGroups": [{"id": "sg-1", "name": "nodes"}],
            "amis": [{"id": "ami-1", "name": "al2023", "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}],
            "instanceProfile": "profile",
            "conditions": [ready],
        })
    );
    assert!(converted.changes.iter().any(|c| c.starts_with("status:")));
    let problems = problems(&converted.object);
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn only_v1beta1_ec2nodeclasses_convert() {
    let mut v1 = v1beta1(json!({"amiFamily": "AL2023"}), Value::Null);
    v1["apiVersion"] = json!("karpenter.k8s.aws/v1");
    assert_eq!(
        convert_v1beta1(&v1),
        Err(ConvertError::NotV1beta1 {
            api_version: "karpenter.k8s.aws/v1".into(),
            kind: "EC2NodeClass".into(),
        })
    );
    let mut node_pool = v1beta1(json!({}), Value::Null);
    node_pool["apiVersion"] = json!("karpenter.sh/v1beta1");
    node_pool["kind"] = json!("NodePool");
    assert_eq!(
        convert_v1beta1(&node_pool),
        Err(ConvertError::NotV1beta1 {
            api_version: "karpenter.sh/v1beta1".into(),
            kind: "NodePool".into(),
        })
    );
    let mut no_spec = v1beta1(json!({}), Value::Null);
    no_spec["spec"] = json!("AL2");
    assert_eq!(
        convert_v1beta1(&no_spec),
        Err(ConvertError::Malformed("spec"))
    );
    no_spec.as_object_mut().unwrap().remove("spec");
    assert_eq!(
        convert_v1beta1(&no_spec),
        Err(ConvertError::Malformed("spec"))
    );
}
