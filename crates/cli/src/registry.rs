//! The providers this binary knows. Adding one is its crate plus lines here: in
//! [`PROVIDERS`] for what its pure part declares (NodeClass CRDs, catalog, conversions), in
//! [`LABEL_DOMAINS`] for the label domains it reserves, and in [`controllers!`] once it can
//! run in the controller. Everything else — `crds`, `validate`, `convert`, the catalogs of
//! `simulate` and `plan`, `--cloud-provider` and its settings — comes from these lists.

use std::sync::LazyLock;

use karpenter_api::crd::{self, Crd, GroupKind, RestrictedLabelDomain};
use karpenter_cloudprovider::{Catalog, Registration};
use serde_json::Value;

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

/// The label domains each provider reserves, in the order of [`PROVIDERS`]: karpenter's
/// NodePool, NodeClaim and NodeOverlay CRDs restrict them to the provider's well-known keys,
/// as each provider's upstream patches karpenter's CRDs.
pub const LABEL_DOMAINS: &[&[RestrictedLabelDomain]] = &[
    karpenter_kwok::LABEL_DOMAINS,
    karpenter_aws::LABEL_DOMAINS,
    karpenter_azure::LABEL_DOMAINS,
    karpenter_alibaba::LABEL_DOMAINS,
    karpenter_huawei::LABEL_DOMAINS,
    karpenter_proxmox::LABEL_DOMAINS,
    karpenter_clusterapi::LABEL_DOMAINS,
];

/// Every provider's restricted label domains, in one list.
pub fn label_domains() -> &'static [RestrictedLabelDomain] {
    static ALL: LazyLock<Vec<RestrictedLabelDomain>> = LazyLock::new(|| {
        LABEL_DOMAINS
            .iter()
            .flat_map(|d| d.iter().copied())
            .collect()
    });
    &ALL
}

/// Every CRD this binary ships: karpenter's, with every provider's restricted label domains,
/// then each provider's NodeClasses.
pub fn crds() -> Vec<Crd> {
    crd::core_with_label_domains(label_domains())
        .into_iter()
        .chain(PROVIDERS.iter().flat_map(|p| p.crds.iter().copied()))
        .collect()
}

/// The NodeClass each provider's NodePools name, which `convert` infers providers from.
pub fn node_classes() -> Vec<GroupKind> {
    PROVIDERS.iter().map(|p| p.node_class).collect()
}

/// The static drift of `claim` from `class` (a NodeClass written as JSON), asked of the
/// provider whose group and kind it has; `None` for another kind or none of the provider's.
pub fn node_class_drift(class: &Value, claim: &karpenter_api::NodeClaim) -> Option<&'static str> {
    let group = class.get("apiVersion")?.as_str()?.split('/').next()?;
    let kind = class.get("kind")?.as_str()?;
    PROVIDERS
        .iter()
        .find(|p| p.node_class.group == group && p.node_class.kind == kind)?
        .static_drift?(class, claim)
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
        .and_then(|p| p.catalog.map(|load| load().with_node_class(p.node_class)))
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

    /// Every provider reserves the domain of its NodeClass group, with the NodeClass label
    /// karpenter puts on NodeClaims among the keys it allows, and every allowed key lies in
    /// its domain; so karpenter's own NodeClaims pass the rules.
    #[test]
    fn every_provider_restricts_its_label_domain() {
        assert_eq!(LABEL_DOMAINS.len(), PROVIDERS.len());
        for (p, domains) in PROVIDERS.iter().zip(LABEL_DOMAINS) {
            let group = p.node_class.group;
            let own = domains
                .iter()
                .find(|d| d.domain == group)
                .unwrap_or_else(|| panic!("{} does not restrict {group}", p.name));
            let class_label = karpenter_api::labels::node_class_label_key(group, p.node_class.kind);
            assert!(own.allows(&class_label), "{}: {class_label}", p.name);
            for d in *domains {
                for key in d.keys.iter().chain(d.overlay_keys.unwrap_or_default()) {
                    assert!(d.contains(key), "{}: {key} is not in {}", p.name, d.domain);
                }
            }
        }
        // A pod may require any label a catalog's instance types carry, and the NodeClaim
        // made for it repeats the requirement: the NodeClaim rules must allow it.
        for (p, domains) in PROVIDERS.iter().zip(LABEL_DOMAINS) {
            let Some(load) = p.catalog else { continue };
            for label in load().provider_labels {
                for d in *domains {
                    assert!(
                        d.allows(&label),
                        "{}: {label} is refused by {}",
                        p.name,
                        d.domain
                    );
                }
            }
        }
        let crds = crds();
        let node_pool = crds.iter().find(|c| c.kind() == "NodePool").unwrap();
        assert_eq!(node_pool.label_domains(), label_domains());
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
