//! The four NoCloud documents from the user's templates, as upstream's
//! `generateCloudInitVars` renders them.

use std::collections::BTreeMap;

use gtmpl::Value;

use super::defaults;
use super::template::{self, TemplateError};
use super::values::UserDataValues;

/// The templates Secret's key for `user-data`.
pub const USER_DATA_KEY: &str = "user-data";
/// The templates Secret's key for `meta-data`.
pub const META_DATA_KEY: &str = "meta-data";
/// The templates Secret's key for `vendor-data`.
pub const VENDOR_DATA_KEY: &str = "vendor-data";
/// The templates Secret's key for `network-config`.
pub const NETWORK_CONFIG_KEY: &str = "network-config";

/// The rendered NoCloud documents, what the `cidata` ISO carries ([`super::iso`]). An empty
/// `vendor_data` or `network_config` is left off the ISO.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoCloud {
    /// `user-data`.
    pub user_data: String,
    /// `meta-data`.
    pub meta_data: String,
    /// `vendor-data`; empty when the Secret has none.
    pub vendor_data: String,
    /// `network-config`.
    pub network_config: String,
}

/// Renders the NodeClass's templates (`metadataOptions.templatesRef`'s data, key → text) with
/// `values`:
///
/// * `user-data` ([`defaults::USER_DATA`] when missing or empty) with all of `values`;
/// * `meta-data` ([`defaults::META_DATA`] when missing or empty) and `vendor-data` (only
///   when present) with `values.metadata`;
/// * `network-config` ([`defaults::NETWORK_V2`] when missing or empty) with
///   `values.network`.
///
/// The first template that fails stops the rendering; the error names it.
pub fn render(
    templates: &BTreeMap<String, String>,
    values: &UserDataValues,
) -> Result<NoCloud, TemplateError> {
    let text = |key: &str, default: &'static str| -> String {
        match templates.get(key) {
            Some(t) if !t.is_empty() => t.clone(),
            _ => default.to_string(),
        }
    };
    let metadata = Value::from(&values.metadata);
    let user_data = template::execute(
        USER_DATA_KEY,
        &text(USER_DATA_KEY, defaults::USER_DATA),
        &Value::from(values),
    )?;
    let meta_data = template::execute(
        META_DATA_KEY,
        &text(META_DATA_KEY, defaults::META_DATA),
        &metadata,
    )?;
    let vendor_data = match templates.get(VENDOR_DATA_KEY) {
        Some(t) if !t.is_empty() => template::execute(VENDOR_DATA_KEY, t, &metadata)?,
        _ => String::new(),
    };
    let network_config = template::execute(
        NETWORK_CONFIG_KEY,
        &text(NETWORK_CONFIG_KEY, defaults::NETWORK_V2),
        &Value::from(&values.network),
    )?;
    Ok(NoCloud {
        user_data,
        meta_data,
        vendor_data,
        network_config,
    })
}
