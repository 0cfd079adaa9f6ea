//! The wire against local stand-ins (axum) for what moto does not model: the SDKs' standard
//! retries and retry quota, clock-skew correction, per-service endpoint overrides, and every
//! credentials source that talks to a server (IMDSv2, the container endpoint, STS AssumeRole
//! chains and web identity, the SSO portal) plus the region from IMDS. The clock, the sleeps
//! and the jitter are fakes: nothing waits for real.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use karpenter_aws::auth::credentials::{Source, Sso};
use karpenter_aws::auth::profile::FileKind;
use karpenter_aws::auth::{Credentials, CredentialsProvider, SharedConfig, region};
use karpenter_aws::http::retry::{RetryConfig, RetryQuota};
use karpenter_aws::http::timing::{Clock, Timing};
use karpenter_aws::http::{AwsHttp, EndpointSettings, Endpoints};

/// 2015-08-30T12:36:00Z, the SigV4 suite's date.
const T0: i64 = 1_440_938_160;

struct FakeClock(AtomicI64);
impl Clock for FakeClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::SeqCst) as u64)
    }
}

/// A fake clock at `now`, sleeps recorded instead of waited, jitter one half.
fn timing(now: i64) -> (Timing, Arc<FakeClock>, Arc<Mutex<Vec<Duration>>>) {
    let clock = Arc::new(FakeClock(AtomicI64::new(now)));
    let slept: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let record = slept.clone();
    let timing = Timing {
        clock: clock.clone(),
        sleep: Arc::new(move |d| {
            record.lock().unwrap().push(d);
            Box::pin(async {})
        }),
        jitter: Arc::new(|| 0.5),
    };
    (timing, clock, slept)
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn keys(id: &str) -> Source {
    Source::Static(Credentials {
        access_key_id: id.into(),
        secret_access_key: "secret".into(),
        session_token: None,
    })
}

fn client(url: Option<String>, region: &str, source: Source, timing: Timing) -> AwsHttp {
    AwsHttp::new(
        Endpoints {
            region: region.into(),
            override_url: url,
        },
        CredentialsProvider::new(source),
    )
    .unwrap()
    .with_timing(timing)
}

fn form(body: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

fn ec2_error(status: u16, code: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        format!("<Response><Errors><Error><Code>{code}</Code><Message>m</Message></Error></Errors></Response>"),
    )
        .into_response()
}

const OK: &str = "<DescribeRegionsResponse><regionInfo/></DescribeRegionsResponse>";

/// An EC2 that answers with the queued failures first, then succeeds; it logs each request's
/// body.
async fn scripted_ec2(script: Vec<(u16, &'static str)>) -> (String, Arc<Mutex<Vec<String>>>) {
    let queue = Arc::new(Mutex::new(VecDeque::from(script)));
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = log.clone();
    let app = Router::new().route(
        "/",
        post(move |body: String| {
            let queue = queue.clone();
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(body);
                match queue.lock().unwrap().pop_front() {
                    Some((status, code)) => ec2_error(status, code),
                    None => OK.into_response(),
                }
            }
        }),
    );
    (serve(app).await, log)
}

fn describe() -> Vec<(String, String)> {
    vec![
        ("Action".into(), "DescribeRegions".into()),
        ("Version".into(), "2016-11-15".into()),
    ]
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried_with_backoff_and_refunded() {
    let (url, log) =
        scripted_ec2(vec![(503, "RequestLimitExceeded"), (500, "InternalError")]).await;
    let (t, _, slept) = timing(T0);
    let http = client(Some(url), "us-east-1", keys("AKID"), t);
    http.query("ec2", &describe()).await.unwrap();
    assert_eq!(log.lock().unwrap().len(), 3, "two retries");
    // Jitter ½: ½ × 1 s, then ½ × 2 s.
    assert_eq!(
        *slept.lock().unwrap(),
        [Duration::from_millis(500), Duration::from_secs(1)]
    );
    assert_eq!(
        http.retry_tokens(),
        RetryQuota::CAPACITY,
        "the retries' cost came back"
    );
}

#[tokio::test]
async fn attempts_and_the_quota_bound_retries() {
    let (url, log) = scripted_ec2(vec![(503, "Unavailable"); 10]).await;
    let (t, _, slept) = timing(T0);
    let http = client(Some(url), "us-east-1", keys("AKID"), t);
    let e = http.query("ec2", &describe()).await.unwrap_err();
    assert_eq!(e.code(), Some("Unavailable"));
    assert_eq!(log.lock().unwrap().len(), 3, "three attempts in all");
    assert_eq!(slept.lock().unwrap().len(), 2);
    assert_eq!(
        http.retry_tokens(),
        RetryQuota::CAPACITY - 10,
        "two retries of 5 tokens"
    );

    // A client error is answered at once.
    let (url, log) = scripted_ec2(vec![(400, "InvalidParameterValue")]).await;
    let (t, _, slept) = timing(T0);
    let http = client(Some(url), "us-east-1", keys("AKID"), t);
    assert!(http.query("ec2", &describe()).await.is_err());
    assert_eq!(
        (log.lock().unwrap().len(), slept.lock().unwrap().len()),
        (1, 0)
    );

    // AWS_MAX_ATTEMPTS=5 gives five attempts; one gives none to spare.
    let (url, log) = scripted_ec2(vec![(500, "InternalError"); 10]).await;
    let (t, _, _) = timing(T0);
    let five = RetryConfig {
        max_attempts: 5,
        ..RetryConfig::STANDARD
    };
    let http = client(Some(url), "us-east-1", keys("AKID"), t).with_retry(five);
    assert!(http.query("ec2", &describe()).await.is_err());
    assert_eq!(log.lock().unwrap().len(), 5);
}

#[tokio::test]
async fn an_empty_quota_stops_retrying_until_successes_refill_it() {
    let (url, log) = scripted_ec2(vec![(500, "InternalError"); 400]).await;
    let (t, _, _) = timing(T0);
    let http = client(Some(url), "us-east-1", keys("AKID"), t);
    // 50 calls of three attempts each spend 10 tokens: the bucket of 500 is then empty.
    for _ in 0..50 {
        assert!(http.query("ec2", &describe()).await.is_err());
    }
    assert_eq!(http.retry_tokens(), 0);
    let before = log.lock().unwrap().len();
    assert!(http.query("ec2", &describe()).await.is_err());
    assert_eq!(
        log.lock().unwrap().len(),
        before + 1,
        "no retry without tokens"
    );
}

#[tokio::test]
async fn create_fleet_gets_an_idempotency_token_so_a_retry_is_not_a_second_fleet() {
    let (url, log) = scripted_ec2(vec![(503, "Unavailable")]).await;
    let (t, _, _) = timing(T0);
    let http = client(Some(url), "us-east-1", keys("AKID"), t);
    http.query(
        "ec2",
        &[
            ("Action".into(), "CreateFleet".into()),
            ("Version".into(), "2016-11-15".into()),
        ],
    )
    .await
    .unwrap();
    let bodies = log.lock().unwrap().clone();
    let tokens: Vec<String> = bodies
        .iter()
        .map(|b| form(b)["ClientToken"].clone())
        .collect();
    assert_eq!(tokens.len(), 2);
    assert_eq!(tokens[0], tokens[1], "the retry carries the same token");
    assert_eq!(tokens[0].len(), 36);
    http.query("ec2", &describe()).await.unwrap();
    assert!(
        !log.lock().unwrap()[2].contains("ClientToken"),
        "only where the SDKs add it"
    );
}

#[tokio::test]
async fn a_skewed_clock_is_corrected_from_the_services_date_and_the_request_signed_again() {
    let dates: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = dates.clone();
    let app = Router::new().route(
        "/",
        post(move |headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                let date = headers["x-amz-date"].to_str().unwrap().to_string();
                seen.lock().unwrap().push(date.clone());
                if date == "20150830T123600Z" {
                    OK.into_response()
                } else {
                    let mut r = ec2_error(400, "RequestTimeTooSkewed");
                    r.headers_mut()
                        .insert("date", "Sun, 30 Aug 2015 12:36:00 GMT".parse().unwrap());
                    r
                }
            }
        }),
    );
    let url = serve(app).await;
    // Our clock is 20 minutes slow.
    let (t, _, _) = timing(T0 - 1200);
    let http = client(Some(url), "us-east-1", keys("AKID"), t);
    http.query("ec2", &describe()).await.unwrap();
    assert_eq!(
        *dates.lock().unwrap(),
        ["20150830T121600Z", "20150830T123600Z"]
    );
    assert_eq!(http.clock_skew_seconds(), 1200);
    http.query("ec2", &describe()).await.unwrap();
    assert_eq!(
        dates.lock().unwrap().len(),
        3,
        "later calls are signed right at once"
    );
}

