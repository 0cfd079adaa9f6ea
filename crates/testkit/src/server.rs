//! The HTTP side: one handler that reads the request, applies faults, and serves it from the
//! store — lists with paging, watches as newline-delimited JSON streams.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode, Uri, header};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::FakeApiServer;
use crate::eviction;
use crate::request::{ApiRequest, Verb};
use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{ApiError, PatchType, WatchEvent};

fn json_response(code: StatusCode, body: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_status())
}

fn selectors(req: &ApiRequest) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(req.query.get("labelSelector").map_or("", |s| s))
        .map_err(|e| ApiError::bad_request(format!("unable to parse labelSelector: {}", e.0)))?;
    let fields = FieldSelector::parse(req.query.get("fieldSelector").map_or("", |s| s))
        .map_err(|e| ApiError::bad_request(format!("unable to parse fieldSelector: {}", e.0)))?;
    Ok((labels, fields))
}

fn body_json(body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid body: {e}")))
}

pub(crate) async fn handle(
    State(server): State<FakeApiServer>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method == Method::GET && uri.path() == "/version" {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            server.version_info().to_string(),
        )
            .into_response();
    }
    if method == Method::GET
        && let Some(group) = discovery_group(uri.path())
    {
        return match crate::resources::served_versions(group) {
            Some(versions) => json_response(StatusCode::OK, &api_group(group, &versions)),
            None => error_response(&ApiError::new(
                StatusCode::NOT_FOUND,
                "NotFound",
                format!("the server could not find the requested resource (get {group})"),
            )),
        };
    }
    let Some(req) = ApiRequest::parse(&method, uri.path(), uri.query()) else {
        return error_response(&ApiError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!(
                "the server could not find the requested resource ({method} {})",
                uri.path()
            ),
        ));
    };
    server.log(&req);
    let (latency, code) = server.fault_for(&req);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(code) = code {
        return error_response(&ApiError::new(
            code,
            "InternalError",
            format!("injected fault: {code}"),
        ));
    }
    if req.subresource.as_deref() == Some("scale") {
        return match scale(&server, &req, &headers, &body) {
            Ok(scale) => json_response(StatusCode::OK, &scale),
            Err(e) => error_response(&e),
        };
    }
    let result = match req.verb {
        Verb::Watch => return watch(&server, &req),
        Verb::List => list(&server, &req),
        Verb::Get => server.with_store(|s| {
            s.get(
                &req.resource,
                req.namespace.as_deref().unwrap_or(""),
                req.name.as_deref().unwrap_or(""),
            )
            .map(|o| (StatusCode::OK, (*o).clone()))
        }),
        Verb::Create => body_json(&body).and_then(|obj| {
            server
                .with_store(|s| s.create(&req.resource, req.namespace.as_deref(), obj))
                .map(|o| (StatusCode::CREATED, o))
        }),
        Verb::Update => body_json(&body).and_then(|obj| {
            server.with_store(|s| {
                s.update(&req.resource, ns(&req), name(&req), obj, status_only(&req))
                    .map(|o| (StatusCode::OK, o))
            })
        }),
        Verb::Patch => patch(&server, &req, &headers, &body),
        Verb::Delete => body_json(&body).and_then(|opts| {
            server.with_store(|s| {
                s.delete(&req.resource, ns(&req), name(&req), &opts["preconditions"])
                    .map(|o| (StatusCode::OK, o))
            })
        }),
        Verb::Evict => body_json(&body).and_then(|eviction| evict(&server, &req, &eviction)),
    };
    match result {
        Ok((code, body)) => json_response(code, &body),
        Err(e) => error_response(&e),
    }
}

/// `GROUP` of a discovery path `/apis/GROUP`.
fn discovery_group(path: &str) -> Option<&str> {
    match path
        .trim_matches('/')
        .split('/')
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["apis", group] => Some(group),
        _ => None,
    }
}

/// The `APIGroup` discovery answers for a custom resource group: its versions, the first the
/// preferred one (an API server prefers the highest-priority version; CRDs list theirs so).
fn api_group(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

/// The `scale` subresource: get, update (with its resourceVersion precondition) and patch.
fn scale(
    server: &FakeApiServer,
    req: &ApiRequest,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Value, ApiError> {
    match req.verb {
        Verb::Get => server.with_store(|s| crate::scale::get(s, &req.resource, ns(req), name(req))),
        Verb::Update => {
            let scale = body_json(body)?;
            server
                .with_store(|s| crate::scale::update(s, &req.resource, ns(req), name(req), &scale))
        }
        Verb::Patch => {
            let kind = patch_type(headers)?;
            let patch = body_json(body)?;
            server.with_store(|s| {
                crate::scale::patch(s, &req.resource, ns(req), name(req), kind, &patch)
            })
        }
        _ => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the scale subresource takes get, update and patch",
        )),
    }
}

fn ns(req: &ApiRequest) -> &str {
    req.namespace.as_deref().unwrap_or("")
}

fn name(req: &ApiRequest) -> &str {
    req.name.as_deref().unwrap_or("")
}

fn status_only(req: &ApiRequest) -> bool {
    req.subresource.as_deref() == Some("status")
}

fn patch(
    server: &FakeApiServer,
    req: &ApiRequest,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(StatusCode, Value), ApiError> {
    let kind = patch_type(headers)?;
    let body = body_json(body)?;
    server.with_store(|s| {
        s.patch(
            &req.resource,
            ns(req),
            name(req),
            kind,
            body,
            status_only(req),
        )
        .map(|o| (StatusCode::OK, o))
    })
}

/// How a PATCH body is to be read, from its content type.
fn patch_type(headers: &HeaderMap) -> Result<PatchType, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let kind = match content_type.split(';').next().unwrap_or_default() {
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            PatchType::Merge
        }
        "application/json-patch+json" => PatchType::Json,
        "application/apply-patch+yaml" => PatchType::Apply,
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UnsupportedMediaType",
                format!("the body of the request was in an unknown format: {other}"),
            ));
        }
    };
    Ok(kind)
}

