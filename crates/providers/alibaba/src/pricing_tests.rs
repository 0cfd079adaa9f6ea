//! Prices from the embedded table, the price server's recorded answer and recorded
//! `DescribeSpotPriceHistory` pages (`tests/testdata/`). Upstream's own test
//! (`pkg/providers/pricing/pricing_test.go`) asks the live price server for cn-beijing and
//! us-east-1 and checks `ecs.i2.xlarge` has a non-zero on-demand price and every spot price is
//! non-zero; the same checks run here on the embedded table and the recorded answer.

use super::*;

fn history(body: &str) -> SpotPriceHistoryPage {
    serde_json::from_str(body).expect("the fixture parses")
}

#[test]
fn the_embedded_table_has_upstreams_regions() {
    let regions = embedded_regions();
    assert_eq!(regions.len(), 27);
    for region in [
        "cn-hangzhou",
        "cn-beijing",
        "us-east-1",
        "eu-central-1",
        "ap-southeast-1",
    ] {
        assert!(regions.iter().any(|r| r == region), "{region}");
    }
    // Upstream's test case: ecs.i2.xlarge is priced in cn-beijing and us-east-1.
    for region in ["cn-beijing", "us-east-1"] {
        let table = PriceTable::embedded(region);
        assert!(
            table.on_demand("ecs.i2.xlarge").is_some_and(|p| p > 0.0),
            "{region}"
        );
    }
    let hangzhou = PriceTable::embedded("cn-hangzhou");
    assert_eq!(hangzhou.on_demand("ecs.g7.large"), Some(0.52325));
    assert_eq!(hangzhou.currency(), "CNY");
    // CNY everywhere: us-east-1 costs about what Hangzhou does, not a seventh of it.
    let virginia = PriceTable::embedded("us-east-1");
    assert_eq!(virginia.on_demand("ecs.g7.large"), Some(0.53578));
    // A region the table lacks uses cn-qingdao's prices.
    let unknown = PriceTable::embedded("cn-nowhere");
    assert_eq!(unknown, PriceTable::embedded(DEFAULT_PRICE_REGION));
    assert_eq!(unknown.on_demand("ecs.g6.large"), Some(0.5));
}

#[test]
fn spot_stands_in_as_on_demand_until_refreshed() {
    let mut table = PriceTable::embedded("cn-hangzhou");
    assert!(!table.spot_updated());
    assert_eq!(table.spot("ecs.g7.large", "cn-hangzhou-i"), Some(0.52325));
    assert_eq!(table.spot("ecs.g7.large", "anywhere"), Some(0.52325));
    assert_eq!(table.spot("ecs.nope.large", "cn-hangzhou-i"), None);

    let err = table.update_spot("cn-hangzhou", ZonalPriceMap::new());
    assert_eq!(err, Err(PricingError::NoPrices("cn-hangzhou".into())));
    assert!(!table.spot_updated(), "an empty refresh changes nothing");

    let refresh = |zone: &str, price: f64| -> ZonalPriceMap {
        [(
            "ecs.g7.large".to_string(),
            [(zone.to_string(), price)].into(),
        )]
        .into()
    };
    assert_eq!(
        table.update_spot("cn-hangzhou", refresh("cn-hangzhou-i", 0.1)),
        Ok(1)
    );
    assert!(table.spot_updated());
    assert_eq!(table.spot("ecs.g7.large", "cn-hangzhou-i"), Some(0.1));
    assert_eq!(table.spot("ecs.g7.large", "cn-hangzhou-k"), None);
    assert_eq!(
        table.spot("ecs.c7.large", "cn-hangzhou-i"),
        None,
        "after a refresh a type without zone prices has no spot price"
    );
    // Later refreshes merge: a zone not mentioned keeps its price.
    table
        .update_spot("cn-hangzhou", refresh("cn-hangzhou-k", 0.12))
        .unwrap();
    assert_eq!(table.spot("ecs.g7.large", "cn-hangzhou-i"), Some(0.1));
    assert_eq!(table.spot("ecs.g7.large", "cn-hangzhou-k"), Some(0.12));
    assert!(table.instance_types().contains("ecs.g7.large"));
}

