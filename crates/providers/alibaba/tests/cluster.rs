//! ACK's ROA calls and the node bootstrap against the in-process Alibaba endpoint, which checks
//! every signature over the method, path, query and body hash. Answers are shaped as ACK's API
//! reference shows them (DescribeClusterAttachScripts, DescribeClusterNodePools,
//! DescribeClusterDetail, DescribeKubernetesVersionMetadata).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use http::Method;
use k8s_openapi::api::core::v1::Taint;
use karpenter_alibaba::client::{AlibabaError, JSON_CONTENT_TYPE, Params};
use karpenter_alibaba::cluster::cloudinit::MimeError;
use karpenter_alibaba::cluster::{
    AckCluster, AnswerError, Cluster, ClusterError, ClusterType, Cni, NodeBootstrap,
};
use karpenter_alibaba::ecsnodeclass::KubeletConfiguration;
use serde_json::{Value, json};
use support::{Auth, Mock, Reply};

const AK: &str = "LTAI5tMockAccessKeyId";
const SECRET: &str = "mock-access-key-secret";
const CLUSTER: &str = "c82e6987e2961451182edacd74faf****";

/// ACK's attach script as the API returns it: one command, `\r\n`s inside, the runtime the
/// script picked (Docker, which the cluster's version no longer runs).
const RAW_ATTACH: &str = "curl -fsSL https://aliacs-k8s-cn-hangzhou.oss-cn-hangzhou.aliyuncs.com/public/pkg/run/attach/1.30.1-aliyun.1/attach_node.sh | bash -s -- --openapi-token 0e4d8aa3d2a1f****\r\n --ack-region cn-hangzhou --runtime docker --runtime-version 19.03.15 --region-id cn-hangzhou";

/// The same, cleaned and with the node pools' runtime.
const ATTACH: &str = "curl -fsSL https://aliacs-k8s-cn-hangzhou.oss-cn-hangzhou.aliyuncs.com/public/pkg/run/attach/1.30.1-aliyun.1/attach_node.sh | bash -s -- --openapi-token 0e4d8aa3d2a1f**** --ack-region cn-hangzhou --runtime containerd --runtime-version 1.6.28 --region-id cn-hangzhou";

fn nodepools() -> Value {
    json!({
        "nodepools": [
            {
                "nodepool_info": {"nodepool_id": "np-big", "name": "big", "is_default": false, "type": "ess"},
                "status": {"healthy_nodes": 12, "total_nodes": 12, "state": "active"},
                "kubernetes_config": {"runtime": "containerd", "runtime_version": "1.6.20", "cpu_policy": "none"}
            },
            {
                "nodepool_info": {"nodepool_id": "np-default", "name": "default-nodepool", "is_default": true, "type": "ess"},
                "status": {"healthy_nodes": 2, "total_nodes": 2, "state": "active"},
                "kubernetes_config": {"runtime": "containerd", "runtime_version": "1.6.28", "cpu_policy": "none"}
            }
        ],
        "page_info": {"page_number": 1, "page_size": 10, "total_count": 2}
    })
}

fn cluster_detail(network: &str) -> Value {
    let meta = json!({
        "Capabilities": {"Network": network, "ProxyMode": "ipvs", "PublicSLB": false},
        "KubernetesVersion": "1.30.1-aliyun.1",
        "Addons": [{"name": network}]
    });
    json!({
        "cluster_id": CLUSTER,
        "cluster_type": "ManagedKubernetes",
        "name": "karpenter-e2e",
        "region_id": "cn-hangzhou",
        "state": "running",
        "current_version": "1.30.1-aliyun.1",
        "meta_data": meta.to_string(),
    })
}

fn version_metadata() -> Value {
    json!([{
        "capabilities": {},
        "images": [
            {"image_id": "aliyun_3_x64_20G_alibase_20240819.vhd", "image_name": "Alibaba Cloud Linux 3.2104", "platform": "AliyunLinux", "os_version": "3.2104", "image_type": "AliyunLinux3", "os_type": "Linux", "image_category": "system", "architecture": "x86_64"},
            {"image_id": "aliyun_3_arm64_20G_alibase_20240819.vhd", "image_name": "Alibaba Cloud Linux 3.2104 ARM", "platform": "AliyunLinux", "os_version": "3.2104", "image_type": "AliyunLinux3Arm64", "os_type": "Linux", "image_category": "system", "architecture": "arm64"}
        ],
        "meta_data": {},
        "runtimes": [{"name": "containerd", "version": "1.6.28"}],
        "version": "1.30.1-aliyun.1",
        "release_date": "2024-07-09T00:00:00Z",
        "creatable": true
    }])
}

