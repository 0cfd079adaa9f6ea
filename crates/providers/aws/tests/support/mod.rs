//! A fake EC2 for the tests that need what moto does not model.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use karpenter_aws::ec2::{
    CapacityReservationInfo, Ec2Api, Filter, FleetError, FleetInstance, FleetRequest, FleetResult,
    Image, Instance, LaunchTemplateData, SecurityGroupInfo, SubnetInfo,
};
use karpenter_aws::ec2nodeclass::EC2NodeClass;
use karpenter_aws::http::{AwsError, Result};
use karpenter_aws::iam::InstanceProfiles;
use karpenter_aws::instancetype::{InstanceTypeInfo, catalog};
use karpenter_aws::pricing::SpotPrice;
use karpenter_aws::pricing_api::PriceList;
use karpenter_aws::provider::{AwsCloudProvider, AwsOptions, NodeClassStore};
use karpenter_aws::ssm::ParameterStore;

/// An in-memory EC2 whose fleets fail with insufficient capacity for chosen types. Clones
/// share state, so a test keeps one to look inside after handing the other to the provider.
#[derive(Clone, Default)]
pub struct FakeEc2 {
    pub exhausted: Arc<Mutex<Vec<String>>>,
    pub fleets: Arc<Mutex<Vec<FleetRequest>>>,
    pub instances: Arc<Mutex<Vec<Instance>>>,
    pub templates: Arc<Mutex<BTreeMap<String, LaunchTemplateData>>>,
    pub profiles: Arc<Mutex<Vec<(String, String)>>>,
    pub images: Arc<Mutex<Vec<Image>>>,
    /// Whether DescribeInstanceTypes fails (EC2 unreachable).
    pub unreachable: Arc<std::sync::atomic::AtomicBool>,
    /// Capacity reservations in the account.
    pub reservations: Arc<Mutex<Vec<CapacityReservationInfo>>>,
    /// What the Price List API answers.
    pub on_demand: Arc<Mutex<Vec<(String, f64)>>>,
    /// Placement groups and dry-run answers (see [`FakeChecks`]).
    pub checks: Arc<Mutex<FakeChecks>>,
}

/// NodeClasses a test can change while the provider runs.
#[derive(Clone, Default)]
pub struct Store(pub Arc<Mutex<BTreeMap<String, EC2NodeClass>>>);

impl NodeClassStore for Store {
    async fn get(&self, name: &str) -> std::result::Result<Option<EC2NodeClass>, String> {
        Ok(self.0.lock().unwrap().get(name).cloned())
    }
}

pub const TYPES: [&str; 3] = ["m5.large", "c5.large", "r5.large"];

