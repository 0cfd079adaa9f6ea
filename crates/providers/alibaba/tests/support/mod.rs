//! An in-process Alibaba Cloud for the provider's tests: one RPC endpoint (ECS, VPC and STS
//! share it, told apart by `x-acs-action` or `Action`) that authenticates every request as
//! Alibaba does — the ACS3 signature recomputed with the caller's secret, the payload hash, the
//! STS security token, a nonce used once; the legacy RPC signature for STS `AssumeRole`; nothing
//! for the anonymous `AssumeRoleWithOIDC` — and answers refusals in Alibaba's error shape
//! (`{"RequestId", "HostId", "Code", "Message", "Recommend"}`). Tests register answers per
//! action and read back the calls. It also plays the ECS metadata service (the metadata token,
//! the instance's RAM role), a credentials URI, and the price server upstream reads prices
//! from (`GET /api/v1/alibabacloud/ecs/regions/{region}/price`, unsigned).
//!
//! Every other path is ACK's ROA API (`GET /clusters/{id}`, `POST /clusters/{id}/attachscript`,
//! …), any method: the ACS3 signature is checked over the method, the (decoded, re-encoded)
//! path, the query and the body's hash, the hook is picked by `x-acs-action`, and the hook sees
//! the method, the path and the JSON body. Hook errors come back in ACK's lower-case shape.
#![allow(dead_code)]

pub mod ecs;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, put};
use karpenter_alibaba::auth::acs3::{self, SignableRequest};
use karpenter_alibaba::auth::{Credentials, CredentialsProvider, Source, rpc};
use karpenter_alibaba::client::Client;
use karpenter_alibaba::endpoint::{Endpoints, Network};
use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};
use serde_json::{Value, json};

/// How the mock authenticated a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// `ACS3-HMAC-SHA256`.
    Acs3,
    /// The legacy RPC signature.
    RpcV1,
    /// None (`AssumeRoleWithOIDC`).
    Anonymous,
}

/// A call the mock accepted.
#[derive(Clone, Debug)]
pub struct Call {
    pub action: String,
    pub version: String,
    /// `POST` for RPC; the API's method for ROA.
    pub method: String,
    /// `/` for RPC; the decoded resource path for ROA (`/clusters/c1/attachscript`).
    pub path: String,
    /// A ROA call's JSON body (`Null` without one).
    pub body: Value,
    /// The `content-type` sent, when one was.
    pub content_type: Option<String>,
    /// Query and form parameters, the signing ones of RPC v1 included.
    pub params: BTreeMap<String, String>,
    pub access_key_id: Option<String>,
    pub security_token: Option<String>,
    pub nonce: Option<String>,
    pub auth: Auth,
}

/// An answer to a call.
#[derive(Clone, Debug)]
pub enum Reply {
    Ok(Value),
    /// A plain-text answer (ACK's attach script).
    Text(String),
    Error {
        status: u16,
        code: String,
        message: String,
    },
}

impl Reply {
    pub fn error(status: u16, code: &str, message: &str) -> Reply {
        Reply::Error {
            status,
            code: code.into(),
            message: message.into(),
        }
    }
}

type Hook = Arc<dyn Fn(&Call) -> Reply + Send + Sync>;

struct Key {
    secret: String,
    token: Option<String>,
}

struct OidcTrust {
    role_arn: String,
    provider_arn: String,
    token: String,
}

struct InstanceRole {
    name: String,
    token_required: bool,
}

#[derive(Default)]
struct Cloud {
    keys: BTreeMap<String, Key>,
    hooks: BTreeMap<String, Hook>,
    calls: Vec<Call>,
    refused: Vec<String>,
    nonces: BTreeSet<String>,
    oidc: Option<OidcTrust>,
    roles: BTreeSet<String>,
    instance_role: Option<InstanceRole>,
    metadata_tokens: BTreeSet<String>,
    /// How long issued temporary credentials live.
    lifetime: u64,
    issued: usize,
    requests: usize,
    /// The price server's answers by region: HTTP status and body.
    prices: BTreeMap<String, (u16, String)>,
    /// The regions the price server was asked for.
    price_requests: Vec<String>,
}

