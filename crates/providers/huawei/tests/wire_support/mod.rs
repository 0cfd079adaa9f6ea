//! An in-process Huawei Cloud for the wire tests: one HTTP endpoint that plays the API gateway
//! in front of CCE, ECS, VPC and BSS — every request's `SDK-HMAC-SHA256` signature recomputed
//! with [`verify`](karpenter_huawei::auth::signer::verify), a temporary key's
//! `X-Security-Token` checked and required to be signed — and answers from hooks per method
//! and path; IAM (the project and domain lookups, the OIDC token exchange and temporary keys);
//! and the ECS metadata service's temporary keys. Refusals come in the gateway's and IAM's
//! shapes (`{"error_code", "error_msg", "request_id"}`) with an `X-Request-Id`.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};
use karpenter_huawei::auth::signer::{unescape, verify_parts};
use serde_json::{Value, json};

/// A call the gateway let through.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    /// The decoded path.
    pub path: String,
    /// The decoded query, in order.
    pub query: Vec<(String, String)>,
    /// The JSON body (`Null` without one).
    pub body: Value,
    /// Every header, names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// The access key that signed it.
    pub access_key: String,
    /// The headers it signed.
    pub signed_headers: Vec<String>,
}

impl Call {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    pub fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An answer to a call.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A JSON answer with this status.
    Json(u16, Value),
    /// An empty answer with this status.
    Empty(u16),
}

type Hook = Arc<dyn Fn(&Call) -> Reply + Send + Sync>;

struct Key {
    secret: String,
    token: Option<String>,
}

/// A log line of what the mock saw besides the calls it let through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// An OIDC token exchanged for an unscoped token.
    TokenExchanged { idp_id: String, id_token: String },
    /// Temporary keys issued, with their lifetime.
    KeysIssued {
        access_key: String,
        duration_seconds: u64,
    },
    /// The metadata token handed out.
    MetadataToken,
    /// Temporary keys read from the metadata service (with a token or without).
    MetadataKeys { with_token: bool },
    /// A request refused, and why.
    Refused { path: String, reason: String },
}

#[derive(Default)]
struct Cloud {
    keys: BTreeMap<String, Key>,
    hooks: BTreeMap<(String, String), Hook>,
    calls: Vec<Call>,
    events: Vec<Event>,
    requests: usize,
    /// IAM's projects: (id, name).
    projects: Vec<(String, String)>,
    domains: Vec<String>,
    /// The identity provider and the OIDC tokens it accepts.
    idp_id: Option<String>,
    id_tokens: BTreeSet<String>,
    /// Unscoped tokens handed out by the exchange.
    subject_tokens: BTreeSet<String>,
    /// How long issued temporary keys live.
    lifetime: u64,
    issued: usize,
    /// The metadata service: whether it is on, and whether it insists on a token.
    metadata: Option<bool>,
}

type Shared = Arc<Mutex<Cloud>>;

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn iso8601(unix: u64) -> String {
    let t = k8s_openapi::jiff::Timestamp::from_second(unix as i64).unwrap();
    // IAM writes microseconds.
    t.strftime("%Y-%m-%dT%H:%M:%S.000000Z").to_string()
}

fn next_request_id(cloud: &mut Cloud) -> String {
    cloud.requests += 1;
    format!("req-{:04}", cloud.requests)
}

fn json_response(status: u16, request_id: &str, v: &Value) -> Response {
    let mut response = (
        StatusCode::from_u16(status).unwrap(),
        [(
            axum::http::header::CONTENT_TYPE,
            "application/json;charset=UTF-8",
        )],
        v.to_string(),
    )
        .into_response();
    response
        .headers_mut()
        .insert("X-Request-Id", HeaderValue::from_str(request_id).unwrap());
    response
}

fn error(cloud: &mut Cloud, status: u16, code: &str, message: &str) -> Response {
    let id = next_request_id(cloud);
    json_response(
        status,
        &id,
        &json!({"error_code": code, "error_msg": message, "request_id": id}),
    )
}

