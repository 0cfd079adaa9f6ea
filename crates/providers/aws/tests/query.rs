//! EC2's Query protocol against a scripted endpoint: what moto does not do — pagination with
//! `NextToken` — and what every request must carry (a SigV4 signature scoped to EC2 and the
//! region).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use karpenter_aws::auth::credentials::Source;
use karpenter_aws::auth::{Credentials, CredentialsProvider};
use karpenter_aws::ec2::{Ec2Api, Ec2Client, Filter};
use karpenter_aws::http::{AwsHttp, Endpoints};

type Seen = Arc<Mutex<Vec<(String, String)>>>;

fn form(body: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(body).into_owned().collect()
}

fn instance(id: &str) -> String {
    format!(
        "<item><instanceId>{id}</instanceId><instanceType>m5.large</instanceType><placement><availabilityZone>us-east-1a</availabilityZone></placement><instanceState><name>running</name></instanceState><tagSet><item><key>karpenter.sh/nodeclaim</key><value>{id}-claim</value></item></tagSet></item>"
    )
}

/// Three pages of instances; a NotFound error for one id.
async fn ec2(seen: Seen, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    let params = form(&body);
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    seen.lock()
        .unwrap()
        .push((get("Action").unwrap_or_default(), auth));
    if get("InstanceId.1").as_deref() == Some("i-gone") {
        return (
            StatusCode::BAD_REQUEST,
            "<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>The instance ID 'i-gone' does not exist</Message></Error></Errors></Response>".into(),
        );
    }
    let (ids, next) = match get("NextToken").as_deref() {
        None => (vec!["i-1", "i-2"], Some("page2")),
        Some("page2") => (vec!["i-3"], Some("page3")),
        Some(_) => (vec!["i-4"], None),
    };
    let items: String = ids.iter().map(|id| instance(id)).collect();
    let token = next
        .map(|t| format!("<nextToken>{t}</nextToken>"))
        .unwrap_or_default();
    (
        StatusCode::OK,
        format!(
            "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><reservationSet><item><instancesSet>{items}</instancesSet></item></reservationSet>{token}</DescribeInstancesResponse>"
        ),
    )
}

#[tokio::test]
async fn pages_are_followed_and_errors_keep_their_code() {
    let seen: Seen = Arc::default();
    let state = seen.clone();
    let app = Router::new().route("/", post(move |h, b| ec2(state.clone(), h, b)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = AwsHttp::new(
        Endpoints {
            region: "eu-west-1".into(),
            override_url: Some(url),
        },
        CredentialsProvider::new(Source::Static(Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "secret".into(),
            session_token: Some("token".into()),
        })),
    )
    .unwrap();
    let ec2 = Ec2Client::new(http);
    let all = ec2
        .describe_instances(
            vec![],
            vec![Filter::new("tag-key", &["karpenter.sh/nodepool"])],
        )
        .await
        .unwrap();
    let ids: Vec<_> = all.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, ["i-1", "i-2", "i-3", "i-4"], "every page");
    assert_eq!(all[2].tags["karpenter.sh/nodeclaim"], "i-3-claim");
    let seen_now = seen.lock().unwrap().clone();
    assert_eq!(seen_now.len(), 3);
    for (action, auth) in &seen_now {
        assert_eq!(action, "DescribeInstances");
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
            "{auth}"
        );
        assert!(auth.contains("/eu-west-1/ec2/aws4_request"), "{auth}");
        assert!(
            auth.contains("x-amz-security-token"),
            "temporary credentials sign their token: {auth}"
        );
    }
    let err = ec2
        .describe_instances(vec!["i-gone".into()], vec![])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("InvalidInstanceID.NotFound"));
}
