//! The provider against moto, a real EC2/IAM/SSM API emulator on loopback: requests signed,
//! encoded and answered as AWS would. The harness installs `moto[server]` from PyPI when it is
//! not there and starts one server per test on a free port.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use karpenter_api::{NodeClaim, NodePool, NodeSelectorRequirementWithMinValues, Operator};
use karpenter_aws::auth::credentials::Source;
use karpenter_aws::auth::{Credentials, CredentialsProvider};
use karpenter_aws::ec2::{Ec2Api, Ec2Client, Filter};
use karpenter_aws::ec2nodeclass::EC2NodeClass;
use karpenter_aws::http::{AwsHttp, Endpoints};
use karpenter_aws::provider::{AwsCloudProvider, AwsOptions};
use karpenter_controller::cloudprovider::{CloudProvider, CloudProviderError};
use karpenter_core::resources::Resources;

const MOTO: &str = "moto[server]==5.2.5";

/// A moto server, stopped when dropped.
struct Moto {
    child: Child,
    url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(port: u16) -> std::io::Result<Child> {
    Command::new("python3")
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

fn installed() -> bool {
    Command::new("python3")
        .args(["-c", "import moto.server, flask"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn start() -> Moto {
    // Tests run in parallel; one of them installs moto, the others wait for it.
    static INSTALLED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(|| {
        if !installed() {
            let status = Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    MOTO,
                ])
                .status()
                .expect("python3 runs");
            assert!(status.success() && installed(), "installing {MOTO} failed");
        }
    });
    // The tests start their servers in parallel. One at a time picks a free port and waits for
    // its server to answer on it, so no two servers race for the same port (the loser would
    // exit while the winner answered for it, until the winner's test ended).
    static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..10 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = spawn(port).expect("moto starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut listening = true;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if child.try_wait().ok().flatten().is_some() {
                // Something else took the port first: try another.
                listening = false;
                break;
            }
            assert!(Instant::now() < deadline, "moto did not listen on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        if listening {
            return Moto {
                child,
                url: format!("http://127.0.0.1:{port}"),
            };
        }
        let _ = child.wait();
    }
    panic!("moto could not get a port of its own in ten tries");
}

fn http(moto: &Moto) -> AwsHttp {
    let credentials = CredentialsProvider::new(Source::Static(Credentials {
        access_key_id: "testing".into(),
        secret_access_key: "testing".into(),
        session_token: None,
    }));
    AwsHttp::new(
        Endpoints {
            region: "us-east-1".into(),
            override_url: Some(moto.url.clone()),
        },
        credentials,
    )
    .unwrap()
}

/// A raw Query call for what the provider itself never does (making VPCs, roles).
async fn query(http: &AwsHttp, service: &str, version: &str, params: &[(&str, &str)]) -> String {
    let mut all = vec![("Version".to_string(), version.to_string())];
    all.extend(params.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    http.query(service, &all)
        .await
        .unwrap_or_else(|e| panic!("{params:?}: {e}"))
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> &'a str {
    let start = text
        .find(open)
        .unwrap_or_else(|| panic!("{open} in {text}"))
        + open.len();
    &text[start..start + text[start..].find(close).unwrap()]
}

/// A VPC with two subnets and a security group tagged for discovery, and a node role.
async fn account(http: &AwsHttp, cluster: &str) -> String {
    let vpc = query(
        http,
        "ec2",
        "2016-11-15",
        &[("Action", "CreateVpc"), ("CidrBlock", "10.0.0.0/16")],
    )
    .await;
    let vpc = between(&vpc, "<vpcId>", "</vpcId>").to_string();
    let discovery = [
        ("Tag.1.Key", "karpenter.sh/discovery"),
        ("Tag.1.Value", cluster),
    ];
    for (cidr, zone) in [("10.0.1.0/24", "us-east-1a"), ("10.0.2.0/24", "us-east-1b")] {
        let subnet = query(
            http,
            "ec2",
            "2016-11-15",
            &[
                ("Action", "CreateSubnet"),
                ("VpcId", &vpc),
                ("CidrBlock", cidr),
                ("AvailabilityZone", zone),
            ],
        )
        .await;
        let id = between(&subnet, "<subnetId>", "</subnetId>").to_string();
        let mut p = vec![("Action", "CreateTags"), ("ResourceId.1", id.as_str())];
        p.extend(discovery);
        query(http, "ec2", "2016-11-15", &p).await;
    }
    let sg = query(
        http,
        "ec2",
        "2016-11-15",
        &[
            ("Action", "CreateSecurityGroup"),
            ("GroupName", "nodes"),
            ("GroupDescription", "nodes"),
            ("VpcId", &vpc),
        ],
    )
    .await;
    let sg = between(&sg, "<groupId>", "</groupId>").to_string();
    let mut p = vec![("Action", "CreateTags"), ("ResourceId.1", sg.as_str())];
    p.extend(discovery);
    query(http, "ec2", "2016-11-15", &p).await;
    query(
        http,
        "iam",
        "2010-05-08",
        &[
            ("Action", "CreateRole"),
            ("RoleName", "KarpenterNodeRole"),
            ("AssumeRolePolicyDocument", "{}"),
        ],
    )
    .await;
    // One of moto's stock x86_64 images.
    let images = Ec2Client::new(http.clone())
        .describe_images(
            vec![Filter::new("architecture", &["x86_64"])],
            vec!["amazon".into()],
        )
        .await
        .unwrap();
    images.first().expect("moto has stock images").id.clone()
}

fn node_class(cluster: &str, ami: &str) -> EC2NodeClass {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole",
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"id": ami}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster}}],
            "tags": {"team": "platform"},
        },
    }))
    .unwrap()
}

