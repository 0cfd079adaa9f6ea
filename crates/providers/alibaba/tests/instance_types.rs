//! Instance types, availability and prices fetched from the in-process Alibaba endpoint, which
//! checks every signature, with the recorded answers of `tests/testdata/`: what is asked (the
//! parameters upstream sends), how pages are followed, what an error does, and the whole
//! refresh made into instance types.

mod support;

use std::collections::BTreeSet;

use karpenter_alibaba::catalog_api::{self, CatalogApiError};
use karpenter_alibaba::instancetype::{
    self, Cni, InstanceTypeOptions, InstanceTypesError, supported_types,
};
use karpenter_alibaba::pricing::PriceTable;
use serde_json::{Value, json};
use support::{Auth, FAST, Mock, Reply, http};

const AK: &str = "LTAI5tMockAccessKeyId";
const SECRET: &str = "mock-access-key-secret";

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

async fn mock() -> Mock {
    let mock = Mock::start().await;
    mock.allow(AK, SECRET);
    mock
}

/// `DescribeInstanceTypes` answering the two recorded pages by `NextToken`.
fn serve_instance_types(mock: &Mock) {
    let (first, second) = (
        fixture("describe-instance-types-1.json"),
        fixture("describe-instance-types-2.json"),
    );
    mock.on("DescribeInstanceTypes", move |call| {
        match call.params.get("NextToken").map(String::as_str) {
            None => Reply::Ok(first.clone()),
            Some("e71d8a535bd9cc11") => Reply::Ok(second.clone()),
            Some(_) => Reply::error(
                400,
                "InvalidParameter.NextToken",
                "The NextToken is invalid.",
            ),
        }
    });
}

/// `DescribeAvailableResource` answering on demand or spot by `SpotStrategy`.
fn serve_availability(mock: &Mock) {
    let (on_demand, spot) = (
        fixture("describe-available-resource-postpaid.json"),
        fixture("describe-available-resource-spot.json"),
    );
    mock.on("DescribeAvailableResource", move |call| {
        match call.params.get("SpotStrategy").map(String::as_str) {
            Some("SpotAsPriceGo") => Reply::Ok(spot.clone()),
            _ => Reply::Ok(on_demand.clone()),
        }
    });
}

#[tokio::test]
async fn instance_types_are_read_page_by_page() {
    let mock = mock().await;
    serve_instance_types(&mock);
    let client = mock.client(AK, SECRET);
    let types = catalog_api::describe_instance_types(&client).await.unwrap();
    assert_eq!(types.len(), 9);
    assert_eq!(types[0].instance_type_id, "ecs.g7.large");
    assert_eq!(types[8].instance_type_id, "ecs.g9i.large");
    let calls = mock.calls_to("DescribeInstanceTypes");
    assert_eq!(calls.len(), 2);
    for call in &calls {
        assert_eq!(call.auth, Auth::Acs3);
        assert_eq!(call.version, "2014-05-26");
        assert_eq!(
            call.params.get("MaxResults").map(String::as_str),
            Some("100")
        );
        assert!(
            !call.params.contains_key("RegionId"),
            "upstream asks without one: the endpoint is the region's"
        );
    }
    assert_eq!(
        calls[1].params.get("NextToken").map(String::as_str),
        Some("e71d8a535bd9cc11")
    );
    assert!(mock.refused().is_empty());
}

#[tokio::test]
async fn refusals_come_back_with_their_code() {
    let mock = mock().await;
    mock.on("DescribeInstanceTypes", |_| {
        Reply::error(
            403,
            "Forbidden.RAM",
            "User not authorized to operate on the specified resource, or this API doesn't support RAM.",
        )
    });
    let client = mock.client(AK, SECRET);
    let err = catalog_api::describe_instance_types(&client)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("Forbidden.RAM"));
    // A key ECS does not know never reaches the action.
    let err = catalog_api::describe_instance_types(&mock.client("LTAI5tUnknown", "x"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("InvalidAccessKeyId.NotFound"));
    assert_eq!(mock.refused(), ["InvalidAccessKeyId.NotFound"]);
}