#[tokio::test]
async fn a_service_endpoint_override_and_the_partitions_signing_scope() {
    let auth: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = auth.clone();
    let app = Router::new().route(
        "/",
        post(move |headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(headers["authorization"].to_str().unwrap().into());
                OK
            }
        }),
    );
    let url = serve(app).await;
    let vars = BTreeMap::from([("AWS_ENDPOINT_URL_EC2".to_string(), url.clone())]);
    let settings =
        EndpointSettings::from_settings(|k| vars.get(k).cloned(), None, BTreeMap::new(), false);
    let (t, _, _) = timing(T0);
    let http = client(None, "cn-north-1", keys("AKID"), t).with_endpoint_settings(settings);
    assert_eq!(http.url("ec2"), url);
    assert_eq!(http.url("sqs"), "https://sqs.cn-north-1.amazonaws.com.cn");
    http.query("ec2", &describe()).await.unwrap();
    let auth = auth.lock().unwrap()[0].clone();
    assert!(
        auth.contains("/20150830/cn-north-1/ec2/aws4_request"),
        "{auth}"
    );
}

/// IMDSv2 and an EC2 that logs who signed: counts token requests.
#[derive(Default)]
struct Imds {
    tokens: Mutex<usize>,
    signers: Mutex<Vec<(String, Option<String>)>>,
}