impl Ec2Api for FakeEc2 {
    async fn describe_subnets(&self, _: Vec<Filter>) -> Result<Vec<SubnetInfo>> {
        Ok(vec![SubnetInfo {
            id: "subnet-a".into(),
            zone: "us-east-1a".into(),
            zone_id: Some("use1-az1".into()),
            available_ips: 100,
        }])
    }
    async fn describe_security_groups(&self, _: Vec<Filter>) -> Result<Vec<SecurityGroupInfo>> {
        Ok(vec![SecurityGroupInfo {
            id: "sg-1".into(),
            name: "nodes".into(),
        }])
    }
    /// As EC2 answers: by id (an unknown id fails the call), `state`, and no filter EC2 does
    /// not document (it rejects those).
    async fn describe_capacity_reservations(
        &self,
        ids: Vec<String>,
        filters: Vec<Filter>,
    ) -> Result<Vec<CapacityReservationInfo>> {
        const DOCUMENTED: &[&str] = &[
            "instance-type",
            "owner-id",
            "instance-platform",
            "availability-zone",
            "tenancy",
            "outpost-arn",
            "state",
            "start-date",
            "end-date",
            "end-date-type",
            "instance-match-criteria",
            "placement-group-arn",
            "tag-key",
        ];
        if let Some(f) = filters
            .iter()
            .find(|f| !DOCUMENTED.contains(&f.name.as_str()) && !f.name.starts_with("tag:"))
        {
            return Err(AwsError::Api {
                code: "InvalidParameterValue".into(),
                message: format!("The filter '{}' is invalid", f.name),
                status: 400,
            });
        }
        let all = self.reservations.lock().unwrap().clone();
        if let Some(missing) = ids.iter().find(|id| !all.iter().any(|r| r.id == **id)) {
            return Err(AwsError::Api {
                code: "InvalidCapacityReservationId.NotFound".into(),
                message: format!("The capacity reservation ID '{missing}' does not exist"),
                status: 400,
            });
        }
        Ok(all
            .into_iter()
            .filter(|r| ids.is_empty() || ids.contains(&r.id))
            .filter(|r| {
                filters.iter().all(|f| match f.name.as_str() {
                    "state" => f.values.contains(&r.state),
                    "owner-id" => f.values.contains(&r.owner_id),
                    "instance-match-criteria" => f.values.contains(&r.instance_match_criteria),
                    _ => true,
                })
            })
            .collect())
    }
    async fn describe_images(&self, _: Vec<Filter>, _: Vec<String>) -> Result<Vec<Image>> {
        Ok(self.images.lock().unwrap().clone())
    }
    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>> {
        if self.unreachable.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(AwsError::Transport("ec2: connection refused".into()));
        }
        Ok(catalog()
            .types
            .iter()
            .filter(|t| TYPES.contains(&t.name.as_str()))
            .cloned()
            .collect())
    }
    async fn describe_instance_type_offerings(&self) -> Result<Vec<(String, String)>> {
        Ok(TYPES
            .iter()
            .map(|t| (t.to_string(), "us-east-1a".to_string()))
            .collect())
    }
    async fn describe_spot_price_history(&self) -> Result<Vec<SpotPrice>> {
        Ok(TYPES
            .iter()
            .map(|t| SpotPrice {
                instance_type: t.to_string(),
                zone: "us-east-1a".into(),
                price: catalog().on_demand[*t] / 3.0,
                timestamp: "2026-11-22T00:00:00Z".into(),
            })
            .collect())
    }
    async fn describe_launch_templates(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>> {
        let t = self.templates.lock().unwrap();
        Ok(t.iter()
            .filter(|(name, data)| {
                filters.iter().all(|f| match f.name.as_str() {
                    "launch-template-name" => f.values.contains(name),
                    "tag-key" => f.values.iter().any(|k| data.tags.contains_key(k)),
                    other => other
                        .strip_prefix("tag:")
                        .is_some_and(|k| data.tags.get(k).is_some_and(|v| f.values.contains(v))),
                })
            })
            .map(|(name, data)| (name.clone(), data.tags.clone()))
            .collect())
    }
    async fn delete_launch_template(&self, name: String) -> Result<()> {
        self.templates.lock().unwrap().remove(&name);
        Ok(())
    }

    async fn create_launch_template(&self, name: String, data: LaunchTemplateData) -> Result<()> {
        if !self.checks().template_errors.is_empty() {
            return Err(self.checks().template_errors.remove(0));
        }
        self.templates.lock().unwrap().insert(name, data);
        Ok(())
    }
    async fn create_fleet(&self, request: FleetRequest) -> Result<FleetResult> {
        self.fleets.lock().unwrap().push(request.clone());
        let exhausted = self.exhausted.lock().unwrap().clone();
        let mut result = FleetResult::default();
        // EC2 tries the overrides in price order (lowest-price / price-capacity-optimized).
        for (_, overrides) in &request.launch_templates {
            for o in overrides {
                if exhausted.contains(&o.instance_type) {
                    result.errors.push(FleetError {
                        code: "InsufficientInstanceCapacity".into(),
                        message: "none left".into(),
                        instance_type: o.instance_type.clone(),
                        zone: o.zone.clone(),
                    });
                } else if result.instances.is_empty() {
                    let id = format!("i-{:04}", self.instances.lock().unwrap().len() + 1);
                    result.instances.push(FleetInstance {
                        id: id.clone(),
                        instance_type: o.instance_type.clone(),
                        zone: o.zone.clone(),
                        capacity_type: request.capacity_type.clone(),
                    });
                    self.instances.lock().unwrap().push(Instance {
                        id,
                        instance_type: o.instance_type.clone(),
                        zone: o.zone.clone(),
                        state: "running".into(),
                        capacity_type: request.capacity_type.clone(),
                        image_id: "ami-1".into(),
                        subnet_id: o.subnet_id.clone(),
                        security_groups: vec!["sg-1".into()],
                        tags: request.tags.clone(),
                        ..Default::default()
                    });
                }
            }
        }
        Ok(result)
    }
    async fn describe_instances(
        &self,
        ids: Vec<String>,
        filters: Vec<Filter>,
    ) -> Result<Vec<Instance>> {
        let all = self.instances.lock().unwrap().clone();
        Ok(all
            .into_iter()
            .filter(|i| ids.is_empty() || ids.contains(&i.id))
            .filter(|i| {
                filters.iter().all(|f| match f.name.strip_prefix("tag:") {
                    Some(key) => i.tags.get(key).is_some_and(|v| f.values.contains(v)),
                    None if f.name == "instance-state-name" => f.values.contains(&i.state),
                    None if f.name == "tag-key" => f.values.iter().any(|k| i.tags.contains_key(k)),
                    None => true,
                })
            })
            .collect())
    }
    async fn terminate_instances(&self, ids: Vec<String>) -> Result<()> {
        for i in self
            .instances
            .lock()
            .unwrap()
            .iter_mut()
            .filter(|i| ids.contains(&i.id))
        {
            i.state = "shutting-down".into();
        }
        Ok(())
    }
}

