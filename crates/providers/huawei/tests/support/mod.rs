//! An in-process Huawei Cloud for the provider's tests: one HTTP endpoint that plays CCE
//! (nodes, jobs), ECS (flavors, zones), VPC (subnets) and BSS (on-demand ratings), told apart
//! by path as the real services are by host. Every request is authenticated as API Gateway
//! does — the `SDK-HMAC-SHA256` signature recomputed with the caller's secret, `X-Sdk-Date`
//! within the allowed skew — and refused in Huawei's error shape otherwise. Answers follow the
//! SDK models' JSON; CCE nodes move through `Build` → `Installing` (the ECS server exists) →
//! `Active` as their job is looked at, and a job can be made to fail for a (flavor, zone).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use karpenter_cloudprovider::http::HttpClient;
use karpenter_huawei::auth::CredentialsProvider;
use karpenter_huawei::auth::signer::{ReceivedRequest, verify};
use karpenter_huawei::client::Client;
use karpenter_huawei::endpoint::Endpoints;
use serde_json::{Value, json};

/// The access key the tests sign with.
pub const AK: &str = "HPUA0TESTACCESSKEY";
/// Its secret.
pub const SK: &str = "test-secret-key-0123456789";
/// The project every path names.
pub const PROJECT: &str = "0a1b2c3d4e5f60718293a4b5c6d7e8f9";
/// The CCE cluster.
pub const CLUSTER: &str = "5e2a4f0c-cccc-4222-8333-944455566677";
/// The region.
pub const REGION: &str = "ap-southeast-3";
/// The subnets the examples select.
pub const SUBNET_A: &str = "5f7c3a1e-2b4d-4c6e-8f0a-1b2c3d4e5f60";
/// A second one.
pub const SUBNET_B: &str = "6a8d4b2f-3c5e-4d7f-9a1b-2c3d4e5f6071";

/// The account (domain) BSS calls are scoped to.
pub const DOMAIN: &str = "d0d1d2d3d4d5d6d7d8d9dadbdcdddedf";

/// A client of `mock`: every service at its URL, static keys, the project and domain known.
pub fn client(mock: &Mock) -> Client {
    let http = HttpClient::new(std::time::Duration::from_secs(10)).unwrap();
    let credentials = CredentialsProvider::static_keys(AK, SK)
        .with_project_id(PROJECT)
        .with_domain_id(DOMAIN);
    Client::new(http, Endpoints::single(REGION, &mock.url), credentials)
}

/// A call the mock accepted.
#[derive(Clone, Debug)]
pub struct Call {
    /// The method.
    pub method: String,
    /// The decoded path.
    pub path: String,
    /// The query string.
    pub query: String,
    /// The JSON body (`Null` without one).
    pub body: Value,
    /// Selected headers, lower-case names.
    pub headers: BTreeMap<String, String>,
}

/// A CCE job the mock runs.
#[derive(Clone, Debug)]
pub struct Job {
    /// The node it creates.
    pub node: String,
    /// Why it fails, if it does.
    pub fails: Option<String>,
    /// How often it was looked at.
    pub polls: u32,
}

/// What the mock holds; tests set it up and read it back.
#[derive(Debug, Default)]
pub struct Cloud {
    /// ECS flavors, as `ListFlavors` answers them.
    pub flavors: Vec<Value>,
    /// The region's zones.
    pub zones: Vec<String>,
    /// VPC subnets, as `ListSubnets` answers them.
    pub subnets: Vec<Value>,
    /// On-demand prices by flavor (BSS ratings).
    pub prices: BTreeMap<String, f64>,
    /// The cluster's CCE nodes, in the SDK's `Node` shape.
    pub nodes: Vec<Value>,
    /// Jobs by id.
    pub jobs: BTreeMap<String, Job>,
    /// `CreateNode` refusals by (flavor, zone): (error code, message).
    pub refuse: BTreeMap<(String, String), (String, String)>,
    /// Creations whose job fails, by (flavor, zone): the job's reason.
    pub fail_job: BTreeMap<(String, String), String>,
    /// Bodies of the accepted `CreateNode` calls.
    pub created: Vec<Value>,
    /// Ids of the deleted nodes.
    pub deleted: Vec<String>,
    /// Every accepted call.
    pub calls: Vec<Call>,
    /// Resource specs BSS does not know (`c7.large.2.linux`).
    pub unpriced_specs: BTreeSet<String>,
    next: u64,
}