fn imds_app(state: Arc<Imds>) -> Router {
    let s1 = state.clone();
    let s2 = state.clone();
    let s3 = state;
    Router::new()
        .route(
            "/latest/api/token",
            put(move |headers: HeaderMap| {
                let s = s1.clone();
                async move {
                    assert_eq!(headers["x-aws-ec2-metadata-token-ttl-seconds"], "21600");
                    *s.tokens.lock().unwrap() += 1;
                    "session-token"
                }
            }),
        )
        .route(
            "/latest/meta-data/{*path}",
            get(
                move |axum::extract::Path(path): axum::extract::Path<String>,
                      headers: HeaderMap| {
                    let _ = &s2;
                    async move {
                        if headers
                            .get("x-aws-ec2-metadata-token")
                            .map(|v| v.as_bytes())
                            != Some(b"session-token")
                        {
                            return (StatusCode::UNAUTHORIZED, String::new());
                        }
                        let body = match path.as_str() {
                            "iam/security-credentials/" => "node-role".to_string(),
                            "iam/security-credentials/node-role" => serde_json::json!({
                                "Code": "Success",
                                "Type": "AWS-HMAC",
                                "AccessKeyId": "ASIAIMDS",
                                "SecretAccessKey": "secret",
                                "Token": "imds-session",
                                "Expiration": "2015-08-30T18:36:00Z",
                            })
                            .to_string(),
                            "placement/region" => "eu-north-1".to_string(),
                            _ => return (StatusCode::NOT_FOUND, String::new()),
                        };
                        (StatusCode::OK, body)
                    }
                },
            ),
        )
        .route(
            "/",
            post(move |headers: HeaderMap| {
                let s = s3.clone();
                async move {
                    let auth = headers["authorization"].to_str().unwrap();
                    let key = auth
                        .split("Credential=")
                        .nth(1)
                        .unwrap()
                        .split('/')
                        .next()
                        .unwrap();
                    let token = headers
                        .get("x-amz-security-token")
                        .map(|t| t.to_str().unwrap().to_string());
                    s.signers.lock().unwrap().push((key.to_string(), token));
                    OK
                }
            }),
        )
}

