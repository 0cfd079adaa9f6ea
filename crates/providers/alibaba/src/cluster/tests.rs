//! The pure parts of the node bootstrap. Cases marked "upstream" are the cloudpilot-ai
//! provider's (`pkg/providers/cluster/ackmanaged_test.go`, `suite_test.go`).

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::core::v1::Taint;
use serde_json::json;

use super::cloudinit::{
    CloudInit, Entry, MimeError, SHELL_SCRIPT, parse_archive, parse_media_type,
};
use super::*;

fn decode(b64: &str) -> String {
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64"),
    )
    .expect("utf-8")
}

fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.map(str::to_string),
        effect: effect.into(),
        time_added: None,
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn entry(content_type: &str, content: &str) -> Entry {
    Entry {
        content_type: content_type.into(),
        content: content.into(),
    }
}

/// upstream: `Test_convertNodeClassKubeletConfigToACKNodeConfig`.
#[test]
fn node_config_carries_max_pods() {
    let kubelet = KubeletConfiguration {
        max_pods: Some(110),
        ..Default::default()
    };
    assert_eq!(
        node_config(Some(&kubelet)),
        "eyJrdWJlbGV0X2NvbmZpZyI6eyJtYXhQb2RzIjoxMTB9fQ=="
    );
    assert_eq!(
        decode(&node_config(Some(&kubelet))),
        r#"{"kubelet_config":{"maxPods":110}}"#
    );
    // Upstream resolves a missing kubelet configuration to an empty one; nothing else of it
    // reaches ACK.
    let others = KubeletConfiguration {
        pods_per_core: Some(4),
        system_reserved: [("cpu".to_string(), "100m".to_string())].into(),
        cluster_dns: vec!["10.0.0.10".into()],
        ..Default::default()
    };
    for kubelet in [None, Some(&others)] {
        assert_eq!(decode(&node_config(kubelet)), r#"{"kubelet_config":{}}"#);
    }
}

#[test]
fn labels_lead_with_acks_own_and_follow_in_key_order() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[], "k8s.aliyun.com=true,ack.aliyun.com=c1"),
        (
            &[
                ("karpenter.sh/nodepool", "default"),
                ("karpenter.sh/capacity-type", "spot"),
                ("app", "web"),
            ],
            "k8s.aliyun.com=true,ack.aliyun.com=c1,app=web,karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default",
        ),
        (
            &[("empty", "")],
            "k8s.aliyun.com=true,ack.aliyun.com=c1,empty=",
        ),
    ];
    for (given, expected) in cases {
        assert_eq!(format_labels("c1", &labels(given)), *expected, "{given:?}");
    }
}

#[test]
fn taints_are_written_as_kubernetes_writes_them() {
    let cases = [
        (vec![], ""),
        (
            vec![taint("dedicated", Some("gpu"), "NoSchedule")],
            "dedicated=gpu:NoSchedule",
        ),
        (
            vec![
                taint("example.com/a", None, "NoExecute"),
                taint("b", Some(""), "PreferNoSchedule"),
                taint("karpenter.sh/unregistered", None, "NoExecute"),
            ],
            "example.com/a:NoExecute,b:PreferNoSchedule,karpenter.sh/unregistered:NoExecute",
        ),
    ];
    for (taints, expected) in cases {
        assert_eq!(format_taints(&taints), expected);
    }
}

#[test]
fn node_taints_add_the_unregistered_taint_once() {
    let claim = [taint("dedicated", Some("gpu"), "NoSchedule")];
    let startup = [taint(
        "node.cilium.io/agent-not-ready",
        Some("true"),
        "NoExecute",
    )];
    let all = node_taints(&claim, &startup);
    assert_eq!(
        format_taints(&all),
        "dedicated=gpu:NoSchedule,node.cilium.io/agent-not-ready=true:NoExecute,karpenter.sh/unregistered:NoExecute"
    );
    // Already there (value aside: key and effect are what match).
    let registered = [taint("karpenter.sh/unregistered", Some("x"), "NoExecute")];
    assert_eq!(node_taints(&registered, &[]).len(), 1);
    assert_eq!(node_taints(&[], &registered).len(), 1);
    // Another effect is another taint.
    let other = [taint("karpenter.sh/unregistered", None, "NoSchedule")];
    assert_eq!(node_taints(&other, &[]).len(), 2);
}

