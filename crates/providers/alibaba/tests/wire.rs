//! The RPC client and the credential chain against the in-process Alibaba endpoint, which checks
//! every signature. Answers are shaped as the API references' examples (ECS DescribeRegions,
//! DescribeInstances; VPC DescribeVSwitches; STS AssumeRole, AssumeRoleWithOIDC; the metadata
//! service's RAM role credentials).

mod support;

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use karpenter_alibaba::auth::{Credentials, CredentialsError, Source};
use karpenter_alibaba::client::{AlibabaError, Params};
use karpenter_alibaba::endpoint::Product;
use serde_json::{Value, json};
use support::{Auth, Mock, Reply, temp_file};

const AK: &str = "LTAI5tMockAccessKeyId";
const SECRET: &str = "mock-access-key-secret";

const ROLE: &str = "acs:ram::113511544585****:role/karpenter";
const OIDC_PROVIDER: &str = "acs:ram::113511544585****:oidc-provider/ack-rrsa-c1234";
const OIDC_TOKEN: &str = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a2FycGVudGVyOmthcnBlbnRlciJ9.c2ln";

fn describe_regions() -> Value {
    json!({
        "RequestId": "473469C7-AA6F-4DC5-B3DB-A3DC0DE3C83E",
        "Regions": {"Region": [
            {"RegionId": "cn-hangzhou", "RegionEndpoint": "ecs.aliyuncs.com", "LocalName": "华东 1（杭州）", "Status": "available"},
            {"RegionId": "cn-shanghai", "RegionEndpoint": "ecs.cn-shanghai.aliyuncs.com", "LocalName": "华东 2（上海）", "Status": "available"}
        ]}
    })
}

fn instance(id: &str) -> Value {
    json!({
        "InstanceId": id,
        "InstanceName": "karpenter-default-abcde",
        "InstanceType": "ecs.g7.large",
        "RegionId": "cn-hangzhou",
        "ZoneId": "cn-hangzhou-i",
        "Status": "Running",
        "ImageId": "aliyun_3_x64_20G_alibase_20240819.vhd",
        "SpotStrategy": "NoSpot",
        "CreationTime": "2024-08-20T04:04Z",
        "Cpu": 2,
        "Memory": 8192,
        "VpcAttributes": {"VpcId": "vpc-bp67acfmxazb4ph****", "VSwitchId": "vsw-bp67acfmxazb4ph****", "PrivateIpAddress": {"IpAddress": ["172.16.0.10"]}},
        "SecurityGroupIds": {"SecurityGroupId": ["sg-bp67acfmxazb4p****"]},
        "Tags": {"Tag": [{"TagKey": "karpenter.sh/nodepool", "TagValue": "default"}]}
    })
}

fn vswitch(n: usize) -> Value {
    json!({
        "VSwitchId": format!("vsw-25bcdxs7pv1{n:04}"),
        "VpcId": "vpc-257gqcdfvx6n****",
        "Status": "Available",
        "CidrBlock": format!("172.16.{n}.0/24"),
        "ZoneId": "cn-hangzhou-i",
        "AvailableIpAddressCount": 250,
        "VSwitchName": format!("karpenter-{n}"),
        "IsDefault": false,
        "CreationTime": "2018-01-18T12:43:57Z",
        "Tags": {"Tag": [{"Key": "karpenter.sh/discovery", "Value": "c1"}]}
    })
}

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn signed_calls_are_accepted() {
    let mock = Mock::start().await;
    mock.allow(AK, SECRET);
    mock.reply("DescribeRegions", describe_regions());
    mock.reply(
        "DescribeVSwitches",
        json!({"TotalCount": 1, "PageNumber": 1, "PageSize": 10, "VSwitches": {"VSwitch": [vswitch(1)]}}),
    );
    let client = mock.client(AK, SECRET);

    let params = Params::new()
        .with("RegionId", "cn-hangzhou")
        .with("AcceptLanguage", "zh-CN")
        .with("Filter", "a b*c~d/é");
    let regions = client
        .call(Product::Ecs, "DescribeRegions", &params)
        .await
        .unwrap();
    assert_eq!(regions["Regions"]["Region"][1]["RegionId"], "cn-shanghai");
    let vswitches = client
        .call(
            Product::Vpc,
            "DescribeVSwitches",
            &Params::new().with("VpcId", "vpc-257gqcdfvx6n****"),
        )
        .await
        .unwrap();
    assert_eq!(
        vswitches["VSwitches"]["VSwitch"][0]["ZoneId"],
        "cn-hangzhou-i"
    );

    let calls = mock.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].auth, Auth::Acs3);
    assert_eq!(calls[0].access_key_id.as_deref(), Some(AK));
    assert_eq!(calls[0].security_token, None);
    assert_eq!(calls[0].version, "2014-05-26");
    assert_eq!(
        calls[0].params["Filter"], "a b*c~d/é",
        "the wire encoding round-trips"
    );
    assert_eq!(calls[1].action, "DescribeVSwitches");
    assert_eq!(calls[1].version, "2016-04-28");
    assert!(mock.refused().is_empty());
}