#[tokio::test]
async fn the_instance_role_through_imdsv2_cached_until_five_minutes_before_expiry() {
    let state = Arc::new(Imds::default());
    let url = serve(imds_app(state.clone())).await;
    let (t, clock, _) = timing(T0);
    let http = client(
        Some(url.clone()),
        "eu-north-1",
        Source::Imds {
            endpoint: url.clone(),
        },
        t,
    );
    http.query("ec2", &describe()).await.unwrap();
    http.query("ec2", &describe()).await.unwrap();
    assert_eq!(
        *state.tokens.lock().unwrap(),
        1,
        "fetched once, then cached"
    );
    assert_eq!(
        state.signers.lock().unwrap()[0],
        ("ASIAIMDS".to_string(), Some("imds-session".to_string()))
    );
    // Six hours later less four minutes: inside the refresh margin.
    clock.0.store(T0 + 6 * 3600 - 240, Ordering::SeqCst);
    http.query("ec2", &describe()).await.unwrap();
    assert_eq!(*state.tokens.lock().unwrap(), 2, "refreshed before expiry");

    // The region chain ends at IMDS.
    let config = SharedConfig::from_parts(
        BTreeMap::from([("AWS_EC2_METADATA_SERVICE_ENDPOINT".to_string(), url)]),
        &[],
    );
    assert_eq!(region::resolve(&config, &http).await.unwrap(), "eu-north-1");
    let disabled = SharedConfig::from_parts(
        BTreeMap::from([("AWS_EC2_METADATA_DISABLED".to_string(), "true".to_string())]),
        &[],
    );
    let e = region::resolve(&disabled, &http)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("AWS_REGION") && e.contains("AWS_DEFAULT_REGION") && e.contains("IMDS"),
        "{e}"
    );
}

