//! The providers this binary knows. Adding one is its crate plus a line here: in
//! [`PROVIDERS`] for what its pure part declares (NodeClass CRDs, catalog, conversions), and
//! in [`controllers!`] once it can run in the controller. Everything else — `crds`,
//! `validate`, `convert`, the catalogs of `simulate` and `plan`, `--cloud-provider` and its
//! settings — comes from these two lists.

use karpenter_api::crd::{self, Crd, GroupKind};
use karpenter_cloudprovider::{Catalog, Registration};

/// Declares the providers the controller can run: their settings, flattened into the
/// `controller` command, and the dispatch from `--cloud-provider` to the provider's type.
macro_rules! controllers {
    ($($name:ident: $provider:ty),* $(,)?) => {
        /// The names `--cloud-provider` takes.
        pub const CONTROLLERS: &[&str] = &[$(stringify!($name)),*];

        /// Every runnable provider's settings, under upstream's names.
        #[derive(Debug, clap::Args)]
        pub struct ProviderSettings {
            $(
                #[command(flatten)]
                #[allow(missing_docs)]
                $name: <$provider as karpenter_controller::Provider>::Settings,
            )*
        }

        /// Builds the provider named `name` from its settings and hands it to `command`.
        pub async fn with_provider<C: ProviderCommand>(
            name: &str,
            client: kube::Client,
            settings: ProviderSettings,
            command: C,
        ) -> anyhow::Result<C::Output> {
            match name {
                $(
                    stringify!($name) => {
                        let provider =
                            build::<$provider>(stringify!($name), client.clone(), settings.$name)
                                .await?;
                        command.run(client, provider).await
                    }
                )*
                other => anyhow::bail!(
                    "unknown cloud provider {other:?}; available: {}",
                    CONTROLLERS.join(", ")
                ),
            }
        }
    };
}

/// What a command does with the provider `--cloud-provider` names, whichever it is.
pub trait ProviderCommand {
    /// What the command gives back.
    type Output;

    /// Runs the command with `provider`, on the cluster `client` talks to.
    fn run<P: karpenter_controller::Provider>(
        self,
        client: kube::Client,
        provider: P,
    ) -> impl std::future::Future<Output = anyhow::Result<Self::Output>>;
}

/// Builds the provider named `name` from its settings.
async fn build<P: karpenter_controller::Provider>(
    name: &str,
    client: kube::Client,
    settings: P::Settings,
) -> anyhow::Result<P> {
    P::build(client, settings)
        .await
        .map_err(|e| anyhow::anyhow!("the {name} provider: {e}"))
}

/// Every provider, as its crate declares it.
pub const PROVIDERS: &[Registration] = &[
    karpenter_kwok::REGISTRATION,
    karpenter_aws::REGISTRATION,
    karpenter_azure::REGISTRATION,
    karpenter_alibaba::REGISTRATION,
    karpenter_huawei::REGISTRATION,
    karpenter_proxmox::REGISTRATION,
    karpenter_clusterapi::REGISTRATION,
];

// The providers the controller can run, by `--cloud-provider` name.
controllers! {
    kwok: karpenter_kwok::KwokProvider,
    aws: karpenter_aws::operator::AwsProvider,
    azure: karpenter_azure::operator::AzureProvider,
    alibaba: karpenter_alibaba::operator::AlibabaProvider,
    huawei: karpenter_huawei::operator::HuaweiProvider,
    proxmox: karpenter_proxmox::operator::ProxmoxProvider,
    clusterapi: karpenter_clusterapi::operator::ClusterApiProvider,
}

/// Every CRD this binary ships: karpenter's, then each provider's NodeClasses.
pub fn crds() -> Vec<Crd> {
    crd::CORE
        .into_iter()
        .chain(PROVIDERS.iter().flat_map(|p| p.crds.iter().copied()))
        .collect()
}

/// The NodeClass each provider's NodePools name, which `convert` infers providers from.
pub fn node_classes() -> Vec<GroupKind> {
    PROVIDERS.iter().map(|p| p.node_class).collect()
}

/// The names of the catalogs `simulate` and `plan` can launch from.
pub fn catalog_names() -> Vec<&'static str> {
    PROVIDERS
        .iter()
        .filter(|p| p.catalog.is_some())
        .map(|p| p.name)
        .collect()
}

/// A catalog name no provider has.
#[derive(Debug, thiserror::Error)]
#[error("unknown catalog {name:?}; available: {}", catalog_names().join(", "))]
pub struct UnknownCatalog {
    name: String,
}

/// The catalog of the provider named `name`.
pub fn catalog(name: &str) -> Result<Catalog, UnknownCatalog> {
    PROVIDERS
        .iter()
        .find(|p| p.name == name)
        .and_then(|p| p.catalog)
        .map(|load| load())
        .ok_or_else(|| UnknownCatalog { name: name.into() })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;

    #[test]
    fn providers_and_crds_are_unique() {
        let names: BTreeSet<&str> = PROVIDERS.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), PROVIDERS.len());
        let crds = crds();
        let kinds: BTreeSet<(&str, &str)> = crds.iter().map(|c| (c.group(), c.kind())).collect();
        assert_eq!(kinds.len(), crds.len());
        for name in CONTROLLERS {
            assert!(names.contains(name), "{name} runs but is not registered");
        }
        for p in PROVIDERS {
            for c in p.crds {
                assert_eq!(c.group(), p.node_class.group, "{}", p.name);
            }
        }
    }

    #[test]
    fn every_registered_catalog_loads() {
        for name in catalog_names() {
            let c = catalog(name).unwrap();
            assert_eq!(c.name, name);
            assert!(!c.instance_types.is_empty(), "{name}");
        }
        let e = catalog("nope").unwrap_err().to_string();
        assert!(e.contains("kwok") && e.contains("aws"), "{e}");
    }

    /// Every schema node says its type (the API server refuses non-structural CRDs), and
    /// every pattern compiles.
    #[test]
    fn schemas_are_structural() {
        fn walk(schema: &Value, path: &str, missing: &mut Vec<String>) {
            let Some(map) = schema.as_object() else {
                return;
            };
            let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
            // A free-form subtree (a NodeClass's kubelet values) may leave its type open.
            let free_form =
                map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            if !map.contains_key("type") && !int_or_string && !free_form {
                missing.push(path.to_string());
            }
            if let Some(Value::String(p)) = map.get("pattern")
                && let Err(e) = regex::Regex::new(p)
            {
                missing.push(format!("{path}: pattern {p}: {e}"));
            }
            if let Some(props) = map.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    walk(v, &format!("{path}.{k}"), missing);
                }
            }
            for key in ["items", "additionalProperties"] {
                if let Some(v) = map.get(key) {
                    walk(v, &format!("{path}[{key}]"), missing);
                }
            }
        }
        for crd in crds() {
            let mut missing = Vec::new();
            walk(&crd.schema(), crd.kind(), &mut missing);
            assert!(missing.is_empty(), "untyped schema nodes: {missing:?}");
        }
    }
}
