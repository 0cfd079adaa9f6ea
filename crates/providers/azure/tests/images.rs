//! Node images from the community galleries against an in-process ARM: Entra ID's token
//! endpoint and `CommunityGalleryImageVersions_List` in the shape of the Azure REST API specs'
//! example, paged by `nextLink` with a skip token. Every ARM request must carry the token and
//! the api-version.
#![cfg(feature = "cloud")]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_azure::aksnodeclass::{AKSNodeClass, AKSNodeClassStatus, NodeImage};
use karpenter_azure::arm::Arm;
use karpenter_azure::auth::{Authorities, Credential, TokenSource};
use karpenter_azure::images::{
    COMMUNITY_GALLERY_API_VERSION, CommunityImages, Gallery, ImageSource, ListError,
    community_image_id, default_images,
};
use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};
use serde_json::{Value, json};

const TOKEN: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.mock";
const PAGE_SIZE: usize = 2;

#[derive(Default)]
struct Galleries {
    /// Versions by `gallery/definition`, in the order ARM lists them.
    versions: BTreeMap<String, Vec<Value>>,
    /// Definitions ARM refuses, with the status and error code.
    refuse: BTreeMap<String, (StatusCode, String)>,
    /// Whether next links leave the api-version out, as the specs' example does.
    bare_next_links: bool,
    /// List requests served, by `gallery/definition`.
    requests: BTreeMap<String, usize>,
    unauthorized: usize,
}

type Shared = Arc<Mutex<Galleries>>;

/// A JSON answer (the workspace's axum has no `Json`: only tests need it).
#[allow(non_snake_case)]
fn Json(v: Value) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
}

fn arm_error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

async fn token(Path(tenant): Path<String>, body: String) -> Response {
    let form: BTreeMap<String, String> = form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let good = tenant == "tenant"
        && form.get("client_secret").map(String::as_str) == Some("secret")
        && form.get("scope").map(String::as_str) == Some("https://management.azure.com/.default");
    if !good {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."})),
        )
            .into_response();
    }
    Json(json!({"token_type": "Bearer", "expires_in": 3599, "access_token": TOKEN})).into_response()
}