#[tokio::test]
async fn the_container_endpoint_with_its_token_file() {
    let app = Router::new().route(
        "/v1/credentials",
        get(|headers: HeaderMap| async move {
            if headers.get("authorization").map(|v| v.as_bytes()) != Some(b"pod-identity-token") {
                return (StatusCode::UNAUTHORIZED, String::new());
            }
            (
                StatusCode::OK,
                serde_json::json!({
                    "AccessKeyId": "ASIAPOD",
                    "SecretAccessKey": "secret",
                    "Token": "pod-session",
                    "Expiration": "2015-08-30T13:36:00Z",
                })
                .to_string(),
            )
        }),
    );
    let url = serve(app).await;
    let dir = scratch("container");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "pod-identity-token\n").unwrap();
    let config = SharedConfig::from_parts(
        BTreeMap::from([
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI".to_string(),
                format!("{url}/v1/credentials"),
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE".to_string(),
                token_file.display().to_string(),
            ),
        ]),
        &[],
    );
    let provider = CredentialsProvider::default_chain(&config).unwrap();
    let (t, _, _) = timing(T0);
    let http = client(Some(url), "us-east-1", keys("unused"), t).with_credentials(provider.clone());
    let c = provider.get(&http).await.unwrap();
    assert_eq!(
        (c.access_key_id.as_str(), c.session_token.as_deref()),
        ("ASIAPOD", Some("pod-session"))
    );
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("karpenter-aws-wire-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An STS that assumes roles for whoever signs (or, for web identity, holds the token) and
/// logs each call as (action, signer or token, role).
async fn sts() -> (String, Arc<Mutex<Vec<(String, String, String)>>>) {
    let log: Arc<Mutex<Vec<(String, String, String)>>> = Arc::default();
    let seen = log.clone();
    let app = Router::new().route(
        "/",
        post(move |headers: HeaderMap, body: String| {
            let seen = seen.clone();
            async move {
                let p = form(&body);
                let action = p["Action"].clone();
                let who = match action.as_str() {
                    "AssumeRole" => {
                        let auth = headers["authorization"].to_str().unwrap();
                        auth.split("Credential=").nth(1).unwrap().split('/').next().unwrap().to_string()
                    }
                    _ => {
                        assert!(headers.get("authorization").is_none(), "web identity is unsigned");
                        p["WebIdentityToken"].clone()
                    }
                };
                let role = p["RoleArn"].clone();
                let key = format!("ASIA{}", role.rsplit('/').next().unwrap().to_uppercase());
                seen.lock().unwrap().push((action.clone(), who, role));
                format!(
                    "<{action}Response><{action}Result><Credentials><AccessKeyId>{key}</AccessKeyId><SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken><Expiration>2015-08-30T13:36:00Z</Expiration></Credentials></{action}Result></{action}Response>"
                )
            }
        }),
    );
    (serve(app).await, log)
}

#[tokio::test]
async fn a_profile_chain_assumes_each_role_with_the_previous_ones_credentials() {
    let (url, log) = sts().await;
    let cfg = "\
[profile base]
aws_access_key_id = AKIDBASE
aws_secret_access_key = s
[profile middle]
role_arn = arn:aws:iam::1:role/middle
source_profile = base
[profile top]
role_arn = arn:aws:iam::2:role/top
source_profile = middle
";
    let config = SharedConfig::from_parts(
        BTreeMap::from([("AWS_PROFILE".to_string(), "top".to_string())]),
        &[(FileKind::Config, cfg.to_string())],
    );
    let provider = CredentialsProvider::default_chain(&config).unwrap();
    let (t, _, _) = timing(T0);
    let http = client(Some(url), "us-east-1", keys("unused"), t).with_credentials(provider.clone());
    let c = provider.get(&http).await.unwrap();
    assert_eq!(c.access_key_id, "ASIATOP");
    assert_eq!(
        *log.lock().unwrap(),
        [
            (
                "AssumeRole".to_string(),
                "AKIDBASE".to_string(),
                "arn:aws:iam::1:role/middle".to_string()
            ),
            (
                "AssumeRole".to_string(),
                "ASIAMIDDLE".to_string(),
                "arn:aws:iam::2:role/top".to_string()
            ),
        ]
    );
}

#[tokio::test]
async fn web_identity_exchanges_the_projected_token() {
    let (url, log) = sts().await;
    let dir = scratch("irsa");
    let token = dir.join("token");
    std::fs::write(&token, "projected-jwt\n").unwrap();
    let (t, _, _) = timing(T0);
    let source = Source::WebIdentity {
        role_arn: "arn:aws:iam::1:role/karpenter".into(),
        token_file: token.display().to_string(),
        session_name: None,
    };
    let http = client(Some(url), "us-east-1", source, t);
    http.query("sts", &describe()).await.ok();
    assert_eq!(
        log.lock().unwrap()[0],
        (
            "AssumeRoleWithWebIdentity".to_string(),
            "projected-jwt".to_string(),
            "arn:aws:iam::1:role/karpenter".to_string()
        )
    );
}

#[tokio::test]
async fn sso_exchanges_the_cached_token_at_the_portal() {
    let app = Router::new().route(
        "/federation/credentials",
        get(
            |headers: HeaderMap, uri: axum::http::Uri| async move {
                assert_eq!(headers["x-amz-sso_bearer_token"], "sso-access-token");
                let q = form(uri.query().unwrap_or_default());
                assert_eq!((q["account_id"].as_str(), q["role_name"].as_str()), ("111122223333", "Admin"));
                r#"{"roleCredentials":{"accessKeyId":"ASIASSO","secretAccessKey":"s","sessionToken":"t","expiration":1440941760000}}"#
            },
        ),
    );
    let url = serve(app).await;
    let dir = scratch("sso");
    let cache = dir.join("token.json");
    std::fs::write(
        &cache,
        r#"{"accessToken":"sso-access-token","expiresAt":"2015-08-30T20:00:00Z"}"#,
    )
    .unwrap();
    let vars = BTreeMap::from([("AWS_ENDPOINT_URL_SSO".to_string(), url)]);
    let settings =
        EndpointSettings::from_settings(|k| vars.get(k).cloned(), None, BTreeMap::new(), false);
    let sso = Sso {
        region: "eu-west-1".into(),
        account_id: "111122223333".into(),
        role_name: "Admin".into(),
        cache_file: cache.display().to_string(),
    };
    let provider = CredentialsProvider::new(Source::Sso(sso));
    let (t, clock, _) = timing(T0);
    let http = client(None, "eu-west-1", keys("unused"), t)
        .with_endpoint_settings(settings)
        .with_credentials(provider.clone());
    assert_eq!(provider.get(&http).await.unwrap().access_key_id, "ASIASSO");
    // Once the cached token has expired, `aws sso login` is needed again.
    clock.0.store(T0 + 86_400, Ordering::SeqCst);
    let fresh = CredentialsProvider::new(provider.source().clone());
    let e = fresh.get(&http).await.unwrap_err().to_string();
    assert!(e.contains("aws sso login"), "{e}");
}

/// The validation dry runs go out once (upstream sends them with no retryer): a throttle is
/// answered at once and spends nothing of the retry quota. RunInstances puts the subnet on the
/// launch template's interfaces, never beside them (a combination EC2 rejects).
#[tokio::test]
async fn dry_runs_are_sent_once_with_the_subnet_on_the_interfaces() {
    use karpenter_aws::ec2::Ec2Client;
    use karpenter_aws::ec2_extra::{CreateFleetDryRun, DryRuns, RunInstancesDryRun};
    use karpenter_aws::interfaces::LaunchTemplateInterface;

    let (url, log) = scripted_ec2(vec![
        (503, "RequestLimitExceeded"),
        (503, "RequestLimitExceeded"),
        (412, "DryRunOperation"),
        (412, "DryRunOperation"),
    ])
    .await;
    let (t, _, slept) = timing(T0);
    let ec2 = Ec2Client::new(client(Some(url), "us-east-1", keys("AKID"), t));
    let run = |interfaces: Vec<LaunchTemplateInterface>| RunInstancesDryRun {
        launch_template: "karpenter.k8s.aws/1".into(),
        instance_type: "m5.large".into(),
        subnet_id: "subnet-a".into(),
        network_interfaces: interfaces,
        tags: BTreeMap::new(),
    };
    let e = ec2
        .dry_run_run_instances(run(Vec::new()))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("RequestLimitExceeded"));
    let e = ec2
        .dry_run_create_fleet(CreateFleetDryRun::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("RequestLimitExceeded"));
    assert_eq!(log.lock().unwrap().len(), 2, "one request each");
    assert!(slept.lock().unwrap().is_empty());
    assert_eq!(ec2.http().retry_tokens(), RetryQuota::CAPACITY);

    // The primary interface only: interface 0 in the subnet.
    ec2.dry_run_run_instances(run(Vec::new())).await.unwrap();
    // The NodeClass's interfaces: each named with the subnet.
    let interfaces = vec![
        LaunchTemplateInterface {
            network_card_index: Some(0),
            device_index: 0,
            interface_type: Some("interface".into()),
            security_groups: vec!["sg-1".into()],
            ..Default::default()
        },
        LaunchTemplateInterface {
            network_card_index: Some(1),
            device_index: 1,
            interface_type: Some("efa-only".into()),
            security_groups: vec!["sg-1".into()],
            ..Default::default()
        },
    ];
    ec2.dry_run_run_instances(run(interfaces)).await.unwrap();
    let bodies = log.lock().unwrap().clone();
    let interface_params = |body: &str| -> Vec<(String, String)> {
        form(body)
            .into_iter()
            .filter(|(k, _)| {
                k.starts_with("NetworkInterface.")
                    || k == "SubnetId"
                    || k.starts_with("SecurityGroupId")
            })
            .collect()
    };
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(form(&bodies[2])["DryRun"], "true");
    assert_eq!(
        interface_params(&bodies[2]),
        pairs(&[
            ("NetworkInterface.1.DeviceIndex", "0"),
            ("NetworkInterface.1.SubnetId", "subnet-a"),
        ])
    );
    assert_eq!(
        interface_params(&bodies[3]),
        pairs(&[
            ("NetworkInterface.1.DeviceIndex", "0"),
            ("NetworkInterface.1.InterfaceType", "interface"),
            ("NetworkInterface.1.NetworkCardIndex", "0"),
            ("NetworkInterface.1.SubnetId", "subnet-a"),
            ("NetworkInterface.2.DeviceIndex", "1"),
            ("NetworkInterface.2.InterfaceType", "efa-only"),
            ("NetworkInterface.2.NetworkCardIndex", "1"),
            ("NetworkInterface.2.SubnetId", "subnet-a"),
        ])
    );
}