type Shared = Arc<Mutex<Cloud>>;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn request_id(cloud: &mut Cloud) -> String {
    cloud.requests += 1;
    format!("473469C7-AA6F-4DC5-B3DB-{:012X}", cloud.requests)
}

fn json_response(status: StatusCode, v: Value) -> Response {
    (
        status,
        [(
            axum::http::header::CONTENT_TYPE,
            "application/json;charset=utf-8",
        )],
        v.to_string(),
    )
        .into_response()
}

fn alibaba_error(cloud: &mut Cloud, status: u16, code: &str, message: &str) -> Response {
    let id = request_id(cloud);
    json_response(
        StatusCode::from_u16(status).unwrap(),
        json!({
            "RequestId": id,
            "HostId": "ecs.cn-hangzhou.aliyuncs.com",
            "Code": code,
            "Message": message,
            "Recommend": format!("https://api.aliyun.com/troubleshoot?q={code}&product=Ecs"),
        }),
    )
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn parse_pairs(s: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(s.as_bytes()).into_owned().collect()
}

/// Who signed an accepted request: access key id, security token, nonce.
type Verified = (String, Option<String>, String);
/// A refusal: HTTP status, Alibaba's code, message.
type Refusal = (u16, &'static str, String);

/// Checks the ACS3 signature.
fn verify_acs3(
    cloud: &mut Cloud,
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Verified, Refusal> {
    let authorization = header(headers, "authorization").unwrap_or_default();
    let (access_key_id, signed, signature) = acs3::parse_authorization(authorization).ok_or((
        400,
        "IncompleteSignature",
        "The request signature does not conform to Aliyun standards.".to_string(),
    ))?;
    let signed: Vec<&str> = signed.split(';').collect();
    for required in [
        "host",
        "x-acs-action",
        "x-acs-content-sha256",
        "x-acs-date",
        "x-acs-signature-nonce",
        "x-acs-version",
    ] {
        if !signed.contains(&required) {
            return Err((
                400,
                "IncompleteSignature",
                format!("The header {required} is not signed."),
            ));
        }
    }
    for name in headers.keys() {
        // A body's type is signed too: the SDKs sign it, and an unsigned one could be swapped.
        let must_sign = name.as_str().starts_with("x-acs-") || name.as_str() == "content-type";
        if must_sign && !signed.contains(&name.as_str()) {
            return Err((
                400,
                "IncompleteSignature",
                format!("The header {name} is not signed."),
            ));
        }
    }
    let hashed = header(headers, "x-acs-content-sha256").unwrap_or_default();
    if hashed != acs3::hashed_payload(body) {
        return Err((
            400,
            "InvalidParameter.ContentSHA256",
            "x-acs-content-sha256 is not the body's SHA-256.".into(),
        ));
    }
    let key = cloud.keys.get(access_key_id).ok_or((
        404,
        "InvalidAccessKeyId.NotFound",
        "Specified access key is not found.".to_string(),
    ))?;
    let token = header(headers, "x-acs-security-token").map(str::to_string);
    if key.token.is_some() && token != key.token {
        return Err((
            400,
            "InvalidSecurityToken.MismatchWithAccessKey",
            "The security token does not belong to the access key.".into(),
        ));
    }
    let received: Vec<(String, String)> = signed
        .iter()
        .flat_map(|name| {
            headers
                .get_all(*name)
                .iter()
                .map(move |v| (name.to_string(), v.to_str().unwrap_or_default().to_string()))
        })
        .collect();
    let secret = key.secret.clone();
    let expected = acs3::sign(
        &SignableRequest {
            method: method.as_str(),
            path,
            query,
            headers: &received,
            hashed_payload: hashed,
        },
        &Credentials::new(access_key_id, secret),
    );
    if expected.signature != signature {
        return Err((
            400,
            "SignatureDoesNotMatch",
            format!(
                "Specified signature does not match our calculation. server string to sign is:{}",
                expected.string_to_sign
            ),
        ));
    }
    let nonce = header(headers, "x-acs-signature-nonce")
        .unwrap_or_default()
        .to_string();
    if !cloud.nonces.insert(nonce.clone()) {
        return Err((
            400,
            "SignatureNonceUsed",
            "Specified signature nonce was used already.".into(),
        ));
    }
    Ok((access_key_id.to_string(), token, nonce))
}

/// Checks the legacy RPC signature over the query and form parameters.
fn verify_rpc_v1(
    cloud: &mut Cloud,
    method: &Method,
    params: &[(String, String)],
) -> Result<Verified, Refusal> {
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if get("SignatureMethod").as_deref() != Some("HMAC-SHA1")
        || get("SignatureVersion").as_deref() != Some("1.0")
    {
        return Err((
            400,
            "IncompleteSignature",
            "SignatureMethod or SignatureVersion is wrong.".into(),
        ));
    }
    let access_key_id = get("AccessKeyId").unwrap_or_default();
    let key = cloud.keys.get(&access_key_id).ok_or((
        404,
        "InvalidAccessKeyId.NotFound",
        "Specified access key is not found.".to_string(),
    ))?;
    let token = get("SecurityToken");
    if key.token.is_some() && token != key.token {
        return Err((
            400,
            "InvalidSecurityToken.MismatchWithAccessKey",
            "The security token does not belong to the access key.".into(),
        ));
    }
    let expected = rpc::sign(method.as_str(), params, &key.secret);
    if get("Signature").as_deref() != Some(expected.as_str()) {
        return Err((
            400,
            "SignatureDoesNotMatch",
            format!(
                "Specified signature does not match our calculation. server string to sign is:{}",
                rpc::string_to_sign(method.as_str(), params)
            ),
        ));
    }
    let nonce = get("SignatureNonce").unwrap_or_default();
    if !cloud.nonces.insert(nonce.clone()) {
        return Err((
            400,
            "SignatureNonceUsed",
            "Specified signature nonce was used already.".into(),
        ));
    }
    Ok((access_key_id, token, nonce))
}

/// Issues temporary credentials valid for the mock's lifetime.
fn issue(cloud: &mut Cloud) -> Value {
    cloud.issued += 1;
    let n = cloud.issued;
    let (id, secret, token) = (
        format!("STS.NUgYrLnoC37mZZCNnAbez{n:04}"),
        format!("CVwjCkNzTMupZ8NbTCxCBRq3K16jtcWFTJAyBEv2{n:04}"),
        format!("CAIShwJ1q6Ft5B2yfSjIr5bSEsj4g7BihPWGWHz{n:04}"),
    );
    cloud.keys.insert(
        id.clone(),
        Key {
            secret: secret.clone(),
            token: Some(token.clone()),
        },
    );
    json!({
        "SecurityToken": token,
        "Expiration": karpenter_alibaba::time::iso8601(unix_now() + cloud.lifetime),
        "AccessKeySecret": secret,
        "AccessKeyId": id,
    })
}

fn sts_answer(cloud: &mut Cloud, role_arn: &str, session: &str, extra: Value) -> Reply {
    let credentials = issue(cloud);
    let id = request_id(cloud);
    let mut answer = json!({
        "RequestId": id,
        "AssumedRoleUser": {
            "AssumedRoleId": format!("33157794895460****:{session}"),
            "Arn": format!("{role_arn}/{session}"),
        },
        "Credentials": credentials,
    });
    if let (Some(a), Value::Object(e)) = (answer.as_object_mut(), extra) {
        a.extend(e);
    }
    Reply::Ok(answer)
}

/// STS `AssumeRoleWithOIDC`, checked against the trusted provider, role and token.
fn assume_role_with_oidc(cloud: &mut Cloud, call: &Call) -> Reply {
    let Some(trust) = &cloud.oidc else {
        return Reply::error(404, "InvalidAction.NotFound", "Specified api is not found.");
    };
    let p = |k: &str| call.params.get(k).map(String::as_str).unwrap_or_default();
    if p("OIDCProviderArn") != trust.provider_arn {
        return Reply::error(
            404,
            "EntityNotExist.OIDCProvider",
            "The specified OIDC provider does not exist.",
        );
    }
    if p("RoleArn") != trust.role_arn {
        return Reply::error(404, "EntityNotExist.Role", "The specified Role not exists.");
    }
    if p("OIDCToken") != trust.token {
        return Reply::error(
            400,
            "AuthenticationFail.OIDCToken.Invalid",
            "The OIDC token is invalid.",
        );
    }
    let role = p("RoleArn").to_string();
    let session = p("RoleSessionName").to_string();
    sts_answer(
        cloud,
        &role,
        &session,
        json!({
            "OIDCTokenInfo": {
                "Subject": "system:serviceaccount:karpenter:karpenter",
                "Issuer": "https://oidc-ack-cn-hangzhou.oss-cn-hangzhou-internal.aliyuncs.com/c",
                "ClientIds": "sts.aliyuncs.com",
            }
        }),
    )
}

/// STS `AssumeRole` for a role any known key may assume.
fn assume_role(cloud: &mut Cloud, call: &Call) -> Reply {
    let role = call.params.get("RoleArn").cloned().unwrap_or_default();
    if !cloud.roles.contains(&role) {
        return Reply::error(404, "EntityNotExist.Role", "The specified Role not exists.");
    }
    let session = call
        .params
        .get("RoleSessionName")
        .cloned()
        .unwrap_or_default();
    sts_answer(cloud, &role, &session, Value::Null)
}

async fn rpc_endpoint(
    State(cloud): State<Shared>,
    method: Method,
    RawQuery(raw_query): RawQuery,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = parse_pairs(raw_query.as_deref().unwrap_or_default());
    let is_form = header(&headers, "content-type")
        .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
    let form = if is_form {
        parse_pairs(&String::from_utf8_lossy(&body))
    } else {
        Vec::new()
    };
    let all: Vec<(String, String)> = query.iter().chain(&form).cloned().collect();
    let param = |k: &str| all.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let action = header(&headers, "x-acs-action")
        .map(str::to_string)
        .or_else(|| param("Action"))
        .unwrap_or_default();
    let version = header(&headers, "x-acs-version")
        .map(str::to_string)
        .or_else(|| param("Version"))
        .unwrap_or_default();

    let mut guard = cloud.lock().unwrap();
    let cloud = &mut *guard;
    let verified = if headers.contains_key("authorization") {
        verify_acs3(cloud, &method, uri.path(), &query, &headers, &body).map(|v| (v, Auth::Acs3))
    } else if param("Signature").is_some() {
        verify_rpc_v1(cloud, &method, &all).map(|v| (v, Auth::RpcV1))
    } else if action == "AssumeRoleWithOIDC" {
        Ok(((String::new(), None, String::new()), Auth::Anonymous))
    } else {
        Err((
            400,
            "MissingSecurityHeader",
            "Your request is missing a security header.".to_string(),
        ))
    };
    let ((access_key_id, security_token, nonce), auth) = match verified {
        Ok(v) => v,
        Err((status, code, message)) => {
            cloud.refused.push(code.to_string());
            return alibaba_error(cloud, status, code, &message);
        }
    };
    let call = Call {
        action: action.clone(),
        version,
        method: method.to_string(),
        path: uri.path().to_string(),
        body: Value::Null,
        content_type: header(&headers, "content-type").map(str::to_string),
        params: all.into_iter().collect(),
        access_key_id: (!access_key_id.is_empty()).then_some(access_key_id),
        security_token,
        nonce: (!nonce.is_empty()).then_some(nonce),
        auth,
    };
    cloud.calls.push(call.clone());
    let reply = match (cloud.hooks.get(&action).cloned(), action.as_str()) {
        (Some(hook), _) => hook(&call),
        (None, "AssumeRoleWithOIDC") => assume_role_with_oidc(cloud, &call),
        (None, "AssumeRole") => assume_role(cloud, &call),
        (None, _) => Reply::error(
            404,
            "InvalidAction.NotFound",
            "Specified api is not found, please check your url and method.",
        ),
    };
    match reply {
        Reply::Ok(mut v) => {
            if let Some(o) = v.as_object_mut()
                && !o.contains_key("RequestId")
            {
                let id = request_id(cloud);
                o.insert("RequestId".into(), json!(id));
            }
            json_response(StatusCode::OK, v)
        }
        Reply::Text(text) => text_response(text),
        Reply::Error {
            status,
            code,
            message,
        } => alibaba_error(cloud, status, &code, &message),
    }
}

fn text_response(text: String) -> Response {
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "text/plain;charset=utf-8")],
        text,
    )
        .into_response()
}