#[test]
fn the_runtime_arguments_are_rewritten() {
    let containerd = Runtime {
        name: "containerd".into(),
        version: "1.6.28".into(),
    };
    let cases = [
        (
            "curl -fsSL https://x/attach_node.sh | bash -s -- --openapi-token t --runtime docker --runtime-version 19.03.15 --ack-region cn-hangzhou",
            "curl -fsSL https://x/attach_node.sh | bash -s -- --openapi-token t --runtime containerd --runtime-version 1.6.28 --ack-region cn-hangzhou",
        ),
        // At the end, with runs of whitespace (which become single spaces).
        (
            "bash -s --  --runtime\tdocker   --runtime-version  19.03.15",
            "bash -s -- --runtime containerd --runtime-version 1.6.28",
        ),
        // Every occurrence.
        (
            "a --runtime x --runtime-version 1 b --runtime y --runtime-version 2",
            "a --runtime containerd --runtime-version 1.6.28 b --runtime containerd --runtime-version 1.6.28",
        ),
        // No pair, or a broken one: untouched.
        ("bash -s -- --token t", "bash -s -- --token t"),
        (
            "a --runtime docker --token t --runtime-version 1",
            "a --runtime docker --token t --runtime-version 1",
        ),
        (
            "a --runtime docker --runtime-version",
            "a --runtime docker --runtime-version",
        ),
        // Needs whitespace before `--runtime`.
        (
            "--runtime docker --runtime-version 1",
            "--runtime docker --runtime-version 1",
        ),
        (
            "a x--runtime docker --runtime-version 1",
            "a x--runtime docker --runtime-version 1",
        ),
    ];
    for (script, expected) in cases {
        assert_eq!(set_runtime(script, &containerd), expected, "{script:?}");
    }
}

#[test]
fn carriage_returns_and_line_feeds_are_removed() {
    assert_eq!(
        clean_attach_script("curl x | bash -s -- \r\n--token t\r\n"),
        "curl x | bash -s -- --token t"
    );
    assert_eq!(clean_attach_script("a\nb"), "a\nb");
}

const ATTACH: &str = "curl -fsSL https://aliacs-k8s-cn-hangzhou.oss-cn-hangzhou.aliyuncs.com/public/pkg/run/attach/1.30.1-aliyun.1/attach_node.sh | bash -s -- --openapi-token t0k3n --ack-region cn-hangzhou --runtime containerd --runtime-version 1.6.28";

#[test]
fn the_attach_script_is_finished_with_labels_node_config_and_taints() {
    let kubelet = KubeletConfiguration {
        max_pods: Some(110),
        ..Default::default()
    };
    let script = finish_attach_script(
        ATTACH,
        "c1",
        &labels(&[("karpenter.sh/nodepool", "default")]),
        &[
            taint("dedicated", Some("gpu"), "NoSchedule"),
            taint("karpenter.sh/unregistered", None, "NoExecute"),
        ],
        Some(&kubelet),
    );
    assert_eq!(
        script,
        format!(
            "#!/bin/bash\n\n{ATTACH} --labels k8s.aliyun.com=true,ack.aliyun.com=c1,karpenter.sh/nodepool=default --node-config eyJrdWJlbGV0X2NvbmZpZyI6eyJtYXhQb2RzIjoxMTB9fQ== --taints dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute\n\n"
        )
    );
}

