//! `karpenter-rs validate` and the providers' label domains: every registered provider's
//! restricted domain refuses keys outside its well-known list and accepts upstream's
//! well-known keys, and `--catalog` warns about requirement values a catalog lacks. The key
//! lists are upstream's: the CRD patches of AWS, Azure and KWOK
//! (`hack/validation/requirements.sh`) and the `WellKnownLabels` the other providers
//! register (`pkg/apis/v1alpha1/labels.go`, and Cluster API's operator), with the NodeClass
//! label karpenter puts on NodeClaims.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn karpenter_rs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_karpenter-rs"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "karpenter-rs-validate-catalog-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A NodePool of `group`/`kind` with these requirements (`key operator values`, YAML flow).
fn node_pool(name: &str, group: &str, kind: &str, requirements: &[String]) -> String {
    let mut text = format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: {name}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{group: {group}, kind: {kind}, name: default}}\n      requirements:\n"
    );
    for r in requirements {
        text.push_str(&format!("      - {r}\n"));
    }
    text
}

fn exists(key: &str) -> String {
    format!("{{key: {key}, operator: Exists}}")
}

/// Each provider's NodeClass and upstream's well-known keys of its domains.
const PROVIDERS: &[(&str, &str, &[&str])] = &[
    (
        "karpenter.k8s.aws",
        "EC2NodeClass",
        &[
            "karpenter.k8s.aws/instance-tenancy",
            "karpenter.k8s.aws/capacity-reservation-type",
            "karpenter.k8s.aws/capacity-reservation-id",
            "karpenter.k8s.aws/capacity-reservation-interruptible",
            "karpenter.k8s.aws/ec2nodeclass",
            "karpenter.k8s.aws/instance-encryption-in-transit-supported",
            "karpenter.k8s.aws/nitro-sandbox",
            "karpenter.k8s.aws/instance-category",
            "karpenter.k8s.aws/instance-hypervisor",
            "karpenter.k8s.aws/instance-family",
            "karpenter.k8s.aws/instance-generation",
            "karpenter.k8s.aws/instance-local-nvme",
            "karpenter.k8s.aws/instance-size",
            "karpenter.k8s.aws/instance-cpu",
            "karpenter.k8s.aws/instance-cpu-manufacturer",
            "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
            "karpenter.k8s.aws/instance-memory",
            "karpenter.k8s.aws/instance-ebs-bandwidth",
            "karpenter.k8s.aws/instance-network-bandwidth",
            "karpenter.k8s.aws/instance-gpu-name",
            "karpenter.k8s.aws/instance-gpu-manufacturer",
            "karpenter.k8s.aws/instance-gpu-count",
            "karpenter.k8s.aws/instance-gpu-memory",
            "karpenter.k8s.aws/instance-accelerator-name",
            "karpenter.k8s.aws/instance-accelerator-manufacturer",
            "karpenter.k8s.aws/instance-accelerator-count",
            "karpenter.k8s.aws/instance-capability-flex",
            "karpenter.k8s.aws/placement-group-id",
            "karpenter.k8s.aws/placement-group-partition",
        ],
    ),
    (
        "karpenter.azure.com",
        "AKSNodeClass",
        &[
            "karpenter.azure.com/aksnodeclass",
            "karpenter.azure.com/sku-name",
            "karpenter.azure.com/sku-family",
            "karpenter.azure.com/sku-series",
            "karpenter.azure.com/sku-version",
            "karpenter.azure.com/sku-cpu",
            "karpenter.azure.com/sku-memory",
            "karpenter.azure.com/sku-networking-accelerated",
            "karpenter.azure.com/sku-storage-premium-capable",
            "karpenter.azure.com/sku-storage-ultra-ssd",
            "karpenter.azure.com/sku-storage-ephemeralos-maxsize",
            "karpenter.azure.com/sku-gpu-name",
            "karpenter.azure.com/sku-gpu-manufacturer",
            "karpenter.azure.com/sku-gpu-count",
            "karpenter.azure.com/placement-scope",
            "kubernetes.azure.com/mode",
            "kubernetes.azure.com/scalesetpriority",
            "kubernetes.azure.com/priority",
            "kubernetes.azure.com/fips_enabled",
            "kubernetes.azure.com/os-sku",
            "kubernetes.azure.com/cluster",
            "kubernetes.azure.com/sku-cpu",
            "kubernetes.azure.com/sku-memory",
            "kubernetes.azure.com/ebpf-dataplane",
            "kubernetes.azure.com/ebpf-host-routing",
            "kubernetes.azure.com/network-policy",
            "kubernetes.azure.com/hostedvm",
        ],
    ),
    (
        "karpenter.k8s.alibabacloud",
        "ECSNodeClass",
        &[
            "karpenter.k8s.alibabacloud/instance-category",
            "karpenter.k8s.alibabacloud/instance-family",
            "karpenter.k8s.alibabacloud/instance-generation",
            "karpenter.k8s.alibabacloud/instance-size",
            "karpenter.k8s.alibabacloud/instance-cpu",
            "karpenter.k8s.alibabacloud/instance-cpu-model",
            "karpenter.k8s.alibabacloud/instance-memory",
            "karpenter.k8s.alibabacloud/instance-gpu-name",
            "karpenter.k8s.alibabacloud/instance-gpu-manufacturer",
            "karpenter.k8s.alibabacloud/instance-gpu-count",
            "karpenter.k8s.alibabacloud/instance-gpu-memory",
            "karpenter.k8s.alibabacloud/ecsnodeclass",
        ],
    ),
    (
        "karpenter.k8s.huawei",
        "CCENodeClass",
        &[
            "karpenter.k8s.huawei/instance-size",
            "karpenter.k8s.huawei/instance-cpu",
            "karpenter.k8s.huawei/instance-memory",
            "karpenter.k8s.huawei/instance-network-bandwidth",
            "karpenter.k8s.huawei/instance-gpu-name",
            "karpenter.k8s.huawei/instance-gpu-manufacturer",
            "karpenter.k8s.huawei/instance-gpu-count",
            "karpenter.k8s.huawei/instance-gpu-memory",
            "karpenter.k8s.huawei/ccenodeclass",
        ],
    ),
    (
        "karpenter.proxmox.sinextra.dev",
        "ProxmoxNodeClass",
        &[
            "karpenter.proxmox.sinextra.dev/instance-family",
            "karpenter.proxmox.sinextra.dev/instance-cpu-type",
            "karpenter.proxmox.sinextra.dev/instance-image-id",
            "karpenter.proxmox.sinextra.dev/proxmoxnodeclass",
        ],
    ),
    (
        "karpenter.cluster.x-k8s.io",
        "ClusterAPINodeClass",
        &[
            "karpenter.cluster.x-k8s.io/instance-size",
            "karpenter.cluster.x-k8s.io/instance-family",
            "karpenter.cluster.x-k8s.io/instance-cpu",
            "karpenter.cluster.x-k8s.io/instance-memory",
            "capacity.karpenter.cluster.x-k8s.io/cpu",
            "capacity.karpenter.cluster.x-k8s.io/memory",
            "karpenter.cluster.x-k8s.io/clusterapinodeclass",
        ],
    ),
    (
        "karpenter.kwok.sh",
        "KWOKNodeClass",
        &[
            "karpenter.kwok.sh/kwoknodeclass",
            "karpenter.kwok.sh/instance-cpu",
            "karpenter.kwok.sh/instance-memory",
            "karpenter.kwok.sh/instance-family",
            "karpenter.kwok.sh/instance-size",
        ],
    ),
];