#[tokio::test]
async fn availability_is_asked_on_demand_then_at_the_market_price() {
    let mock = mock().await;
    serve_availability(&mock);
    let client = mock.client(AK, SECRET);
    let availability = catalog_api::availability(&client).await.unwrap();
    let calls = mock.calls_to("DescribeAvailableResource");
    assert_eq!(calls.len(), 2);
    let param = |i: usize, k: &str| calls[i].params.get(k).cloned();
    for i in 0..2 {
        assert_eq!(param(i, "RegionId").as_deref(), Some("cn-hangzhou"));
        assert_eq!(
            param(i, "DestinationResource").as_deref(),
            Some("InstanceType")
        );
        assert_eq!(param(i, "InstanceChargeType").as_deref(), Some("PostPaid"));
    }
    assert_eq!(param(0, "SpotStrategy"), None);
    assert_eq!(param(1, "SpotStrategy").as_deref(), Some("SpotAsPriceGo"));
    assert_eq!(availability.on_demand.len(), 9);
    assert_eq!(
        availability.spot["ecs.g7.large"],
        BTreeSet::from(["cn-hangzhou-i".to_string()])
    );
}

#[tokio::test]
async fn an_answer_without_zones_fails_the_refresh() {
    let mock = mock().await;
    mock.reply(
        "DescribeAvailableResource",
        json!({"RequestId": "0041D94C-FB92-4C49-B115-259DA1C00009", "AvailableZones": {"AvailableZone": []}}),
    );
    let client = mock.client(AK, SECRET);
    let err = catalog_api::availability(&client).await.unwrap_err();
    assert!(
        matches!(
            &err,
            CatalogApiError::Availability(InstanceTypesError::NoZones { request_id })
                if request_id == "0041D94C-FB92-4C49-B115-259DA1C00009"
        ),
        "{err}"
    );
    assert_eq!(
        mock.calls_to("DescribeAvailableResource").len(),
        1,
        "spot is not asked once on demand failed"
    );
}

#[tokio::test]
async fn spot_history_is_read_by_offset() {
    let mock = mock().await;
    let (first, second) = (
        fixture("describe-spot-price-history-1.json"),
        fixture("describe-spot-price-history-2.json"),
    );
    mock.on("DescribeSpotPriceHistory", move |call| {
        match call.params.get("Offset").map(String::as_str) {
            None => Reply::Ok(first.clone()),
            Some("3") => Reply::Ok(second.clone()),
            Some(_) => Reply::Ok(json!({"Currency": "CNY", "SpotPrices": {"SpotPriceType": []}})),
        }
    });
    let client = mock.client(AK, SECRET);
    let (currency, records) = catalog_api::spot_price_history(&client, "ecs.g7.large")
        .await
        .unwrap();
    assert_eq!(currency.as_deref(), Some("CNY"));
    assert_eq!(records.len(), 5);
    let calls = mock.calls_to("DescribeSpotPriceHistory");
    assert_eq!(calls.len(), 2);
    for call in &calls {
        for (k, v) in [
            ("RegionId", "cn-hangzhou"),
            ("InstanceType", "ecs.g7.large"),
            ("NetworkType", "vpc"),
            ("OSType", "linux"),
        ] {
            assert_eq!(call.params.get(k).map(String::as_str), Some(v), "{k}");
        }
    }
    let mut table = PriceTable::embedded("cn-hangzhou");
    let spot = table.spot_from_history(currency.as_deref(), &records);
    table.update_spot("cn-hangzhou", spot).unwrap();
    assert_eq!(table.spot("ecs.g7.large", "cn-hangzhou-i"), Some(0.1046));
    assert_eq!(table.spot("ecs.g7.large", "cn-hangzhou-k"), Some(0.0983));
}

#[tokio::test]
async fn a_next_offset_that_does_not_move_ends_the_listing() {
    let mock = mock().await;
    mock.reply(
        "DescribeSpotPriceHistory",
        json!({"Currency": "CNY", "NextOffset": 0, "SpotPrices": {"SpotPriceType": [
            {"InstanceType": "ecs.g7.large", "ZoneId": "cn-hangzhou-i", "SpotPrice": 0.1, "OriginPrice": 0.52325, "Timestamp": "2024-10-09T06:00:00Z", "NetworkType": "vpc", "IoOptimized": "optimized"}
        ]}}),
    );
    let client = mock.client(AK, SECRET);
    let (_, records) = catalog_api::spot_price_history(&client, "ecs.g7.large")
        .await
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(mock.calls_to("DescribeSpotPriceHistory").len(), 1);
}

#[tokio::test]
async fn spot_histories_skip_the_types_ecs_refuses() {
    let mock = mock().await;
    let first = fixture("describe-spot-price-history-2.json");
    mock.on("DescribeSpotPriceHistory", move |call| {
        match call.params.get("InstanceType").map(String::as_str) {
            Some("ecs.g7.large") => Reply::Ok(first.clone()),
            _ => Reply::error(
                400,
                "InvalidInstanceType.ValueNotSupported",
                "The specified InstanceType does not exist or beyond the permitted range.",
            ),
        }
    });
    let client = mock.client(AK, SECRET);
    let history =
        catalog_api::spot_price_histories(&client, ["ecs.g7.large", "ecs.retired.large"]).await;
    assert_eq!(history.currency.as_deref(), Some("CNY"));
    assert_eq!(history.records.len(), 2);
    assert_eq!(history.failed.len(), 1);
    assert_eq!(history.failed[0].0, "ecs.retired.large");
    assert_eq!(
        history.failed[0].1.code(),
        Some("InvalidInstanceType.ValueNotSupported")
    );
}

