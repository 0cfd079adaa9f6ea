//! An in-process ARM for the provider's tests: Entra ID's token endpoint (which checks the
//! service principal's secret), resources created by PUT with ARM's long-running operations,
//! collections listed by GET, Resource Graph, and deletes answered 202 with a `Location` to
//! poll — in the shapes of the Azure REST API specs. Every ARM request must carry the token.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use karpenter_azure::arm::Arm;
use karpenter_azure::auth::{Authorities, Credential, TokenSource};
use karpenter_azure::compute::{Compute, Placement, VmRequest};
use karpenter_azure::provider::AzureOptions;
use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};
use serde_json::{Value, json};

const TOKEN: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.mock";

/// How an operation ends: fine, or with ARM's error code and message.
type Outcome = Result<(), (String, String)>;

#[derive(Default)]
pub struct Cloud {
    pub resources: BTreeMap<String, Value>,
    /// Async operations: id → polls left before it ends, and how it ends.
    operations: BTreeMap<String, (u32, Outcome)>,
    /// VM sizes that fail to allocate, with ARM's error code.
    pub refuse: BTreeMap<String, String>,
    pub tokens_issued: usize,
    pub unauthorized: usize,
    pub puts: usize,
}

pub type Shared = Arc<Mutex<Cloud>>;

/// A JSON answer (the workspace's axum has no `Json`: only tests need it).
#[allow(non_snake_case)]
fn Json(v: Value) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
}

fn authorized(cloud: &Shared, headers: &HeaderMap) -> bool {
    let ok = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {TOKEN}"));
    if !ok {
        cloud.lock().unwrap().unauthorized += 1;
    }
    ok
}

fn arm_error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

async fn token(State(cloud): State<Shared>, Path(tenant): Path<String>, body: String) -> Response {
    let form: BTreeMap<String, String> = form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let good = tenant == "tenant"
        && form.get("grant_type").map(String::as_str) == Some("client_credentials")
        && form.get("client_id").map(String::as_str) == Some("client")
        && form.get("client_secret").map(String::as_str) == Some("secret")
        && form.get("scope").map(String::as_str) == Some("https://management.azure.com/.default");
    if !good {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."})),
        )
            .into_response();
    }
    cloud.lock().unwrap().tokens_issued += 1;
    Json(json!({"token_type": "Bearer", "expires_in": 3599, "access_token": TOKEN})).into_response()
}

