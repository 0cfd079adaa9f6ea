//! Upstream's pricing cases (`pkg/providers/pricing/pricing_test.go`) run through the pure
//! pieces — the request body, the answer parser, the "product not found" parser — joined by
//! the refresh the provider runs ([`rate`]: batches, drop a refused spec and ask again,
//! remember refused flavors; the table replaced).

use std::cell::RefCell;
use std::collections::BTreeSet;

use serde_json::json;

use super::*;

fn flavor(id: &str, name: &str) -> Flavor {
    Flavor {
        id: id.into(),
        name: name.into(),
        vcpus: "2".into(),
        ram: 4096,
        os_extra_specs: None,
    }
}

/// BSS's wrapped "product not found" error for `spec`, as upstream's test builds it.
fn not_found(spec: &str) -> (String, String) {
    (
        "CBC.99006006".into(),
        format!(
            r#"Product not found..cse://CSBBillingRatingService/rest/cbc/csbbillingratingservice/v2/inquiry/ondemand_resource[error_code]:CBC.6006[msg]:{{"error_code":"CBC.6006","error_msg":"Can not find product {spec}","error_list":[]}}"#
        ),
    )
}

fn answer(prices: &[(&str, f64)]) -> Vec<u8> {
    let results: Vec<Value> = prices
        .iter()
        .map(|(id, amount)| json!({"id": id, "amount": amount, "measure_id": 1}))
        .collect();
    serde_json::to_vec(&json!({"currency": "CNY", "product_rating_results": results})).unwrap()
}

type Bss<'a> = dyn FnMut(&Value) -> Result<Vec<u8>, (String, String)> + 'a;

/// [`rate`], with BSS played by `bss` (an answer's body, or a refusal's code and message),
/// the table made as the provider makes it; `Err` is the refusal's message.
fn refresh(
    region: &str,
    flavors: &[Flavor],
    unsupported: &mut BTreeSet<String>,
    bss: &mut Bss<'_>,
) -> Result<PriceTable, String> {
    let rated = rate(
        "project-id",
        region,
        flavors,
        unsupported,
        |request| {
            let answer = bss(&request).and_then(|body| {
                parse_ratings(&body).map_err(|e| ("parse".to_string(), e.to_string()))
            });
            std::future::ready(answer)
        },
        |(code, message): &(String, String)| unsupported_resource_spec(code, message),
    );
    let ratings = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(rated)
        .map_err(|(_, message)| message)?;
    Ok(PriceTable::from_ratings(region, ratings))
}