/// The mock's state, shared with the server.
pub type Shared = Arc<Mutex<Cloud>>;

/// A running mock.
pub struct Mock {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// Its state.
    pub cloud: Shared,
}

impl Mock {
    /// Starts the mock with the [`standard`] cloud.
    pub async fn start() -> Self {
        let cloud: Shared = Arc::new(Mutex::new(standard()));
        let app = Router::new().fallback(handle).with_state(cloud.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { url, cloud }
    }

    /// The calls accepted so far whose path contains `needle`, with `method`.
    pub fn calls(&self, method: &str, needle: &str) -> Vec<Call> {
        self.cloud
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|c| c.method == method && c.path.contains(needle))
            .cloned()
            .collect()
    }
}

fn flavor(name: &str, vcpus: u32, ram_mib: u64, extra: Value) -> Value {
    let mut specs = json!({
        "ecs:performancetype": "computingv3",
        "ecs:instance_architecture": "x86",
        "cond:operation:status": "normal",
        "quota:sub_network_interface_max_num": "0",
    });
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            specs[k] = v.clone();
        }
    }
    json!({
        "id": name, "name": name, "vcpus": vcpus.to_string(), "ram": ram_mib,
        "disk": "0", "swap": "", "OS-FLV-EXT-DATA:ephemeral": 0, "rxtx_factor": 1.0,
        "os-flavor-access:is_public": true, "attachableQuantity": {"free_scsi": 59, "free_blk": 23, "free_disk": 23},
        "os_extra_specs": specs,
    })
}

/// Three c7 sizes and an arm flavor in two zones; c7.large.2 sold out in zone b.
pub fn standard() -> Cloud {
    Cloud {
        flavors: vec![
            flavor(
                "c7.large.2",
                2,
                4096,
                json!({"cond:operation:az": "ap-southeast-3a(normal),ap-southeast-3b(sellout)"}),
            ),
            flavor("c7.xlarge.2", 4, 8192, json!({})),
            flavor("c7.2xlarge.2", 8, 16384, json!({})),
            flavor(
                "kc1.large.2",
                2,
                4096,
                json!({"ecs:instance_architecture": "arm64"}),
            ),
        ],
        zones: vec!["ap-southeast-3a".into(), "ap-southeast-3b".into()],
        subnets: vec![
            json!({"id": SUBNET_A, "name": "subnet-a", "cidr": "192.168.0.0/24", "status": "ACTIVE",
                   "vpc_id": "vpc-1", "gateway_ip": "192.168.0.1", "dhcp_enable": true,
                   "neutron_network_id": SUBNET_A, "neutron_subnet_id": "ns-a",
                   "available_ip_address_count": 200}),
            json!({"id": SUBNET_B, "name": "subnet-b", "cidr": "192.168.1.0/24", "status": "ACTIVE",
                   "vpc_id": "vpc-1", "gateway_ip": "192.168.1.1", "dhcp_enable": true,
                   "neutron_network_id": SUBNET_B, "neutron_subnet_id": "ns-b",
                   "available_ip_address_count": 20}),
        ],
        prices: BTreeMap::from([
            ("c7.large.2".into(), 0.46),
            ("c7.xlarge.2".into(), 0.92),
            ("c7.2xlarge.2".into(), 1.84),
            ("kc1.large.2".into(), 0.37),
        ]),
        ..Default::default()
    }
}

/// A node of CCE's own node pool, which Karpenter must never list or collect.
pub fn foreign_node() -> Value {
    json!({
        "kind": "Node", "apiVersion": "v3",
        "metadata": {"name": "pool-node-1", "uid": "f0f0f0f0-0000-4000-8000-000000000001",
                     "creationTimestamp": "2026-01-01 00:00:00.000000 +0000 UTC"},
        "spec": {"flavor": "c7.xlarge.2", "az": "ap-southeast-3a", "os": "Huawei Cloud EulerOS 2.0",
                 "nodeNicSpec": {"primaryNic": {"subnetId": SUBNET_A}},
                 "k8sTags": {"cce.cloud.com/cce-nodepool": "pool-1"}},
        "status": {"phase": "Active", "serverId": "srv-foreign", "privateIP": "192.168.0.9"},
    })
}