async fn mock() -> Mock {
    let mock = Mock::start().await;
    mock.allow(AK, SECRET);
    mock
}

fn decode(b64: &str) -> String {
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

fn unregistered() -> Taint {
    Taint {
        key: "karpenter.sh/unregistered".into(),
        effect: "NoExecute".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn roa_calls_sign_method_path_query_and_body() {
    let mock = mock().await;
    mock.reply("DescribeClusterDetail", cluster_detail("Flannel"));
    mock.on("DescribeClusterAttachScripts", |call| {
        Reply::Text(format!("script for {}", call.body))
    });
    let client = mock.client(AK, SECRET);

    let detail = client
        .roa(
            karpenter_alibaba::endpoint::Product::Cs,
            "DescribeClusterDetail",
            Method::GET,
            &format!("/clusters/{CLUSTER}"),
            &Params::new().with("Filter", "a b*c~d/é"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(detail["cluster_id"], CLUSTER);
    let body = json!({"format_disk": true, "keep_instance_name": true, "options": "{\"a\": 1}"});
    let text = client
        .roa_text(
            karpenter_alibaba::endpoint::Product::Cs,
            "DescribeClusterAttachScripts",
            Method::POST,
            // A segment that needs encoding, signed and sent encoded.
            "/clusters/c 1/attachscript",
            &Params::new(),
            Some(&body),
        )
        .await
        .unwrap();
    assert_eq!(text, format!("script for {body}"));

    assert!(mock.refused().is_empty(), "{:?}", mock.refused());
    let calls = mock.calls();
    assert_eq!(calls.len(), 2);
    let get = &calls[0];
    assert_eq!(
        (
            get.action.as_str(),
            get.version.as_str(),
            get.method.as_str()
        ),
        ("DescribeClusterDetail", "2015-12-15", "GET")
    );
    assert_eq!(get.path, format!("/clusters/{CLUSTER}"));
    assert_eq!(
        get.params.get("Filter").map(String::as_str),
        Some("a b*c~d/é")
    );
    assert_eq!(
        (get.body.clone(), get.content_type.clone()),
        (Value::Null, None)
    );
    assert_eq!(get.auth, Auth::Acs3);
    let post = &calls[1];
    assert_eq!(post.method, "POST");
    assert_eq!(post.path, "/clusters/c 1/attachscript");
    assert_eq!(post.body, body);
    assert_eq!(post.content_type.as_deref(), Some(JSON_CONTENT_TYPE));
}

#[tokio::test]
async fn roa_signatures_are_checked() {
    let mock = mock().await;
    mock.reply("DescribeClusterDetail", cluster_detail("Flannel"));
    let wrong = mock.client(AK, "not-the-secret");
    let err = wrong
        .roa(
            karpenter_alibaba::endpoint::Product::Cs,
            "DescribeClusterDetail",
            Method::GET,
            "/clusters/c1",
            &Params::new(),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("SignatureDoesNotMatch"));
    assert!(mock.calls().is_empty());
    let err = mock
        .client(AK, SECRET)
        .roa(
            karpenter_alibaba::endpoint::Product::Cs,
            "DescribeClusterDetail",
            Method::GET,
            "clusters/c1",
            &Params::new(),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, AlibabaError::Parse { .. }), "{err:?}");
}

#[tokio::test]
async fn roa_errors_are_read_and_throttling_retried() {
    let mock = mock().await;
    mock.replies(
        "DescribeClusterDetail",
        vec![
            Reply::error(
                429,
                "Throttling.User",
                "Request was denied due to user flow control.",
            ),
            Reply::Ok(cluster_detail("terway-eniip")),
        ],
    );
    mock.on("DescribeClusterNodePools", |_| {
        Reply::error(404, "ErrorClusterNotFound", "cluster not found")
    });
    let client = mock.client(AK, SECRET);
    let ack = AckCluster::new(client, CLUSTER, "cn-hangzhou");
    assert_eq!(ack.cni().await.unwrap(), Cni::Terway);
    assert_eq!(mock.calls_to("DescribeClusterDetail").len(), 2);

    let err = ack.runtime().await.unwrap_err();
    let ClusterError::Call {
        action,
        cluster_id,
        source,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (*action, cluster_id.as_str()),
        ("DescribeClusterNodePools", CLUSTER)
    );
    assert_eq!(source.code(), Some("ErrorClusterNotFound"));
    assert!(source.is_not_found());
    assert!(source.request_id().is_some_and(|id| !id.is_empty()));
    assert!(
        err.to_string().starts_with(&format!(
            "DescribeClusterNodePools of cluster {CLUSTER}: ErrorClusterNotFound: cluster not found"
        )),
        "{err}"
    );
    // A 404 is not retried.
    assert_eq!(mock.calls_to("DescribeClusterNodePools").len(), 1);
}

#[tokio::test]
async fn ack_user_data_is_the_finished_script_in_a_mime_document() {
    let mock = mock().await;
    mock.on("DescribeClusterAttachScripts", |_| {
        Reply::Text(RAW_ATTACH.into())
    });
    mock.reply("DescribeClusterNodePools", nodepools());
    let ack = AckCluster::new(mock.client(AK, SECRET), CLUSTER, "cn-hangzhou");

    let labels: BTreeMap<String, String> = [
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.sh/capacity-type", "spot"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let taints = [
        Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        },
        unregistered(),
    ];
    let kubelet = KubeletConfiguration {
        max_pods: Some(64),
        ..Default::default()
    };
    let user_data = "#!/bin/bash\necho 'custom'\n";
    let node = NodeBootstrap {
        labels: &labels,
        taints: &taints,
        kubelet: Some(&kubelet),
        user_data: Some(user_data),
        format_data_disk: false,
    };
    let document = decode(&ack.user_data(&node).await.unwrap());
    assert_eq!(
        document,
        format!(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n\
             --//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n\
             #!/bin/bash\n\n{ATTACH} --labels k8s.aliyun.com=true,ack.aliyun.com={CLUSTER},karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default --node-config eyJrdWJlbGV0X2NvbmZpZyI6eyJtYXhQb2RzIjo2NH19 --taints dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute\n\n\
             \n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n\
             #!/bin/bash\necho 'custom'\n\
             \n--//--\n"
        )
    );

    let attach = mock.calls_to("DescribeClusterAttachScripts");
    assert_eq!(attach.len(), 1);
    assert_eq!(attach[0].method, "POST");
    assert_eq!(attach[0].path, format!("/clusters/{CLUSTER}/attachscript"));
    assert_eq!(
        attach[0].body,
        json!({"format_disk": false, "keep_instance_name": true})
    );
    let pools = mock.calls_to("DescribeClusterNodePools");
    assert_eq!(pools.len(), 1);
    assert_eq!(
        (pools[0].method.as_str(), pools[0].path.clone()),
        ("GET", format!("/clusters/{CLUSTER}/nodepools"))
    );

    // Reused: another node, the same script, no call.
    let again = ack
        .user_data(&NodeBootstrap {
            user_data: None,
            ..node
        })
        .await
        .unwrap();
    assert!(decode(&again).contains(ATTACH));
    assert_eq!(mock.calls().len(), 2);

    // The script differs with formatDataDisk: fetched (and cached) on its own.
    ack.user_data(&NodeBootstrap {
        format_data_disk: true,
        ..node
    })
    .await
    .unwrap();
    ack.attach_script(true).await.unwrap();
    let attach = mock.calls_to("DescribeClusterAttachScripts");
    assert_eq!(attach.len(), 2);
    assert_eq!(
        attach[1].body,
        json!({"format_disk": true, "keep_instance_name": true})
    );
}

#[tokio::test]
async fn attach_scripts_expire() {
    let mock = mock().await;
    mock.on("DescribeClusterAttachScripts", |_| {
        Reply::Text(RAW_ATTACH.into())
    });
    mock.reply("DescribeClusterNodePools", nodepools());
    let ack = AckCluster::new(mock.client(AK, SECRET), CLUSTER, "cn-hangzhou")
        .with_attach_script_ttl(Duration::ZERO);
    assert_eq!(ack.attach_script(false).await.unwrap(), ATTACH);
    assert_eq!(ack.attach_script(false).await.unwrap(), ATTACH);
    assert_eq!(mock.calls_to("DescribeClusterAttachScripts").len(), 2);
    // Clones share the cache.
    let cached = AckCluster::new(mock.client(AK, SECRET), CLUSTER, "cn-hangzhou");
    let clone = cached.clone();
    cached.attach_script(false).await.unwrap();
    clone.attach_script(false).await.unwrap();
    assert_eq!(mock.calls_to("DescribeClusterAttachScripts").len(), 3);
}

#[tokio::test]
async fn the_scripts_runtime_stays_when_the_node_pools_are_unknown() {
    for pools in [
        Reply::error(
            403,
            "Forbidden.RAM",
            "no permission for DescribeClusterNodePools",
        ),
        Reply::Ok(json!({"nodepools": []})),
    ] {
        let mock = mock().await;
        mock.on("DescribeClusterAttachScripts", |_| {
            Reply::Text(RAW_ATTACH.into())
        });
        mock.on("DescribeClusterNodePools", move |_| pools.clone());
        let ack = AckCluster::new(mock.client(AK, SECRET), CLUSTER, "cn-hangzhou");
        assert_eq!(
            ack.attach_script(false).await.unwrap(),
            RAW_ATTACH.replace("\r\n", "")
        );
    }
}

#[tokio::test]
async fn attach_script_failures() {
    let mock = mock().await;
    mock.on("DescribeClusterAttachScripts", |_| {
        Reply::Text(String::new())
    });
    let ack = AckCluster::new(mock.client(AK, SECRET), CLUSTER, "cn-hangzhou");
    let err = ack.attach_script(false).await.unwrap_err();
    assert_eq!(err, ClusterError::EmptyAttachScript(CLUSTER.into()));

    mock.on("DescribeClusterAttachScripts", |_| {
        Reply::error(400, "ErrorQueryCluster", "Failed to query cluster")
    });
    let err = ack.attach_script(false).await.unwrap_err();
    assert!(
        matches!(&err, ClusterError::Call { action: "DescribeClusterAttachScripts", source, .. } if source.code() == Some("ErrorQueryCluster")),
        "{err:?}"
    );

    // An unreadable MIME user data fails the launch, after the script was fetched.
    mock.on("DescribeClusterAttachScripts", |_| {
        Reply::Text(RAW_ATTACH.into())
    });
    mock.reply("DescribeClusterNodePools", nodepools());
    let labels = BTreeMap::new();
    let err = ack
        .user_data(&NodeBootstrap {
            labels: &labels,
            taints: &[],
            kubelet: None,
            user_data: Some("MIME-Version: 1.0\nInvalid-Content"),
            format_data_disk: false,
        })
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ClusterError::UserData(MimeError::MalformedHeader("Invalid-Content".into()))
    );
}

#[tokio::test]
async fn a_json_quoted_script_is_unquoted() {
    let mock = mock().await;
    mock.on("DescribeClusterAttachScripts", |_| {
        Reply::Ok(Value::String(RAW_ATTACH.into()))
    });
    mock.reply("DescribeClusterNodePools", nodepools());
    let ack = AckCluster::new(mock.client(AK, SECRET), CLUSTER, "cn-hangzhou");
    assert_eq!(ack.attach_script(false).await.unwrap(), ATTACH);
}

#[tokio::test]
async fn the_cni_is_read_once_it_is_known() {
    let mock = mock().await;
    mock.replies(
        "DescribeClusterDetail",
        vec![
            Reply::Ok(cluster_detail("")),
            Reply::Ok(cluster_detail("Flannel")),
            Reply::Ok(cluster_detail("terway-eniip")),
        ],
    );
    let ack = AckCluster::new(mock.client(AK, SECRET), CLUSTER, "cn-hangzhou");
    // Not named yet: asked again.
    assert_eq!(ack.cni().await.unwrap(), Cni::Other);
    assert_eq!(ack.cni().await.unwrap(), Cni::Flannel);
    assert_eq!(ack.cni().await.unwrap(), Cni::Flannel);
    let calls = mock.calls_to("DescribeClusterDetail");
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].method.as_str(), calls[0].path.clone()),
        ("GET", format!("/clusters/{CLUSTER}"))
    );

    let broken = self::mock().await;
    broken.reply("DescribeClusterDetail", json!({"cluster_id": CLUSTER}));
    let ack = AckCluster::new(broken.client(AK, SECRET), CLUSTER, "cn-hangzhou");
    assert_eq!(
        ack.cni().await.unwrap_err(),
        ClusterError::Answer {
            cluster_id: CLUSTER.into(),
            source: AnswerError::NoMetaData
        }
    );
}