fn query_pairs(query: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

async fn versions(
    State(galleries): State<Shared>,
    Path((subscription, location, public_name, definition)): Path<(String, String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let mut state = galleries.lock().unwrap();
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok());
    if bearer != Some(&format!("Bearer {TOKEN}")) {
        state.unauthorized += 1;
        return arm_error(StatusCode::UNAUTHORIZED, "AuthenticationFailed", "no token");
    }
    let query = query_pairs(&query.unwrap_or_default());
    if query.get("api-version").map(String::as_str) != Some(COMMUNITY_GALLERY_API_VERSION) {
        return arm_error(
            StatusCode::BAD_REQUEST,
            "InvalidApiVersionParameter",
            &format!("{query:?}"),
        );
    }
    assert_eq!(
        (subscription.as_str(), location.as_str()),
        ("sub", "eastus")
    );
    let key = format!("{public_name}/{definition}");
    *state.requests.entry(key.clone()).or_default() += 1;
    if let Some((status, code)) = state.refuse.get(&key) {
        return arm_error(
            *status,
            code,
            &format!("The gallery image {key} is not found."),
        );
    }
    let Some(all) = state.versions.get(&key) else {
        return arm_error(
            StatusCode::NOT_FOUND,
            "GalleryImageNotFound",
            &format!("The gallery image {key} is not found."),
        );
    };
    let page: usize = query.get("$skiptoken").map_or(0, |t| t.parse().unwrap());
    let value: Vec<Value> = all
        .iter()
        .skip(page * PAGE_SIZE)
        .take(PAGE_SIZE)
        .cloned()
        .collect();
    let mut body = json!({"value": value});
    if (page + 1) * PAGE_SIZE < all.len() {
        let host = headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        let api = if state.bare_next_links {
            String::new()
        } else {
            format!("api-version={COMMUNITY_GALLERY_API_VERSION}&")
        };
        body["nextLink"] = json!(format!(
            "http://{host}/subscriptions/sub/providers/Microsoft.Compute/locations/eastus/communityGalleries/{public_name}/images/{definition}/versions?{api}$skiptoken={}",
            page + 1
        ));
    }
    Json(body).into_response()
}

/// A version as the specs' example lists it.
fn version(name: &str, published: &str) -> Value {
    json!({
        "properties": {
            "publishedDate": published,
            "excludeFromLatest": false,
            "storageProfile": {"osDiskImage": {"diskSizeGB": 30, "hostCaching": "ReadOnly"}},
        },
        "name": name,
        "identifier": {"uniqueId": format!("/CommunityGalleries/g/Images/i/Versions/{name}")},
    })
}

/// Five versions over three pages; the latest, published last, is on the second page.
fn five_versions() -> Vec<Value> {
    vec![
        version("202409.01.0", "2024-09-01T10:00:00.1234567+00:00"),
        version("202411.12.0", "2024-11-14T19:35:45.8471146+00:00"),
        version("202501.10.0", "2025-01-10T08:00:00+00:00"),
        version("202410.01.0", "2024-10-01T00:00:00+00:00"),
        version("202412.01.0", "2024-12-01T00:00:00+00:00"),
    ]
}

fn key(gallery: Gallery, definition: &str) -> String {
    format!("{}/{definition}", gallery.community_name())
}

async fn start() -> (String, Shared) {
    let state: Shared = Arc::default();
    let app = Router::new()
        .route("/login/{tenant}/oauth2/v2.0/token", post(token))
        .route(
            "/subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/communityGalleries/{gallery}/images/{definition}/versions",
            get(versions),
        )
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, state)
}

fn images(url: &str) -> CommunityImages {
    let http = HttpClient::new(Duration::from_secs(5)).unwrap();
    let tokens = TokenSource::new(
        Credential::ClientSecret {
            tenant_id: "tenant".into(),
            client_id: "client".into(),
            secret: "secret".into(),
        },
        Authorities {
            authority: format!("{url}/login/"),
            imds: format!("{url}/imds"),
            ..Authorities::default()
        },
        http.clone(),
    );
    let arm = Arm::new(http, url, tokens).with_retry(RetryPolicy::NEVER);
    CommunityImages::new(arm, "sub", "eastus")
}

fn ready(type_: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: "True".into(),
        observed_generation: Some(1),
        message: String::new(),
        reason: type_.into(),
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
    }
}

fn node_class(spec: Value, kubernetes_version: &str) -> AKSNodeClass {
    let mut class: AKSNodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.azure.com/v1beta1",
        "kind": "AKSNodeClass",
        "metadata": {"name": "default", "generation": 1},
        "spec": spec,
    }))
    .unwrap();
    class.status = Some(AKSNodeClassStatus {
        kubernetes_version: Some(kubernetes_version.into()),
        conditions: vec![ready("KubernetesVersionReady")],
        ..Default::default()
    });
    class
}

#[tokio::test]
async fn the_latest_version_is_the_last_published_across_pages() {
    let (url, state) = start().await;
    let ubuntu = Gallery::AksUbuntu.community_name();
    state.lock().unwrap().versions.insert(
        key(Gallery::AksUbuntu, "2204gen2containerd"),
        five_versions(),
    );
    let latest = images(&url)
        .latest_version(ubuntu, "2204gen2containerd")
        .await
        .unwrap();
    assert_eq!(latest, "202501.10.0");
    let state = state.lock().unwrap();
    assert_eq!(
        state.requests[&key(Gallery::AksUbuntu, "2204gen2containerd")],
        3,
        "every page was read"
    );
    assert_eq!(state.unauthorized, 0);
}

