//! What the Cluster API provider's tests share: two fake API servers (the management cluster
//! with Cluster API's CRDs, the workload cluster with karpenter's), MachineDeployments made the
//! way users annotate them, a stand-in for Cluster API's MachineDeployment and MachineSet
//! controllers (Machines made and deleted as replicas change, each with a providerID; it runs
//! against a real API server too, see `spawn_machine_sets_on`), and a stand-in for the kubelets
//! that register those Machines as Nodes.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use karpenter_clusterapi::ClusterAPINodeClass;
use karpenter_clusterapi::capi::{self, Version};
use karpenter_clusterapi::management::Management;
use karpenter_clusterapi::provider::{ClusterApiCloudProvider, KubeState, ProviderOptions};
use karpenter_clusterapi::shape;
use karpenter_testkit::FakeApiServer;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The namespace the MachineDeployments live in.
pub const NS: &str = "capi-workers";

const CRD_FILES: [&str; 3] = [
    include_str!("../testdata/crds/cluster.x-k8s.io_machinedeployments.yaml"),
    include_str!("../testdata/crds/cluster.x-k8s.io_machinesets.yaml"),
    include_str!("../testdata/crds/cluster.x-k8s.io_machines.yaml"),
];

/// Cluster API's CRDs serving only `versions`.
pub fn capi_crds(versions: &[&str]) -> Vec<Value> {
    CRD_FILES
        .iter()
        .map(|text| {
            let mut crd: Value = serde_saphyr::from_str(text).expect("test CRD parses");
            let kept: Vec<Value> = crd["spec"]["versions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| versions.contains(&v["name"].as_str().unwrap()))
                .cloned()
                .collect();
            crd["spec"]["versions"] = json!(kept);
            crd
        })
        .collect()
}

/// The API resource of a Cluster API kind at `version`.
pub fn resource(version: Version, kind: &str) -> ApiResource {
    let plural = format!("{}s", kind.to_lowercase());
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(capi::CAPI_GROUP, version.as_str(), kind),
        &plural,
    )
}

/// The two clusters.
pub struct Clusters {
    /// Where the MachineDeployments and Machines live.
    pub management: FakeApiServer,
    /// Where karpenter runs: NodePools, NodeClaims, Nodes, pods.
    pub workload: FakeApiServer,
    /// The version the management cluster is spoken to at.
    pub version: Version,
}

impl Clusters {
    /// A management cluster serving `versions` of Cluster API, and a workload cluster with the
    /// ClusterAPINodeClass CRD and a `default` class.
    pub fn new(versions: &[&str]) -> Self {
        let management = FakeApiServer::new();
        management.install_crds(capi_crds(versions)).unwrap();
        let workload = FakeApiServer::new();
        workload
            .install_crds(karpenter_clusterapi::CRDS.iter().map(|c| c.definition()))
            .unwrap();
        let version = Version::choose(versions).unwrap();
        Self {
            management,
            workload,
            version,
        }
    }

    /// Creates the ClusterAPINodeClass `name` with `spec`, its status Ready (the status loop
    /// is tested apart).
    pub fn node_class(&self, name: &str, spec: Value) {
        let class: ClusterAPINodeClass = serde_json::from_value(json!({
            "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
            "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap();
        self.workload.create(&class).unwrap();
        self.workload
            .merge::<ClusterAPINodeClass>(
                "",
                name,
                json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
            )
            .unwrap();
    }

    /// The management cluster's API for `kind`.
    pub fn api(&self, kind: &str) -> Api<DynamicObject> {
        Api::all_with(self.management.client(), &resource(self.version, kind))
    }

    fn namespaced(&self, kind: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.management.client(), NS, &resource(self.version, kind))
    }

    /// Creates a MachineDeployment.
    pub async fn create_machine_deployment(&self, md: Value) {
        let mut object: DynamicObject = serde_json::from_value(md).unwrap();
        object.types = None;
        self.namespaced("MachineDeployment")
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }

    /// A MachineDeployment, as the provider reads it.
    pub async fn machine_deployment(&self, name: &str) -> capi::MachineDeployment {
        let o = self
            .namespaced("MachineDeployment")
            .get(name)
            .await
            .unwrap();
        serde_json::from_value(serde_json::to_value(o).unwrap()).unwrap()
    }

    /// Desired replicas of a MachineDeployment.
    pub async fn replicas(&self, name: &str) -> i32 {
        self.machine_deployment(name).await.replicas()
    }

    /// Merge-patches a MachineDeployment.
    pub async fn patch_machine_deployment(&self, name: &str, patch: Value) {
        self.namespaced("MachineDeployment")
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    /// Merge-patches a Machine.
    pub async fn patch_machine(&self, name: &str, patch: Value) {
        self.namespaced("Machine")
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    /// Every Machine, as the provider reads them, by name.
    pub async fn machines(&self) -> Vec<capi::Machine> {
        let listed = self
            .api("Machine")
            .list(&ListParams::default())
            .await
            .unwrap();
        let mut out: Vec<capi::Machine> = listed
            .items
            .into_iter()
            .map(|o| serde_json::from_value(serde_json::to_value(o).unwrap()).unwrap())
            .collect();
        out.sort_by(|a, b| a.name().cmp(b.name()));
        out
    }

    /// Creates a Machine of MachineDeployment `md` (as its MachineSet would).
    pub async fn create_machine(
        &self,
        name: &str,
        md: &str,
        provider_id: Option<&str>,
        labels: Value,
    ) {
        let mut all =
            json!({capi::DEPLOYMENT_NAME_LABEL: md, "cluster.x-k8s.io/cluster-name": "workload"});
        for (k, v) in labels.as_object().unwrap() {
            all[k] = v.clone();
        }
        let object: DynamicObject = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS, "labels": all},
            "spec": {"clusterName": "workload", "providerID": provider_id,
                     "bootstrap": {"dataSecretName": "join"},
                     "infrastructureRef": infrastructure_ref(self.version, "DockerMachine", name)},
        }))
        .unwrap();
        self.namespaced("Machine")
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }

    /// A provider speaking to these clusters, with short waits; its requests to the management
    /// cluster are logged as `provider`'s.
    pub fn provider(&self) -> Arc<ClusterApiCloudProvider<KubeState>> {
        Arc::new(ClusterApiCloudProvider::new(
            Management::new(self.management.named("provider").client(), self.version),
            Api::all(self.workload.client()),
            fast(),
        ))
    }
}

/// Provider options for tests: waits in tens of milliseconds.
pub fn fast() -> ProviderOptions {
    ProviderOptions {
        claim_wait: Duration::from_secs(5),
        provider_id_wait: Duration::from_secs(2),
        poll: Duration::from_millis(20),
        machine_deployments_ttl: Duration::from_millis(100),
        ..Default::default()
    }
}

/// A template reference as `version` spells it.
pub fn infrastructure_ref(version: Version, kind: &str, name: &str) -> Value {
    match version {
        Version::V1beta1 => {
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": kind, "name": name})
        }
        Version::V1beta2 => {
            json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": kind, "name": name})
        }
    }
}

/// A member MachineDeployment whose nodes are labelled instance type and zone `(instance_type,
/// zone)`, of `(cpu, memory)`, at `price`, with these extra annotations.
pub fn machine_deployment(
    version: Version,
    name: &str,
    (instance_type, zone): (&str, &str),
    (cpu, memory): (&str, &str),
    price: &str,
    extra: Value,
) -> Value {
    let mut annotations = json!({
        shape::CPU_ANNOTATION: cpu,
        shape::MEMORY_ANNOTATION: memory,
        shape::MAX_PODS_ANNOTATION: "110",
        shape::LABELS_ANNOTATION: format!("node.kubernetes.io/instance-type={instance_type},topology.kubernetes.io/zone={zone}"),
        shape::PRICE_ANNOTATION: price,
        capi::MAX_SIZE_ANNOTATION: "5",
        capi::MIN_SIZE_ANNOTATION: "0",
    });
    for (k, v) in extra.as_object().unwrap() {
        annotations[k] = v.clone();
    }
    json!({
        "metadata": {"name": name, "namespace": NS,
                     "labels": {capi::MEMBER_LABEL: "", "cluster.x-k8s.io/cluster-name": "workload"},
                     "annotations": annotations},
        "spec": {
            "clusterName": "workload",
            "replicas": 0,
            "selector": {"matchLabels": {capi::DEPLOYMENT_NAME_LABEL: name}},
            "template": {
                "metadata": {"labels": {capi::DEPLOYMENT_NAME_LABEL: name, "node-role.kubernetes.io/worker": ""}},
                "spec": {
                    "clusterName": "workload",
                    "version": "v1.33.2",
                    "bootstrap": {"configRef": match version {
                        Version::V1beta1 => json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfigTemplate", "name": name}),
                        Version::V1beta2 => json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": name}),
                    }},
                    "infrastructureRef": infrastructure_ref(version, "DockerMachineTemplate", name),
                },
            },
        },
    })
}

/// When the infrastructure provider sets a new Machine's providerID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderIds {
    /// When the Machine is made.
    AtOnce,
    /// On the pass after (so a launch sees the Machine without one first).
    NextPass,
    /// Never (a test sets it).
    Never,
}

/// What the MachineSet stand-in did.
#[derive(Default)]
pub struct Made {
    /// Machines made, by name.
    pub created: Vec<String>,
    /// Machines deleted, by name.
    pub deleted: Vec<String>,
    /// Of those, the ones deleted because they carried `cluster.x-k8s.io/delete-machine`.
    pub marked: Vec<String>,
}

