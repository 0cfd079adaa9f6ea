//! The launch surface end to end on a fake AWS: what the launch templates and fleets carry for
//! EFA, `ipPrefixCount`, IPv6 clusters, connection tracking, `cpuOptions` and Capacity Blocks;
//! AL2 and Windows aliases and user data; AMI deprecation; the Kubernetes version refresh; EKS
//! discovery of the cluster.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine;
use karpenter_api::{NodeClaim, NodeSelectorRequirementWithMinValues, Operator};
use karpenter_aws::ec2::{
    CapacityReservationInfo, Ec2Api, Filter, FleetRequest, FleetResult, Image, Instance,
    LaunchTemplateData, SecurityGroupInfo, SubnetInfo,
};
use karpenter_aws::ec2nodeclass::EC2NodeClass;
use karpenter_aws::eks::{ClusterApi, ClusterInfo};
use karpenter_aws::http::{AwsError, Result};
use karpenter_aws::iam::InstanceProfiles;
use karpenter_aws::instancetype::{InstanceTypeInfo, catalog};
use karpenter_aws::launch::{FleetPlan, Override, TemplateKey, keep_one_reservation_type};
use karpenter_aws::operator::{AwsSettings, discover_cluster};
use karpenter_aws::pricing::SpotPrice;
use karpenter_aws::pricing_api::PriceList;
use karpenter_aws::provider::{AwsCloudProvider, AwsOptions};
use karpenter_aws::ssm::{ParameterStore, Variant};
use karpenter_controller::cloudprovider::CloudProvider;
use karpenter_core::resources::Resources;
use support::{FakeEc2, Store, TYPES};

/// The fake EC2, plus SSM parameters, extra instance types, and DescribeImages that honours
/// the `image-id` filter.
#[derive(Clone, Default)]
struct Surface {
    ec2: FakeEc2,
    parameters: Arc<Mutex<BTreeMap<String, String>>>,
    asked: Arc<Mutex<Vec<String>>>,
    extra_types: Arc<Mutex<Vec<String>>>,
}

impl Surface {
    fn type_names(&self) -> Vec<String> {
        let mut names: Vec<String> = TYPES.iter().map(|t| t.to_string()).collect();
        names.extend(self.extra_types.lock().unwrap().iter().cloned());
        names
    }
    fn templates(&self) -> Vec<LaunchTemplateData> {
        self.ec2
            .templates
            .lock()
            .unwrap()
            .values()
            .cloned()
            .collect()
    }
    fn fleets(&self) -> Vec<FleetRequest> {
        self.ec2.fleets.lock().unwrap().clone()
    }
    fn image(&self, id: &str, created: &str, deprecation: Option<&str>) {
        self.ec2.images.lock().unwrap().push(Image {
            id: id.into(),
            name: id.into(),
            architecture: "x86_64".into(),
            creation_date: created.into(),
            deprecation_time: deprecation.map(str::to_string),
            ..Default::default()
        });
    }
}

