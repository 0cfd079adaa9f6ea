//! On-demand prices from the AWS Price List API (`GetProducts`), which replace the embedded
//! list prices twice a day, as upstream refreshes them. Isolated VPCs, which cannot reach the
//! API, keep the embedded prices (`ISOLATED_VPC`).

use std::future::Future;

use serde_json::{Value, json};

use crate::ec2::Ec2Client;
use crate::http::{AwsError, Result};

/// Reads on-demand prices.
pub trait PriceList: Send + Sync + 'static {
    /// Linux, shared-tenancy on-demand prices of every instance type in the region.
    fn on_demand_prices(&self) -> impl Future<Output = Result<Vec<(String, f64)>>> + Send;
}

/// The `(instance type, USD per hour)` pairs of a `PriceList` page: each entry is a JSON
/// document (as a string) with the product's attributes and its on-demand terms.
pub fn parse_price_list(entries: &[Value]) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for entry in entries {
        let parsed: Value = match entry {
            Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
            other => other.clone(),
        };
        let Some(instance_type) = parsed["product"]["attributes"]["instanceType"].as_str() else {
            continue;
        };
        let price = parsed["terms"]["OnDemand"]
            .as_object()
            .into_iter()
            .flat_map(|terms| terms.values())
            .flat_map(|term| {
                term["priceDimensions"]
                    .as_object()
                    .into_iter()
                    .flat_map(|d| d.values())
            })
            .filter_map(|dimension| {
                dimension["pricePerUnit"]["USD"]
                    .as_str()?
                    .parse::<f64>()
                    .ok()
            })
            .find(|p| *p > 0.0);
        if let Some(price) = price {
            out.push((instance_type.to_string(), price));
        }
    }
    out
}

impl PriceList for Ec2Client {
    async fn on_demand_prices(&self) -> Result<Vec<(String, f64)>> {
        let region = self.http().endpoints.region.clone();
        let mut out = Vec::new();
        for family in ["Compute Instance", "Compute Instance (bare metal)"] {
            let mut token: Option<String> = None;
            loop {
                let filter = |field: &str, value: &str| json!({"Field": field, "Type": "TERM_MATCH", "Value": value});
                let mut body = json!({
                    "ServiceCode": "AmazonEC2",
                    "FormatVersion": "aws_v1",
                    "MaxResults": 100,
                    "Filters": [
                        filter("regionCode", &region),
                        filter("productFamily", family),
                        filter("tenancy", "Shared"),
                        filter("operatingSystem", "Linux"),
                        filter("preInstalledSw", "NA"),
                        filter("capacitystatus", "Used"),
                        filter("marketoption", "OnDemand"),
                    ],
                });
                if let Some(t) = &token {
                    body["NextToken"] = json!(t);
                }
                let bytes = self
                    .http()
                    .send(
                        "pricing",
                        "POST",
                        "/",
                        &[],
                        &[
                            ("content-type", "application/x-amz-json-1.1"),
                            ("x-amz-target", "AWSPriceListService.GetProducts"),
                        ],
                        body.to_string().into_bytes(),
                    )
                    .await?;
                let page: Value = serde_json::from_slice(&bytes)
                    .map_err(|e| AwsError::Parse(format!("GetProducts: {e}")))?;
                out.extend(parse_price_list(
                    page["PriceList"].as_array().map_or(&[][..], |a| a),
                ));
                token = page["NextToken"]
                    .as_str()
                    .filter(|t| !t.is_empty())
                    .map(str::to_string);
                if token.is_none() {
                    break;
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_from_price_list_documents() {
        let entry = json!({
            "product": {"productFamily": "Compute Instance", "attributes": {"instanceType": "m5.large", "regionCode": "us-east-1"}},
            "terms": {"OnDemand": {"ABC.JRTCKXETXF": {"priceDimensions": {"ABC.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "pricePerUnit": {"USD": "0.0960000000"}}}}}},
        })
        .to_string();
        let free = json!({"product": {"attributes": {"instanceType": "t9.free"}}, "terms": {"OnDemand": {"X": {"priceDimensions": {"Y": {"pricePerUnit": {"USD": "0.0000000000"}}}}}}}).to_string();
        let parsed = parse_price_list(&[
            Value::String(entry),
            Value::String(free),
            Value::String("{}".into()),
        ]);
        assert_eq!(parsed, vec![("m5.large".to_string(), 0.096)]);
    }
}