/// `%XX` sequences decoded; the client encodes each path segment and the signature re-encodes
/// the decoded path, so a double encoding would not verify.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// ACK's ROA API: any method on any path not served otherwise.
async fn roa_endpoint(
    State(cloud): State<Shared>,
    method: Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = parse_pairs(uri.query().unwrap_or_default());
    let path = percent_decode(uri.path());
    let action = header(&headers, "x-acs-action")
        .unwrap_or_default()
        .to_string();
    let version = header(&headers, "x-acs-version")
        .unwrap_or_default()
        .to_string();
    let mut guard = cloud.lock().unwrap();
    let cloud = &mut *guard;
    let verified = if headers.contains_key("authorization") {
        verify_acs3(cloud, &method, &path, &query, &headers, &body)
    } else {
        Err((
            400,
            "MissingSecurityHeader",
            "Your request is missing a security header.".to_string(),
        ))
    };
    let (access_key_id, security_token, nonce) = match verified {
        Ok(v) => v,
        Err((status, code, message)) => {
            cloud.refused.push(code.to_string());
            return alibaba_error(cloud, status, code, &message);
        }
    };
    let content_type = header(&headers, "content-type").map(str::to_string);
    let json_body = if body.is_empty() {
        Value::Null
    } else if content_type
        .as_deref()
        .is_some_and(|c| c.starts_with("application/json"))
    {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                return ack_error(cloud, 400, "InvalidParameter", &format!("body: {e}"));
            }
        }
    } else {
        return ack_error(
            cloud,
            400,
            "InvalidParameter",
            "a body without content-type application/json",
        );
    };
    let call = Call {
        action: action.clone(),
        version,
        method: method.to_string(),
        path,
        body: json_body,
        content_type,
        params: query.into_iter().collect(),
        access_key_id: Some(access_key_id),
        security_token,
        nonce: Some(nonce),
        auth: Auth::Acs3,
    };
    cloud.calls.push(call.clone());
    let reply = match cloud.hooks.get(&action).cloned() {
        Some(hook) => hook(&call),
        None => Reply::error(
            404,
            "InvalidAction.NotFound",
            "Specified api is not found, please check your url and method.",
        ),
    };
    match reply {
        Reply::Ok(v) => json_response(StatusCode::OK, v),
        Reply::Text(text) => text_response(text),
        Reply::Error {
            status,
            code,
            message,
        } => ack_error(cloud, status, &code, &message),
    }
}

