//! The client and the credential chain against the in-process Huawei Cloud of `wire_support`,
//! which checks every signature: signed calls to CCE, ECS and BSS with their scope headers,
//! the project and domain lookups, OIDC federation and the metadata service with their
//! temporary keys refreshed before expiry (on tokio's clock), retries, and error answers in
//! the services' shapes. Answers are shaped as the API references' examples.

mod wire_support;

use std::time::Duration;

use karpenter_huawei::auth::Credentials;
use karpenter_huawei::auth::credentials::{CredentialsProvider, Settings, Source};
use karpenter_huawei::client::{Client, ClientError};
use karpenter_huawei::endpoint::{Endpoints, Service};
use serde_json::{Value, json};
use wire_support::{Event, IMMEDIATE, Mock, Reply, http, temp_file};

const AK: &str = "HPUAMOCKACCESSKEY001";
const SK: &str = "mock-secret-key";
const PROJECT: &str = "05a8a25cd8000f0f2f4ec00b4c4a6c1e";
const DOMAIN: &str = "0970dd7a1300f5672ff2c003c60ae115";
const REGION: &str = "cn-north-4";
const CLUSTER: &str = "4d0bb5b2-6b82-11ee-a1b8-0255ac100b03";
const OIDC_TOKEN: &str = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a2FycGVudGVyIn0.c2ln";

fn client(mock: &Mock, credentials: CredentialsProvider) -> Client {
    Client::new(http(), Endpoints::single(REGION, &mock.url), credentials).with_retry(IMMEDIATE)
}

fn static_client(mock: &Mock) -> Client {
    mock.key(AK, SK);
    client(
        mock,
        CredentialsProvider::static_keys(AK, SK)
            .with_project_id(PROJECT)
            .with_domain_id(DOMAIN),
    )
}

fn flavor(id: &str) -> Value {
    json!({
        "id": id,
        "name": id,
        "vcpus": "2",
        "ram": 4096,
        "disk": "0",
        "os_extra_specs": {
            "ecs:performancetype": "normal",
            "cond:operation:status": "normal",
            "cond:operation:az": "cn-north-4a(normal),cn-north-4b(sellout)",
            "quota:sub_network_interface_max_num": "256"
        }
    })
}

fn cce_error(status: u16, error_code: &str, error_msg: &str, message: &str) -> Reply {
    Reply::Json(
        status,
        json!({
            "kind": "Status",
            "apiVersion": "v3",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "BadRequest",
            "code": status,
            "errorCode": "CCE.01400001",
            "errorMessage": "Invalid request.",
            "error_code": error_code,
            "error_msg": error_msg
        }),
    )
}