#[tokio::test]
async fn next_links_without_an_api_version_are_followed() {
    let (url, state) = start().await;
    {
        let mut state = state.lock().unwrap();
        state.bare_next_links = true;
        state
            .versions
            .insert(key(Gallery::AksAzureLinux, "V3gen2"), five_versions());
    }
    let latest = images(&url)
        .latest_version(Gallery::AksAzureLinux.community_name(), "V3gen2")
        .await
        .unwrap();
    assert_eq!(latest, "202501.10.0");
    assert_eq!(
        state.lock().unwrap().requests[&key(Gallery::AksAzureLinux, "V3gen2")],
        3
    );
}

fn publish(state: &Shared, gallery: Gallery, definitions: &[&str], versions: &[Value]) {
    let mut state = state.lock().unwrap();
    for d in definitions {
        state.versions.insert(key(gallery, d), versions.to_vec());
    }
}

fn total_requests(state: &Shared) -> usize {
    state.lock().unwrap().requests.values().sum()
}

#[tokio::test]
async fn a_node_classs_images_are_its_familys_at_their_latest_versions_in_order() {
    let (url, state) = start().await;
    let ubuntu = [
        "2204gen2containerd",
        "2204containerd",
        "2204gen2arm64containerd",
    ];
    publish(&state, Gallery::AksUbuntu, &ubuntu, &five_versions());
    let reader = images(&url);
    let class = node_class(json!({"imageFamily": "Ubuntu2204"}), "1.31.0");
    let listed = reader.node_images_for(&class).await.unwrap();
    let expected: Vec<NodeImage> =
        default_images(&class.spec, "1.31.0", ImageSource::CommunityGallery)
            .iter()
            .map(|i| i.community_node_image("202501.10.0"))
            .collect();
    assert_eq!(listed, expected);
    assert_eq!(
        listed[0].id,
        community_image_id(
            Gallery::AksUbuntu.community_name(),
            "2204gen2containerd",
            "202501.10.0"
        )
    );
    assert_eq!(
        serde_json::to_value(&listed[2]).unwrap(),
        json!({
            "id": "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2arm64containerd/versions/202501.10.0",
            "requirements": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                {"key": "karpenter.azure.com/sku-hyperv-generation", "operator": "In", "values": ["2"]},
            ],
        }),
        "status.images as upstream writes it"
    );
    assert_eq!(
        total_requests(&state),
        9,
        "three definitions, three pages each"
    );

    // Asked again, the cache answers.
    assert_eq!(reader.node_images_for(&class).await.unwrap(), listed);
    assert_eq!(total_requests(&state), 9);

    // A Kubernetes upgrade lists afresh and finds what was published since.
    let mut newer = five_versions();
    newer.push(version("202502.01.0", "2025-02-01T00:00:00Z"));
    publish(&state, Gallery::AksUbuntu, &ubuntu, &newer);
    let upgraded = node_class(json!({"imageFamily": "Ubuntu2204"}), "1.31.1");
    let relisted = reader.node_images_for(&upgraded).await.unwrap();
    assert!(
        relisted
            .iter()
            .all(|i| i.id.ends_with("/versions/202502.01.0")),
        "{relisted:?}"
    );
    assert_eq!(total_requests(&state), 18);
}

#[tokio::test]
async fn azure_linux_from_kubernetes_1_32_reads_azure_linux_3() {
    let (url, state) = start().await;
    publish(
        &state,
        Gallery::AksAzureLinux,
        &["V3gen2", "V3", "V3gen2arm64"],
        &five_versions()[..2],
    );
    let class = node_class(json!({"imageFamily": "AzureLinux"}), "1.32.0");
    let listed = images(&url).node_images_for(&class).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "/CommunityGalleries/AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b/images/V3gen2/versions/202411.12.0",
            "/CommunityGalleries/AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b/images/V3/versions/202411.12.0",
            "/CommunityGalleries/AKSAzureLinux-f7c7cda5-1c9a-4bdc-a222-9614c968580b/images/V3gen2arm64/versions/202411.12.0",
        ]
    );
}