/// An error in ACK's shape: `{"code", "message", "requestId", "status"}`.
fn ack_error(cloud: &mut Cloud, status: u16, code: &str, message: &str) -> Response {
    let id = request_id(cloud);
    json_response(
        StatusCode::from_u16(status).unwrap(),
        json!({"code": code, "message": message, "requestId": id, "status": status}),
    )
}

async fn metadata_token(State(cloud): State<Shared>, headers: HeaderMap) -> Response {
    let ttl = header(&headers, "x-aliyun-ecs-metadata-token-ttl-seconds")
        .and_then(|t| t.parse::<u32>().ok());
    if !ttl.is_some_and(|t| (1..=21_600).contains(&t)) {
        return StatusCode::BAD_REQUEST.into_response();
    }
    let mut cloud = cloud.lock().unwrap();
    let token = format!("AQAEAFm-metadata-token-{}", cloud.metadata_tokens.len());
    cloud.metadata_tokens.insert(token.clone());
    token.into_response()
}

fn metadata_allowed(cloud: &Cloud, headers: &HeaderMap) -> bool {
    let token_ok = header(headers, "x-aliyun-ecs-metadata-token")
        .is_some_and(|t| cloud.metadata_tokens.contains(t));
    token_ok
        || cloud
            .instance_role
            .as_ref()
            .is_some_and(|r| !r.token_required)
}