impl Ec2Api for Surface {
    async fn describe_subnets(&self, f: Vec<Filter>) -> Result<Vec<SubnetInfo>> {
        self.ec2.describe_subnets(f).await
    }
    async fn describe_security_groups(&self, f: Vec<Filter>) -> Result<Vec<SecurityGroupInfo>> {
        self.ec2.describe_security_groups(f).await
    }
    async fn describe_capacity_reservations(
        &self,
        ids: Vec<String>,
        f: Vec<Filter>,
    ) -> Result<Vec<CapacityReservationInfo>> {
        self.ec2.describe_capacity_reservations(ids, f).await
    }
    async fn describe_images(&self, filters: Vec<Filter>, _: Vec<String>) -> Result<Vec<Image>> {
        let ids = filters.iter().find(|f| f.name == "image-id");
        Ok(self
            .ec2
            .images
            .lock()
            .unwrap()
            .iter()
            .filter(|i| ids.is_none_or(|f| f.values.contains(&i.id)))
            .cloned()
            .collect())
    }
    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>> {
        let names = self.type_names();
        Ok(catalog()
            .types
            .iter()
            .filter(|t| names.contains(&t.name))
            .cloned()
            .collect())
    }
    async fn describe_instance_type_offerings(&self) -> Result<Vec<(String, String)>> {
        Ok(self
            .type_names()
            .into_iter()
            .map(|t| (t, "us-east-1a".to_string()))
            .collect())
    }
    async fn describe_spot_price_history(&self) -> Result<Vec<SpotPrice>> {
        self.ec2.describe_spot_price_history().await
    }
    async fn describe_launch_templates(
        &self,
        f: Vec<Filter>,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>> {
        self.ec2.describe_launch_templates(f).await
    }
    async fn delete_launch_template(&self, name: String) -> Result<()> {
        self.ec2.delete_launch_template(name).await
    }
    async fn create_launch_template(&self, name: String, data: LaunchTemplateData) -> Result<()> {
        self.ec2.create_launch_template(name, data).await
    }
    async fn create_fleet(&self, request: FleetRequest) -> Result<FleetResult> {
        self.ec2.create_fleet(request).await
    }
    async fn describe_instances(&self, ids: Vec<String>, f: Vec<Filter>) -> Result<Vec<Instance>> {
        self.ec2.describe_instances(ids, f).await
    }
    async fn terminate_instances(&self, ids: Vec<String>) -> Result<()> {
        self.ec2.terminate_instances(ids).await
    }
}

impl ParameterStore for Surface {
    async fn get_parameter(&self, name: String) -> Result<String> {
        self.asked.lock().unwrap().push(name.clone());
        self.parameters
            .lock()
            .unwrap()
            .get(&name)
            .cloned()
            .ok_or(AwsError::Api {
                code: "ParameterNotFound".into(),
                message: name,
                status: 400,
            })
    }
}

impl PriceList for Surface {
    async fn on_demand_prices(&self) -> Result<Vec<(String, f64)>> {
        Ok(Vec::new())
    }
}

impl InstanceProfiles for Surface {
    async fn ensure_instance_profile(&self, name: String, role: String) -> Result<()> {
        self.ec2.ensure_instance_profile(name, role).await
    }
}

impl karpenter_aws::ec2_extra::PlacementGroups for Surface {
    async fn describe_placement_groups(
        &self,
        query: karpenter_aws::ec2_extra::PlacementGroupQuery,
    ) -> Result<Vec<karpenter_aws::ec2_extra::PlacementGroupInfo>> {
        self.ec2.describe_placement_groups(query).await
    }
}

impl karpenter_aws::ec2_extra::DryRuns for Surface {
    async fn dry_run_create_fleet(
        &self,
        request: karpenter_aws::ec2_extra::CreateFleetDryRun,
    ) -> Result<()> {
        self.ec2.dry_run_create_fleet(request).await
    }
    async fn dry_run_run_instances(
        &self,
        request: karpenter_aws::ec2_extra::RunInstancesDryRun,
    ) -> Result<()> {
        self.ec2.dry_run_run_instances(request).await
    }
}

fn options() -> AwsOptions {
    AwsOptions {
        cluster_name: "test".into(),
        cluster_endpoint: "https://test-cluster".into(),
        region: "us-east-1".into(),
        kubernetes_version: "1.33".into(),
        vm_memory_overhead_percent: 0.075,
        kube_dns_ip: Some("10.100.0.10".into()),
        ..Default::default()
    }
}

fn provider(
    surface: &Surface,
    class: EC2NodeClass,
    change: impl FnOnce(&mut AwsOptions),
) -> AwsCloudProvider<Surface, Store> {
    let mut o = options();
    change(&mut o);
    let store = Store(Arc::new(Mutex::new(BTreeMap::from([(
        "default".to_string(),
        class,
    )]))));
    AwsCloudProvider::new(surface.clone(), store, o)
}

/// A NodeClass booting `ami-1` (which the surface has) with `extra` fields.
fn class(extra: serde_json::Value) -> EC2NodeClass {
    support::node_class(extra)
}

fn with_ami_1(surface: &Surface) {
    surface.image("ami-1", "2026-01-01T00:00:00Z", None);
}

fn claim(capacity_types: &[&str], extra_requests: &[(&str, &str)]) -> NodeClaim {
    let mut c = NodeClaim::default();
    c.metadata.name = Some("a".into());
    c.metadata.labels = Some([("karpenter.sh/nodepool".to_string(), "default".to_string())].into());
    c.spec.node_class_ref.name = "default".into();
    c.spec.requirements = vec![NodeSelectorRequirementWithMinValues {
        key: "karpenter.sh/capacity-type".into(),
        operator: Operator::In,
        values: capacity_types.iter().map(|s| s.to_string()).collect(),
        min_values: None,
    }];
    let mut requests = vec![("cpu", "1")];
    requests.extend_from_slice(extra_requests);
    c.spec.resources.requests = Resources::parse(&requests).to_list();
    c
}

fn require_type(c: &mut NodeClaim, name: &str) {
    c.spec
        .requirements
        .push(NodeSelectorRequirementWithMinValues {
            key: "node.kubernetes.io/instance-type".into(),
            operator: Operator::In,
            values: vec![name.into()],
            min_values: None,
        });
}

fn user_data(t: &LaunchTemplateData) -> String {
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(&t.user_data)
            .unwrap(),
    )
    .unwrap()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// A catalog type with several EFA interfaces and an on-demand price.
fn efa_type() -> (String, i64) {
    let t = catalog()
        .types
        .iter()
        .filter(|t| t.efa >= 2 && catalog().on_demand.contains_key(&t.name))
        .min_by_key(|t| (t.vcpu, t.name.clone()))
        .expect("the catalog has EFA types");
    (t.name.clone(), t.efa)
}

#[test]
fn an_efa_request_attaches_one_efa_interface_per_card() {
    block_on(async {
        let surface = Surface::default();
        with_ami_1(&surface);
        let (efa_type, efa) = efa_type();
        surface.extra_types.lock().unwrap().push(efa_type.clone());
        let p = provider(&surface, class(serde_json::json!({})), |_| {});
        let mut c = claim(&["on-demand"], &[("vpc.amazonaws.com/efa", "1")]);
        require_type(&mut c, &efa_type);
        let launched = p.create(&c).await.unwrap();
        assert_eq!(
            launched.metadata.labels.unwrap()["node.kubernetes.io/instance-type"],
            efa_type
        );
        let templates = surface.templates();
        assert_eq!(templates.len(), 1);
        let interfaces = &templates[0].network_interfaces;
        assert_eq!(interfaces.len() as i64, efa, "{interfaces:?}");
        assert!(
            interfaces.iter().all(
                |n| n.interface_type.as_deref() == Some("efa") && n.security_groups == ["sg-1"]
            )
        );
        assert_eq!(
            (interfaces[0].network_card_index, interfaces[0].device_index),
            (Some(0), 0)
        );
        assert_eq!(
            (interfaces[1].network_card_index, interfaces[1].device_index),
            (Some(1), 1)
        );

        // The same type without an EFA request gets no EFA interfaces.
        let surface = Surface::default();
        with_ami_1(&surface);
        surface.extra_types.lock().unwrap().push(efa_type.clone());
        let p = provider(&surface, class(serde_json::json!({})), |_| {});
        let mut c = claim(&["on-demand"], &[]);
        require_type(&mut c, &efa_type);
        p.create(&c).await.unwrap();
        // Only the primary interface, carrying the groups (upstream's default).
        let plain = &surface.templates()[0].network_interfaces;
        assert_eq!(plain.len(), 1);
        assert_eq!(
            (
                plain[0].network_card_index,
                plain[0].device_index,
                plain[0].interface_type.as_deref(),
                plain[0].security_groups.as_slice()
            ),
            (None, 0, None, &["sg-1".to_string()][..])
        );
    });
}

#[test]
fn prefixes_public_ip_connection_tracking_and_cpu_options_reach_the_template() {
    block_on(async {
        let surface = Surface::default();
        with_ami_1(&surface);
        let p = provider(
            &surface,
            class(serde_json::json!({
                "ipPrefixCount": 2,
                "associatePublicIPAddress": true,
                "connectionTracking": {"tcpEstablishedTimeout": 120, "udpTimeout": 30},
                "cpuOptions": {"nestedVirtualization": "enabled"},
            })),
            |_| {},
        );
        p.create(&claim(&["on-demand"], &[])).await.unwrap();
        let t = &surface.templates()[0];
        assert_eq!(t.nested_virtualization.as_deref(), Some("enabled"));
        assert_eq!(t.market_type, None);
        let ni = &t.network_interfaces;
        assert_eq!(ni.len(), 1);
        assert_eq!(ni[0].ipv4_prefix_count, Some(2));
        assert_eq!(ni[0].ipv6_prefix_count, None);
        assert_eq!(ni[0].associate_public_ip, Some(true));
        let ct = ni[0].connection_tracking.as_ref().unwrap();
        assert_eq!(
            (
                ct.tcp_established_timeout,
                ct.udp_stream_timeout,
                ct.udp_timeout
            ),
            (Some(120), None, Some(30))
        );
        assert!(user_data(t).contains("\"clusterDNS\": [\n          \"10.100.0.10\""));
    });
}

#[test]
fn an_ipv6_cluster_gets_ipv6_interfaces_and_its_dns() {
    block_on(async {
        let surface = Surface::default();
        with_ami_1(&surface);
        let p = provider(
            &surface,
            class(serde_json::json!({"ipPrefixCount": 1})),
            |o| o.kube_dns_ip = Some("fd30:1c53:5f8a::a".into()),
        );
        p.create(&claim(&["on-demand"], &[])).await.unwrap();
        let t = &surface.templates()[0];
        let ni = &t.network_interfaces[0];
        assert_eq!(
            (
                ni.ipv6_prefix_count,
                ni.ipv4_prefix_count,
                ni.ipv6_address_count,
                ni.primary_ipv6
            ),
            (Some(1), None, Some(1), Some(true))
        );
        assert!(
            user_data(t).contains("fd30:1c53:5f8a::a"),
            "{}",
            user_data(t)
        );

        // AL2 nodes are told the family.
        let surface = Surface::default();
        with_ami_1(&surface);
        let p = provider(
            &surface,
            class(serde_json::json!({"amiFamily": "AL2"})),
            |o| o.kube_dns_ip = Some("fd30:1c53:5f8a::a".into()),
        );
        p.create(&claim(&["on-demand"], &[])).await.unwrap();
        let script = user_data(&surface.templates()[0]);
        assert!(
            script.contains("--ip-family ipv6 \\\n--dns-cluster-ip 'fd30:1c53:5f8a::a'"),
            "{script}"
        );
        // A NodeClass's own clusterDNS wins over the cluster's.
        let surface = Surface::default();
        with_ami_1(&surface);
        let p = provider(
            &surface,
            class(
                serde_json::json!({"amiFamily": "AL2", "kubelet": {"clusterDNS": ["10.0.0.53"]}}),
            ),
            |_| {},
        );
        p.create(&claim(&["on-demand"], &[])).await.unwrap();
        let script = user_data(&surface.templates()[0]);
        assert!(script.contains("--dns-cluster-ip '10.0.0.53'"), "{script}");
        assert!(!script.contains("--ip-family"));
    });
}

fn reservation(id: &str, kind: &str) -> CapacityReservationInfo {
    CapacityReservationInfo {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        available: 2,
        instance_match_criteria: "targeted".into(),
        owner_id: "123456789012".into(),
        end_date: Some("2026-12-01T00:00:00Z".into()),
        reservation_type: kind.into(),
        state: "active".into(),
    }
}

#[test]
fn a_capacity_block_launches_as_capacity_block() {
    block_on(async {
        let surface = Surface::default();
        with_ami_1(&surface);
        surface
            .ec2
            .reservations
            .lock()
            .unwrap()
            .push(reservation("cr-block", "capacity-block"));
        let p = provider(
            &surface,
            class(serde_json::json!({"capacityReservationSelectorTerms": [{"id": "cr-block"}]})),
            |_| {},
        );
        let launched = p.create(&claim(&["reserved"], &[])).await.unwrap();
        let labels = launched.metadata.labels.unwrap();
        assert_eq!(labels["karpenter.sh/capacity-type"], "reserved");
        assert_eq!(
            labels["karpenter.k8s.aws/capacity-reservation-type"],
            "capacity-block"
        );
        let fleet = &surface.fleets()[0];
        assert!(fleet.capacity_block);
        let t = &surface.templates()[0];
        assert_eq!(t.market_type.as_deref(), Some("capacity-block"));
        assert_eq!(t.capacity_reservation_id.as_deref(), Some("cr-block"));
        assert!(
            user_data(t).contains("karpenter.k8s.aws/capacity-reservation-type=capacity-block")
        );

        // An On-Demand Capacity Reservation is `default`, with no market type.
        let surface = Surface::default();
        with_ami_1(&surface);
        surface
            .ec2
            .reservations
            .lock()
            .unwrap()
            .push(reservation("cr-odcr", "default"));
        let p = provider(
            &surface,
            class(serde_json::json!({"capacityReservationSelectorTerms": [{"id": "cr-odcr"}]})),
            |_| {},
        );
        let launched = p.create(&claim(&["reserved"], &[])).await.unwrap();
        assert_eq!(
            launched.metadata.labels.unwrap()["karpenter.k8s.aws/capacity-reservation-type"],
            "default"
        );
        assert!(!surface.fleets()[0].capacity_block);
        assert_eq!(surface.templates()[0].market_type, None);
    });
}

/// After upstream's capacity reservation type filter: one kind per fleet, the cheapest; on a
/// tie On-Demand Capacity Reservations before Capacity Blocks.
#[test]
fn a_fleet_holds_one_kind_of_reservation() {
    let key = |image: &str, reservation: &str| TemplateKey {
        image: image.into(),
        pods: 29,
        reservation: Some(reservation.into()),
        efa: 0,
    };
    let o = |t: &str, price: f64| Override {
        instance_type: t.into(),
        subnet_id: "subnet-a".into(),
        zone: "us-east-1a".into(),
        price,
    };
    let kinds = |id: &str| {
        if id.starts_with("cr-block") {
            "capacity-block".to_string()
        } else {
            "default".to_string()
        }
    };
    let plan = |block_price: f64| FleetPlan {
        capacity_type: "reserved".into(),
        by_image: BTreeMap::from([
            (
                key("ami-1", "cr-block"),
                vec![o("p5.48xlarge", block_price)],
            ),
            (key("ami-1", "cr-odcr"), vec![o("m5.large", 0.5)]),
        ]),
    };
    let mut tie = plan(0.5);
    assert_eq!(
        keep_one_reservation_type(&mut tie, kinds).as_deref(),
        Some("default")
    );
    assert_eq!(tie.by_image.len(), 1);
    assert!(
        tie.by_image
            .keys()
            .all(|k| k.reservation.as_deref() == Some("cr-odcr"))
    );
    let mut cheaper_block = plan(0.1);
    assert_eq!(
        keep_one_reservation_type(&mut cheaper_block, kinds).as_deref(),
        Some("capacity-block")
    );
    assert!(
        cheaper_block
            .by_image
            .keys()
            .all(|k| k.reservation.as_deref() == Some("cr-block"))
    );
    let mut unreserved = FleetPlan {
        capacity_type: "on-demand".into(),
        by_image: BTreeMap::from([(
            TemplateKey {
                reservation: None,
                ..key("ami-1", "")
            },
            vec![o("m5.large", 0.1)],
        )]),
    };
    assert_eq!(keep_one_reservation_type(&mut unreserved, kinds), None);
    assert_eq!(unreserved.by_image.len(), 1);
}

#[test]
fn al2_aliases_resolve_through_ssm_and_boot_with_bootstrap_sh() {
    block_on(async {
        let surface = Surface::default();
        surface.image("ami-al2", "2026-01-01T00:00:00Z", None);
        surface.image("ami-al2-gpu", "2026-01-01T00:00:00Z", None);
        surface.parameters.lock().unwrap().extend([
            (
                "/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id"
                    .to_string(),
                "ami-al2".to_string(),
            ),
            (
                "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id"
                    .to_string(),
                "ami-al2-gpu".to_string(),
            ),
        ]);
        let nc = class(serde_json::json!({
            "amiFamily": null,
            "amiSelectorTerms": [{"alias": "al2@latest"}],
        }));
        let p = provider(&surface, nc.clone(), |o| {
            o.kubernetes_version = "1.32".into()
        });
        let resolved = p.resolve_node_class(&nc).await.unwrap();
        let mut images: Vec<(&str, Variant)> = resolved
            .images
            .iter()
            .map(|i| (i.id.as_str(), i.variant))
            .collect();
        images.sort();
        assert_eq!(
            images,
            [
                ("ami-al2", Variant::Standard),
                ("ami-al2-gpu", Variant::Nvidia),
                ("ami-al2-gpu", Variant::Neuron),
            ]
        );
        p.create(&claim(&["on-demand"], &[])).await.unwrap();
        let t = &surface.templates()[0];
        assert_eq!(t.image_id, "ami-al2");
        let script = user_data(t);
        assert!(
            script.contains(
                "/etc/eks/bootstrap.sh 'test' --apiserver-endpoint 'https://test-cluster'"
            ),
            "{script}"
        );
        assert!(script.contains("--dns-cluster-ip '10.100.0.10'"));

        // No AL2 on 1.33: the NodeClass says why.
        let p = provider(&surface, nc.clone(), |_| {});
        let err = p.resolve_node_class(&nc).await.unwrap_err();
        assert!(
            err.to_string().starts_with(
                "spec.amiSelectorTerms[].alias: al2 aliases are not supported on Kubernetes 1.33"
            ),
            "{err}"
        );
    });
}

#[test]
fn windows_aliases_boot_windows_nodes_of_their_build() {
    block_on(async {
        let surface = Surface::default();
        surface.image("ami-win", "2026-01-01T00:00:00Z", None);
        surface.parameters.lock().unwrap().insert(
            "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id".into(),
            "ami-win".into(),
        );
        let nc = class(serde_json::json!({
            "amiFamily": null,
            "amiSelectorTerms": [{"alias": "windows2022@latest"}],
        }));
        let p = provider(&surface, nc, |_| {});
        let launched = p.create(&claim(&["on-demand"], &[])).await.unwrap();
        let labels = launched.metadata.labels.unwrap();
        assert_eq!(labels["kubernetes.io/os"], "windows");
        assert_eq!(labels["node.kubernetes.io/windows-build"], "10.0.20348");
        let t = &surface.templates()[0];
        assert_eq!(t.image_id, "ami-win");
        let script = user_data(t);
        assert!(script.starts_with("<powershell>\n"), "{script}");
        assert!(
            script.contains("-EKSClusterName 'test' -APIServerEndpoint 'https://test-cluster'")
        );
        assert!(script.contains("-DNSClusterIP '10.100.0.10'"));
        assert_eq!(t.block_devices[0].device_name, "/dev/sda1");
    });
}

#[test]
fn images_deprecated_in_the_future_are_still_current() {
    block_on(async {
        let surface = Surface::default();
        // The newest is scheduled for deprecation long after now; an older one already is.
        surface.image(
            "ami-new",
            "2026-06-01T00:00:00Z",
            Some("2099-01-01T00:00:00Z"),
        );
        surface.image(
            "ami-newer-gone",
            "2026-07-01T00:00:00Z",
            Some("2020-01-01T00:00:00Z"),
        );
        surface.image("ami-old", "2025-01-01T00:00:00Z", None);
        let nc = class(serde_json::json!({
            "amiSelectorTerms": [{"tags": {"team": "platform"}}],
        }));
        let p = provider(&surface, nc.clone(), |_| {});
        let resolved = p.resolve_node_class(&nc).await.unwrap();
        let order: Vec<(&str, bool)> = resolved
            .images
            .iter()
            .map(|i| (i.id.as_str(), i.deprecated))
            .collect();
        assert_eq!(
            order,
            [
                ("ami-new", false),
                ("ami-old", false),
                ("ami-newer-gone", true)
            ]
        );
        p.create(&claim(&["on-demand"], &[])).await.unwrap();
        assert_eq!(surface.templates()[0].image_id, "ami-new");
    });
}

#[test]
fn aliases_follow_a_control_plane_upgrade() {
    block_on(async {
        let surface = Surface::default();
        surface.image("ami-132", "2026-01-01T00:00:00Z", None);
        surface.image("ami-133", "2026-02-01T00:00:00Z", None);
        let param = |v: &str| {
            format!(
                "/aws/service/eks/optimized-ami/{v}/amazon-linux-2023/x86_64/standard/recommended/image_id"
            )
        };
        surface.parameters.lock().unwrap().extend([
            (param("1.32"), "ami-132".to_string()),
            (param("1.33"), "ami-133".to_string()),
        ]);
        let nc = class(serde_json::json!({"amiSelectorTerms": [{"alias": "al2023@latest"}]}));
        let p = provider(&surface, nc.clone(), |o| {
            o.kubernetes_version = "1.32".into()
        });
        let ids = |r: &karpenter_aws::nodeclass::ResolvedNodeClass| {
            r.images.iter().map(|i| i.id.clone()).collect::<Vec<_>>()
        };
        assert_eq!(ids(&p.resolve_node_class(&nc).await.unwrap()), ["ami-132"]);

        // A failed read keeps the version.
        assert!(
            !karpenter_aws::version::refresh_once(&p, async { Err("unreachable".to_string()) })
                .await
        );
        assert_eq!(p.kubernetes_version(), "1.32");
        // The upgrade is seen, and the cached resolution is not reused.
        assert!(karpenter_aws::version::refresh_once(&p, async { Ok("1.33".to_string()) }).await);
        assert!(!karpenter_aws::version::refresh_once(&p, async { Ok("1.33".to_string()) }).await);
        assert_eq!(ids(&p.resolve_node_class(&nc).await.unwrap()), ["ami-133"]);
        assert!(surface.asked.lock().unwrap().contains(&param("1.33")));
    });
}

/// An EKS that answers DescribeCluster, counting the calls.
#[derive(Default)]
struct FakeEks {
    info: Option<ClusterInfo>,
    calls: Mutex<usize>,
}

impl ClusterApi for FakeEks {
    async fn describe_cluster(&self, name: String) -> Result<ClusterInfo> {
        *self.calls.lock().unwrap() += 1;
        self.info.clone().ok_or(AwsError::Api {
            code: "ResourceNotFoundException".into(),
            message: format!("No cluster found for name: {name}."),
            status: 404,
        })
    }
}

#[test]
fn the_cluster_is_discovered_through_eks_when_not_set() {
    block_on(async {
        let eks = FakeEks {
            info: Some(ClusterInfo {
                endpoint: Some("https://ABC.gr7.us-east-1.eks.amazonaws.com".into()),
                certificate_authority: Some("Y2EK".into()),
                service_ipv4_cidr: Some("172.20.0.0/16".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let settings = AwsSettings {
            cluster_name: "test".into(),
            aws_region: "us-east-1".into(),
            ..Default::default()
        };
        let found = discover_cluster(&eks, &settings, None, None).await.unwrap();
        assert_eq!(
            found.endpoint,
            "https://ABC.gr7.us-east-1.eks.amazonaws.com"
        );
        assert_eq!(found.ca_bundle.as_deref(), Some("Y2EK"));
        assert_eq!(found.cidr.as_deref(), Some("172.20.0.0/16"));
        assert_eq!(found.kube_dns_ip.as_deref(), Some("172.20.0.10"));

        // What is set wins; the kube-dns service's address wins over the CIDR's.
        let set = AwsSettings {
            cluster_endpoint: "https://mine".into(),
            cluster_cidr: Some("10.100.0.0/16".into()),
            ..settings.clone()
        };
        let found = discover_cluster(&eks, &set, None, Some("10.100.0.53".into()))
            .await
            .unwrap();
        assert_eq!(found.endpoint, "https://mine");
        assert_eq!(found.cidr.as_deref(), Some("10.100.0.0/16"));
        assert_eq!(found.ca_bundle.as_deref(), Some("Y2EK"));
        assert_eq!(found.kube_dns_ip.as_deref(), Some("10.100.0.53"));
        assert_eq!(*eks.calls.lock().unwrap(), 2);

        // Everything set: EKS is not asked; the DNS address comes from the CIDR.
        let found = discover_cluster(&eks, &set, Some("Q0EK".into()), None)
            .await
            .unwrap();
        assert_eq!(*eks.calls.lock().unwrap(), 2);
        assert_eq!(found.kube_dns_ip.as_deref(), Some("10.100.0.10"));

        // No endpoint anywhere is an error naming the setting.
        let err = discover_cluster(&FakeEks::default(), &settings, None, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("CLUSTER_ENDPOINT"), "{err}");
        // EKS failing is fine when the settings say enough.
        let found = discover_cluster(&FakeEks::default(), &set, None, None)
            .await
            .unwrap();
        assert_eq!(found.ca_bundle, None);
    });
}