async fn resource(
    State(cloud): State<Shared>,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    method: axum::http::Method,
    headers: HeaderMap,
    body: String,
) -> Response {
    if !authorized(&cloud, &headers) {
        return arm_error(StatusCode::UNAUTHORIZED, "AuthenticationFailed", "no token");
    }
    if !query.unwrap_or_default().contains("api-version=") {
        return arm_error(
            StatusCode::BAD_REQUEST,
            "MissingApiVersionParameter",
            "api-version",
        );
    }
    let id = format!("/subscriptions/{path}");
    let mut cloud = cloud.lock().unwrap();
    match method.as_str() {
        "GET" => match cloud.resources.get(&id) {
            Some(r) => Json(r.clone()).into_response(),
            None if is_collection(&id) => {
                let prefix = format!("{id}/");
                let value: Vec<Value> = cloud
                    .resources
                    .iter()
                    .filter(|(k, _)| {
                        k.strip_prefix(&prefix)
                            .is_some_and(|rest| !rest.contains('/'))
                    })
                    .map(|(_, v)| v.clone())
                    .collect();
                Json(json!({"value": value})).into_response()
            }
            None => arm_error(
                StatusCode::NOT_FOUND,
                "ResourceNotFound",
                &format!("{id} was not found"),
            ),
        },
        "PUT" => {
            cloud.puts += 1;
            let mut r: Value = serde_json::from_str(&body).unwrap();
            if id.contains("/networkInterfaces/")
                && let Some(refused) = missing_reference(&cloud, &id, &r)
            {
                return refused;
            }
            let name = id.rsplit('/').next().unwrap().to_string();
            r["id"] = json!(id);
            r["name"] = json!(name);
            r["properties"]["provisioningState"] = json!("Creating");
            let refused = r
                .pointer("/properties/hardwareProfile/vmSize")
                .and_then(Value::as_str)
                .and_then(|size| cloud.refuse.get(size).cloned());
            if id.contains("/virtualMachines/") {
                let op = format!("op-{}", cloud.operations.len());
                let outcome = match refused {
                    Some(code) => Err((code, "The requested size is not available.".to_string())),
                    None => Ok(()),
                };
                if outcome.is_ok() {
                    r["properties"]["provisioningState"] = json!("Succeeded");
                }
                cloud.operations.insert(op.clone(), (2, outcome.clone()));
                if outcome.is_ok() {
                    cloud.resources.insert(id, r.clone());
                }
                let mut response = (StatusCode::CREATED, Json(r)).into_response();
                response.headers_mut().insert(
                    "azure-asyncoperation",
                    format!("{}/operations/{op}?api-version=2024-07-01", base(&headers))
                        .parse()
                        .unwrap(),
                );
                response
            } else {
                r["properties"]["provisioningState"] = json!("Succeeded");
                cloud.resources.insert(id, r.clone());
                (StatusCode::OK, Json(r)).into_response()
            }
        }
        "DELETE" => {
            if cloud.resources.remove(&id).is_none() {
                return StatusCode::NO_CONTENT.into_response();
            }
            let op = format!("op-{}", cloud.operations.len());
            cloud.operations.insert(op.clone(), (1, Ok(())));
            let mut response = StatusCode::ACCEPTED.into_response();
            response.headers_mut().insert(
                "location",
                format!("{}/deletions/{op}?api-version=2024-07-01", base(&headers))
                    .parse()
                    .unwrap(),
            );
            response
        }
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

async fn operation(
    State(cloud): State<Shared>,
    Path(op): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&cloud, &headers) {
        return arm_error(StatusCode::UNAUTHORIZED, "AuthenticationFailed", "no token");
    }
    let mut cloud = cloud.lock().unwrap();
    match cloud.operations.get_mut(&op) {
        None => arm_error(StatusCode::NOT_FOUND, "NotFound", "no such operation"),
        Some((left, _)) if *left > 0 => {
            *left -= 1;
            Json(json!({"status": "InProgress"})).into_response()
        }
        Some((_, Ok(()))) => Json(json!({"status": "Succeeded"})).into_response(),
        Some((_, Err((code, message)))) => {
            Json(json!({"status": "Failed", "error": {"code": code, "message": message}}))
                .into_response()
        }
    }
}

async fn deletion(
    State(cloud): State<Shared>,
    Path(op): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&cloud, &headers) {
        return arm_error(StatusCode::UNAUTHORIZED, "AuthenticationFailed", "no token");
    }
    let mut cloud = cloud.lock().unwrap();
    match cloud.operations.get_mut(&op) {
        Some((left, _)) if *left > 0 => {
            *left -= 1;
            StatusCode::ACCEPTED.into_response()
        }
        Some(_) => StatusCode::OK.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn resource_graph(State(cloud): State<Shared>, headers: HeaderMap, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap();
    if !authorized(&cloud, &headers) {
        return arm_error(StatusCode::UNAUTHORIZED, "AuthenticationFailed", "no token");
    }
    let query = body["query"].as_str().unwrap_or_default();
    assert!(
        query.contains("microsoft.compute/virtualmachines")
            && query.contains("karpenter.sh_nodepool"),
        "{query}"
    );
    let cloud = cloud.lock().unwrap();
    let rows: Vec<Value> = cloud
        .resources
        .iter()
        .filter(|(id, r)| {
            id.contains("/virtualMachines/") && r["tags"]["karpenter.sh_nodepool"].is_string()
        })
        .map(|(_, r)| r.clone())
        .collect();
    Json(json!({"totalRecords": rows.len(), "count": rows.len(), "resultTruncated": "false", "data": rows}))
        .into_response()
}

/// Whether `id` names a collection: after `/providers/<namespace>/` ARM ids alternate type
/// and name, so a collection ends on a type. An empty one lists as `{"value": []}`.
fn is_collection(id: &str) -> bool {
    id.rsplit_once("/providers/")
        .is_some_and(|(_, rest)| rest.split('/').count() % 2 == 0)
}

/// ARM refuses a NIC naming a backend pool or NSG that does not exist, with
/// `InvalidResourceReference`.
fn missing_reference(cloud: &Cloud, nic_id: &str, nic: &Value) -> Option<Response> {
    let pools = nic
        .pointer("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|c| {
            c.pointer("/properties/loadBalancerBackendAddressPools")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|p| p["id"].as_str().map(str::to_string));
    let nsg = nic
        .pointer("/properties/networkSecurityGroup/id")
        .and_then(Value::as_str)
        .map(str::to_string);
    for id in pools.chain(nsg) {
        let exists = match id.split_once("/backendAddressPools/") {
            Some((lb, _)) => cloud.resources.get(lb).is_some_and(|lb| {
                lb.pointer("/properties/backendAddressPools")
                    .and_then(Value::as_array)
                    .is_some_and(|ps| ps.iter().any(|p| p["id"] == json!(id)))
            }),
            None => cloud.resources.contains_key(&id),
        };
        if !exists {
            return Some(arm_error(
                StatusCode::BAD_REQUEST,
                "InvalidResourceReference",
                &format!(
                    "Resource {id} referenced by resource {nic_id} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region."
                ),
            ));
        }
    }
    None
}

/// Puts `resource` at `id` as ARM would return it (with its id and name).
pub fn seed(cloud: &Shared, id: &str, mut resource: Value) {
    resource["id"] = json!(id);
    if resource.get("name").is_none() {
        resource["name"] = json!(id.rsplit('/').next().unwrap());
    }
    cloud
        .lock()
        .unwrap()
        .resources
        .insert(id.to_string(), resource);
}

fn base(headers: &HeaderMap) -> String {
    format!(
        "http://{}",
        headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default()
    )
}

pub async fn start() -> (String, Shared) {
    let cloud: Shared = Arc::default();
    let app = Router::new()
        .route("/login/{tenant}/oauth2/v2.0/token", post(token))
        .route(
            "/providers/Microsoft.ResourceGraph/resources",
            post(resource_graph),
        )
        .route("/operations/{op}", get(operation))
        .route("/deletions/{op}", get(deletion))
        .route("/subscriptions/{*path}", axum::routing::any(resource))
        .with_state(cloud.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, cloud)
}

pub fn arm(url: &str, secret: &str) -> Arm {
    let http = HttpClient::new(Duration::from_secs(5)).unwrap();
    let tokens = TokenSource::new(
        Credential::ClientSecret {
            tenant_id: "tenant".into(),
            client_id: "client".into(),
            secret: secret.into(),
        },
        Authorities {
            authority: format!("{url}/login/"),
            imds: format!("{url}/imds"),
            ..Authorities::default()
        },
        http.clone(),
    );
    let mut arm = Arm::new(http, url, tokens).with_retry(RetryPolicy::NEVER);
    arm.poll_every = Duration::from_millis(5);
    arm
}

pub fn compute(url: &str, secret: &str) -> Compute {
    Compute::new(
        arm(url, secret),
        Placement {
            subscription_id: "sub".into(),
            resource_group: "MC_rg_c_eastus".into(),
            location: "eastus".into(),
            cluster_name: "c".into(),
        },
    )
}

pub fn request(claim: &str, size: &str) -> VmRequest {
    VmRequest {
        node_claim: claim.into(),
        node_pool: "default".into(),
        vm_size: size.into(),
        zone: Some("1".into()),
        spot: false,
        image_id: "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202411.12.0".into(),
        os_disk_gb: 128,
        subnet_id: "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s".into(),
        custom_data: "IyEvYmluL2Jhc2g=".into(),
        admin_username: "azureuser".into(),
        ssh_public_key: "ssh-rsa AAAA".into(),
        tags: BTreeMap::new(),
        nic: Default::default(),
    }
}

pub const SUB: &str = "/subscriptions/sub";
pub const SUBNET: &str = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes";
pub const NODE_RG: &str = "MC_rg_c_eastus";

/// The ID of a backend pool of AKS's public load balancer.
pub fn pool_id(name: &str) -> String {
    format!(
        "{SUB}/resourceGroups/{NODE_RG}/providers/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/{name}"
    )
}

/// AKS's public load balancer with the backend pools `names`.
pub fn seed_load_balancer(cloud: &Shared, names: &[&str]) {
    let pools: Vec<Value> = names
        .iter()
        .map(|n| json!({"id": pool_id(n), "name": n, "properties": {"loadBalancerBackendAddresses": []}}))
        .collect();
    seed(
        cloud,
        &format!(
            "{SUB}/resourceGroups/{NODE_RG}/providers/Microsoft.Network/loadBalancers/kubernetes"
        ),
        json!({"location": "eastus", "properties": {"backendAddressPools": pools}}),
    );
}

/// The NICs ARM holds, by name.
pub fn nics(cloud: &Shared) -> BTreeMap<String, Value> {
    cloud
        .lock()
        .unwrap()
        .resources
        .iter()
        .filter(|(id, _)| id.contains("/networkInterfaces/"))
        .map(|(id, v)| (id.rsplit('/').next().unwrap().to_string(), v.clone()))
        .collect()
}

/// The region's sizes, the galleries' image versions, the cluster's NSG, load balancer
/// (outbound and inbound pools) and subnet.
pub fn seed_cloud(cloud: &Shared) {
    seed_load_balancer(cloud, &["aksOutboundBackendPool", "kubernetes"]);
    let skus: Value =
        serde_json::from_str(include_str!("../../testdata/resource-skus-eastus.json")).unwrap();
    for sku in skus["value"].as_array().unwrap() {
        let name = sku["name"].as_str().unwrap();
        let kind = sku["resourceType"].as_str().unwrap();
        seed(
            cloud,
            &format!("{SUB}/providers/Microsoft.Compute/skus/{kind}-{name}"),
            sku.clone(),
        );
    }
    for (gallery, definition) in [
        (
            "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2",
            "2204gen2containerd",
        ),
        (
            "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2",
            "2204gen2arm64containerd",
        ),
        (
            "AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2",
            "2204containerd",
        ),
    ] {
        for (version, published) in [
            ("202410.09.0", "2024-10-10T00:00:00Z"),
            ("202411.12.0", "2024-11-13T00:00:00Z"),
        ] {
            seed(
                cloud,
                &format!(
                    "{SUB}/providers/Microsoft.Compute/locations/eastus/communityGalleries/{gallery}/images/{definition}/versions/{version}"
                ),
                json!({"name": version, "location": "eastus", "type": "Microsoft.Compute/locations/communityGalleries/images/versions",
                       "properties": {"publishedDate": published}}),
            );
        }
    }
    seed(
        cloud,
        &format!(
            "{SUB}/resourceGroups/{NODE_RG}/providers/Microsoft.Network/networkSecurityGroups/aks-agentpool-12345678-nsg"
        ),
        json!({"location": "eastus", "properties": {}}),
    );
    seed(
        cloud,
        SUBNET,
        json!({"properties": {"addressPrefix": "10.224.0.0/16"}}),
    );
}

pub fn options() -> AzureOptions {
    AzureOptions {
        cluster_name: "c".into(),
        cluster_endpoint: "https://c-dns-abc.hcp.eastus.azmk8s.io:443".into(),
        ca_bundle: Some("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==".into()),
        kubelet_bootstrap_token: "abcdef.0123456789abcdef".into(),
        subscription_id: "sub".into(),
        tenant_id: "tenant".into(),
        resource_group: "rg".into(),
        node_resource_group: NODE_RG.into(),
        location: "eastus".into(),
        vnet_subnet_id: SUBNET.into(),
        ssh_public_key: "ssh-rsa AAAA".into(),
        linux_admin_username: "azureuser".into(),
        kubelet_identity_client_id: "61f71907-753f-4802-a901-47361c3664f2".into(),
        vm_memory_overhead_percent: 0.075,
        ..Default::default()
    }
}

/// The Node a kubelet registers for `claim`'s VM (`aks-<claim>`): the claim's labels and
/// hostname, its providerID, the taint Karpenter nodes register with, and a Ready status with
/// the claim's capacity and a kubelet of `kubelet_version` (another would be K8sVersionDrift).
/// A real API server takes the status in a second write, so it is returned apart.
pub fn registered_node(
    claim: &karpenter_api::NodeClaim,
    kubelet_version: &str,
) -> (k8s_openapi::api::core::v1::Node, Value) {
    let name = format!("aks-{}", claim.metadata.name.as_deref().unwrap());
    let status = claim.status.clone().unwrap_or_default();
    let mut labels = claim.metadata.labels.clone().unwrap_or_default();
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    let node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": status.provider_id,
                 "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
    }))
    .unwrap();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let node_status = json!({
        "capacity": status.capacity, "allocatable": status.allocatable,
        "nodeInfo": {"kubeletVersion": kubelet_version, "machineID": "", "systemUUID": "", "bootID": "",
                     "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                     "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "lastHeartbeatTime": now, "lastTransitionTime": now}],
    });
    (node, node_status)
}