async fn role_list(State(cloud): State<Shared>, headers: HeaderMap) -> Response {
    let cloud = cloud.lock().unwrap();
    if !metadata_allowed(&cloud, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match &cloud.instance_role {
        Some(role) => role.name.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn role_credentials(
    State(cloud): State<Shared>,
    Path(role): Path<String>,
    headers: HeaderMap,
) -> Response {
    let mut cloud = cloud.lock().unwrap();
    if !metadata_allowed(&cloud, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if cloud.instance_role.as_ref().map(|r| r.name.as_str()) != Some(role.as_str()) {
        return StatusCode::NOT_FOUND.into_response();
    }
    metadata_credentials(&mut cloud)
}

/// The metadata service's (and a credentials URI's) answer.
fn metadata_credentials(cloud: &mut Cloud) -> Response {
    let mut credentials = issue(cloud);
    let o = credentials.as_object_mut().unwrap();
    o.insert("Code".into(), json!("Success"));
    o.insert(
        "LastUpdated".into(),
        json!(karpenter_alibaba::time::iso8601(unix_now())),
    );
    json_response(StatusCode::OK, credentials)
}

/// The price server: the registered answer for the region, else what the real one says of a
/// region it does not know (`null`).
async fn price_server(State(cloud): State<Shared>, Path(region): Path<String>) -> Response {
    let mut cloud = cloud.lock().unwrap();
    cloud.price_requests.push(region.clone());
    let (status, body) = cloud
        .prices
        .get(&region)
        .cloned()
        .unwrap_or((200, "null".into()));
    (
        StatusCode::from_u16(status).unwrap(),
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

async fn credentials_uri(State(cloud): State<Shared>) -> Response {
    metadata_credentials(&mut cloud.lock().unwrap())
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
            lifetime: 3600,
            ..Default::default()
        }));
        let app = Router::new()
            .route("/", any(rpc_endpoint))
            .route("/latest/api/token", put(metadata_token))
            .route(
                "/latest/meta-data/ram/security-credentials/",
                get(role_list),
            )
            .route(
                "/latest/meta-data/ram/security-credentials/{role}",
                get(role_credentials),
            )
            .route("/credentials", get(credentials_uri))
            .route(
                "/api/v1/alibabacloud/ecs/regions/{region}/price",
                get(price_server),
            )
            .fallback(roa_endpoint)
            .with_state(cloud.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Mock { url, cloud }
    }

    /// Accepts requests signed with this long-term key.
    pub fn allow(&self, access_key_id: &str, secret: &str) {
        self.cloud.lock().unwrap().keys.insert(
            access_key_id.into(),
            Key {
                secret: secret.into(),
                token: None,
            },
        );
    }

    /// Answers `action` with what `hook` makes of each call.
    pub fn on(&self, action: &str, hook: impl Fn(&Call) -> Reply + Send + Sync + 'static) {
        self.cloud
            .lock()
            .unwrap()
            .hooks
            .insert(action.into(), Arc::new(hook));
    }

    /// Answers `action` with `answer`, always.
    pub fn reply(&self, action: &str, answer: Value) {
        self.on(action, move |_| Reply::Ok(answer.clone()));
    }

    /// Answers successive calls of `action` with `replies` in turn, the last one from then on.
    pub fn replies(&self, action: &str, replies: Vec<Reply>) {
        let next = Mutex::new(0usize);
        self.on(action, move |_| {
            let mut i = next.lock().unwrap();
            let reply = replies[(*i).min(replies.len() - 1)].clone();
            *i += 1;
            reply
        });
    }

    /// Trusts RRSA: `AssumeRoleWithOIDC` for `role_arn` through `provider_arn` with `token`.
    pub fn trust_oidc(&self, role_arn: &str, provider_arn: &str, token: &str) {
        self.cloud.lock().unwrap().oidc = Some(OidcTrust {
            role_arn: role_arn.into(),
            provider_arn: provider_arn.into(),
            token: token.into(),
        });
    }

    /// Lets any known key `AssumeRole` into `role_arn`.
    pub fn trust_role(&self, role_arn: &str) {
        self.cloud.lock().unwrap().roles.insert(role_arn.into());
    }

    /// Gives the "instance" a RAM role, its credentials served only with a metadata token when
    /// `token_required`.
    pub fn instance_role(&self, name: &str, token_required: bool) {
        self.cloud.lock().unwrap().instance_role = Some(InstanceRole {
            name: name.into(),
            token_required,
        });
    }

    /// How long issued temporary credentials live.
    pub fn set_lifetime(&self, seconds: u64) {
        self.cloud.lock().unwrap().lifetime = seconds;
    }

    /// The calls accepted so far.
    pub fn calls(&self) -> Vec<Call> {
        self.cloud.lock().unwrap().calls.clone()
    }

    /// The accepted calls of `action`.
    pub fn calls_to(&self, action: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.action == action)
            .collect()
    }

    /// The error codes of the requests refused at authentication.
    pub fn refused(&self) -> Vec<String> {
        self.cloud.lock().unwrap().refused.clone()
    }

    /// Answers the price server's `region` with `status` and `body`.
    pub fn prices(&self, region: &str, status: u16, body: &str) {
        self.cloud
            .lock()
            .unwrap()
            .prices
            .insert(region.into(), (status, body.into()));
    }

    /// The regions the price server was asked for.
    pub fn price_requests(&self) -> Vec<String> {
        self.cloud.lock().unwrap().price_requests.clone()
    }

    /// How many temporary credentials were issued.
    pub fn issued(&self) -> usize {
        self.cloud.lock().unwrap().issued
    }

    /// Endpoints of cn-hangzhou with every product here.
    pub fn endpoints(&self) -> Endpoints {
        Endpoints::new("cn-hangzhou", Network::Public).all_at(&self.url)
    }

    /// Credentials from `source`, fetched with short backoffs.
    pub fn provider(&self, source: Source) -> CredentialsProvider {
        CredentialsProvider::new(source, http()).with_retry(FAST)
    }

    /// A client signing with `credentials`.
    pub fn client_with(&self, credentials: CredentialsProvider) -> Client {
        Client::new(http(), self.endpoints(), credentials).with_retry(FAST)
    }

    /// A client signing with the long-term key `access_key_id` / `secret`.
    pub fn client(&self, access_key_id: &str, secret: &str) -> Client {
        self.client_with(self.provider(Source::Static(Credentials::new(access_key_id, secret))))
    }
}

/// Retries quick enough for tests.
pub const FAST: RetryPolicy = RetryPolicy {
    attempts: 3,
    base: Duration::from_millis(5),
    max: Duration::from_millis(20),
};

pub fn http() -> HttpClient {
    HttpClient::new(Duration::from_secs(5)).unwrap()
}

/// A file holding `text`, in a directory of its own.
pub fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    // Cargo's scratch directory for integration tests, named at compile time.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "karpenter-alibaba-wire-{}-{name}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}