fn list(server: &FakeApiServer, req: &ApiRequest) -> Result<(StatusCode, Value), ApiError> {
    let (labels, fields) = selectors(req)?;
    let limit: usize = req
        .query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|&l| l > 0)
        .unwrap_or(usize::MAX);
    // The continue token is the last key served: `namespace/name`.
    let after = req
        .query
        .get("continue")
        .and_then(|t| t.split_once('/'))
        .map(|(ns, name)| (ns.to_string(), name.to_string()));
    let ((page, next), rv) = server.with_store(|s| {
        (
            s.page(
                &req.resource,
                req.namespace.as_deref(),
                &labels,
                &fields,
                after,
                limit,
            ),
            s.resource_version(),
        )
    });
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some((ns, name)) = next {
        metadata["continue"] = json!(format!("{ns}/{name}"));
    }
    Ok((
        StatusCode::OK,
        json!({
            "kind": format!("{}List", req.resource.kind()),
            "apiVersion": req.resource.api_version(),
            "metadata": metadata,
            "items": page.iter().map(|o| (**o).clone()).collect::<Vec<_>>(),
        }),
    ))
}

fn evict(
    server: &FakeApiServer,
    req: &ApiRequest,
    eviction: &Value,
) -> Result<(StatusCode, Value), ApiError> {
    server.with_store(|s| {
        let pods_rt = req.resource.clone();
        let pod_value = s.get(&pods_rt, ns(req), name(req))?;
        let pod: Pod = serde_json::from_value((*pod_value).clone())
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let pdb_rt = ResourceType {
            group: "policy".into(),
            version: "v1".into(),
            plural: "poddisruptionbudgets".into(),
        };
        let none = (LabelSelector::default(), FieldSelector::default());
        let pdbs: Vec<PodDisruptionBudget> =
            eviction::typed(&s.list(&pdb_rt, Some(ns(req)), &none.0, &none.1));
        let pods: Vec<Pod> = eviction::typed(&s.list(&pods_rt, Some(ns(req)), &none.0, &none.1));
        eviction::check(&pod, &pdbs, &pods)?;
        s.delete(&pods_rt, ns(req), name(req), &eviction["deleteOptions"]["preconditions"])?;
        Ok((
            StatusCode::CREATED,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        ))
    })
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

fn gone_line() -> Bytes {
    let status = ApiError::new(StatusCode::GONE, "Expired", "too old resource version").to_status();
    event_line("ERROR", &status)
}

fn watch(server: &FakeApiServer, req: &ApiRequest) -> Response {
    let (labels, fields) = match selectors(req) {
        Ok(s) => s,
        Err(e) => return error_response(&e),
    };
    let since: Option<u64> = req
        .query
        .get("resourceVersion")
        .and_then(|rv| rv.parse().ok())
        .filter(|&rv| rv > 0);
    let timeout = Duration::from_secs(
        req.query
            .get("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .unwrap_or(1800),
    );
    let bookmarks = req
        .query
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true");
    let (list_labels, list_fields) = (labels.clone(), fields.clone());
    let resource = (req.resource.group.clone(), req.resource.plural.clone());
    let namespace = req.namespace.clone();
    let wanted = move |e: &WatchEvent| {
        e.resource == resource
            && namespace.as_deref().is_none_or(|ns| ns == e.namespace)
            && labels.matches(&e.object)
            && fields.matches(&e.object)
    };
    let (initial, mut rx, floor) = server.with_store(|s| {
        let rx = s.events.subscribe();
        let initial: Option<Vec<Bytes>> = match since {
            None => Some(
                s.list(
                    &req.resource,
                    req.namespace.as_deref(),
                    &list_labels,
                    &list_fields,
                )
                .iter()
                .map(|o| event_line("ADDED", o))
                .collect(),
            ),
            Some(rv) => s.since(rv).map(|events| {
                events
                    .iter()
                    .filter(|e| wanted(e))
                    .map(|e| event_line(e.kind, &e.object))
                    .collect()
            }),
        };
        (initial, rx, s.resource_version())
    });
    let (tx, out) = tokio::sync::mpsc::channel::<Bytes>(256);
    let bookmark_every = server.bookmark_interval();
    let (kind, api_version) = (req.resource.kind(), req.resource.api_version());
    tokio::spawn(async move {
        let Some(initial) = initial else {
            let _ = tx.send(gone_line()).await;
            return;
        };
        for line in initial {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(bookmark_every);
        let mut seen = floor;
        loop {
            let line = tokio::select! {
                event = rx.recv() => match event {
                    Ok(e) if e.rv <= seen => continue,
                    Ok(e) => {
                        seen = e.rv;
                        if !wanted(&e) {
                            continue;
                        }
                        event_line(e.kind, &e.object)
                    }
                    // Fell behind the broadcast: the client must relist, as after compaction.
                    Err(RecvError::Lagged(_)) => gone_line(),
                    Err(RecvError::Closed) => return,
                },
                _ = tick.tick(), if bookmarks => event_line(
                    "BOOKMARK",
                    &json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": seen.to_string()}}),
                ),
                _ = &mut deadline => return,
            };
            let gone = line.starts_with(b"{\"type\":\"ERROR\"");
            if tx.send(line).await.is_err() || gone {
                return;
            }
        }
    });
    let stream = futures::stream::unfold(out, |mut out| async move {
        out.recv()
            .await
            .map(|line| (Ok::<_, Infallible>(line), out))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