/// The CCENodeClass the tests use (the seed article's, with a key pair).
pub fn node_class() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.huawei/v1alpha1",
        "kind": "CCENodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "subnetSelectorTerms": [{"id": SUBNET_A}, {"name": "subnet-b"}],
            "imsSelector": {"imsFamily": "Huawei Cloud EulerOS 2.0"},
            "blockDeviceMappings": {"root": {"volumeSize": 40, "volumeType": "SSD"},
                                    "k8s": {"volumeSize": 100, "volumeType": "SSD"}},
            "runtimeConfiguration": {"type": "containerd"},
            "login": {"sshKey": "ops-key"},
        },
    })
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn json_response(status: StatusCode, value: Value) -> Response {
    (
        status,
        [
            ("content-type", "application/json"),
            ("x-request-id", "req-mock"),
        ],
        value.to_string(),
    )
        .into_response()
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    json_response(status, json!({"error_code": code, "error_msg": message}))
}

/// CCE's own error shape.
fn cce_error(status: StatusCode, code: &str, message: &str) -> Response {
    json_response(
        status,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "BadRequest", "code": status.as_u16(),
            "errorCode": code, "errorMessage": message, "error_code": code, "error_msg": message,
        }),
    )
}

fn ok(value: Value) -> Response {
    json_response(StatusCode::OK, value)
}

async fn handle(
    State(cloud): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header_list: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                v.to_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let raw_path = uri.path().to_string();
    let query = uri.query().unwrap_or_default().to_string();
    let received = ReceivedRequest {
        method: method.as_str(),
        path: &raw_path,
        query: &query,
        headers: &header_list,
        body: &body,
    };
    if let Err(e) = verify(
        &received,
        |ak| (ak == AK).then(|| SK.to_string()),
        now_unix(),
    ) {
        return error(StatusCode::UNAUTHORIZED, "APIGW.0301", &e.to_string());
    }
    let json_body: Value = if body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => return error(StatusCode::BAD_REQUEST, "Common.0001", &e.to_string()),
        }
    };
    let mut c = cloud.lock().unwrap();
    let kept: BTreeMap<String, String> = header_list
        .iter()
        .filter(|(k, _)| k.starts_with("x-") || k == "content-type")
        .cloned()
        .collect();
    c.calls.push(Call {
        method: method.to_string(),
        path: raw_path.clone(),
        query: query.clone(),
        body: json_body.clone(),
        headers: kept,
    });
    let parts: Vec<&str> = raw_path.trim_matches('/').split('/').collect();
    match (method.as_str(), parts.as_slice()) {
        ("GET", ["v1", p, "cloudservers", "flavors"]) if *p == PROJECT => {
            ok(json!({"flavors": c.flavors}))
        }
        ("GET", ["v1", p, "availability-zones"]) if *p == PROJECT => {
            let zones: Vec<Value> = c
                .zones
                .iter()
                .map(|z| json!({"availability_zone_id": z, "type": "core", "alias": z}))
                .collect();
            ok(json!({"availability_zones": zones}))
        }
        ("GET", ["v1", p, "subnets"]) if *p == PROJECT => ok(json!({"subnets": c.subnets})),
        ("POST", ["v2", "bills", "ratings", "on-demand-resources"]) => ratings(&c, &json_body),
        ("GET", ["api", "v3", "projects", p, "jobs", id]) if *p == PROJECT => show_job(&mut c, id),
        (
            _,
            [
                "api",
                "v3",
                "projects",
                p,
                "clusters",
                cl,
                "nodes",
                rest @ ..,
            ],
        ) if *p == PROJECT && *cl == CLUSTER => match (method.as_str(), rest) {
            ("POST", []) => create_node(&mut c, json_body),
            ("GET", []) => ok(json!({"kind": "List", "apiVersion": "v3", "items": c.nodes})),
            ("GET", [id]) => match c.nodes.iter().find(|n| n["metadata"]["uid"] == *id) {
                Some(n) => ok(n.clone()),
                None => cce_error(
                    StatusCode::NOT_FOUND,
                    "CCE.01404001",
                    "The resource can not be found.",
                ),
            },
            ("DELETE", [id]) => delete_node(&mut c, id),
            _ => cce_error(StatusCode::NOT_FOUND, "CCE.01404001", "no such API"),
        },
        _ => error(
            StatusCode::NOT_FOUND,
            "APIGW.0101",
            "The API does not exist",
        ),
    }
}