#[tokio::test]
async fn prices_come_from_the_price_server() {
    let mock = mock().await;
    let body = std::fs::read_to_string(format!(
        "{}/tests/testdata/price-server-cn-hangzhou.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    mock.prices("cn-hangzhou", 200, &body);
    mock.prices("cn-shanghai", 503, "<html>Service Unavailable</html>");
    let prices = catalog_api::price_server(&http(), &mock.url, "cn-hangzhou", FAST)
        .await
        .unwrap();
    assert_eq!(prices.on_demand["ecs.g7.large"], 0.52325);
    assert_eq!(prices.spot["ecs.g7.large"]["cn-hangzhou-k"], 0.1201);

    let err = catalog_api::price_server(&http(), &mock.url, "cn-shanghai", FAST)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("HTTP 503"), "{err}");
    let err = catalog_api::price_server(&http(), &mock.url, "ap-nowhere-1", FAST)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no price info available for region ap-nowhere-1"
    );
    // The server's 503 is retried before giving up.
    let asked = mock.price_requests();
    assert_eq!(
        asked.iter().filter(|r| *r == "cn-shanghai").count(),
        FAST.attempts as usize
    );
}

/// The whole refresh, as the operator runs it, made into one NodeClass's instance types.
#[tokio::test]
async fn a_refresh_becomes_instance_types() {
    let mock = mock().await;
    serve_instance_types(&mock);
    serve_availability(&mock);
    let body = std::fs::read_to_string(format!(
        "{}/tests/testdata/price-server-cn-hangzhou.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    mock.prices("cn-hangzhou", 200, &body);
    let client = mock.client(AK, SECRET);

    let types = supported_types(
        catalog_api::describe_instance_types(&client).await.unwrap(),
        Cni::Terway,
    );
    let availability = catalog_api::availability(&client).await.unwrap();
    let mut prices = PriceTable::embedded("cn-hangzhou");
    let fresh = catalog_api::price_server(&http(), &mock.url, "cn-hangzhou", FAST)
        .await
        .unwrap();
    prices
        .update_on_demand("cn-hangzhou", fresh.on_demand)
        .unwrap();
    prices.update_spot("cn-hangzhou", fresh.spot).unwrap();

    let vswitch_zones = BTreeSet::from(["cn-hangzhou-h".to_string(), "cn-hangzhou-i".to_string()]);
    let options = InstanceTypeOptions {
        cni: Cni::Terway,
        ..InstanceTypeOptions::new("cn-hangzhou")
    };
    let built = instancetype::instance_types(
        &types,
        &availability,
        &vswitch_zones,
        &options,
        &prices,
        &|_, _, _| false,
    )
    .unwrap();
    let names: Vec<&str> = built.iter().map(|t| t.name.as_str()).collect();
    // Terway keeps five types; all are priced now that the server priced g9i.
    assert_eq!(
        names,
        [
            "ecs.g7.large",
            "ecs.c7.16xlarge",
            "ecs.g8y.large",
            "ecs.re6.52xlarge",
            "ecs.g9i.large"
        ]
    );
    let g7 = &built[0];
    let offered: Vec<(&str, &str, f64, bool)> = g7
        .offerings
        .iter()
        .map(|o| {
            (
                o.zone.as_str(),
                o.capacity_type.as_str(),
                o.price,
                o.available,
            )
        })
        .collect();
    assert_eq!(
        offered,
        [
            ("cn-hangzhou-h", "on-demand", 0.52325, true),
            ("cn-hangzhou-h", "spot", 0.0912, false),
            ("cn-hangzhou-i", "on-demand", 0.52325, true),
            ("cn-hangzhou-i", "spot", 0.1046, true),
            ("cn-hangzhou-k", "on-demand", 0.52325, false),
            ("cn-hangzhou-k", "spot", 0.1201, false),
        ]
    );
    // 15 Terway pods; 8192 MiB less the VM's 533 and ACK's 11 × 15 + 255 + 200.
    assert_eq!(g7.allocatable().pods, 15_000);
    assert_eq!(
        g7.allocatable().memory,
        (8192 - 533 - 620) * (1 << 20) * 1000
    );
    assert!(mock.refused().is_empty());
}