#[tokio::test]
async fn supported_images_are_asked_for_the_version_without_its_v() {
    let mock = mock().await;
    mock.reply("DescribeKubernetesVersionMetadata", version_metadata());
    let ack = AckCluster::new(mock.client(AK, SECRET), CLUSTER, "cn-beijing");
    let images = ack.supported_images("v1.30.1-aliyun.1").await.unwrap();
    assert_eq!(
        images.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        [
            "aliyun_3_x64_20G_alibase_20240819.vhd",
            "aliyun_3_arm64_20G_alibase_20240819.vhd"
        ]
    );
    assert_eq!(images[1].image_type, "AliyunLinux3Arm64");
    let calls = mock.calls_to("DescribeKubernetesVersionMetadata");
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].method.as_str(), calls[0].path.as_str()),
        ("GET", "/api/v1/metadata/versions")
    );
    let expected: BTreeMap<String, String> = [
        ("ClusterType", "ManagedKubernetes"),
        ("KubernetesVersion", "1.30.1-aliyun.1"),
        ("Region", "cn-beijing"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(calls[0].params, expected);

    mock.reply("DescribeKubernetesVersionMetadata", json!([]));
    assert_eq!(
        ack.supported_images("1.30.1").await.unwrap_err(),
        ClusterError::Answer {
            cluster_id: CLUSTER.into(),
            source: AnswerError::NoVersion
        }
    );
}

#[tokio::test]
async fn custom_clusters_call_nothing() {
    let mock = mock().await;
    let cluster = Cluster::new(
        "Custom".parse().unwrap(),
        mock.client(AK, SECRET),
        CLUSTER,
        "cn-hangzhou",
    );
    assert_eq!(cluster.cluster_type(), ClusterType::Custom);
    let labels = BTreeMap::from([("a".to_string(), "b".to_string())]);
    let taints = [unregistered()];
    let node = NodeBootstrap {
        labels: &labels,
        taints: &taints,
        kubelet: None,
        user_data: Some("#!/bin/bash\n/opt/join.sh\n"),
        format_data_disk: true,
    };
    assert_eq!(
        decode(&cluster.user_data(&node).await.unwrap()),
        "#!/bin/bash\n/opt/join.sh\n"
    );
    assert_eq!(cluster.cni().await.unwrap(), Cni::Other);
    assert!(cluster.supported_images("1.30.1").await.unwrap().is_empty());
    assert!(mock.calls().is_empty());

    // The ACK variant goes through AckCluster.
    mock.reply("DescribeClusterDetail", cluster_detail("Flannel"));
    let ack = Cluster::new(
        ClusterType::AckManaged,
        mock.client(AK, SECRET),
        CLUSTER,
        "cn-hangzhou",
    );
    assert_eq!(ack.cluster_type(), ClusterType::AckManaged);
    assert_eq!(ack.cni().await.unwrap(), Cni::Flannel);
}

/// The CloudProvider runs these on the controller's tasks, which need `Send` futures (a cache
/// lock held across an await would break that).
#[test]
fn futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let labels = BTreeMap::new();
    let node = NodeBootstrap {
        labels: &labels,
        taints: &[],
        kubelet: None,
        user_data: None,
        format_data_disk: false,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mock = runtime.block_on(mock());
    let cluster = Cluster::new(
        ClusterType::AckManaged,
        mock.client(AK, SECRET),
        CLUSTER,
        "cn-hangzhou",
    );
    send(&cluster.user_data(&node));
    send(&cluster.cni());
    send(&cluster.supported_images("1.30.1"));
}
