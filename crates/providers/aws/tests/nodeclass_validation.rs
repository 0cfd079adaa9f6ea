//! Upstream's EC2NodeClass CEL suite as a table, judged by `karpenter-rs validate`'s
//! machinery (schema, CEL, runtime checks), and the types' defaults against the CRD's.

use karpenter_api::crd::CORE;
use karpenter_api::validation::table::{Expect::*, failures, set};
use karpenter_aws::EC2NodeClass;
use serde_json::{Value, json};

fn ec2nc() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole-test",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
        },
    })
}

#[test]
fn upstream_ec2nodeclass_cases() {
    let cases = vec![
        // EC2NodeClass, after upstream's EC2NodeClass CEL suite.
        ("ec2nc with role", ec2nc(), Valid),
        (
            "ec2nc with instance profile",
            set(
                set(ec2nc(), "/spec/role", Value::Null),
                "/spec/instanceProfile",
                json!("KarpenterNodeInstanceProfile"),
            ),
            Valid,
        ),
        (
            "ec2nc with both role and instance profile",
            set(ec2nc(), "/spec/instanceProfile", json!("p")),
            Rejected("spec", "exactly one of ['role', 'instanceProfile']"),
        ),
        (
            "ec2nc with neither role nor instance profile",
            set(ec2nc(), "/spec/role", Value::Null),
            Rejected("spec", "exactly one of ['role', 'instanceProfile']"),
        ),
        (
            "ec2nc empty role",
            set(ec2nc(), "/spec/role", json!("")),
            Rejected("spec.role", "role cannot be empty"),
        ),
        (
            "ec2nc ubuntu family",
            set(
                set(ec2nc(), "/spec/amiFamily", json!("Ubuntu")),
                "/spec/amiSelectorTerms",
                json!([{"id": "ami-123"}]),
            ),
            Rejected("spec.amiFamily", "Ubuntu"),
        ),
        (
            "ec2nc custom family with id",
            set(
                set(ec2nc(), "/spec/amiFamily", json!("Custom")),
                "/spec/amiSelectorTerms",
                json!([{"id": "ami-123"}]),
            ),
            Valid,
        ),
        (
            "ec2nc neither amiFamily nor alias",
            set(
                ec2nc(),
                "/spec/amiSelectorTerms",
                json!([{"id": "ami-123"}]),
            ),
            Rejected(
                "spec",
                "must specify amiFamily if amiSelectorTerms does not contain an alias",
            ),
        ),
        (
            "ec2nc family contradicts alias",
            set(ec2nc(), "/spec/amiFamily", json!("Bottlerocket")),
            Rejected(
                "spec",
                "amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
            ),
        ),
        (
            "ec2nc family agrees with alias",
            set(ec2nc(), "/spec/amiFamily", json!("AL2023")),
            Valid,
        ),
        (
            "ec2nc tags",
            set(
                ec2nc(),
                "/spec/tags",
                json!({"team": "platform", "karpenter.sh/custom": "x"}),
            ),
            Valid,
        ),
        (
            "ec2nc restricted tag nodepool",
            set(ec2nc(), "/spec/tags", json!({"karpenter.sh/nodepool": "x"})),
            Rejected("spec.tags", "restricted tag matching karpenter.sh/nodepool"),
        ),
        (
            "ec2nc restricted tag cluster",
            set(
                ec2nc(),
                "/spec/tags",
                json!({"kubernetes.io/cluster/test": "owned"}),
            ),
            Rejected(
                "spec.tags",
                "restricted tag matching kubernetes.io/cluster/",
            ),
        ),
        (
            "ec2nc restricted tag eks",
            set(ec2nc(), "/spec/tags", json!({"eks:eks-cluster-name": "c"})),
            Rejected("spec.tags", "eks:eks-cluster-name"),
        ),
        (
            "ec2nc subnet by id",
            set(
                ec2nc(),
                "/spec/subnetSelectorTerms",
                json!([{"id": "subnet-12345749"}]),
            ),
            Valid,
        ),
        (
            "ec2nc no subnet terms",
            set(ec2nc(), "/spec/subnetSelectorTerms", json!([])),
            Rejected(
                "spec.subnetSelectorTerms",
                "subnetSelectorTerms cannot be empty",
            ),
        ),
        (
            "ec2nc missing subnet terms",
            set(ec2nc(), "/spec/subnetSelectorTerms", Value::Null),
            Rejected("spec.subnetSelectorTerms", "required"),
        ),
        (
            "ec2nc empty subnet term",
            set(ec2nc(), "/spec/subnetSelectorTerms", json!([{}])),
            Rejected(
                "spec.subnetSelectorTerms",
                "expected at least one, got none, ['tags', 'id']",
            ),
        ),
        (
            "ec2nc empty subnet tag value",
            set(
                ec2nc(),
                "/spec/subnetSelectorTerms",
                json!([{"tags": {"test": ""}}]),
            ),
            Rejected(
                "spec.subnetSelectorTerms[0].tags",
                "empty tag keys or values",
            ),
        ),
        (
            "ec2nc subnet id with tags",
            set(
                ec2nc(),
                "/spec/subnetSelectorTerms",
                json!([{"id": "subnet-1", "tags": {"a": "b"}}]),
            ),
            Rejected("spec.subnetSelectorTerms", "'id' is mutually exclusive"),
        ),
        (
            "ec2nc malformed subnet id",
            set(
                ec2nc(),
                "/spec/subnetSelectorTerms",
                json!([{"id": "sn-1"}]),
            ),
            Rejected("spec.subnetSelectorTerms[0].id", "subnet-"),
        ),
        (
            "ec2nc security group by name",
            set(
                ec2nc(),
                "/spec/securityGroupSelectorTerms",
                json!([{"name": "my-sg"}]),
            ),
            Valid,
        ),
        (
            "ec2nc security group id with name",
            set(
                ec2nc(),
                "/spec/securityGroupSelectorTerms",
                json!([{"id": "sg-1", "name": "n"}]),
            ),
            Rejected(
                "spec.securityGroupSelectorTerms",
                "'id' is mutually exclusive",
            ),
        ),
        (
            "ec2nc security group name with tags",
            set(
                ec2nc(),
                "/spec/securityGroupSelectorTerms",
                json!([{"name": "n", "tags": {"a": "b"}}]),
            ),
            Rejected(
                "spec.securityGroupSelectorTerms",
                "'name' is mutually exclusive",
            ),
        ),
        (
            "ec2nc capacity reservation by id",
            set(
                ec2nc(),
                "/spec/capacityReservationSelectorTerms",
                json!([{"id": "cr-12345749"}]),
            ),
            Valid,
        ),
        (
            "ec2nc capacity reservation malformed id",
            set(
                ec2nc(),
                "/spec/capacityReservationSelectorTerms",
                json!([{"id": "r-12345749"}]),
            ),
            Rejected("spec.capacityReservationSelectorTerms[0].id", "cr-"),
        ),
        (
            "ec2nc capacity reservation owner alone",
            set(
                ec2nc(),
                "/spec/capacityReservationSelectorTerms",
                json!([{"ownerID": "012345678901"}]),
            ),
            Rejected(
                "spec.capacityReservationSelectorTerms",
                "expected at least one",
            ),
        ),
        (
            "ec2nc capacity reservation malformed owner",
            set(
                ec2nc(),
                "/spec/capacityReservationSelectorTerms",
                json!([{"ownerID": "01234567890", "tags": {"a": "b"}}]),
            ),
            Rejected("spec.capacityReservationSelectorTerms[0].ownerID", ""),
        ),
        (
            "ec2nc capacity reservation id with criteria",
            set(
                ec2nc(),
                "/spec/capacityReservationSelectorTerms",
                json!([{"id": "cr-1", "instanceMatchCriteria": "open"}]),
            ),
            Rejected(
                "spec.capacityReservationSelectorTerms",
                "'id' is mutually exclusive",
            ),
        ),
        (
            "ec2nc capacity reservation criteria with tags",
            set(
                ec2nc(),
                "/spec/capacityReservationSelectorTerms",
                json!([{"instanceMatchCriteria": "targeted", "tags": {"a": "b"}}]),
            ),
            Valid,
        ),
        (
            "ec2nc ami by name and owner",
            set(
                set(
                    ec2nc(),
                    "/spec/amiSelectorTerms",
                    json!([{"name": "my-ami", "owner": "123456789012"}]),
                ),
                "/spec/amiFamily",
                json!("AL2023"),
            ),
            Valid,
        ),
        (
            "ec2nc alias with other terms",
            set(
                ec2nc(),
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@latest"}, {"id": "ami-1"}]),
            ),
            Rejected("spec.amiSelectorTerms", "'alias' is mutually exclusive"),
        ),
        (
            "ec2nc alias with tags",
            set(
                ec2nc(),
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023@latest", "tags": {"a": "b"}}]),
            ),
            Rejected("spec.amiSelectorTerms", "'alias' is mutually exclusive"),
        ),
        (
            "ec2nc alias bad family",
            set(
                ec2nc(),
                "/spec/amiSelectorTerms",
                json!([{"alias": "ubuntu@latest"}]),
            ),
            Rejected("spec.amiSelectorTerms[0].alias", "family is not supported"),
        ),
        (
            "ec2nc alias bad format",
            set(
                ec2nc(),
                "/spec/amiSelectorTerms",
                json!([{"alias": "al2023"}]),
            ),
            Rejected(
                "spec.amiSelectorTerms[0].alias",
                "must match the format 'family@version'",
            ),
        ),
        (
            "ec2nc windows alias pinned",
            set(
                ec2nc(),
                "/spec/amiSelectorTerms",
                json!([{"alias": "windows2022@v1"}]),
            ),
            Rejected(
                "spec.amiSelectorTerms[0].alias",
                "windows families may only specify version 'latest'",
            ),
        ),
        (
            "ec2nc no ami terms",
            set(ec2nc(), "/spec/amiSelectorTerms", json!([])),
            Rejected("spec.amiSelectorTerms", ""),
        ),
        (
            "ec2nc free-form kubelet",
            set(
                ec2nc(),
                "/spec/kubelet",
                json!({"maxPods": 42, "someFutureKnob": {"nested": [1, 2]}}),
            ),
            Valid,
        ),
        (
            "ec2nc metadata options",
            set(
                ec2nc(),
                "/spec/metadataOptions",
                json!({"httpEndpoint": "disabled", "httpTokens": "optional", "httpPutResponseHopLimit": 2}),
            ),
            Valid,
        ),
        (
            "ec2nc bad http tokens",
            set(
                ec2nc(),
                "/spec/metadataOptions",
                json!({"httpTokens": "sometimes"}),
            ),
            Rejected("spec.metadataOptions.httpTokens", ""),
        ),
        (
            "ec2nc hop limit too high",
            set(
                ec2nc(),
                "/spec/metadataOptions",
                json!({"httpPutResponseHopLimit": 65}),
            ),
            Rejected("spec.metadataOptions.httpPutResponseHopLimit", ""),
        ),
        (
            "ec2nc volume sizes",
            set(
                ec2nc(),
                "/spec/blockDeviceMappings",
                json!([{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "64T"}}, {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "59000Gi", "volumeType": "gp3"}}]),
            ),
            Valid,
        ),
        (
            "ec2nc volume too big",
            set(
                ec2nc(),
                "/spec/blockDeviceMappings",
                json!([{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "65Ti"}}]),
            ),
            Rejected("spec.blockDeviceMappings[0].ebs.volumeSize", ""),
        ),
        (
            "ec2nc volume without size or snapshot",
            set(
                ec2nc(),
                "/spec/blockDeviceMappings",
                json!([{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3"}}]),
            ),
            Rejected(
                "spec.blockDeviceMappings[0].ebs",
                "snapshotID or volumeSize must be defined",
            ),
        ),
        (
            "ec2nc two root volumes",
            set(
                ec2nc(),
                "/spec/blockDeviceMappings",
                json!([{"rootVolume": true, "ebs": {"volumeSize": "20Gi"}}, {"rootVolume": true, "ebs": {"volumeSize": "20Gi"}}]),
            ),
            Rejected(
                "spec.blockDeviceMappings",
                "only one blockDeviceMappings with rootVolume",
            ),
        ),
        (
            "ec2nc initialization rate without snapshot",
            set(
                ec2nc(),
                "/spec/blockDeviceMappings",
                json!([{"ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 200}}]),
            ),
            Rejected("spec.blockDeviceMappings[0].ebs", "snapshotID must be set"),
        ),
        (
            "ec2nc placement group both",
            set(
                ec2nc(),
                "/spec/placementGroupSelector",
                json!({"name": "a", "id": "pg-1"}),
            ),
            Rejected("spec.placementGroupSelector", "mutually exclusive"),
        ),
        (
            "ec2nc network interfaces without primary",
            set(
                ec2nc(),
                "/spec/networkInterfaces",
                json!([{"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"}]),
            ),
            Rejected("spec.networkInterfaces", "primary interface"),
        ),
        (
            "ec2nc connection tracking empty",
            set(ec2nc(), "/spec/connectionTracking", json!({})),
            Rejected("spec.connectionTracking", "at least one of"),
        ),
        (
            "ec2nc unknown field",
            set(ec2nc(), "/spec/amiFamilly", json!("AL2023")),
            Rejected("spec.amiFamilly", ""),
        ),
    ];
    let crds: Vec<_> = CORE.iter().chain(karpenter_aws::CRDS).copied().collect();
    let failures = failures(&crds, cases);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn ec2nodeclasses_are_unknown_without_the_provider() {
    assert!(karpenter_api::validation::validate_object(&CORE, &ec2nc()).is_none());
}

/// The Rust types' serde defaults must be the CRD's defaults: an object read by the provider
/// must mean what the API server stored.
#[test]
fn type_defaults_match_crd_defaults() {
    let schema = karpenter_aws::ec2nodeclass::CRD.schema();
    let defaulted: EC2NodeClass =
        serde_json::from_value(kube_cel::apply_defaults(&schema, &ec2nc())).unwrap();
    let typed: EC2NodeClass = serde_json::from_value(ec2nc()).unwrap();
    assert_eq!(typed, defaulted);
    assert_eq!(typed.spec.metadata_options.http_tokens, "required");
}