#[test]
fn the_price_server_refreshes_both_kinds() {
    let body = include_bytes!("../tests/testdata/price-server-cn-hangzhou.json");
    let prices = parse_price_server(body, "cn-hangzhou").unwrap();
    assert_eq!(prices.on_demand.len(), 9);
    assert_eq!(prices.on_demand["ecs.t6-c1m1.large"], 0.0);
    assert_eq!(
        prices.spot["ecs.g7.large"],
        [
            ("cn-hangzhou-h".to_string(), 0.0912),
            ("cn-hangzhou-i".to_string(), 0.1046),
            ("cn-hangzhou-k".to_string(), 0.1201)
        ]
        .into()
    );
    // Upstream's checks: every spot price is non-zero.
    assert!(
        prices
            .spot
            .values()
            .flat_map(|z| z.values())
            .all(|p| *p > 0.0)
    );

    let mut table = PriceTable::embedded("cn-hangzhou");
    assert_eq!(
        table.update_on_demand("cn-hangzhou", prices.on_demand),
        Ok(8)
    );
    assert_eq!(table.on_demand("ecs.g9i.large"), Some(0.55));
    assert_eq!(
        table.on_demand("ecs.t6-c1m1.large"),
        None,
        "a zero is no price, not a free type"
    );
    assert_eq!(
        table.on_demand("ecs.c7.large"),
        None,
        "replaced, not merged"
    );
    table.update_spot("cn-hangzhou", prices.spot).unwrap();
    assert_eq!(
        table.spot("ecs.t6-c1m1.large", "cn-hangzhou-k"),
        Some(0.0236)
    );

    assert_eq!(
        parse_price_server(body, "cn-beijing"),
        Err(PricingError::NoPrices("cn-beijing".into()))
    );
    assert_eq!(
        parse_price_server(b"null", "cn-hangzhou"),
        Err(PricingError::NoPrices("cn-hangzhou".into())),
        "the server's answer for a region it does not know"
    );
    assert!(matches!(
        parse_price_server(b"<html>", "cn-hangzhou"),
        Err(PricingError::Parse(_))
    ));
    let mut unchanged = PriceTable::embedded("cn-hangzhou");
    assert_eq!(
        unchanged.update_on_demand("cn-hangzhou", [("ecs.g7.large".to_string(), 0.0)].into()),
        Err(PricingError::NoPrices("cn-hangzhou".into()))
    );
    assert_eq!(unchanged, PriceTable::embedded("cn-hangzhou"));
}

#[test]
fn spot_history_keeps_the_latest_price_of_each_zone() {
    let pages = [
        history(include_str!(
            "../tests/testdata/describe-spot-price-history-1.json"
        )),
        history(include_str!(
            "../tests/testdata/describe-spot-price-history-2.json"
        )),
    ];
    assert_eq!(pages[0].next_offset, Some(3));
    assert_eq!(pages[1].next_offset, None);
    assert_eq!(pages[0].currency.as_deref(), Some("CNY"));
    let records: Vec<SpotPriceRecord> = pages
        .iter()
        .flat_map(|p| p.spot_prices.spot_price_type.clone())
        .collect();
    let latest = latest_spot_prices(&records);
    let g7 = &latest["ecs.g7.large"];
    // i: 06:00 0.1112, 08:00 0.1046, 07:00 0.0951 (on the second page) — 08:00 wins.
    assert_eq!(g7["cn-hangzhou-i"].spot_price, 0.1046);
    assert_eq!(g7["cn-hangzhou-i"].timestamp, "2024-10-09T08:00:00Z");
    // k: 06:00 0.1046, 08:30 0.0983.
    assert_eq!(g7["cn-hangzhou-k"].spot_price, 0.0983);

    let mut table = PriceTable::embedded("cn-hangzhou");
    let spot = table.spot_from_history(Some("CNY"), &records);
    table.update_spot("cn-hangzhou", spot).unwrap();
    assert_eq!(table.spot("ecs.g7.large", "cn-hangzhou-i"), Some(0.1046));
    assert_eq!(table.spot("ecs.g7.large", "cn-hangzhou-k"), Some(0.0983));
    assert_eq!(table.spot("ecs.g7.large", "cn-hangzhou-h"), None);
}

#[test]
fn spot_history_in_another_currency_keeps_its_discount() {
    let page = history(include_str!(
        "../tests/testdata/describe-spot-price-history-usd.json"
    ));
    let records = page.spot_prices.spot_price_type;
    let table = PriceTable::embedded("us-east-1");
    // USD 0.0156 of USD 0.078 on demand is 20%: 20% of the table's CNY 0.53578.
    let spot = table.spot_from_history(page.currency.as_deref(), &records);
    let a = spot["ecs.g7.large"]["us-east-1a"];
    let b = spot["ecs.g7.large"]["us-east-1b"];
    assert!((a - 0.2 * 0.53578).abs() < 1e-9, "{a}");
    assert!((b - 0.3 * 0.53578).abs() < 1e-9, "{b}");
    // The same answer read as the table's currency is taken as is.
    let same = table.spot_from_history(Some("CNY"), &records);
    assert_eq!(same["ecs.g7.large"]["us-east-1a"], 0.0156);
    // No on-demand price to convert through: left out.
    let empty = PriceTable::new("CNY", PriceMap::new());
    assert!(empty.spot_from_history(Some("USD"), &records).is_empty());
}