#[tokio::test]
async fn signed_calls_reach_ecs_cce_and_bss_with_their_scope_headers() {
    let mock = Mock::start().await;
    let client = static_client(&mock);
    mock.on(
        "GET",
        &format!("/v1/{PROJECT}/cloudservers/flavors"),
        |_| Reply::Json(200, json!({"flavors": [flavor("c7.large.2")]})),
    );
    mock.on(
        "POST",
        &format!("/api/v3/projects/{PROJECT}/clusters/{CLUSTER}/nodes"),
        |call| {
            Reply::Json(
                201,
                json!({
                    "kind": "Node",
                    "apiVersion": "v3",
                    "metadata": {"uid": "7ee8cbe5-70cb-11ee-8b5c-0255ac100b05", "name": call.body["metadata"]["name"]},
                    "spec": call.body["spec"],
                    "status": {"jobID": "8c3a0a9e-70cb-11ee-8b5c-0255ac100b05"}
                }),
            )
        },
    );
    mock.on("POST", "/v2/bills/ratings/on-demand-resources", |_| {
        Reply::Json(
            200,
            json!({"amount": 0.36, "currency": "CNY", "product_rating_results": []}),
        )
    });

    let flavors: Value = client
        .get(
            Service::Ecs,
            "/v1/{project_id}/cloudservers/flavors",
            &[("availability_zone", "cn-north-4a".to_string())],
        )
        .await
        .unwrap();
    assert_eq!(flavors["flavors"][0]["id"], "c7.large.2");

    let node: Value = client
        .post(
            Service::Cce,
            &format!("/api/v3/projects/{{project_id}}/clusters/{CLUSTER}/nodes"),
            &json!({"kind": "Node", "apiVersion": "v3", "metadata": {"name": "karpenter-x"}, "spec": {"flavor": "c7.large.2", "az": "cn-north-4a", "count": 1}}),
        )
        .await
        .unwrap();
    assert_eq!(
        node["metadata"]["uid"],
        "7ee8cbe5-70cb-11ee-8b5c-0255ac100b05"
    );

    let rating: Value = client
        .post_idempotent(
            Service::Bss,
            "/v2/bills/ratings/on-demand-resources",
            &json!({"project_id": PROJECT, "product_infos": []}),
        )
        .await
        .unwrap();
    assert_eq!(rating["currency"], "CNY");

    let calls = mock.calls();
    assert_eq!(calls.len(), 3);
    let (ecs, cce, bss) = (&calls[0], &calls[1], &calls[2]);
    assert_eq!(ecs.query("availability_zone"), Some("cn-north-4a"));
    for call in [ecs, cce] {
        assert_eq!(call.access_key, AK);
        assert_eq!(call.header("x-project-id"), Some(PROJECT));
        assert_eq!(call.header("x-domain-id"), None);
        assert_eq!(call.header("content-type"), Some("application/json"));
        assert_eq!(call.header("x-security-token"), None);
        assert_eq!(
            call.signed_headers,
            ["user-agent", "x-project-id", "x-sdk-date"],
            "every header but Content-Type is signed"
        );
        assert!(
            call.header("user-agent")
                .is_some_and(|ua| ua.starts_with("karpenter-rs/"))
        );
    }
    assert_eq!(cce.body["spec"]["flavor"], "c7.large.2");
    assert_eq!(bss.header("x-domain-id"), Some(DOMAIN));
    assert_eq!(bss.header("x-project-id"), None);
    assert_eq!(
        bss.signed_headers,
        ["user-agent", "x-domain-id", "x-sdk-date"]
    );
}

#[tokio::test]
async fn a_wrong_secret_is_refused_and_not_retried() {
    let mock = Mock::start().await;
    mock.key(AK, SK);
    mock.on("GET", &format!("/v1/{PROJECT}/subnets"), |_| {
        Reply::Json(200, json!({"subnets": []}))
    });
    let wrong = client(
        &mock,
        CredentialsProvider::static_keys(AK, "not-the-secret").with_project_id(PROJECT),
    );
    let err = wrong
        .get::<Value>(Service::Vpc, "/v1/{project_id}/subnets", &[])
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(401));
    assert_eq!(err.code(), Some("APIGW.0301"));
    assert!(err.request_id().is_some_and(|id| id.starts_with("req-")));
    assert!(!err.is_retryable() && !err.is_not_found());
    let refusals: Vec<Event> = mock
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::Refused { .. }))
        .collect();
    assert_eq!(refusals.len(), 1, "a refusal is not retried: {refusals:?}");
    assert!(
        matches!(&refusals[0], Event::Refused { reason, .. } if reason.contains("signature does not match")),
        "{refusals:?}"
    );

    let unknown = client(
        &mock,
        CredentialsProvider::static_keys("HPUAUNKNOWN", SK).with_project_id(PROJECT),
    );
    let err = unknown
        .get::<Value>(Service::Vpc, "/v1/{project_id}/subnets", &[])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown access key"), "{err}");
    assert!(mock.calls().is_empty());
}