fn refuse(cloud: &mut Cloud, path: &str, status: u16, code: &str, reason: String) -> Response {
    cloud.events.push(Event::Refused {
        path: path.to_string(),
        reason: reason.clone(),
    });
    error(cloud, status, code, &reason)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn handle(
    axum::extract::State(cloud): axum::extract::State<Shared>,
    parts: Parts,
    body: Bytes,
) -> Response {
    let mut cloud = cloud.lock().unwrap();
    let path = unescape(parts.uri.path(), false);
    match (parts.method.as_str(), path.as_str()) {
        ("POST", "/v3.0/OS-AUTH/id-token/tokens") => {
            exchange_id_token(&mut cloud, &parts.headers, &body)
        }
        ("POST", "/v3.0/OS-CREDENTIAL/securitytokens") => issue_keys(&mut cloud, &body),
        ("PUT", "/meta-data/latest/api/token") => metadata_token(&mut cloud, &parts.headers),
        ("GET", "/openstack/latest/securitykey") => metadata_keys(&mut cloud, &parts.headers),
        _ => signed_call(&mut cloud, &parts, &body),
    }
}

fn exchange_id_token(cloud: &mut Cloud, headers: &HeaderMap, body: &[u8]) -> Response {
    let path = "/v3.0/OS-AUTH/id-token/tokens";
    let idp = header(headers, "x-idp-id").unwrap_or_default().to_string();
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let id_token = v["auth"]["id_token"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if cloud.idp_id.as_deref() != Some(idp.as_str()) {
        return refuse(
            cloud,
            path,
            404,
            "IAM.0004",
            format!("identity provider {idp:?} not found"),
        );
    }
    if !cloud.id_tokens.contains(&id_token) {
        return refuse(
            cloud,
            path,
            401,
            "IAM.0011",
            "the id_token is invalid".into(),
        );
    }
    cloud.events.push(Event::TokenExchanged {
        idp_id: idp,
        id_token,
    });
    let subject = format!("MIIunscoped-{}", cloud.subject_tokens.len() + 1);
    cloud.subject_tokens.insert(subject.clone());
    let id = next_request_id(cloud);
    let mut response = json_response(
        201,
        &id,
        &json!({"token": {
            "expires_at": iso8601(unix_now() + 86_400),
            "issued_at": iso8601(unix_now()),
            "methods": ["mapped"],
            "user": {"OS-FEDERATION": {"identity_provider": {"id": "karpenter-idp"}, "protocol": {"id": "oidc"}, "groups": []},
                     "domain": {"id": "d0m41n", "name": "account"}, "id": "fed-user", "name": "system:serviceaccount:karpenter:karpenter"}
        }}),
    );
    response
        .headers_mut()
        .insert("X-Subject-Token", HeaderValue::from_str(&subject).unwrap());
    response
}

fn issue_keys(cloud: &mut Cloud, body: &[u8]) -> Response {
    let path = "/v3.0/OS-CREDENTIAL/securitytokens";
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let identity = &v["auth"]["identity"];
    let token = identity["token"]["id"].as_str().unwrap_or_default();
    if identity["methods"] != json!(["token"]) || !cloud.subject_tokens.contains(token) {
        return refuse(cloud, path, 401, "IAM.0011", "the token is invalid".into());
    }
    let duration = identity["token"]["duration_seconds"]
        .as_u64()
        .unwrap_or(900);
    let (access, secret, security_token) = issue(cloud);
    cloud.events.push(Event::KeysIssued {
        access_key: access.clone(),
        duration_seconds: duration,
    });
    let expires_at = iso8601(unix_now() + cloud.lifetime);
    let id = next_request_id(cloud);
    json_response(
        201,
        &id,
        &json!({"credential": {"access": access, "secret": secret, "securitytoken": security_token, "expires_at": expires_at}}),
    )
}

/// New temporary keys, accepted from now on.
fn issue(cloud: &mut Cloud) -> (String, String, String) {
    cloud.issued += 1;
    let n = cloud.issued;
    let (access, secret, token) = (
        format!("TMPKEY{n:04}"),
        format!("temporary-secret-{n}"),
        format!("gQpjbi1ub3J0aC00{n}"),
    );
    cloud.keys.insert(
        access.clone(),
        Key {
            secret: secret.clone(),
            token: Some(token.clone()),
        },
    );
    (access, secret, token)
}

fn metadata_token(cloud: &mut Cloud, headers: &HeaderMap) -> Response {
    match cloud.metadata {
        None => error(cloud, 404, "", "not on ECS"),
        Some(_) => {
            if header(headers, "x-metadata-token-ttl-seconds").is_none() {
                return error(cloud, 400, "", "no TTL");
            }
            cloud.events.push(Event::MetadataToken);
            (StatusCode::OK, "metadata-token-1").into_response()
        }
    }
}

fn metadata_keys(cloud: &mut Cloud, headers: &HeaderMap) -> Response {
    let Some(token_required) = cloud.metadata else {
        return error(cloud, 404, "", "not on ECS");
    };
    let token = header(headers, "x-metadata-token");
    if token_required && token != Some("metadata-token-1") {
        return (StatusCode::UNAUTHORIZED, "token required").into_response();
    }
    cloud.events.push(Event::MetadataKeys {
        with_token: token.is_some(),
    });
    let (access, secret, security_token) = issue(cloud);
    let expires_at = iso8601(unix_now() + cloud.lifetime);
    let id = next_request_id(cloud);
    json_response(
        200,
        &id,
        &json!({"credential": {"access": access, "secret": secret, "securitytoken": security_token, "expires_at": expires_at}}),
    )
}

fn signed_call(cloud: &mut Cloud, parts: &Parts, body: &[u8]) -> Response {
    let (method, uri, headers) = (&parts.method, &parts.uri, &parts.headers);
    let path = unescape(uri.path(), false);
    let keys = &cloud.keys;
    let verified = match verify_parts(
        parts,
        body,
        |ak| keys.get(ak).map(|k| k.secret.clone()),
        unix_now(),
    ) {
        Ok(v) => v,
        Err(e) => {
            return refuse(
                cloud,
                &path,
                401,
                "APIGW.0301",
                format!("Incorrect IAM authentication information: {e}"),
            );
        }
    };
    let expected_token = cloud.keys[&verified.access_key].token.clone();
    let sent_token = header(headers, "x-security-token").map(str::to_string);
    if sent_token != expected_token {
        return refuse(
            cloud,
            &path,
            401,
            "APIGW.0301",
            "Incorrect IAM authentication information: security token does not match the key"
                .into(),
        );
    }
    if sent_token.is_some()
        && !verified
            .signed_headers
            .iter()
            .any(|h| h == "x-security-token")
    {
        return refuse(
            cloud,
            &path,
            401,
            "APIGW.0301",
            "Incorrect IAM authentication information: x-security-token is not signed".into(),
        );
    }
    let call = Call {
        method: method.to_string(),
        path: path.clone(),
        query: uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (unescape(k, true), unescape(v, true))
            })
            .collect(),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect(),
        access_key: verified.access_key,
        signed_headers: verified.signed_headers,
    };
    cloud.calls.push(call.clone());
    let reply = match (method.as_str(), path.as_str()) {
        ("GET", "/v3/projects") => {
            let name = call.query("name").unwrap_or_default();
            let projects: Vec<Value> = cloud
                .projects
                .iter()
                .filter(|(_, n)| n == name)
                .map(|(id, n)| json!({"id": id, "name": n, "domain_id": "d0m41n", "enabled": true, "is_domain": false, "parent_id": "d0m41n", "description": "", "links": {"self": format!("https://iam.myhuaweicloud.com/v3/projects/{id}")}}))
                .collect();
            Reply::Json(
                200,
                json!({"projects": projects, "links": {"self": "https://iam.myhuaweicloud.com/v3/projects", "previous": null, "next": null}}),
            )
        }
        ("GET", "/v3/auth/domains") => {
            let domains: Vec<Value> = cloud
                .domains
                .iter()
                .map(|id| json!({"id": id, "name": "account", "enabled": true, "description": ""}))
                .collect();
            Reply::Json(
                200,
                json!({"domains": domains, "links": {"self": "https://iam.myhuaweicloud.com/v3/auth/domains"}}),
            )
        }
        _ => match cloud.hooks.get(&(method.to_string(), path.clone())) {
            Some(hook) => hook(&call),
            None => Reply::Json(
                404,
                json!({"error_code": "APIGW.0101", "error_msg": "The API does not exist or has not been published in the environment"}),
            ),
        },
    };
    let id = next_request_id(cloud);
    match reply {
        Reply::Json(status, v) => json_response(status, &id, &v),
        Reply::Empty(status) => {
            let mut r = StatusCode::from_u16(status).unwrap().into_response();
            r.headers_mut()
                .insert("X-Request-Id", HeaderValue::from_str(&id).unwrap());
            r
        }
    }
}