#[tokio::test]
async fn a_tampered_secret_is_refused_with_alibabas_error() {
    let mock = Mock::start().await;
    mock.allow(AK, SECRET);
    mock.reply("DescribeRegions", describe_regions());
    let client = mock.client(AK, "not-the-secret");
    let err = client
        .call(Product::Ecs, "DescribeRegions", &Params::new())
        .await
        .unwrap_err();
    match &err {
        AlibabaError::Api {
            code,
            message,
            request_id,
            status,
        } => {
            assert_eq!(code, "SignatureDoesNotMatch");
            assert_eq!(*status, 400);
            assert!(
                message.starts_with("Specified signature does not match"),
                "{message}"
            );
            assert!(!request_id.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert!(!err.is_not_found() && !err.is_throttling());
    assert_eq!(mock.refused(), ["SignatureDoesNotMatch"], "not retried");
    assert!(mock.calls().is_empty());

    let unknown = mock
        .client("LTAI5tSomebodyElse", SECRET)
        .call(Product::Ecs, "DescribeRegions", &Params::new())
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Some("InvalidAccessKeyId.NotFound"));
    assert!(
        !unknown.is_not_found(),
        "a wrong key is not a missing resource"
    );
}

#[tokio::test]
async fn throttling_is_retried_each_attempt_signed_afresh() {
    let mock = Mock::start().await;
    mock.allow(AK, SECRET);
    mock.replies(
        "DescribeRegions",
        vec![
            Reply::error(
                400,
                "Throttling.User",
                "Request was denied due to user flow control.",
            ),
            Reply::error(
                503,
                "Throttling",
                "Request was denied due to request throttling.",
            ),
            Reply::Ok(describe_regions()),
        ],
    );
    let client = mock.client(AK, SECRET);
    let answer = client
        .call(Product::Ecs, "DescribeRegions", &Params::new())
        .await
        .unwrap();
    assert_eq!(answer["Regions"]["Region"][0]["RegionId"], "cn-hangzhou");
    let calls = mock.calls_to("DescribeRegions");
    assert_eq!(calls.len(), 3);
    // The mock refuses a nonce it has seen: three accepted calls had three nonces.
    assert!(mock.refused().is_empty(), "{:?}", mock.refused());

    // Throttling is retried even for a call that must not be sent twice: Alibaba did nothing.
    mock.replies(
        "RunInstances",
        vec![
            Reply::error(
                400,
                "Throttling.User",
                "Request was denied due to user flow control.",
            ),
            Reply::Ok(json!({"InstanceIdSets": {"InstanceIdSet": ["i-bp1"]}, "TradePrice": 0.0})),
        ],
    );
    let run = client
        .call_once(
            Product::Ecs,
            "RunInstances",
            &Params::new().with("Amount", "1"),
        )
        .await
        .unwrap();
    assert_eq!(run["InstanceIdSets"]["InstanceIdSet"][0], "i-bp1");

    // Throttled throughout: the error after the last attempt.
    mock.replies(
        "DescribeZones",
        vec![Reply::error(
            400,
            "Throttling.Api",
            "Request was denied due to api flow control.",
        )],
    );
    let err = client
        .call(Product::Ecs, "DescribeZones", &Params::new())
        .await
        .unwrap_err();
    assert!(err.is_throttling(), "{err}");
    assert_eq!(
        mock.calls_to("DescribeZones").len(),
        support::FAST.attempts as usize
    );
}

#[tokio::test]
async fn server_errors_are_retried_unless_the_call_may_not_repeat() {
    let mock = Mock::start().await;
    mock.allow(AK, SECRET);
    let internal = Reply::error(
        500,
        "InternalError",
        "The request processing has failed due to some unknown error.",
    );
    mock.replies(
        "DescribeRegions",
        vec![internal.clone(), Reply::Ok(describe_regions())],
    );
    let client = mock.client(AK, SECRET);
    client
        .call(Product::Ecs, "DescribeRegions", &Params::new())
        .await
        .unwrap();
    assert_eq!(mock.calls_to("DescribeRegions").len(), 2);

    mock.replies("CreateAutoProvisioningGroup", vec![internal]);
    let err = client
        .call_once(Product::Ecs, "CreateAutoProvisioningGroup", &Params::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("InternalError"));
    assert_eq!(mock.calls_to("CreateAutoProvisioningGroup").len(), 1);
}

#[tokio::test]
async fn error_codes_are_mapped() {
    let mock = Mock::start().await;
    mock.allow(AK, SECRET);
    mock.on("DeleteInstance", |call| {
        Reply::error(
            404,
            "InvalidInstanceId.NotFound",
            &format!(
                "The specified InstanceId {} does not exist.",
                call.params["InstanceId"]
            ),
        )
    });
    mock.reply(
        "DescribeInstances",
        json!({"Instances": {"Instance": []}, "TotalCount": 0}),
    );
    mock.replies(
        "RunInstances",
        vec![Reply::error(
            403,
            "OperationDenied.NoStock",
            "The requested resource is sold out in the specified zone; try other types of resources or other regions and zones.",
        )],
    );
    mock.replies(
        "CreateAutoProvisioningGroup",
        vec![Reply::error(
            403,
            "QuotaExceed.Spot",
            "The spot instance quota is exceeded.",
        )],
    );
    let client = mock.client(AK, SECRET);

    let gone = client
        .call(
            Product::Ecs,
            "DeleteInstance",
            &Params::new()
                .with("InstanceId", "i-bp1gone")
                .with("Force", "true"),
        )
        .await
        .unwrap_err();
    assert!(gone.is_not_found(), "{gone}");
    assert!(gone.to_string().contains("i-bp1gone"));
    assert!(gone.request_id().is_some_and(|id| !id.is_empty()));

    let stock = client
        .call_once(Product::Ecs, "RunInstances", &Params::new())
        .await
        .unwrap_err();
    assert!(stock.is_insufficient_capacity() && !stock.is_quota());
    let quota = client
        .call_once(Product::Ecs, "CreateAutoProvisioningGroup", &Params::new())
        .await
        .unwrap_err();
    assert!(quota.is_insufficient_capacity() && quota.is_quota());

    let unknown_action = client
        .call(Product::Ecs, "DescribeNothing", &Params::new())
        .await
        .unwrap_err();
    assert_eq!(unknown_action.code(), Some("InvalidAction.NotFound"));
    assert!(
        !unknown_action.is_not_found(),
        "an unknown action is not a missing resource"
    );
}

#[tokio::test]
async fn rrsa_credentials_from_sts_sign_the_calls_that_follow() {
    let mock = Mock::start().await;
    mock.trust_oidc(ROLE, OIDC_PROVIDER, OIDC_TOKEN);
    mock.reply("DescribeRegions", describe_regions());
    let token_file = temp_file("token", &format!("{OIDC_TOKEN}\n"));
    let token_path = token_file.to_string_lossy().to_string();
    let source = Source::from_env(
        env(&[
            ("ALIBABA_CLOUD_ROLE_ARN", ROLE),
            ("ALIBABA_CLOUD_OIDC_PROVIDER_ARN", OIDC_PROVIDER),
            ("ALIBABA_CLOUD_OIDC_TOKEN_FILE", token_path.as_str()),
            ("HOME", "/nonexistent"),
        ]),
        &mock.endpoints(),
    )
    .unwrap();
    assert_eq!(source.name(), "oidc_role_arn");
    let client = mock.client_with(mock.provider(source));

    client
        .call(
            Product::Ecs,
            "DescribeRegions",
            &Params::new().with("RegionId", "cn-hangzhou"),
        )
        .await
        .unwrap();

    let exchange = mock.calls_to("AssumeRoleWithOIDC");
    assert_eq!(exchange.len(), 1);
    let exchange = &exchange[0];
    assert_eq!(exchange.auth, Auth::Anonymous);
    assert_eq!(exchange.version, "2015-04-01");
    assert_eq!(exchange.params["RoleArn"], ROLE);
    assert_eq!(exchange.params["OIDCProviderArn"], OIDC_PROVIDER);
    assert_eq!(
        exchange.params["OIDCToken"], OIDC_TOKEN,
        "the token file, trimmed"
    );
    assert_eq!(exchange.params["RoleSessionName"], "karpenter");
    assert_eq!(exchange.params["DurationSeconds"], "3600");

    let call = &mock.calls_to("DescribeRegions")[0];
    assert_eq!(call.auth, Auth::Acs3);
    assert!(
        call.access_key_id
            .as_deref()
            .is_some_and(|id| id.starts_with("STS."))
    );
    assert!(
        call.security_token
            .as_deref()
            .is_some_and(|t| t.starts_with("CAIS")),
        "x-acs-security-token is sent and checked: {call:?}"
    );

    // A second call reuses the cached credentials.
    client
        .call(Product::Ecs, "DescribeRegions", &Params::new())
        .await
        .unwrap();
    assert_eq!(mock.issued(), 1);
}

#[tokio::test]
async fn a_refused_oidc_exchange_names_the_code_not_the_token() {
    let mock = Mock::start().await;
    mock.trust_oidc(ROLE, OIDC_PROVIDER, "another-token");
    let token_file = temp_file("token", OIDC_TOKEN);
    let provider = mock.provider(Source::Oidc {
        session: karpenter_alibaba::auth::credentials::RoleSession {
            role_arn: ROLE.into(),
            session_name: "karpenter".into(),
            duration_seconds: 3600,
            policy: None,
            sts_url: mock.url.clone(),
        },
        oidc_provider_arn: OIDC_PROVIDER.into(),
        token_file,
    });
    let err = provider.get().await.unwrap_err();
    assert!(matches!(
        err,
        CredentialsError::Fetch {
            source_name: "oidc_role_arn",
            ..
        }
    ));
    let shown = err.to_string();
    assert!(
        shown.contains("AuthenticationFail.OIDCToken.Invalid"),
        "{shown}"
    );
    assert!(!shown.contains(OIDC_TOKEN), "{shown}");
}

#[tokio::test]
async fn temporary_credentials_are_cached_and_refreshed_before_they_expire() {
    let mock = Mock::start().await;
    mock.trust_oidc(ROLE, OIDC_PROVIDER, OIDC_TOKEN);
    mock.set_lifetime(3600);
    let token_file = temp_file("token", OIDC_TOKEN);
    let token_path = token_file.to_string_lossy().to_string();
    let source = Source::from_env(
        env(&[
            ("ALIBABA_CLOUD_ROLE_ARN", ROLE),
            ("ALIBABA_CLOUD_OIDC_PROVIDER_ARN", OIDC_PROVIDER),
            ("ALIBABA_CLOUD_OIDC_TOKEN_FILE", token_path.as_str()),
        ]),
        &mock.endpoints(),
    )
    .unwrap();
    let provider = mock.provider(source);
    let t0 = unix_now();
    let first = provider.get_at(t0).await.unwrap();
    assert_eq!(mock.issued(), 1);
    // Still more than three minutes left an hour minus ten minutes later: the same credentials.
    let later = provider.get_at(t0 + 3000).await.unwrap();
    assert_eq!(later, first);
    assert_eq!(mock.issued(), 1);
    // Within three minutes of expiry: fetched again (the new ones live longer, so that the
    // mock's clock, which is the real one, leaves them valid at the test's later time).
    mock.set_lifetime(7200);
    let refreshed = provider.get_at(t0 + 3500).await.unwrap();
    assert_eq!(mock.issued(), 2);
    assert_ne!(refreshed.access_key_id, first.access_key_id);
    // Clones share the cache.
    assert_eq!(provider.clone().get_at(t0 + 3500).await.unwrap(), refreshed);
    assert_eq!(mock.issued(), 2);
    let shown = format!("{provider:?} {refreshed:?}");
    assert!(
        !shown.contains(&refreshed.access_key_secret)
            && !shown.contains(refreshed.security_token.as_deref().unwrap()),
        "{shown}"
    );
}

#[tokio::test]
async fn a_cli_profile_role_is_assumed_with_the_rpc_signature() {
    let mock = Mock::start().await;
    mock.allow(AK, SECRET);
    mock.trust_role("acs:ram::113511544585****:role/karpenter-ops");
    mock.reply("DescribeRegions", describe_regions());
    let config = temp_file(
        "config.json",
        &json!({
            "current": "ops",
            "profiles": [{
                "name": "ops",
                "mode": "RamRoleArn",
                "access_key_id": AK,
                "access_key_secret": SECRET,
                "ram_role_arn": "acs:ram::113511544585****:role/karpenter-ops",
                "ram_session_name": "karpenter-ops",
                "expired_seconds": 900,
                "region_id": "cn-hangzhou"
            }]
        })
        .to_string(),
    );
    let path = config.to_string_lossy().to_string();
    let source = Source::from_env(
        env(&[("ALIBABA_CLOUD_CONFIG_FILE", path.as_str())]),
        &mock.endpoints(),
    )
    .unwrap();
    assert_eq!(source.name(), "ram_role_arn");
    let client = mock.client_with(mock.provider(source));
    client
        .call(Product::Ecs, "DescribeRegions", &Params::new())
        .await
        .unwrap();

    let assume = &mock.calls_to("AssumeRole")[0];
    assert_eq!(
        assume.auth,
        Auth::RpcV1,
        "signed as the credentials library signs it"
    );
    assert_eq!(assume.access_key_id.as_deref(), Some(AK));
    assert_eq!(assume.params["RoleSessionName"], "karpenter-ops");
    assert_eq!(assume.params["DurationSeconds"], "900");
    let call = &mock.calls_to("DescribeRegions")[0];
    assert!(
        call.access_key_id
            .as_deref()
            .is_some_and(|id| id.starts_with("STS."))
    );
    assert!(call.security_token.is_some());
}

#[tokio::test]
async fn the_chart_mounted_config_file_is_found_in_home() {
    // The cloudpilot-ai chart mounts its Secret at ~/.aliyun/config.json.
    let mock = Mock::start().await;
    mock.allow("LTAI5tChart", "chart-secret");
    mock.reply("DescribeRegions", describe_regions());
    let config = temp_file(
        "config.json",
        r#"{"profiles": [{"mode": "AK", "access_key_id": "LTAI5tChart", "access_key_secret": "chart-secret", "region_id": "cn-hangzhou"}]}"#,
    );
    let aliyun = config.parent().unwrap();
    let home = aliyun.with_file_name(format!(
        "{}-home",
        aliyun.file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(home.join(".aliyun")).unwrap();
    std::fs::copy(&config, home.join(".aliyun").join("config.json")).unwrap();
    let home = home.to_string_lossy().to_string();
    let source = Source::from_env(env(&[("HOME", home.as_str())]), &mock.endpoints()).unwrap();
    assert_eq!(
        source,
        Source::Static(Credentials::new("LTAI5tChart", "chart-secret"))
    );
    mock.client_with(mock.provider(source))
        .call(Product::Ecs, "DescribeRegions", &Params::new())
        .await
        .unwrap();

    // Named by ALIBABA_CLOUD_CONFIG_FILE but missing: an error naming the file, not a silent
    // fall-through to the instance role.
    let err = Source::from_env(
        env(&[("ALIBABA_CLOUD_CONFIG_FILE", "/nonexistent/config.json")]),
        &mock.endpoints(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("/nonexistent/config.json"), "{err}");
}

#[tokio::test]
async fn the_instance_ram_role_through_the_hardened_metadata_service() {
    let mock = Mock::start().await;
    mock.instance_role("KubernetesWorkerRole-1f2e3d", true);
    mock.reply("DescribeRegions", describe_regions());
    let provider = mock.provider(Source::EcsRamRole {
        role_name: None,
        metadata_url: mock.url.clone(),
        disable_imdsv1: true,
    });
    let credentials = provider.get().await.unwrap();
    assert!(credentials.access_key_id.starts_with("STS."));
    mock.client_with(provider)
        .call(Product::Ecs, "DescribeRegions", &Params::new())
        .await
        .unwrap();
    assert!(mock.calls_to("DescribeRegions")[0].security_token.is_some());

    // A named role the instance does not have.
    let wrong = mock
        .provider(Source::EcsRamRole {
            role_name: Some("SomeOtherRole".into()),
            metadata_url: mock.url.clone(),
            disable_imdsv1: false,
        })
        .get()
        .await
        .unwrap_err();
    assert!(wrong.to_string().contains("HTTP 404"), "{wrong}");
}

#[tokio::test]
async fn a_credentials_uri_answers_like_the_metadata_service() {
    let mock = Mock::start().await;
    let source = Source::from_env(
        env(&[
            ("HOME", "/nonexistent"),
            (
                "ALIBABA_CLOUD_CREDENTIALS_URI",
                &format!("{}/credentials", mock.url),
            ),
        ]),
        &mock.endpoints(),
    )
    .unwrap();
    let credentials = mock.provider(source).get().await.unwrap();
    assert!(credentials.security_token.is_some());
    assert_eq!(mock.issued(), 1);
}

#[tokio::test]
async fn pagination_follows_page_numbers_and_next_tokens() {
    let mock = Mock::start().await;
    mock.allow(AK, SECRET);
    let all: Vec<Value> = (1..=5).map(vswitch).collect();
    mock.on("DescribeVSwitches", move |call| {
        let number: usize = call.params["PageNumber"].parse().unwrap();
        let size: usize = call.params["PageSize"].parse().unwrap();
        let page: Vec<Value> = all
            .iter()
            .skip((number - 1) * size)
            .take(size)
            .cloned()
            .collect();
        Reply::Ok(json!({
            "TotalCount": 5,
            "PageNumber": number,
            "PageSize": size,
            "VSwitches": {"VSwitch": page},
        }))
    });
    mock.on("DescribeInstances", |call| {
        let page = match call.params.get("NextToken").map(String::as_str) {
            None => json!({"NextToken": "caeba0bbb2be03f84eb48b699f0a0001", "Instances": {"Instance": [instance("i-1"), instance("i-2")]}}),
            Some("caeba0bbb2be03f84eb48b699f0a0001") => json!({"NextToken": "caeba0bbb2be03f84eb48b699f0a0002", "Instances": {"Instance": [instance("i-3")]}}),
            Some(_) => json!({"NextToken": "", "Instances": {"Instance": [instance("i-4")]}}),
        };
        Reply::Ok(page)
    });
    let client = mock.client(AK, SECRET);

    let vswitches = client
        .pages(
            Product::Vpc,
            "DescribeVSwitches",
            &Params::new().with("RegionId", "cn-hangzhou"),
            "VSwitches.VSwitch",
            2,
        )
        .await
        .unwrap();
    let ids: Vec<&str> = vswitches
        .iter()
        .map(|v| v["VSwitchId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 5);
    assert_eq!(ids[4], "vsw-25bcdxs7pv10005");
    let pages: Vec<String> = mock
        .calls_to("DescribeVSwitches")
        .iter()
        .map(|c| c.params["PageNumber"].clone())
        .collect();
    assert_eq!(pages, ["1", "2", "3"]);

    let instances = client
        .pages_by_token(
            Product::Ecs,
            "DescribeInstances",
            &Params::new()
                .with("RegionId", "cn-hangzhou")
                .with("Tag.1.Key", "kubernetes.io/cluster/c1")
                .with("Tag.1.Value", "owned"),
            "Instances.Instance",
            Some(100),
        )
        .await
        .unwrap();
    let ids: Vec<&str> = instances
        .iter()
        .map(|v| v["InstanceId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["i-1", "i-2", "i-3", "i-4"]);
    let calls = mock.calls_to("DescribeInstances");
    assert_eq!(calls.len(), 3);
    assert!(
        calls.iter().all(|c| c.params["MaxResults"] == "100"
            && c.params["Tag.1.Key"] == "kubernetes.io/cluster/c1")
    );
    assert_eq!(
        calls[2].params["NextToken"],
        "caeba0bbb2be03f84eb48b699f0a0002"
    );
}

#[tokio::test]
async fn sts_keys_are_checked_against_their_token() {
    // A client holding an STS key without its token is refused, as Alibaba refuses it.
    let mock = Mock::start().await;
    mock.trust_role("acs:ram::1:role/r");
    mock.allow(AK, SECRET);
    let provider = mock.provider(Source::RamRoleArn {
        session: karpenter_alibaba::auth::credentials::RoleSession {
            role_arn: "acs:ram::1:role/r".into(),
            session_name: "karpenter".into(),
            duration_seconds: 3600,
            policy: None,
            sts_url: mock.url.clone(),
        },
        source: Box::new(Source::Static(Credentials::new(AK, SECRET))),
        external_id: None,
    });
    let mut issued = provider.get().await.unwrap();
    issued.security_token = None;
    let err = mock
        .client_with(mock.provider(Source::Static(issued)))
        .call(Product::Ecs, "DescribeRegions", &Params::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some("InvalidSecurityToken.MismatchWithAccessKey")
    );
}