#[test]
fn every_providers_well_known_keys_pass_and_a_typo_in_its_domain_does_not() {
    for (group, kind, keys) in PROVIDERS {
        let requirements: Vec<String> = keys.iter().map(|k| exists(k)).collect();
        let path = temp_file(
            &format!("{kind}-ok.yaml"),
            &node_pool("ok", group, kind, &requirements),
        );
        let out = karpenter_rs(&["validate", "-f", path.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{group}: {}{}",
            stdout(&out),
            stderr(&out)
        );

        let typo = format!("{group}/instance-typo");
        let path = temp_file(
            &format!("{kind}-typo.yaml"),
            &node_pool("typo", group, kind, &[exists(&typo)]),
        );
        let out = karpenter_rs(&["validate", "-f", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{group}: {}", stderr(&out));
        let text = stdout(&out);
        let expected = format!(
            "{}: NodePool/typo: spec.template.spec.requirements[0].key: label domain \"{group}\" is restricted to its well-known labels ({}",
            path.display(),
            keys[0]
        );
        assert!(text.starts_with(&expected), "{group}: {text}");
        assert!(
            text.trim_end()
                .ends_with(&format!("; not well-known: \"{typo}\"")),
            "{group}: {text}"
        );
    }
}

#[test]
fn the_issue_s_mistyped_aws_key_is_refused_and_other_domains_are_untouched() {
    let path = temp_file(
        "aws-typo.yaml",
        &node_pool(
            "typo",
            "karpenter.k8s.aws",
            "EC2NodeClass",
            &[
                "{key: karpenter.k8s.aws/instance-categry, operator: In, values: [c, m]}".into(),
                exists("example.com/instance-categry"),
                exists("team"),
            ],
        ),
    );
    let out = karpenter_rs(&["validate", "-f", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains("spec.template.spec.requirements[0].key: label domain \"karpenter.k8s.aws\" is restricted")
            && lines[0].contains("karpenter.k8s.aws/instance-category, ")
            && lines[0].ends_with("not well-known: \"karpenter.k8s.aws/instance-categry\""),
        "{text}"
    );
}

/// Upstream's Azure CRDs refuse AKS's legacy `agentpool` label; here only on the NodePools
/// of AKSNodeClasses, since this binary's CRDs serve every provider.
#[test]
fn aks_legacy_labels_are_refused_on_azure_node_pools() {
    let legacy = [exists("agentpool")];
    let azure = temp_file(
        "azure-agentpool.yaml",
        &node_pool("aks", "karpenter.azure.com", "AKSNodeClass", &legacy),
    );
    let out = karpenter_rs(&["validate", "-f", azure.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out)
            .contains("NodePool/aks: spec.template.spec: label \"agentpool\" is restricted"),
        "{}",
        stdout(&out)
    );
    let aws = temp_file(
        "aws-agentpool.yaml",
        &node_pool("eks", "karpenter.k8s.aws", "EC2NodeClass", &legacy),
    );
    let out = karpenter_rs(&["validate", "-f", aws.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn the_committed_crds_carry_every_provider_domain() {
    let text = std::fs::read_to_string(
        repo().join("charts/karpenter-rs/crds/karpenter.sh_nodepools.yaml"),
    )
    .unwrap();
    for (group, _, _) in PROVIDERS {
        assert!(
            text.contains(&format!("message: label domain \"{group}\" is restricted")),
            "{group}"
        );
    }
    assert!(text.contains("message: label domain \"kubernetes.azure.com\" is restricted"));
}

const AZURE_GPU: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: gpu
spec:
  template:
    metadata:
      labels:
        team: ml
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
      - {key: karpenter.azure.com/sku-family, operator: In, values: [NC]}
      - {key: karpenter.azure.com/sku-family, operator: NotIn, values: [NC]}
      - {key: karpenter.azure.com/sku-cpu, operator: In, values: ['4', '8']}
      - {key: team, operator: In, values: [ml]}
      - {key: karpenter.azure.com/sku-name, operator: In, values: [Standard_D4s_v3, Standard_Z9]}
";

#[test]
fn catalog_warns_about_values_no_instance_type_has() {
    let path = temp_file("azure-gpu.yaml", AZURE_GPU);
    let file = path.display().to_string();
    let out = karpenter_rs(&["validate", "-f", &file, "--catalog", "azure"]);
    // Warnings: the API server would accept the NodePool.
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let family = format!(
        "{file}: NodePool/gpu: spec.template.spec.requirements[0].values: warning: no instance type of the azure catalog has karpenter.azure.com/sku-family NC; it has "
    );
    assert!(lines[0].starts_with(&family), "{text}");
    // A short sample of the families it has, the D family among them.
    let sample = &lines[0][family.len()..];
    assert!(sample.contains("D, "), "{sample}");
    assert!(sample.split(", ").count() <= 9, "{sample}");
    assert!(
        lines[1].starts_with(&format!(
            "{file}: NodePool/gpu: spec.template.spec.requirements[4].values: warning: no instance type of the azure catalog has karpenter.azure.com/sku-name Standard_Z9; it has "
        )),
        "{text}"
    );
    assert!(
        stderr(&out).contains("1 objects checked, 0 invalid, 2 warnings"),
        "{}",
        stderr(&out)
    );

    // Without a catalog there is nothing to compare with.
    let out = karpenter_rs(&["validate", "-f", &file]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));

    // Another provider's NodePool would not launch from this catalog: not compared.
    let out = karpenter_rs(&["validate", "-f", &file, "--catalog", "aws"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

#[test]
fn catalog_warnings_do_not_hide_problems_and_an_unknown_catalog_is_an_error() {
    let text = AZURE_GPU.replace("sku-cpu", "sku-cpus");
    let path = temp_file("azure-both.yaml", &text);
    let out = karpenter_rs(&[
        "validate",
        "-f",
        path.to_str().unwrap(),
        "--catalog",
        "azure",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("requirements[2].key: label domain \"karpenter.azure.com\" is restricted"),
        "{text}"
    );
    assert!(text.contains("requirements[0].values: warning: "), "{text}");

    let out = karpenter_rs(&[
        "validate",
        "-f",
        path.to_str().unwrap(),
        "--catalog",
        "nope",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown catalog \"nope\"; available: kwok, aws, azure"),
        "{}",
        stderr(&out)
    );
}