impl ParameterStore for FakeEc2 {
    async fn get_parameter(&self, name: String) -> Result<String> {
        Err(AwsError::Api {
            code: "ParameterNotFound".into(),
            message: name,
            status: 400,
        })
    }
}

impl PriceList for FakeEc2 {
    async fn on_demand_prices(&self) -> Result<Vec<(String, f64)>> {
        Ok(self.on_demand.lock().unwrap().clone())
    }
}

impl InstanceProfiles for FakeEc2 {
    async fn ensure_instance_profile(&self, name: String, role: String) -> Result<()> {
        self.profiles.lock().unwrap().push((name, role));
        Ok(())
    }
}

pub fn node_class(extra: serde_json::Value) -> EC2NodeClass {
    let mut spec = serde_json::json!({
        "role": "KarpenterNodeRole",
        "amiFamily": "AL2023",
        "amiSelectorTerms": [{"id": "ami-1"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default"}, "spec": spec,
    }))
    .unwrap()
}

pub fn provider(fake: FakeEc2, class: EC2NodeClass) -> AwsCloudProvider<FakeEc2, Store> {
    provider_with(
        fake,
        Store(Arc::new(Mutex::new(BTreeMap::from([(
            "default".to_string(),
            class,
        )])))),
    )
}

pub fn provider_with_options(
    fake: FakeEc2,
    class: EC2NodeClass,
    change: impl FnOnce(&mut AwsOptions),
) -> AwsCloudProvider<FakeEc2, Store> {
    let store = Store(Arc::new(Mutex::new(BTreeMap::from([(
        "default".to_string(),
        class,
    )]))));
    let mut options = options();
    change(&mut options);
    with_image(&fake);
    AwsCloudProvider::new(fake, store, options)
}

/// The one AMI the fake account has.
fn with_image(fake: &FakeEc2) {
    fake.images.lock().unwrap().push(Image {
        id: "ami-1".into(),
        name: "al2023".into(),
        architecture: "x86_64".into(),
        creation_date: "2026-01-01T00:00:00Z".into(),
        ..Default::default()
    });
}

fn options() -> AwsOptions {
    AwsOptions {
        cluster_name: "test".into(),
        cluster_endpoint: "https://test-cluster".into(),
        region: "us-east-1".into(),
        kubernetes_version: "1.33".into(),
        vm_memory_overhead_percent: 0.075,
        ..Default::default()
    }
}

pub fn provider_with(fake: FakeEc2, store: Store) -> AwsCloudProvider<FakeEc2, Store> {
    with_image(&fake);
    AwsCloudProvider::new(fake, store, options())
}

/// Placement groups and dry-run answers of the fake account.
#[derive(Clone, Default)]
pub struct FakeChecks {
    /// Placement groups in the account (all `available`).
    pub placement_groups: Vec<karpenter_aws::ec2_extra::PlacementGroupInfo>,
    /// What the next CreateFleet dry runs answer, first first; `DryRunOperation` when empty.
    pub fleet_errors: Vec<AwsError>,
    /// What the next RunInstances dry runs answer, first first; `DryRunOperation` when empty.
    pub run_errors: Vec<AwsError>,
    /// What the next CreateLaunchTemplate calls fail with, first first.
    pub template_errors: Vec<AwsError>,
    /// Every dry run made: `("CreateFleet" | "RunInstances", launch template, subnets)`.
    pub dry_runs: Vec<(String, String, Vec<String>)>,
    /// Every RunInstances dry run, as asked.
    pub runs: Vec<karpenter_aws::ec2_extra::RunInstancesDryRun>,
}

impl FakeEc2 {
    /// The placement groups and dry-run answers, shared by every clone of this fake.
    pub fn checks(&self) -> std::sync::MutexGuard<'_, FakeChecks> {
        self.checks.lock().unwrap()
    }
}