#[test]
fn ack_user_data_is_the_script_then_the_users_data() {
    let node_labels = labels(&[("a", "b")]);
    let taints = [taint("karpenter.sh/unregistered", None, "NoExecute")];
    let node = |user_data| NodeBootstrap {
        labels: &node_labels,
        taints: &taints,
        kubelet: None,
        user_data,
        format_data_disk: false,
    };
    let finished = format!(
        "#!/bin/bash\n\n{ATTACH} --labels k8s.aliyun.com=true,ack.aliyun.com=c1,a=b --node-config eyJrdWJlbGV0X2NvbmZpZyI6e319 --taints karpenter.sh/unregistered:NoExecute\n\n"
    );
    let alone = decode(&ack_user_data(ATTACH, "c1", &node(None)).unwrap());
    assert_eq!(
        alone,
        format!(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n{finished}\n--//--\n"
        )
    );
    assert_eq!(
        ack_user_data(ATTACH, "c1", &node(Some(""))).unwrap(),
        ack_user_data(ATTACH, "c1", &node(None)).unwrap()
    );
    let with_pre = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"==b==\"\n\n--==b==\nContent-Type: text/x-shellscript; stage=pre\n\necho pre\n--==b==--\n";
    let merged = decode(&ack_user_data(ATTACH, "c1", &node(Some(with_pre))).unwrap());
    assert_eq!(
        merged,
        format!(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: text/x-shellscript; stage=pre\n\necho pre\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n{finished}\n--//--\n"
        )
    );
    assert!(matches!(
        ack_user_data(
            ATTACH,
            "c1",
            &node(Some("MIME-Version: 1.0\nInvalid-Content"))
        ),
        Err(MimeError::MalformedHeader(_))
    ));
}

#[test]
fn custom_clusters_boot_the_users_data_alone() {
    assert_eq!(custom_user_data(None), "");
    assert_eq!(custom_user_data(Some("")), "");
    assert_eq!(
        decode(&custom_user_data(Some("#!/bin/bash\necho hi\n"))),
        "#!/bin/bash\necho hi\n"
    );
    // A MIME document goes as it is, not re-wrapped.
    let mime = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"x\"\n\n--x--\n";
    assert_eq!(decode(&custom_user_data(Some(mime))), mime);
}

#[test]
fn cluster_types_parse_from_the_setting() {
    assert_eq!("ACKManaged".parse(), Ok(ClusterType::AckManaged));
    assert_eq!("".parse(), Ok(ClusterType::AckManaged));
    assert_eq!(" Custom ".parse(), Ok(ClusterType::Custom));
    assert_eq!(ClusterType::default(), ClusterType::AckManaged);
    let err = "ackmanaged".parse::<ClusterType>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "CLUSTER_TYPE \"ackmanaged\": expected \"ACKManaged\" or \"Custom\""
    );
    for t in [ClusterType::AckManaged, ClusterType::Custom] {
        assert_eq!(t.to_string().parse(), Ok(t));
    }
}

fn pool(
    name: &str,
    default: Option<bool>,
    healthy: Option<i64>,
    runtime: Option<(&str, &str)>,
) -> serde_json::Value {
    let mut p = json!({"nodepool_info": {"name": name}, "status": {}, "kubernetes_config": {}});
    if let Some(d) = default {
        p["nodepool_info"]["is_default"] = json!(d);
    }
    if let Some(h) = healthy {
        p["status"]["healthy_nodes"] = json!(h);
    }
    if let Some((r, v)) = runtime {
        p["kubernetes_config"]["runtime"] = json!(r);
        p["kubernetes_config"]["runtime_version"] = json!(v);
    }
    p
}