/// Cluster API's MachineDeployment and MachineSet controllers, reduced: for each
/// MachineDeployment, a MachineSet per template (named after its hash), Machines made in the
/// newest one while fewer than the replicas exist (labels from the template, providerID
/// `test:///NAME`), and while more exist, those marked `cluster.x-k8s.io/delete-machine`
/// deleted first, then the newest; `status.replicas` kept.
pub fn spawn_machine_sets(
    clusters: &Clusters,
    provider_ids: ProviderIds,
    stop: CancellationToken,
) -> (Arc<Mutex<Made>>, tokio::task::JoinHandle<()>) {
    spawn_machine_sets_on(
        clusters.management.client(),
        clusters.version,
        None,
        provider_ids,
        Duration::from_millis(30),
        stop,
    )
}

/// The same stand-in against any API server `client` reaches (a real one too): only the
/// MachineDeployments of `namespace` (every namespace when `None`), a pass every `every`.
pub fn spawn_machine_sets_on(
    client: kube::Client,
    version: Version,
    namespace: Option<&str>,
    provider_ids: ProviderIds,
    every: Duration,
    stop: CancellationToken,
) -> (Arc<Mutex<Made>>, tokio::task::JoinHandle<()>) {
    let made = Arc::new(Mutex::new(Made::default()));
    let out = made.clone();
    let namespace = namespace.map(str::to_string);
    let task = tokio::spawn(async move {
        let counter = AtomicUsize::new(0);
        let mds: Api<DynamicObject> = match &namespace {
            Some(ns) => {
                Api::namespaced_with(client.clone(), ns, &resource(version, "MachineDeployment"))
            }
            None => Api::all_with(client.clone(), &resource(version, "MachineDeployment")),
        };
        while !stop.is_cancelled() {
            if let Err(e) =
                machine_set_pass(&client, &mds, version, provider_ids, &counter, &made).await
            {
                eprintln!("machineset stand-in: {e}");
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    });
    (out, task)
}

async fn machine_set_pass(
    client: &kube::Client,
    mds: &Api<DynamicObject>,
    version: Version,
    provider_ids: ProviderIds,
    counter: &AtomicUsize,
    made: &Mutex<Made>,
) -> Result<(), kube::Error> {
    for md in mds.list(&ListParams::default()).await?.items {
        let ns = md.metadata.namespace.clone().unwrap_or_default();
        let name = md.metadata.name.clone().unwrap_or_default();
        let typed: capi::MachineDeployment =
            serde_json::from_value(serde_json::to_value(&md).unwrap()).unwrap();
        let replicas = usize::try_from(typed.replicas()).unwrap_or(0);
        let set_name = format!("{name}-{}", &typed.template_hash()[..6]);
        let sets: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &resource(version, "MachineSet"));
        if sets.get_opt(&set_name).await?.is_none() {
            // apiVersion and kind: a real API server wants them in the body.
            let set: DynamicObject = serde_json::from_value(json!({
                "apiVersion": format!("{}/{}", capi::CAPI_GROUP, version.as_str()), "kind": "MachineSet",
                "metadata": {"name": set_name, "namespace": ns, "labels": {capi::DEPLOYMENT_NAME_LABEL: name}},
                "spec": {"clusterName": md.data["spec"]["clusterName"], "replicas": 0,
                         "template": md.data["spec"]["template"]},
            }))
            .unwrap();
            sets.create(&PostParams::default(), &set).await?;
        }
        let machines: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &resource(version, "Machine"));
        let listed = machines
            .list(&ListParams::default().labels(&format!("{}={name}", capi::DEPLOYMENT_NAME_LABEL)))
            .await?
            .items;
        let mut live: Vec<capi::Machine> = listed
            .iter()
            .map(|o| {
                serde_json::from_value::<capi::Machine>(serde_json::to_value(o).unwrap()).unwrap()
            })
            .filter(|m| m.metadata.deletion_timestamp.is_none())
            .collect();
        if provider_ids == ProviderIds::NextPass {
            for m in live.iter().filter(|m| m.provider_id().is_none()) {
                machines
                    .patch(
                        m.name(),
                        &PatchParams::default(),
                        &Patch::Merge(
                            json!({"spec": {"providerID": format!("test:///{}", m.name())}}),
                        ),
                    )
                    .await?;
            }
        }
        while live.len() < replicas {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let machine_name = format!("{set_name}-m{n}");
            let template = &md.data["spec"]["template"];
            let mut labels: BTreeMap<String, String> =
                serde_json::from_value(template["metadata"]["labels"].clone()).unwrap_or_default();
            labels.insert(capi::DEPLOYMENT_NAME_LABEL.into(), name.clone());
            labels.insert(capi::SET_NAME_LABEL.into(), set_name.clone());
            let mut spec = template["spec"].clone();
            spec["providerID"] = match provider_ids {
                ProviderIds::AtOnce => json!(format!("test:///{machine_name}")),
                _ => Value::Null,
            };
            let machine: DynamicObject = serde_json::from_value(json!({
                "apiVersion": format!("{}/{}", capi::CAPI_GROUP, version.as_str()), "kind": "Machine",
                "metadata": {"name": machine_name, "namespace": ns, "labels": labels},
                "spec": spec,
            }))
            .unwrap();
            let created = machines.create(&PostParams::default(), &machine).await?;
            made.lock().unwrap().created.push(machine_name);
            live.push(serde_json::from_value(serde_json::to_value(created).unwrap()).unwrap());
        }
        if live.len() > replicas {
            let marked = |m: &capi::Machine| {
                m.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(capi::DELETE_MACHINE_ANNOTATION))
            };
            // Marked first, then the newest.
            live.sort_by(|a, b| {
                marked(b)
                    .cmp(&marked(a))
                    .then_with(|| {
                        b.metadata
                            .creation_timestamp
                            .cmp(&a.metadata.creation_timestamp)
                    })
                    .then_with(|| b.name().cmp(a.name()))
            });
            for m in live.drain(..live.len() - replicas).collect::<Vec<_>>() {
                machines.delete(m.name(), &DeleteParams::default()).await?;
                let mut made = made.lock().unwrap();
                made.deleted.push(m.name().to_string());
                if marked(&m) {
                    made.marked.push(m.name().to_string());
                }
            }
        }
        let md_api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &resource(version, "MachineDeployment"));
        if md.data["status"]["replicas"].as_u64() != Some(live.len() as u64) {
            md_api
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"replicas": live.len()}})),
                )
                .await?;
        }
    }
    Ok(())
}