impl karpenter_aws::ec2_extra::PlacementGroups for FakeEc2 {
    async fn describe_placement_groups(
        &self,
        query: karpenter_aws::ec2_extra::PlacementGroupQuery,
    ) -> Result<Vec<karpenter_aws::ec2_extra::PlacementGroupInfo>> {
        Ok(self
            .checks()
            .placement_groups
            .iter()
            .filter(|g| match (&query.id, &query.name) {
                (Some(id), _) => g.id == *id,
                (None, Some(name)) => g.name == *name,
                (None, None) => true,
            })
            .cloned()
            .collect())
    }
}

impl karpenter_aws::ec2_extra::DryRuns for FakeEc2 {
    async fn dry_run_create_fleet(
        &self,
        request: karpenter_aws::ec2_extra::CreateFleetDryRun,
    ) -> Result<()> {
        let mut checks = self.checks();
        checks.dry_runs.push((
            "CreateFleet".into(),
            request.launch_template,
            request.overrides.into_iter().map(|o| o.subnet_id).collect(),
        ));
        match checks.fleet_errors.is_empty() {
            true => Ok(()),
            false => Err(checks.fleet_errors.remove(0)),
        }
    }
    async fn dry_run_run_instances(
        &self,
        request: karpenter_aws::ec2_extra::RunInstancesDryRun,
    ) -> Result<()> {
        // EC2's rule: interfaces in the call (the dry run always names interface 0) and
        // security groups on the template itself are an invalid combination.
        let groups_on_template = self
            .templates
            .lock()
            .unwrap()
            .get(&request.launch_template)
            .is_some_and(|t| t.network_interfaces.is_empty() && !t.security_groups.is_empty());
        let mut checks = self.checks();
        checks.runs.push(request.clone());
        checks.dry_runs.push((
            "RunInstances".into(),
            request.launch_template,
            vec![request.subnet_id],
        ));
        if groups_on_template {
            return Err(AwsError::Api {
                code: "InvalidParameterCombination".into(),
                message: "Network interfaces and an instance-level security groups may not be specified on the same request".into(),
                status: 400,
            });
        }
        match checks.run_errors.is_empty() {
            true => Ok(()),
            false => Err(checks.run_errors.remove(0)),
        }
    }
}