#[test]
fn the_runtime_is_the_default_pools_or_the_healthiest() {
    let rt = |name: &str, version: &str| Runtime {
        name: name.into(),
        version: version.into(),
    };
    let cases = [
        (
            "the default pool wins over a healthier one",
            vec![
                pool("big", Some(false), Some(10), Some(("docker", "19.03.15"))),
                pool(
                    "default",
                    Some(true),
                    Some(1),
                    Some(("containerd", "1.6.28")),
                ),
            ],
            Ok(rt("containerd", "1.6.28")),
        ),
        (
            "without a default, the most healthy nodes",
            vec![
                pool("a", Some(false), Some(2), Some(("containerd", "1.6.20"))),
                pool("b", None, Some(5), Some(("containerd", "1.6.28"))),
                pool("c", Some(false), None, Some(("docker", "19.03.15"))),
            ],
            Ok(rt("containerd", "1.6.28")),
        ),
        (
            "a tie goes to the first",
            vec![
                pool("a", Some(false), Some(3), Some(("containerd", "1.6.20"))),
                pool("b", Some(false), Some(3), Some(("containerd", "1.6.28"))),
            ],
            Ok(rt("containerd", "1.6.20")),
        ),
        (
            "the chosen pool must name its runtime",
            vec![
                pool("default", Some(true), Some(3), None),
                pool("b", Some(false), Some(3), Some(("containerd", "1.6.28"))),
            ],
            Err(AnswerError::NoRuntime("default".into())),
        ),
        ("no pool", vec![], Err(AnswerError::NoNodePool)),
    ];
    for (name, pools, expected) in cases {
        assert_eq!(
            pick_runtime(&json!({"nodepools": pools})),
            expected,
            "{name}"
        );
    }
    assert_eq!(pick_runtime(&json!({})), Err(AnswerError::NoNodePool));
}