#[tokio::test]
async fn project_and_domain_ids_are_looked_up_in_iam_once() {
    let mock = Mock::start().await;
    mock.key(AK, SK)
        .project(PROJECT, REGION)
        .project("0aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "cn-north-4_subproject")
        .domain(DOMAIN);
    mock.on(
        "GET",
        &format!("/api/v3/projects/{PROJECT}/clusters/{CLUSTER}"),
        |_| {
            Reply::Json(
                200,
                json!({"kind": "Cluster", "metadata": {"uid": CLUSTER}}),
            )
        },
    );
    mock.on("POST", "/v2/bills/ratings/on-demand-resources", |_| {
        Reply::Json(200, json!({"product_rating_results": []}))
    });
    let client = client(&mock, CredentialsProvider::static_keys(AK, SK));
    for _ in 0..2 {
        let cluster: Value = client
            .get(
                Service::Cce,
                &format!("/api/v3/projects/{{project_id}}/clusters/{CLUSTER}"),
                &[],
            )
            .await
            .unwrap();
        assert_eq!(cluster["metadata"]["uid"], CLUSTER);
        let _: Value = client
            .post_idempotent(
                Service::Bss,
                "/v2/bills/ratings/on-demand-resources",
                &json!({}),
            )
            .await
            .unwrap();
    }
    assert_eq!(client.project_id().await.unwrap(), PROJECT);
    assert_eq!(client.domain_id().await.unwrap(), DOMAIN);
    let lookups = mock.calls_to("/v3/projects");
    assert_eq!(lookups.len(), 1, "looked up once");
    assert_eq!(lookups[0].query("name"), Some(REGION));
    assert_eq!(
        lookups[0].header("x-project-id"),
        None,
        "a lookup is unscoped"
    );
    assert_eq!(mock.calls_to("/v3/auth/domains").len(), 1);
    assert!(
        mock.calls_to(&format!("/api/v3/projects/{PROJECT}/clusters/{CLUSTER}"))
            .iter()
            .all(|c| c.header("x-project-id") == Some(PROJECT))
    );

    // A region IAM has no project for: an error that says what to set.
    let elsewhere = Client::new(
        http(),
        Endpoints::single("ap-southeast-3", &mock.url),
        CredentialsProvider::static_keys(AK, SK),
    )
    .with_retry(IMMEDIATE);
    let err = elsewhere.project_id().await.unwrap_err().to_string();
    assert!(
        err.contains("ap-southeast-3") && err.contains("HUAWEICLOUD_SDK_PROJECT_ID"),
        "{err}"
    );
}

/// CCE's workload identity: the projected token exchanged with IAM for temporary keys, which
/// sign the calls with their security token; cached while fresh and exchanged again (with the
/// token file read afresh) once tokio's clock passes the refresh margin.
#[tokio::test]
async fn oidc_federation_keys_are_used_and_refreshed_before_expiry() {
    let mock = Mock::start().await;
    let lifetime = Duration::from_secs(2 * 3600);
    mock.trust("karpenter-idp", OIDC_TOKEN)
        .trust("karpenter-idp", "rotated-token")
        .lifetime(lifetime)
        .project(PROJECT, REGION);
    mock.on(
        "GET",
        &format!("/api/v3/projects/{PROJECT}/clusters/{CLUSTER}/nodes"),
        |_| {
            Reply::Json(
                200,
                json!({"kind": "List", "apiVersion": "v3", "items": []}),
            )
        },
    );
    let token_file = temp_file("oidc-token", &format!("{OIDC_TOKEN}\n"));
    let endpoints = Endpoints::single(REGION, &mock.url);
    let token_path = token_file.display().to_string();
    let settings = Settings::from_env(
        |k| match k {
            "HUAWEICLOUD_SDK_IDP_ID" => Some("karpenter-idp".into()),
            "HUAWEICLOUD_SDK_ID_TOKEN_FILE" => Some(token_path.clone()),
            _ => None,
        },
        &endpoints,
    )
    .unwrap();
    assert!(matches!(settings.source, Source::Oidc { .. }));
    let credentials = CredentialsProvider::from_settings(settings, http()).with_retry(IMMEDIATE);
    let client = Client::new(http(), endpoints, credentials).with_retry(IMMEDIATE);
    let nodes_path = format!("/api/v3/projects/{{project_id}}/clusters/{CLUSTER}/nodes");

    for _ in 0..3 {
        let _: Value = client.get(Service::Cce, &nodes_path, &[]).await.unwrap();
    }
    assert_eq!(
        mock.events(),
        [
            Event::TokenExchanged {
                idp_id: "karpenter-idp".into(),
                id_token: OIDC_TOKEN.into()
            },
            Event::KeysIssued {
                access_key: "TMPKEY0001".into(),
                duration_seconds: 6 * 3600
            },
        ],
        "one exchange while the keys are fresh"
    );
    let calls = mock.calls();
    assert_eq!(calls.len(), 4, "the project lookup and three calls");
    for call in &calls {
        assert_eq!(call.access_key, "TMPKEY0001");
        assert_eq!(call.header("x-security-token"), Some("gQpjbi1ub3J0aC001"));
        assert!(call.signed_headers.iter().any(|h| h == "x-security-token"));
    }

    // Just short of the refresh point (forty minutes before expiry): still cached.
    std::fs::write(&token_file, "rotated-token").unwrap();
    tokio::time::pause();
    tokio::time::advance(lifetime - Duration::from_secs(40 * 60 + 60)).await;
    tokio::time::resume();
    let _: Value = client.get(Service::Cce, &nodes_path, &[]).await.unwrap();
    assert_eq!(mock.events().len(), 2);

    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(120)).await;
    tokio::time::resume();
    let _: Value = client.get(Service::Cce, &nodes_path, &[]).await.unwrap();
    let events = mock.events();
    assert_eq!(
        events[2..],
        [
            Event::TokenExchanged {
                idp_id: "karpenter-idp".into(),
                id_token: "rotated-token".into()
            },
            Event::KeysIssued {
                access_key: "TMPKEY0002".into(),
                duration_seconds: 6 * 3600
            },
        ],
        "refreshed with the rotated token: {events:?}"
    );
    let last = mock.calls().pop().unwrap();
    assert_eq!(last.access_key, "TMPKEY0002");
    assert_eq!(last.header("x-security-token"), Some("gQpjbi1ub3J0aC002"));
}