/// The running mock.
#[derive(Clone)]
pub struct Mock {
    pub url: String,
    cloud: Shared,
}

impl Mock {
    pub async fn start() -> Mock {
        let cloud: Shared = Arc::new(Mutex::new(Cloud {
            lifetime: 6 * 3600,
            ..Cloud::default()
        }));
        let app = Router::new()
            .fallback(any(handle))
            .with_state(cloud.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Mock { url, cloud }
    }

    /// Accepts requests signed with this permanent key.
    pub fn key(&self, access_key: &str, secret: &str) -> &Self {
        self.key_with_token(access_key, secret, None)
    }

    /// Accepts requests signed with these temporary keys, carrying `token`.
    pub fn key_with_token(&self, access_key: &str, secret: &str, token: Option<&str>) -> &Self {
        self.cloud.lock().unwrap().keys.insert(
            access_key.into(),
            Key {
                secret: secret.into(),
                token: token.map(str::to_string),
            },
        );
        self
    }

    /// IAM's project named `name` (a region).
    pub fn project(&self, id: &str, name: &str) -> &Self {
        self.cloud
            .lock()
            .unwrap()
            .projects
            .push((id.into(), name.into()));
        self
    }

    /// IAM's domain for the credentials.
    pub fn domain(&self, id: &str) -> &Self {
        self.cloud.lock().unwrap().domains.push(id.into());
        self
    }

    /// The identity provider and an OIDC token it accepts.
    pub fn trust(&self, idp_id: &str, id_token: &str) -> &Self {
        let mut cloud = self.cloud.lock().unwrap();
        cloud.idp_id = Some(idp_id.into());
        cloud.id_tokens.insert(id_token.into());
        self
    }

    /// How long temporary keys issued from now on live.
    pub fn lifetime(&self, lifetime: Duration) -> &Self {
        self.cloud.lock().unwrap().lifetime = lifetime.as_secs();
        self
    }

    /// Turns the metadata service on, insisting on its token or not.
    pub fn metadata(&self, token_required: bool) -> &Self {
        self.cloud.lock().unwrap().metadata = Some(token_required);
        self
    }

    /// Answers `method path` with `hook`.
    pub fn on(
        &self,
        method: &str,
        path: &str,
        hook: impl Fn(&Call) -> Reply + Send + Sync + 'static,
    ) -> &Self {
        self.cloud
            .lock()
            .unwrap()
            .hooks
            .insert((method.into(), path.into()), Arc::new(hook));
        self
    }

    /// Answers `method path` with `replies` in turn, the last one from then on.
    pub fn on_sequence(&self, method: &str, path: &str, replies: Vec<Reply>) -> &Self {
        let next = Arc::new(Mutex::new(0usize));
        self.on(method, path, move |_| {
            let mut i = next.lock().unwrap();
            let reply = replies[(*i).min(replies.len() - 1)].clone();
            *i += 1;
            reply
        })
    }

    /// The calls let through, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.cloud.lock().unwrap().calls.clone()
    }

    /// The calls let through to `path`.
    pub fn calls_to(&self, path: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.path == path)
            .collect()
    }

    /// Everything else the mock saw.
    pub fn events(&self) -> Vec<Event> {
        self.cloud.lock().unwrap().events.clone()
    }
}

/// Retries without waiting.
pub const IMMEDIATE: RetryPolicy = RetryPolicy {
    attempts: 3,
    base: Duration::ZERO,
    max: Duration::ZERO,
};

pub fn http() -> HttpClient {
    HttpClient::new(Duration::from_secs(10)).unwrap()
}

/// A file holding `text`, in a directory of its own.
pub fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "karpenter-huawei-wire-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}