fn claim(name: &str) -> NodeClaim {
    let mut c = NodeClaim::default();
    c.metadata.name = Some(name.into());
    c.metadata.labels = Some([("karpenter.sh/nodepool".to_string(), "default".to_string())].into());
    c.spec.node_class_ref.name = "default".into();
    c.spec.requirements = vec![
        NodeSelectorRequirementWithMinValues {
            key: "karpenter.sh/capacity-type".into(),
            operator: Operator::In,
            values: vec!["on-demand".into()],
            min_values: None,
        },
        NodeSelectorRequirementWithMinValues {
            key: "node.kubernetes.io/instance-type".into(),
            operator: Operator::In,
            values: vec!["m5.large".into(), "m5.xlarge".into()],
            min_values: None,
        },
    ];
    c.spec.resources.requests = Resources::parse(&[("cpu", "1")]).to_list();
    c
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn launch_find_list_and_terminate_through_moto() {
    let moto = start();
    block_on(async {
        let http = http(&moto);
        let ami = account(&http, "test").await;
        let options = AwsOptions {
            cluster_name: "test".into(),
            cluster_endpoint: "https://test-cluster".into(),
            region: "us-east-1".into(),
            kubernetes_version: "1.33".into(),
            vm_memory_overhead_percent: 0.075,
            ..Default::default()
        };
        let classes = BTreeMap::from([("default".to_string(), node_class("test", &ami))]);
        let ec2 = Ec2Client::new(http.clone());
        let provider = AwsCloudProvider::new(ec2.clone(), classes, options);

        // Instance types come from EC2's DescribeInstanceTypes and offerings.
        let mut pool = NodePool::default();
        pool.spec.template.spec.node_class_ref.name = "default".into();
        let types = provider.instance_types(&pool).await.unwrap();
        assert!(types.len() > 500, "{} types", types.len());
        let m5 = types
            .iter()
            .find(|t| t.name == "m5.large")
            .expect("m5.large offered");
        assert_eq!(
            m5.allocatable().pods,
            29_000,
            "ENI-limited pods from EC2's answer"
        );
        let zones: std::collections::BTreeSet<_> =
            m5.offerings.iter().map(|o| o.zone.as_str()).collect();
        assert_eq!(
            zones,
            ["us-east-1a", "us-east-1b"].into(),
            "only zones with a selected subnet"
        );

        let launched = provider.create(&claim("default-abc")).await.unwrap();
        let provider_id = launched
            .status
            .as_ref()
            .unwrap()
            .provider_id
            .clone()
            .unwrap();
        assert!(provider_id.starts_with("aws:///us-east-1"), "{provider_id}");
        let labels = launched.metadata.labels.clone().unwrap();
        assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
        assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
        assert_eq!(
            launched.status.as_ref().unwrap().image_id.as_deref(),
            Some(ami.as_str())
        );

        // The instance is tagged for List and garbage collection.
        let id = provider_id.rsplit('/').next().unwrap().to_string();
        let instance = ec2
            .describe_instances(vec![id.clone()], vec![])
            .await
            .unwrap()
            .remove(0);
        assert_eq!(instance.tags["karpenter.sh/nodeclaim"], "default-abc");
        assert_eq!(instance.tags["karpenter.sh/nodepool"], "default");
        assert_eq!(instance.tags["eks:eks-cluster-name"], "test");
        assert_eq!(instance.tags["kubernetes.io/cluster/test"], "owned");
        assert_eq!(instance.tags["team"], "platform");

        // Asking again for the same claim finds the same instance.
        let again = provider.create(&claim("default-abc")).await.unwrap();
        assert_eq!(
            again.status.unwrap().provider_id.as_deref(),
            Some(provider_id.as_str())
        );

        let listed = provider.list().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].metadata.name.as_deref(), Some("default-abc"));
        let got = provider.get(&provider_id).await.unwrap();
        assert_eq!(
            got.metadata.labels.unwrap()["node.kubernetes.io/instance-type"],
            "m5.large"
        );

        // Terminate: asked, then gone.
        let mut with_id = claim("default-abc");
        with_id.status = launched.status.clone();
        let deleted = provider.delete(&with_id).await;
        assert!(deleted.is_ok(), "{deleted:?}");
        assert!(matches!(
            provider.get(&provider_id).await,
            Err(CloudProviderError::NotFound(_))
        ));
        assert!(matches!(
            provider.delete(&with_id).await,
            Err(CloudProviderError::NotFound(_))
        ));
        assert!(provider.list().await.unwrap().is_empty());
    });
}