fn products(request: &Value) -> Vec<String> {
    request["product_infos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

/// Upstream's `TestUpdateOnDemandPricing`: the request's fields and the price read back.
#[test]
fn the_request_asks_for_an_hour_of_each_linux_spec() {
    let c6 = flavor("c6.large.2", "c6.large.2");
    let body = ratings_request("project-id", "cn-north-4", &[&c6]);
    assert_eq!(
        body,
        json!({
            "project_id": "project-id",
            "inquiry_precision": 1,
            "product_infos": [{
                "id": "c6.large.2",
                "cloud_service_type": "hws.service.type.ec2",
                "resource_type": "hws.resource.type.vm",
                "resource_spec": "c6.large.2.linux",
                "region": "cn-north-4",
                "usage_factor": "Duration",
                "usage_value": 1,
                "usage_measure_id": 4,
                "subscription_num": 1,
            }],
        })
    );
    let mut calls = 0;
    let table = refresh("cn-north-4", &[c6], &mut BTreeSet::new(), &mut |_| {
        calls += 1;
        Ok(answer(&[("c6.large.2", 0.42)]))
    })
    .unwrap();
    assert_eq!(calls, 1);
    assert_eq!(table.on_demand("c6.large.2"), Some(0.42));
    assert_eq!((table.region(), table.currency()), ("cn-north-4", "CNY"));
}

#[test]
fn specs_come_from_the_flavor_id() {
    assert_eq!(
        resource_spec(&flavor("c6.large.2", "c6.large.2")),
        "c6.large.2.linux"
    );
    assert_eq!(
        resource_spec(&flavor("c6.large.2.billing", "c6.large.2")),
        "c6.large.2.billing.linux"
    );
    assert_eq!(resource_spec(&flavor("", "c6.large.2")), "c6.large.2.linux");
}

/// Upstream's `TestUpdateOnDemandPricingSkipsUnsupportedProducts` and `…ByResourceSpec`: the
/// refused flavor is dropped, the rest asked again; the next refresh leaves it out. The
/// refusal names the spec (the flavor's id), the memory keeps the name.
#[test]
fn a_refused_spec_is_dropped_and_remembered() {
    for (bad_id, good_id) in [
        ("bad.large.1", "c6.large.2"),
        ("bad.large.1.billing", "c6.large.2.billing"),
    ] {
        let flavors = [flavor(bad_id, "bad.large.1"), flavor(good_id, "c6.large.2")];
        let bad_spec = format!("{bad_id}.linux");
        let mut unsupported = BTreeSet::new();
        let requests = RefCell::new(Vec::new());
        let mut bss = |request: &Value| {
            requests.borrow_mut().push(products(request));
            if products(request).len() == 2 {
                Err(not_found(&bad_spec))
            } else {
                Ok(answer(&[("c6.large.2", 0.42)]))
            }
        };
        let table = refresh("ap-southeast-3", &flavors, &mut unsupported, &mut bss).unwrap();
        assert_eq!(table.on_demand("bad.large.1"), None, "{bad_id}");
        assert_eq!(table.on_demand("c6.large.2"), Some(0.42), "{bad_id}");
        assert_eq!(
            *requests.borrow(),
            [vec!["bad.large.1", "c6.large.2"], vec!["c6.large.2"]],
            "{bad_id}"
        );
        assert_eq!(unsupported, BTreeSet::from(["bad.large.1".to_string()]));

        requests.borrow_mut().clear();
        refresh("ap-southeast-3", &flavors, &mut unsupported, &mut bss).unwrap();
        assert_eq!(
            *requests.borrow(),
            [vec!["c6.large.2"]],
            "{bad_id}: the second refresh skips it"
        );
    }
}

/// Upstream's `TestUpdateOnDemandPricingClearsCachedPriceWhenAllProductsUnsupported` and
/// `…WhenNoPriceReturned`: a refresh replaces the table, so a flavor no longer priced loses
/// its price; once every flavor is refused, BSS is not asked at all.
#[test]
fn a_refresh_replaces_the_table() {
    let flavors = [flavor("bad.large.1", "bad.large.1")];
    let mut unsupported = BTreeSet::new();
    let first = refresh("cn-north-4", &flavors, &mut unsupported, &mut |_| {
        Ok(answer(&[("bad.large.1", 0.42)]))
    })
    .unwrap();
    assert_eq!(first.on_demand("bad.large.1"), Some(0.42));

    let mut calls = 0;
    let second = refresh("cn-north-4", &flavors, &mut unsupported, &mut |_| {
        calls += 1;
        Err(not_found("bad.large.1.linux"))
    })
    .unwrap();
    assert_eq!(calls, 1);
    assert_eq!(second.on_demand("bad.large.1"), None);
    assert!(second.is_empty());

    let third = refresh("cn-north-4", &flavors, &mut unsupported, &mut |_| {
        panic!("nothing is left to price")
    })
    .unwrap();
    assert!(third.is_empty());

    let empty_answer = refresh(
        "cn-north-4",
        &[flavor("c6.large.2", "c6.large.2")],
        &mut BTreeSet::new(),
        &mut |_| Ok(b"{}".to_vec()),
    )
    .unwrap();
    assert_eq!(empty_answer.on_demand("c6.large.2"), None);
}

#[test]
fn other_refusals_stop_the_refresh() {
    let flavors = [flavor("c6.large.2", "c6.large.2")];
    let mut bss = |_: &Value| Err(("CBC.0150".to_string(), "Access denied.".to_string()));
    assert_eq!(
        refresh("cn-north-4", &flavors, &mut BTreeSet::new(), &mut bss),
        Err("Access denied.".to_string())
    );
    // Refused for a spec no flavor of the batch has: asking again would loop.
    let mut bss = |_: &Value| Err(not_found("other.large.2.linux"));
    assert!(refresh("cn-north-4", &flavors, &mut BTreeSet::new(), &mut bss).is_err());
}

#[test]
fn requests_hold_at_most_a_hundred_flavors_sorted_by_name() {
    let flavors: Vec<Flavor> = (0..250)
        .rev()
        .map(|i| {
            let name = format!("f{i:03}.large.2");
            flavor(&name, &name)
        })
        .collect();
    let to_price = flavors_to_price(&flavors, &BTreeSet::from(["f007.large.2".to_string()]));
    assert_eq!(to_price.len(), 249);
    let sizes: Vec<usize> = price_batches(&to_price).map(<[_]>::len).collect();
    assert_eq!(sizes, [100, 100, 49]);
    assert_eq!(to_price[0].name, "f000.large.2");
    assert_eq!(to_price[7].name, "f008.large.2");
}

/// Upstream's `TestUnsupportedProductResourceSpec*`.
#[test]
fn product_not_found_names_the_spec() {
    let (code, msg) = not_found("bad.large.1.linux");
    assert_eq!(
        unsupported_resource_spec(&code, &msg).as_deref(),
        Some("bad.large.1.linux")
    );
    // Unwrapped, with the inner code outside.
    assert_eq!(
        unsupported_resource_spec("CBC.6006", "Can not find product bad.large.1.linux").as_deref(),
        Some("bad.large.1.linux")
    );
    // The embedded payload decides: another inner code is another error.
    let wrapped_other =
        r#"Failed[msg]:{"error_code":"CBC.0100","error_msg":"Can not find product x.linux"}"#;
    assert_eq!(
        unsupported_resource_spec("CBC.99006006", wrapped_other),
        None
    );
    // A message without a code is no service error.
    assert_eq!(
        unsupported_resource_spec("", "Can not find product bad.large.1.linux"),
        None
    );
    assert_eq!(
        unsupported_resource_spec("CBC.6006", "Product not found"),
        None
    );

    let body = serde_json::to_vec(&json!({"error_code": code, "error_msg": msg})).unwrap();
    assert_eq!(
        unsupported_resource_spec_in_body(&body).as_deref(),
        Some("bad.large.1.linux")
    );
    assert_eq!(unsupported_resource_spec_in_body(b"<html>"), None);
}

/// Upstream's `TestProductResourceSpecFromMessageHandlesDelimitersWithoutGoto`.
#[test]
fn the_spec_ends_at_a_delimiter() {
    for (message, spec) in [
        (
            r#"Can not find product bad.large.1.linux""#,
            Some("bad.large.1.linux"),
        ),
        (
            r"Can not find product bad.large.1.linux\",
            Some("bad.large.1.linux"),
        ),
        (
            "Can not find product bad.large.1.linux,",
            Some("bad.large.1.linux"),
        ),
        (
            "Can not find product bad.large.1.linux]",
            Some("bad.large.1.linux"),
        ),
        (
            "Can not find product bad.large.1.linux ",
            Some("bad.large.1.linux"),
        ),
        (
            "prefix Can not find product bad.large.1",
            Some("bad.large.1"),
        ),
        ("Can not find product ", None),
        ("Can not find product \"", None),
        ("no product here", None),
    ] {
        assert_eq!(spec_in_message(message).as_deref(), spec, "{message:?}");
    }
}

#[test]
fn answers_read_amounts_as_upstream() {
    let body = br#"{
        "amount": 1.5, "discount_amount": 0.1, "official_website_amount": 1.6, "measure_id": 1,
        "currency": "USD",
        "product_rating_results": [
            {"id": "a", "product_id": "00301-1", "amount": 0.5, "official_website_amount": 0.6, "measure_id": 1},
            {"id": "b", "official_website_amount": 0.7},
            {"id": "c", "amount": "0.0801234567"},
            {"id": "d", "amount": 0},
            {"id": "e", "amount": -1},
            {"id": "f"},
            {"amount": 0.3}
        ]}"#;
    let ratings = parse_ratings(body).unwrap();
    assert_eq!(ratings.currency, "USD");
    let prices: Vec<(&str, f64)> = ratings
        .prices
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(prices, [("a", 0.5), ("b", 0.7), ("c", 0.080_123_456_7)]);
    assert_eq!(
        parse_ratings(br#"{"product_rating_results": []}"#)
            .unwrap()
            .currency,
        "CNY"
    );
    assert!(matches!(
        parse_ratings(b"<html>"),
        Err(PricingError::Parse(_))
    ));

    let mut merged = Ratings::default();
    merged.merge(parse_ratings(body).unwrap());
    merged.merge(Ratings {
        currency: "USD".into(),
        prices: [("a".to_string(), 0.55)].into(),
    });
    assert_eq!(merged.prices["a"], 0.55);
    assert_eq!(merged.currency, "USD");
}

#[test]
fn tables_hold_only_real_prices() {
    let table = PriceTable::new(
        "cn-north-4",
        "CNY",
        [
            ("a".to_string(), 0.5),
            ("zero".to_string(), 0.0),
            ("negative".to_string(), -1.0),
            ("nan".to_string(), f64::NAN),
            ("inf".to_string(), f64::INFINITY),
        ],
    );
    assert_eq!(table.flavors().collect::<Vec<_>>(), ["a"]);
    assert_eq!(table.on_demand_or_missing("a"), 0.5);
    assert_eq!(table.on_demand_or_missing("zero"), MISSING_PRICE);
}

#[test]
fn the_embedded_table_is_cn_north_4_in_cny() {
    let table = PriceTable::embedded("cn-north-4");
    assert_eq!((table.region(), table.currency()), ("cn-north-4", "CNY"));
    assert_eq!(table.len(), 33);
    assert_eq!(table.on_demand("c9.large.4"), Some(0.52325));
    assert_eq!(table.on_demand("kc1.large.2"), Some(0.266933));
    // Another region gets no stand-in prices.
    let elsewhere = PriceTable::embedded("ap-southeast-3");
    assert!(elsewhere.is_empty());
    assert_eq!(elsewhere.region(), "ap-southeast-3");
    assert_eq!(elsewhere.on_demand_or_missing("c9.large.4"), MISSING_PRICE);
}