#[tokio::test]
async fn a_refused_oidc_token_is_a_credentials_error() {
    let mock = Mock::start().await;
    mock.trust("karpenter-idp", OIDC_TOKEN);
    let token_file = temp_file("stale-token", "not-a-trusted-token");
    let credentials = CredentialsProvider::new(
        Source::Oidc {
            idp_id: "karpenter-idp".into(),
            token_file,
            iam_url: mock.url.clone(),
        },
        http(),
    )
    .with_retry(IMMEDIATE);
    let err = credentials.get().await.unwrap_err().to_string();
    assert!(
        err.contains("IAM.0011")
            && err.contains("karpenter-idp")
            && !err.contains("not-a-trusted-token"),
        "{err}"
    );
}

#[tokio::test]
async fn the_metadata_services_keys_with_its_token() {
    let mock = Mock::start().await;
    mock.metadata(true)
        .lifetime(Duration::from_secs(3600))
        .project(PROJECT, REGION);
    mock.on("GET", &format!("/v1/{PROJECT}/cloudservers/availability-zones"), |_| {
        Reply::Json(200, json!({"availability_zones": [{"zone_name": "cn-north-4a", "zone_state": {"available": true}}]}))
    });
    let credentials = CredentialsProvider::new(
        Source::Metadata {
            url: mock.url.clone(),
        },
        http(),
    )
    .with_retry(IMMEDIATE);
    let client = client(&mock, credentials);
    let zones: Value = client
        .get(
            Service::Ecs,
            "/v1/{project_id}/cloudservers/availability-zones",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(zones["availability_zones"][0]["zone_name"], "cn-north-4a");
    assert_eq!(
        mock.events(),
        [
            Event::MetadataToken,
            Event::MetadataKeys { with_token: true }
        ]
    );
    assert!(
        mock.calls()
            .iter()
            .all(|c| c.access_key == "TMPKEY0001" && c.header("x-security-token").is_some())
    );
}

#[tokio::test]
async fn static_temporary_keys_carry_their_token() {
    let mock = Mock::start().await;
    mock.key_with_token("TMPSTATIC", "temporary", Some("gQstatic"));
    mock.on("GET", &format!("/v1/{PROJECT}/subnets"), |_| {
        Reply::Json(200, json!({"subnets": []}))
    });
    let client = client(
        &mock,
        CredentialsProvider::static_credentials(
            Credentials::new("TMPSTATIC", "temporary").with_security_token("gQstatic"),
        )
        .with_project_id(PROJECT),
    );
    let _: Value = client
        .get(Service::Vpc, "/v1/{project_id}/subnets", &[])
        .await
        .unwrap();
    let call = &mock.calls()[0];
    assert_eq!(call.header("x-security-token"), Some("gQstatic"));
    assert_eq!(
        call.signed_headers,
        [
            "user-agent",
            "x-project-id",
            "x-sdk-date",
            "x-security-token"
        ]
    );
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried_refusals_are_not() {
    let mock = Mock::start().await;
    let client = static_client(&mock);
    let throttled = Reply::Json(
        429,
        json!({"error_msg": "The throttling threshold has been reached: policy user over ratelimit,limit:100,time:1 minute", "error_code": "APIGW.0308", "request_id": "r"}),
    );
    let unavailable = Reply::Json(
        503,
        json!({"error_code": "SYS.0503", "error_msg": "Service unavailable"}),
    );
    let ok = Reply::Json(200, json!({"subnets": [{"id": "s1"}]}));
    let bad = Reply::Json(
        400,
        json!({"error": {"code": "VPC.0101", "message": "Invalid parameter."}}),
    );

    let path = |n: u32| format!("/v1/{PROJECT}/subnets-{n}");
    let call_path = |n: u32| format!("/v1/{{project_id}}/subnets-{n}");
    mock.on_sequence(
        "GET",
        &path(1),
        vec![throttled.clone(), unavailable.clone(), ok.clone()],
    );
    let subnets: Value = client.get(Service::Vpc, &call_path(1), &[]).await.unwrap();
    assert_eq!(subnets["subnets"][0]["id"], "s1");
    assert_eq!(mock.calls_to(&path(1)).len(), 3);

    mock.on_sequence("GET", &path(2), vec![bad.clone(), ok.clone()]);
    let err = client
        .get::<Value>(Service::Vpc, &call_path(2), &[])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("VPC.0101"));
    assert_eq!(mock.calls_to(&path(2)).len(), 1, "a 400 is not retried");

    mock.on_sequence("GET", &path(3), vec![unavailable.clone()]);
    let err = client
        .get::<Value>(Service::Vpc, &call_path(3), &[])
        .await
        .unwrap_err();
    assert!(err.is_retryable() && err.status() == Some(503));
    assert_eq!(mock.calls_to(&path(3)).len(), 3, "attempts run out");

    // A POST that may have been carried out is not sent twice; a throttled one is.
    mock.on_sequence("POST", &path(4), vec![unavailable.clone(), ok.clone()]);
    let err = client
        .post::<Value>(Service::Vpc, &call_path(4), &json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(503));
    assert_eq!(mock.calls_to(&path(4)).len(), 1);
    mock.on_sequence("POST", &path(5), vec![throttled.clone(), ok.clone()]);
    client
        .post::<Value>(Service::Vpc, &call_path(5), &json!({}))
        .await
        .unwrap();
    assert_eq!(mock.calls_to(&path(5)).len(), 2);
    mock.on_sequence("POST", &path(6), vec![unavailable, ok]);
    client
        .post_idempotent::<Value>(Service::Vpc, &call_path(6), &json!({}))
        .await
        .unwrap();
    assert_eq!(mock.calls_to(&path(6)).len(), 2);

    // Each attempt is signed afresh and passes the gateway.
    assert!(mock.events().is_empty(), "{:?}", mock.events());
}

#[tokio::test]
async fn error_answers_parse_and_classify() {
    let mock = Mock::start().await;
    let client = static_client(&mock);
    let nodes = format!("/api/v3/projects/{PROJECT}/clusters/{CLUSTER}/nodes");
    let create = || async {
        client
            .post::<Value>(
                Service::Cce,
                &format!("/api/v3/projects/{{project_id}}/clusters/{CLUSTER}/nodes"),
                &json!({"kind": "Node"}),
            )
            .await
            .unwrap_err()
    };

    mock.on("POST", &nodes, |_| {
        cce_error(
            409,
            "CCE_CM.0021",
            "[x1e.12u.96g|ap-southeast-3a] flavor is insufficient in specified az",
            "flavor is sold out",
        )
    });
    let ice = create().await;
    assert!(ice.is_insufficient_capacity() && !ice.is_unsupported_network() && !ice.is_not_found());
    assert_eq!(ice.code(), Some("CCE_CM.0021"));
    assert!(ice.request_id().is_some());

    mock.on("POST", &nodes, |_| {
        cce_error(
            400,
            "CCE_CM.0004",
            "Request is invalid",
            "Subeni quota is not enough of VM's flavor, Flavor [t7.xlarge.2] 's subeni quota is 0, Eni network is not supported ",
        )
    });
    let network = create().await;
    assert!(network.is_unsupported_network() && !network.is_insufficient_capacity());
    assert!(
        network.to_string().contains("subeni quota is 0"),
        "{network}"
    );

    let server =
        format!("/v1/{PROJECT}/cloudservers/0d9a4c4e-1a3d-4c5c-8e5e-2c0a8f5f0e55/tags/action");
    mock.on("POST", &server, |_| {
        Reply::Json(
            404,
            json!({"error": {"code": "Ecs.0114", "message": "Instance [0d9a4c4e-1a3d-4c5c-8e5e-2c0a8f5f0e55] could not be found."}}),
        )
    });
    let gone = client
        .post_idempotent::<Value>(
            Service::Ecs,
            "/v1/{project_id}/cloudservers/0d9a4c4e-1a3d-4c5c-8e5e-2c0a8f5f0e55/tags/action",
            &json!({"action": "create", "tags": [{"key": "karpenter.sh/nodepool", "value": "default"}]}),
        )
        .await
        .unwrap_err();
    assert!(gone.is_not_found(), "{gone}");
    assert_eq!(gone.code(), Some("Ecs.0114"));

    // A path no API answers: the gateway's 404, which is not a missing resource.
    let route = client
        .get::<Value>(Service::Cce, "/api/v3/projects/{project_id}/nowhere", &[])
        .await
        .unwrap_err();
    assert_eq!(route.status(), Some(404));
    assert!(!route.is_not_found(), "{route}");

    // A successful answer of the wrong shape.
    mock.on("GET", &format!("/v1/{PROJECT}/subnets"), |_| {
        Reply::Json(200, json!({"subnets": "not a list"}))
    });
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Subnets {
        subnets: Vec<Value>,
    }
    let decode = client
        .get::<Subnets>(Service::Vpc, "/v1/{project_id}/subnets", &[])
        .await
        .unwrap_err();
    assert!(matches!(decode, ClientError::Decode { .. }), "{decode}");
}

#[tokio::test]
async fn delete_takes_an_empty_answer() {
    let mock = Mock::start().await;
    let client = static_client(&mock);
    let node = format!("/api/v3/projects/{PROJECT}/clusters/{CLUSTER}/nodes/7ee8cbe5");
    mock.on("DELETE", &node, |call| {
        assert_eq!(call.query("nodepoolScaleDown"), Some("NoScaleDown"));
        Reply::Empty(200)
    });
    let path = format!("/api/v3/projects/{{project_id}}/clusters/{CLUSTER}/nodes/7ee8cbe5");
    let query = [("nodepoolScaleDown", "NoScaleDown".to_string())];
    client
        .delete::<()>(Service::Cce, &path, &query)
        .await
        .unwrap();
    let answer: Value = client.delete(Service::Cce, &path, &query).await.unwrap();
    assert_eq!(answer, Value::Null);
    let missing: Option<Value> = client.delete(Service::Cce, &path, &query).await.unwrap();
    assert_eq!(missing, None);
}

#[tokio::test]
async fn listings_follow_the_marker() {
    let mock = Mock::start().await;
    let client = static_client(&mock);
    let all: Vec<Value> = [
        "c7.large.2",
        "c7.xlarge.2",
        "m7.large.8",
        "s6.small.1",
        "x1e.2u.4g",
    ]
    .into_iter()
    .map(flavor)
    .collect();
    mock.on(
        "GET",
        &format!("/v1/{PROJECT}/cloudservers/flavors"),
        move |call| {
            let limit: usize = call.query("limit").unwrap().parse().unwrap();
            let start = match call.query("marker") {
                Some(m) => all.iter().position(|f| f["id"] == m).unwrap() + 1,
                None => 0,
            };
            let page: Vec<Value> = all.iter().skip(start).take(limit).cloned().collect();
            Reply::Json(200, json!({"flavors": page}))
        },
    );
    let flavors = client
        .list_by_marker(
            Service::Ecs,
            "/v1/{project_id}/cloudservers/flavors",
            &[("availability_zone", "cn-north-4a".to_string())],
            "flavors",
            2,
        )
        .await
        .unwrap();
    let ids: Vec<&str> = flavors.iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "c7.large.2",
            "c7.xlarge.2",
            "m7.large.8",
            "s6.small.1",
            "x1e.2u.4g"
        ]
    );
    let markers: Vec<Option<String>> = mock
        .calls()
        .iter()
        .map(|c| c.query("marker").map(str::to_string))
        .collect();
    assert_eq!(
        markers,
        [None, Some("c7.xlarge.2".into()), Some("s6.small.1".into())]
    );
    assert!(
        mock.calls()
            .iter()
            .all(|c| c.query("availability_zone") == Some("cn-north-4a"))
    );
}