#[test]
fn validation_dry_runs_through_moto() {
    use karpenter_aws::validation::{self, Outcome, ValidationCache};
    let moto = start();
    block_on(async {
        let http = http(&moto);
        let ami = account(&http, "test").await;
        let class = node_class("test", &ami);
        let classes = BTreeMap::from([("default".to_string(), class.clone())]);
        let options = AwsOptions {
            cluster_name: "test".into(),
            cluster_endpoint: "https://test-cluster".into(),
            region: "us-east-1".into(),
            kubernetes_version: "1.33".into(),
            vm_memory_overhead_percent: 0.075,
            ..Default::default()
        };
        let ec2 = Ec2Client::new(http.clone());
        let provider = AwsCloudProvider::new(ec2.clone(), classes, options);
        let resolved = provider.resolve_node_class(&class).await.unwrap();
        // moto answers CreateFleet and RunInstances with DryRun=true as EC2 does, with
        // DryRunOperation, and makes the launch template for real.
        let outcome = validation::validate(
            &provider,
            &class,
            &resolved,
            &ValidationCache::default(),
            std::time::Instant::now(),
        )
        .await;
        assert_eq!(outcome, Outcome::Succeeded);
        let templates = ec2
            .describe_launch_templates(vec![Filter::new(
                "tag:karpenter.k8s.aws/ec2nodeclass",
                &["default"],
            )])
            .await
            .unwrap();
        assert_eq!(templates.len(), 1, "{templates:?}");
        // A dry run launches nothing.
        let instances = ec2
            .describe_instances(Vec::new(), Vec::new())
            .await
            .unwrap();
        assert!(instances.is_empty(), "{instances:?}");
    });
}

#[test]
fn placement_lands_in_the_launch_template() {
    let moto = start();
    block_on(async {
        let http = http(&moto);
        let ec2 = Ec2Client::new(http.clone());
        let data = karpenter_aws::ec2::LaunchTemplateData {
            image_id: "ami-12c6146b".into(),
            placement: Some(("pg-0123456789abcdef0".into(), Some(2))),
            tags: [("team".to_string(), "platform".to_string())].into(),
            ..Default::default()
        };
        ec2.create_launch_template("placed".into(), data)
            .await
            .unwrap();
        let versions = query(
            &http,
            "ec2",
            "2016-11-15",
            &[
                ("Action", "DescribeLaunchTemplateVersions"),
                ("LaunchTemplateName", "placed"),
            ],
        )
        .await;
        let placement = between(&versions, "<placement>", "</placement>");
        assert!(
            placement.contains("<groupId>pg-0123456789abcdef0</groupId>"),
            "{placement}"
        );
        assert!(
            placement.contains("<partitionNumber>2</partitionNumber>"),
            "{placement}"
        );
    });
}