#[tokio::test]
async fn fips_has_no_community_images_and_asks_nothing() {
    let (url, state) = start().await;
    let class = node_class(
        json!({"imageFamily": "AzureLinux", "fipsMode": "FIPS"}),
        "1.32.0",
    );
    assert_eq!(images(&url).node_images_for(&class).await.unwrap(), vec![]);
    assert_eq!(total_requests(&state), 0);
}

#[tokio::test]
async fn arms_errors_surface_naming_the_image() {
    let (url, state) = start().await;
    let ubuntu = Gallery::AksUbuntu.community_name();
    let reader = images(&url);

    let err = reader
        .latest_version(ubuntu, "2204gen9containerd")
        .await
        .unwrap_err();
    assert_eq!(err.arm_code(), Some("GalleryImageNotFound"), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("{ubuntu}/2204gen9containerd")),
        "{err}"
    );

    // One definition failing fails the list, and nothing is cached.
    publish(
        &state,
        Gallery::AksUbuntu,
        &["2204gen2containerd", "2204gen2arm64containerd"],
        &five_versions(),
    );
    state.lock().unwrap().refuse.insert(
        key(Gallery::AksUbuntu, "2204containerd"),
        (StatusCode::TOO_MANY_REQUESTS, "TooManyRequests".into()),
    );
    let class = node_class(json!({"imageFamily": "Ubuntu2204"}), "1.31.0");
    let err = reader.node_images_for(&class).await.unwrap_err();
    assert_eq!(err.arm_code(), Some("TooManyRequests"), "{err}");
    {
        let mut state = state.lock().unwrap();
        state.refuse.clear();
        state
            .versions
            .insert(key(Gallery::AksUbuntu, "2204containerd"), five_versions());
    }
    assert_eq!(reader.node_images_for(&class).await.unwrap().len(), 3);
}

#[tokio::test]
async fn a_definition_without_versions_is_an_error() {
    let (url, state) = start().await;
    publish(&state, Gallery::AksUbuntu, &["2404containerd"], &[]);
    let err = images(&url)
        .latest_version(Gallery::AksUbuntu.community_name(), "2404containerd")
        .await
        .unwrap_err();
    assert!(
        matches!(err, ListError::NoVersions { ref location, .. } if location == "eastus"),
        "{err}"
    );
}

#[tokio::test]
async fn a_node_class_without_a_current_kubernetes_version_lists_nothing() {
    let (url, state) = start().await;
    let mut class = node_class(json!({}), "1.31.0");
    class.metadata.generation = Some(2);
    let err = images(&url).node_images_for(&class).await.unwrap_err();
    assert!(matches!(err, ListError::NodeClass(_)), "{err}");
    assert!(err.to_string().contains("KubernetesVersionReady"), "{err}");
    assert_eq!(total_requests(&state), 0);
}

#[tokio::test]
async fn a_wrong_secret_is_reported_with_entra_ids_reason() {
    let (url, _) = start().await;
    let http = HttpClient::new(Duration::from_secs(5)).unwrap();
    let tokens = TokenSource::new(
        Credential::ClientSecret {
            tenant_id: "tenant".into(),
            client_id: "client".into(),
            secret: "wrong".into(),
        },
        Authorities {
            authority: format!("{url}/login/"),
            imds: format!("{url}/imds"),
            ..Authorities::default()
        },
        http.clone(),
    );
    let reader = CommunityImages::new(
        Arm::new(http, &url, tokens).with_retry(RetryPolicy::NEVER),
        "sub",
        "eastus",
    );
    let err = reader
        .latest_version(Gallery::AksUbuntu.community_name(), "2204gen2containerd")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("AADSTS7000215"), "{err}");
}