#[test]
fn the_network_comes_from_the_clusters_meta_data() {
    let detail = |meta: &str| json!({"cluster_id": "c1", "meta_data": meta});
    let cases = [
        (
            detail(
                r#"{"Capabilities":{"Network":"terway-eniip","ProxyMode":"ipvs"},"KubernetesVersion":"1.30.1-aliyun.1"}"#,
            ),
            Ok("terway-eniip".to_string()),
        ),
        (
            detail(r#"{"Capabilities":{"Network":"Flannel"}}"#),
            Ok("Flannel".to_string()),
        ),
        (
            detail(r#"{"capabilities":{"network":"Flannel"}}"#),
            Ok("Flannel".to_string()),
        ),
        (detail(r#"{"Capabilities":{}}"#), Ok(String::new())),
        (detail("{}"), Ok(String::new())),
        (json!({"cluster_id": "c1"}), Err(AnswerError::NoMetaData)),
        (
            detail("[]"),
            Err(AnswerError::MetaData("not a JSON object".into())),
        ),
    ];
    for (answer, expected) in cases {
        assert_eq!(cluster_network(&answer), expected, "{answer}");
    }
    assert!(matches!(
        cluster_network(&detail("")),
        Err(AnswerError::MetaData(_))
    ));
    assert_eq!(Cni::from_ack("terway-eniip"), Cni::Terway);
    assert_eq!(Cni::from_ack("Flannel"), Cni::Flannel);
    assert_eq!(Cni::from_ack(""), Cni::Other);
}

#[test]
fn images_come_from_the_first_version() {
    let answer = json!([{
        "version": "1.30.1-aliyun.1",
        "images": [
            {"image_id": "aliyun_3_x64_20G_alibase_20240819.vhd", "image_name": "Alibaba Cloud Linux 3.2104", "platform": "AliyunLinux", "os_version": "3.2104", "image_type": "AliyunLinux3", "os_type": "Linux", "image_category": "system", "architecture": "x86_64"},
            {"image_id": "aliyun_3_arm64_20G_alibase_20240819.vhd", "image_name": "Alibaba Cloud Linux 3.2104 ARM", "platform": "AliyunLinux", "os_version": "3.2104", "image_type": "AliyunLinux3Arm64", "os_type": "Linux", "architecture": "arm64"}
        ],
        "runtimes": [{"name": "containerd", "version": "1.6.28"}]
    }]);
    let images = parse_images(&answer).unwrap();
    assert_eq!(images.len(), 2);
    assert_eq!(
        images[0],
        ClusterImage {
            id: "aliyun_3_x64_20G_alibase_20240819.vhd".into(),
            name: "Alibaba Cloud Linux 3.2104".into(),
            platform: "AliyunLinux".into(),
            os_version: "3.2104".into(),
            image_type: "AliyunLinux3".into(),
            os_type: "Linux".into(),
            architecture: "x86_64".into(),
        }
    );
    assert_eq!(images[1].architecture, "arm64");
    assert_eq!(parse_images(&json!([])), Err(AnswerError::NoVersion));
    assert_eq!(parse_images(&json!({})), Err(AnswerError::NoVersion));
    assert_eq!(
        parse_images(&json!([{"version": "1.30.1-aliyun.1", "images": []}])),
        Err(AnswerError::NoImages)
    );
    assert_eq!(metadata_version("v1.30.1"), "1.30.1");
    assert_eq!(metadata_version("1.30.1-aliyun.1"), "1.30.1-aliyun.1");
}

// The cloud-init document (upstream `suite_test.go`, "CloudInit").

/// upstream: "should initialize empty entries"; "should return empty string" — an empty
/// document still has its headers and closing delimiter.
#[test]
fn an_empty_document() {
    let mut cloud_init = CloudInit::new();
    assert!(cloud_init.entries.is_empty());
    assert_eq!(
        cloud_init.script(),
        "TUlNRS1WZXJzaW9uOiAxLjAKQ29udGVudC1UeXBlOiBtdWx0aXBhcnQvbWl4ZWQ7IGJvdW5kYXJ5PSIvLyIKCgotLS8vLS0K"
    );
}

/// upstream: "when merging empty userdata"; "when merging non-MIME shell script".
#[test]
fn plain_user_data_is_one_shell_script() {
    let mut cloud_init = CloudInit::new();
    cloud_init.merge("").unwrap();
    assert!(cloud_init.entries.is_empty());
    let script = "#!/bin/bash\necho 'hello'";
    cloud_init.merge(script).unwrap();
    assert_eq!(cloud_init.entries, vec![entry(SHELL_SCRIPT, script)]);
    // YAML is a "script" too, as upstream has it.
    cloud_init.merge("#cloud-config\nruncmd: [ls]\n").unwrap();
    assert_eq!(cloud_init.entries[1].content_type, SHELL_SCRIPT);
}

const FOUR_PARTS: &str = r#"Content-Type: multipart/mixed; boundary="//"
MIME-Version: 1.0

--//
Content-Type: text/x-shellscript; stage=pre

#!/bin/bash
echo 'pre-script'

--//
Content-Type: text/x-shellscript"

#!/bin/bash
echo 'http://localhost'

--//
Content-Type: text/x-shellscript; stage=pre

#!/bin/sh
echo 'The time is now $(date -R)!'

--//
Content-Type: text/cloud-config; charset="us-ascii"

fqdn: my-instance.localdomain

--//--
"#;

/// upstream: "when merging valid MIME data" — the parts in order, each content without the
/// line end that belongs to the next delimiter.
#[test]
fn a_mime_document_is_taken_part_by_part() {
    let mut cloud_init = CloudInit::new();
    cloud_init.merge(FOUR_PARTS).unwrap();
    assert_eq!(
        cloud_init.entries,
        vec![
            entry(
                "text/x-shellscript; stage=pre",
                "#!/bin/bash\necho 'pre-script'\n"
            ),
            entry(
                "text/x-shellscript\"",
                "#!/bin/bash\necho 'http://localhost'\n"
            ),
            entry(
                "text/x-shellscript; stage=pre",
                "#!/bin/sh\necho 'The time is now $(date -R)!'\n"
            ),
            entry(
                "text/cloud-config; charset=\"us-ascii\"",
                "fqdn: my-instance.localdomain\n"
            ),
        ]
    );
    let (media_type, _) = parse_media_type(&cloud_init.entries[2].content_type).unwrap();
    assert_eq!(media_type, "text/x-shellscript");
}

/// upstream: "when merging invalid MIME data", and other documents that cannot be read.
#[test]
fn unreadable_mime_documents_are_errors() {
    type Check = fn(&MimeError) -> bool;
    let cases: &[(&str, Check)] = &[
        (
            "MIME-Version: 1.0\nInvalid-Content",
            |e| matches!(e, MimeError::MalformedHeader(l) if l == "Invalid-Content"),
        ),
        ("MIME-Version: 1.0\n\n--//\n", |e| {
            matches!(e, MimeError::ContentType { .. })
        }),
        ("Content-Type: text/plain\n\nhello\n", |e| {
            matches!(e, MimeError::NotMultipart(_))
        }),
        ("Content-Type: multipart/mixed\n\n--//\n", |e| {
            matches!(e, MimeError::NoBoundary(_))
        }),
        (
            "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/x-shellscript\n\necho\n",
            |e| matches!(e, MimeError::Unterminated(1)),
        ),
        (
            "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/x-shellscript\n",
            |e| matches!(e, MimeError::Unterminated(1)),
        ),
        (
            "Content-Type: multipart/mixed; boundary=b\n\n--b\necho 'no headers'\n--b--\n",
            |e| matches!(e, MimeError::MalformedHeader(_)),
        ),
    ];
    for (document, expected) in cases {
        let err = CloudInit::new().merge(document).unwrap_err();
        assert!(expected(&err), "{document:?}: {err:?}");
    }
}

#[test]
fn mime_documents_are_read_as_mail_readers_read_them() {
    // CRLF line ends, a folded header, a preamble and an epilogue, a delimiter with trailing
    // blanks, a part without headers, a content line that merely starts like a delimiter.
    let document = "MIME-Version: 1.0\r\nContent-Type: multipart/mixed;\r\n boundary=\"==BOUNDARY==\"\r\n\r\nThis is a preamble.\r\n--==BOUNDARY==  \r\nContent-Type: text/x-shellscript\r\n\r\necho one\r\n--==BOUNDARY==x\r\n--==BOUNDARY==\r\n\r\nbare\r\n--==BOUNDARY==--\r\nepilogue\r\n";
    let entries = parse_archive(document).unwrap();
    assert_eq!(
        entries,
        vec![
            entry("text/x-shellscript", "echo one\r\n--==BOUNDARY==x"),
            entry("", "bare"),
        ]
    );
    // Leading whitespace before the headers is skipped (upstream would read a blank first line
    // as the end of the headers and find no Content-Type).
    for leading in ["\n", "\n  ", "\r\n\t"] {
        let mut cloud_init = CloudInit::new();
        cloud_init
            .merge(&format!("{leading}MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/x-shellscript\n\necho\n--b--\n"))
            .unwrap();
        assert_eq!(
            cloud_init.entries,
            vec![entry("text/x-shellscript", "echo")]
        );
    }
    // Without a delimiter there are no parts; without headers after it, no content either.
    assert_eq!(
        parse_archive("Content-Type: multipart/mixed; boundary=b\n\nonly a preamble\n").unwrap(),
        vec![]
    );
    // Headers only: no body, no parts.
    assert_eq!(
        parse_archive("Content-Type: multipart/mixed; boundary=b").unwrap(),
        vec![]
    );
    // Carriage returns are dropped from the whole document when written.
    let mut crlf = CloudInit::new();
    crlf.merge("echo a\r\necho b\r\n").unwrap();
    assert!(!crlf.document().contains('\r'));
}

/// upstream: "should order pre-stage entries first"; "with invalid content types".
#[test]
fn pre_stage_scripts_go_first() {
    let mut cloud_init = CloudInit {
        entries: vec![
            entry("text/x-shellscript", "normal"),
            entry("text/x-shellscript; stage=pre", "pre1"),
            entry("text/plain", "other"),
            entry("text/x-shellscript; stage=pre", "pre2"),
        ],
    };
    cloud_init.sort();
    let order: Vec<&str> = cloud_init
        .entries
        .iter()
        .map(|e| e.content.as_str())
        .collect();
    assert_eq!(order, ["pre1", "pre2", "normal", "other"]);

    let mut invalid = CloudInit {
        entries: vec![
            entry("invalid/type", "invalid"),
            entry("text/x-shellscript; stage=pre", "pre"),
        ],
    };
    invalid.sort();
    assert_eq!(invalid.entries[0].content, "pre");
    assert_eq!(invalid.entries[1].content, "invalid");

    // Only shell scripts, only `stage=pre` exactly, and only well-formed types move.
    let mut others = CloudInit {
        entries: vec![
            entry("text/x-shellscript", "a"),
            entry("text/cloud-config; stage=pre", "b"),
            entry("text/x-shellscript; stage=PRE", "c"),
            entry("text/x-shellscript\"; stage=pre", "d"),
            entry("TEXT/X-SHELLSCRIPT; Stage=\"pre\"", "e"),
        ],
    };
    others.sort();
    let order: Vec<&str> = others.entries.iter().map(|e| e.content.as_str()).collect();
    assert_eq!(order, ["e", "a", "b", "c", "d"]);
}

/// upstream: "should sort entries and serialize".
#[test]
fn sorted_entries_are_serialized_in_order() {
    let mut cloud_init = CloudInit {
        entries: vec![
            entry(SHELL_SCRIPT, "normal-script"),
            entry(&format!("{SHELL_SCRIPT}; stage=pre"), "pre-script"),
        ],
    };
    let document = decode(&cloud_init.script());
    let pre = document.find("pre-script").unwrap();
    let normal = document.find("normal-script").unwrap();
    assert!(pre < normal, "{document}");
}

const BOOTSTRAP: &str = "#!/bin/bash\necho 'start ack'\n";

/// upstream: "build userdata" — the ACK script with a MIME document, with nothing, with a
/// plain script.
#[test]
fn user_data_documents() {
    let custom = r#"Content-Type: multipart/mixed; boundary="//"
MIME-Version: 1.0

--//
Content-Type: text/cloud-config; charset="us-ascii"

fqdn: my-instance.localdomain

--//
Content-Type: text/x-shellscript; stage=pre

#!/bin/bash
echo 'pre-script'

--//
Content-Type: text/x-shellscript

#!/bin/bash
echo 'http://localhost'

--//--
"#;
    let cases: [(Option<&str>, &str); 3] = [
        (
            Some(custom),
            r#"MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript; stage=pre

#!/bin/bash
echo 'pre-script'

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo 'start ack'

--//
Content-Type: text/cloud-config; charset="us-ascii"

fqdn: my-instance.localdomain

--//
Content-Type: text/x-shellscript

#!/bin/bash
echo 'http://localhost'

--//--
"#,
        ),
        (
            None,
            r#"MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo 'start ack'

--//--
"#,
        ),
        (
            Some("echo 'hello'\necho 'world'"),
            r#"MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo 'start ack'

--//
Content-Type: text/x-shellscript; charset="us-ascii"

echo 'hello'
echo 'world'
--//--
"#,
        ),
    ];
    for (user_data, expected) in cases {
        let mut cloud_init = CloudInit::new();
        cloud_init.merge(BOOTSTRAP).unwrap();
        cloud_init.merge(user_data.unwrap_or_default()).unwrap();
        assert_eq!(decode(&cloud_init.script()), expected, "{user_data:?}");
    }
}

#[test]
fn media_types_parse_as_rfc_2045_has_them() {
    let ok = |t: &str, params: &[(&str, &str)]| {
        Ok::<_, String>((
            t.to_string(),
            params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ))
    };
    let cases = [
        ("text/x-shellscript", ok("text/x-shellscript", &[])),
        (
            "Multipart/Mixed; Boundary=\"//\"",
            ok("multipart/mixed", &[("boundary", "//")]),
        ),
        (
            "text/x-shellscript; charset=\"us-ascii\"; stage=pre;",
            ok(
                "text/x-shellscript",
                &[("charset", "us-ascii"), ("stage", "pre")],
            ),
        ),
        (
            "multipart/mixed; boundary=\"a \\\"q\\\" b\"",
            ok("multipart/mixed", &[("boundary", "a \"q\" b")]),
        ),
        ("text", ok("text", &[])),
    ];
    for (value, expected) in cases {
        assert_eq!(parse_media_type(value), expected, "{value:?}");
    }
    for bad in [
        "",
        "text/x-shellscript\"",
        "text/",
        "text x",
        "text/plain; stage",
        "text/plain; a=1; a=2",
        "text/plain; a=\"open",
    ] {
        assert!(parse_media_type(bad).is_err(), "{bad:?}");
    }
}