#[test]
fn a_node_class_selecting_nothing_is_not_ready() {
    let moto = start();
    block_on(async {
        let http = http(&moto);
        let ami = account(&http, "test").await;
        let classes =
            BTreeMap::from([("default".to_string(), node_class("another-cluster", &ami))]);
        let options = AwsOptions {
            cluster_name: "test".into(),
            region: "us-east-1".into(),
            ..Default::default()
        };
        let provider = AwsCloudProvider::new(Ec2Client::new(http), classes, options);
        let err = provider.create(&claim("a")).await.unwrap_err();
        assert!(
            matches!(&err, CloudProviderError::NodeClassNotReady(c)
                if c.message() == "spec.subnetSelectorTerms: no subnet matches"),
            "{err:?}"
        );
    });
}

#[test]
fn interruption_queue_round_trip_through_moto() {
    use karpenter_aws::sqs::{Queue, SqsQueue};
    let moto = start();
    block_on(async {
        let http = http(&moto);
        let sqs = |action: &str, body: serde_json::Value| {
            let http = http.clone();
            let target = format!("AmazonSQS.{action}");
            async move {
                http.send(
                    "sqs",
                    "POST",
                    "/",
                    &[],
                    &[
                        ("content-type", "application/x-amz-json-1.0"),
                        ("x-amz-target", &target),
                    ],
                    body.to_string().into_bytes(),
                )
                .await
                .unwrap()
            }
        };
        sqs(
            "CreateQueue",
            serde_json::json!({"QueueName": "karpenter-test"}),
        )
        .await;
        let queue = SqsQueue::open(http.clone(), "karpenter-test")
            .await
            .unwrap();
        let body = r#"{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":"2026-11-22T13:52:02Z","region":"us-east-1","resources":[],"detail":{"instance-id":"i-1","instance-action":"terminate"}}"#;
        sqs(
            "SendMessage",
            serde_json::json!({"QueueUrl": queue.url(), "MessageBody": body}),
        )
        .await;
        let received = queue.receive().await.unwrap();
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].body, body);
        assert!(received[0].sent_timestamp_ms.is_some());
        let parsed = karpenter_aws::interruption::parse(&received[0].body).unwrap();
        assert_eq!(parsed.instance_ids, vec!["i-1"]);
        queue
            .delete(received[0].receipt_handle.clone())
            .await
            .unwrap();
        let attributes = sqs(
            "GetQueueAttributes",
            serde_json::json!({"QueueUrl": queue.url(), "AttributeNames": ["All"]}),
        )
        .await;
        let attributes: serde_json::Value = serde_json::from_slice(&attributes).unwrap();
        assert_eq!(attributes["Attributes"]["ApproximateNumberOfMessages"], "0");
        assert_eq!(
            attributes["Attributes"]["ApproximateNumberOfMessagesNotVisible"], "0",
            "deleted, not just hidden"
        );
        let missing = SqsQueue::open(http, "no-such-queue").await.err().unwrap();
        assert!(
            missing.to_string().contains("QueueDoesNotExist")
                || missing.to_string().contains("NonExistentQueue"),
            "{missing}"
        );
    });
}