fn ratings(c: &Cloud, body: &Value) -> Response {
    if body["project_id"] != PROJECT {
        return error(StatusCode::BAD_REQUEST, "CBC.0100", "project_id mismatch");
    }
    let products = body["product_infos"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for p in &products {
        let spec = p["resource_spec"].as_str().unwrap_or_default();
        if c.unpriced_specs.contains(spec) {
            let inner = json!({"error_code": "CBC.6006", "error_msg": format!("Can not find product {spec}")});
            return error(
                StatusCode::BAD_REQUEST,
                "CBC.99006006",
                &format!("rating failed: {inner}"),
            );
        }
    }
    let results: Vec<Value> = products
        .iter()
        .filter_map(|p| {
            let id = p["id"].as_str()?;
            let price = c.prices.get(id)?;
            Some(
                json!({"id": id, "product_id": format!("prod-{id}"), "amount": price,
                        "official_website_amount": price, "measure_id": 1}),
            )
        })
        .collect();
    let total: f64 = results.iter().filter_map(|r| r["amount"].as_f64()).sum();
    ok(
        json!({"amount": total, "official_website_amount": total, "measure_id": 1,
              "currency": "USD", "product_rating_results": results}),
    )
}

fn create_node(c: &mut Cloud, body: Value) -> Response {
    let spec = &body["spec"];
    let flavor = spec["flavor"].as_str().unwrap_or_default().to_string();
    let az = spec["az"].as_str().unwrap_or_default().to_string();
    if body["kind"] != "Node" || body["apiVersion"] != "v3" || spec["count"] != 1 {
        return cce_error(StatusCode::BAD_REQUEST, "CCE.01400001", "Invalid request.");
    }
    if let Some((code, message)) = c.refuse.get(&(flavor.clone(), az.clone())).cloned() {
        return cce_error(StatusCode::BAD_REQUEST, &code, &message);
    }
    c.next += 1;
    let n = c.next;
    let uid = format!("00000000-0000-4000-8000-{n:012}");
    let job_id = format!("job-{n}");
    let fails = c.fail_job.get(&(flavor.clone(), az.clone())).cloned();
    let name = body["metadata"]["name"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("cce-node-{n}"));
    let node = json!({
        "kind": "Node", "apiVersion": "v3",
        "metadata": {"name": name, "uid": uid,
                     "creationTimestamp": "2026-11-24 10:00:00.000000 +0000 UTC"},
        "spec": spec.clone(),
        "status": {"phase": "Build", "jobID": job_id},
    });
    c.nodes.push(node.clone());
    c.created.push(body);
    c.jobs.insert(
        job_id,
        Job {
            node: uid,
            fails,
            polls: 0,
        },
    );
    json_response(StatusCode::CREATED, node)
}

fn show_job(c: &mut Cloud, id: &str) -> Response {
    let Some(job) = c.jobs.get_mut(id) else {
        return cce_error(StatusCode::NOT_FOUND, "CCE.01404001", "job not found");
    };
    job.polls += 1;
    let job = job.clone();
    let node = c
        .nodes
        .iter_mut()
        .find(|n| n["metadata"]["uid"] == job.node.as_str());
    let (phase, sub) = match (&job.fails, node) {
        (Some(reason), node) => {
            if let Some(node) = node {
                node["status"]["phase"] = json!("Error");
            }
            (
                "Failed",
                json!([{"spec": {"type": "CreateServer", "resourceID": job.node},
                         "status": {"phase": "Failed", "reason": reason}}]),
            )
        }
        (None, Some(node)) => {
            // The ECS server exists from the first look on.
            node["status"]["serverId"] = json!(format!("srv-{}", job.node));
            if job.polls >= 2 {
                node["status"]["phase"] = json!("Active");
                ("Success", json!([]))
            } else {
                node["status"]["phase"] = json!("Installing");
                ("Running", json!([]))
            }
        }
        (None, None) => ("Failed", json!([])),
    };
    ok(json!({
        "kind": "Job", "apiVersion": "v3",
        "metadata": {"uid": id},
        "spec": {"type": "CreateNode", "clusterUID": CLUSTER, "resourceID": job.node, "subJobs": sub},
        "status": {"phase": phase},
    }))
}

fn delete_node(c: &mut Cloud, id: &str) -> Response {
    let Some(i) = c.nodes.iter().position(|n| n["metadata"]["uid"] == id) else {
        return cce_error(
            StatusCode::NOT_FOUND,
            "CCE.01404001",
            "The resource can not be found.",
        );
    };
    let mut node = c.nodes.remove(i);
    c.deleted.push(id.to_string());
    c.next += 1;
    node["status"]["phase"] = json!("Deleting");
    node["status"]["jobID"] = json!(format!("job-{}", c.next));
    ok(node)
}