/// The kubelets of the Machines, reduced: a Machine with a providerID registers a Node named
/// after it (once), with the labels and capacity its MachineDeployment's annotations give
/// (as kubeadm's `node-labels` would), the `karpenter.sh/unregistered` taint, Ready.
pub fn spawn_kubelets(clusters: &Clusters, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    let client = clusters.management.client();
    let version = clusters.version;
    let workload = clusters.workload.clone();
    tokio::spawn(async move {
        let mut registered: HashSet<String> = HashSet::new();
        while !stop.is_cancelled() {
            let machines: Api<DynamicObject> =
                Api::all_with(client.clone(), &resource(version, "Machine"));
            let mds: Api<DynamicObject> =
                Api::all_with(client.clone(), &resource(version, "MachineDeployment"));
            if let (Ok(machines), Ok(mds)) = (
                machines.list(&ListParams::default()).await,
                mds.list(&ListParams::default()).await,
            ) {
                for o in machines.items {
                    let m: capi::Machine =
                        serde_json::from_value(serde_json::to_value(o).unwrap()).unwrap();
                    let Some(provider_id) = m.provider_id() else {
                        continue;
                    };
                    if m.metadata.deletion_timestamp.is_some() || registered.contains(provider_id) {
                        continue;
                    }
                    let Some(md) = mds.items.iter().find(|d| {
                        d.metadata.namespace.as_deref() == Some(m.namespace())
                            && d.metadata.name.as_deref() == m.machine_deployment()
                    }) else {
                        continue;
                    };
                    let annotations = md.metadata.annotations.clone().unwrap_or_default();
                    let mut labels = annotations
                        .get(shape::LABELS_ANNOTATION)
                        .map(|l| shape::parse_labels(l).unwrap())
                        .unwrap_or_default();
                    labels.insert("kubernetes.io/hostname".into(), m.name().into());
                    labels.insert("kubernetes.io/os".into(), "linux".into());
                    labels.insert("kubernetes.io/arch".into(), "amd64".into());
                    let capacity = json!({
                        "cpu": annotations[shape::CPU_ANNOTATION],
                        "memory": annotations[shape::MEMORY_ANNOTATION],
                        "pods": annotations.get(shape::MAX_PODS_ANNOTATION).cloned().unwrap_or("110".into()),
                    });
                    let now = k8s_openapi::jiff::Timestamp::now().to_string();
                    let node: Node = serde_json::from_value(json!({
                        "apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": m.name(), "labels": labels},
                        "spec": {"providerID": provider_id,
                                 "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
                        "status": {
                            "capacity": capacity, "allocatable": capacity,
                            "nodeInfo": {"kubeletVersion": "v1.33.2", "machineID": "", "systemUUID": "", "bootID": "",
                                         "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                                         "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
                            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
                        },
                    }))
                    .unwrap();
                    if workload.create(&node).is_ok() {
                        registered.insert(provider_id.to_string());
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}