#[test]
fn eks_describe_cluster_through_moto() {
    use karpenter_aws::eks::{ClusterApi, EksClient};
    use karpenter_aws::operator::{AwsSettings, discover_cluster};
    let moto = start();
    block_on(async {
        let http = http(&moto);
        http.send(
            "eks",
            "POST",
            "/clusters",
            &[],
            &[("content-type", "application/json")],
            serde_json::json!({
                "name": "test",
                "version": "1.33",
                "roleArn": "arn:aws:iam::123456789012:role/eks",
                "resourcesVpcConfig": {"subnetIds": []},
                "kubernetesNetworkConfig": {"serviceIpv4Cidr": "10.100.0.0/16"},
            })
            .to_string()
            .into_bytes(),
        )
        .await
        .unwrap();
        let eks = EksClient::new(http);
        let info = eks.describe_cluster("test".into()).await.unwrap();
        assert_eq!(info.version.as_deref(), Some("1.33"));
        assert_eq!(info.service_ipv4_cidr.as_deref(), Some("10.100.0.0/16"));
        let endpoint = info.endpoint.clone().unwrap();
        assert!(endpoint.starts_with("https://"), "{endpoint}");
        assert!(info.certificate_authority.is_some());
        let missing = eks.describe_cluster("nope".into()).await.unwrap_err();
        assert!(
            missing.to_string().contains("No cluster found"),
            "{missing}"
        );

        let settings = AwsSettings {
            cluster_name: "test".into(),
            aws_region: "us-east-1".into(),
            ..Default::default()
        };
        let found = discover_cluster(&eks, &settings, None, None).await.unwrap();
        assert_eq!(found.endpoint, endpoint);
        assert_eq!(found.cidr.as_deref(), Some("10.100.0.0/16"));
        assert_eq!(found.kube_dns_ip.as_deref(), Some("10.100.0.10"));
    });
}

#[test]
fn launch_template_interfaces_cpu_and_market_options_through_moto() {
    use karpenter_aws::ec2::LaunchTemplateData;
    use karpenter_aws::ec2nodeclass::ConnectionTracking;
    use karpenter_aws::interfaces::LaunchTemplateInterface;
    let moto = start();
    block_on(async {
        let http = http(&moto);
        let ec2 = Ec2Client::new(http.clone());
        let efa = |card: i32| LaunchTemplateInterface {
            network_card_index: Some(card),
            device_index: if card == 0 { 0 } else { 1 },
            interface_type: Some("efa".into()),
            ipv4_prefix_count: Some(2),
            security_groups: vec!["sg-1".into()],
            connection_tracking: Some(ConnectionTracking {
                tcp_established_timeout: Some(120),
                udp_stream_timeout: None,
                udp_timeout: Some(30),
            }),
            ..Default::default()
        };
        ec2.create_launch_template(
            "karpenter.k8s.aws/surface".into(),
            LaunchTemplateData {
                image_id: "ami-12345678".into(),
                user_data: "IyEvYmluL2Jhc2g=".into(),
                instance_profile: "profile".into(),
                security_groups: vec!["sg-1".into()],
                http_tokens: "required".into(),
                http_endpoint: "enabled".into(),
                http_protocol_ipv6: "disabled".into(),
                http_put_response_hop_limit: 1,
                network_interfaces: vec![efa(0), efa(1)],
                capacity_reservation_id: Some("cr-0123".into()),
                capacity_reservation_preference: Some("capacity-reservations-only".into()),
                market_type: Some("capacity-block".into()),
                nested_virtualization: Some("enabled".into()),
                tags: [("eks:eks-cluster-name".to_string(), "test".to_string())].into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let versions = query(
            &http,
            "ec2",
            "2016-11-15",
            &[
                ("Action", "DescribeLaunchTemplateVersions"),
                ("LaunchTemplateName", "karpenter.k8s.aws/surface"),
            ],
        )
        .await;
        let data = between(&versions, "<launchTemplateData>", "</launchTemplateData>");
        let compact: String = data.split_whitespace().collect();
        for wanted in [
            "<interfaceType>efa</interfaceType>",
            "<networkCardIndex>1</networkCardIndex>",
            "<ipv4PrefixCount>2</ipv4PrefixCount>",
            "<tcpEstablishedTimeout>120</tcpEstablishedTimeout>",
            "<marketType>capacity-block</marketType>",
            "<nestedVirtualization>enabled</nestedVirtualization>",
            "<capacityReservationId>cr-0123</capacityReservationId>",
            "<capacityReservationPreference>capacity-reservations-only</capacityReservationPreference>",
        ] {
            assert!(compact.contains(wanted), "{wanted} in {data}");
        }
        assert!(
            !compact.contains("<securityGroupIdSet>"),
            "the interfaces carry the groups: {data}"
        );
    });
}
