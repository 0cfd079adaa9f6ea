//! The management cluster: where the MachineDeployments and Machines live, which may be the
//! cluster Karpenter runs in or another one (upstream's settings: a kubeconfig, or a URL with a
//! bearer token and CA). It speaks `cluster.x-k8s.io/v1beta2` where the cluster serves it and
//! `v1beta1` otherwise, and reads and writes only what the provider needs: MachineDeployments
//! (listed, and scaled through their `scale` subresource with the resourceVersion read, never
//! replaced), MachineSets (read) and Machines (listed, read, patched with the resourceVersion
//! read).

use std::path::PathBuf;

use base64::Engine;
use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::capi::{
    CAPI_GROUP, DEPLOYMENT_NAME_LABEL, MEMBER_LABEL, Machine, MachineDeployment, MachineSet,
    Version,
};

/// Why a call to the management cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum ManagementError {
    /// The API refused or failed.
    #[error("management cluster: {0}")]
    Kube(#[from] kube::Error),
    /// The cluster serves neither Cluster API version.
    #[error(
        "management cluster serves {CAPI_GROUP} at {served:?}, neither v1beta1 nor v1beta2 (is Cluster API installed?)"
    )]
    NotServed {
        /// What it serves.
        served: Vec<String>,
    },
    /// An object did not read as the Cluster API type.
    #[error("management cluster: {kind} {name}: {error}")]
    Parse {
        /// The kind.
        kind: &'static str,
        /// `namespace/name`.
        name: String,
        /// What did not read.
        error: String,
    },
}

impl ManagementError {
    /// A write that lost to another (409).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kube(kube::Error::Api(s)) if s.code == 409)
    }

    /// An object that is not there (404).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Kube(kube::Error::Api(s)) if s.code == 404)
    }
}

type Result<T> = std::result::Result<T, ManagementError>;

fn resource(version: Version, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(CAPI_GROUP, version.as_str(), kind),
        plural,
    )
}

fn parse<T: DeserializeOwned>(kind: &'static str, object: DynamicObject) -> Result<T> {
    let name = crate::capi::key(&object.metadata);
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| ManagementError::Parse {
            kind,
            name,
            error: e.to_string(),
        })
}

/// The management cluster's Cluster API objects.
#[derive(Clone)]
pub struct Management {
    client: kube::Client,
    version: Version,
    machine_deployments: ApiResource,
    machine_sets: ApiResource,
    machines: ApiResource,
}

impl Management {
    /// The Cluster API objects `client` reaches, at `version`.
    pub fn new(client: kube::Client, version: Version) -> Self {
        Self {
            machine_deployments: resource(version, "MachineDeployment", "machinedeployments"),
            machine_sets: resource(version, "MachineSet", "machinesets"),
            machines: resource(version, "Machine", "machines"),
            client,
            version,
        }
    }

    /// The Cluster API objects `client` reaches, at the newest version it serves.
    pub async fn discover(client: kube::Client) -> Result<Self> {
        let request = http::Request::get(format!("/apis/{CAPI_GROUP}"))
            .body(Vec::new())
            .map_err(|e| kube::Error::BuildRequest(kube::core::request::Error::BuildRequest(e)))?;
        let group: Value = client.request(request).await?;
        let served: Vec<String> = group["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["version"].as_str().map(str::to_string))
            .collect();
        let version = Version::choose(&served).ok_or(ManagementError::NotServed { served })?;
        Ok(Self::new(client, version))
    }

    /// The Cluster API version spoken.
    pub fn version(&self) -> Version {
        self.version
    }

    fn api(&self, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        }
    }

    /// Every MachineDeployment labelled a member, in every namespace.
    pub async fn machine_deployments(&self) -> Result<Vec<MachineDeployment>> {
        let listed = self
            .api(&self.machine_deployments, None)
            .list(&ListParams::default().labels(MEMBER_LABEL))
            .await?;
        listed
            .items
            .into_iter()
            .map(|o| parse("MachineDeployment", o))
            .collect()
    }

    /// One MachineDeployment, if it exists.
    pub async fn machine_deployment(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<MachineDeployment>> {
        let found = self
            .api(&self.machine_deployments, Some(namespace))
            .get_opt(name)
            .await?;
        found.map(|o| parse("MachineDeployment", o)).transpose()
    }

    /// One MachineSet, if it exists.
    pub async fn machine_set(&self, namespace: &str, name: &str) -> Result<Option<MachineSet>> {
        let found = self
            .api(&self.machine_sets, Some(namespace))
            .get_opt(name)
            .await?;
        found.map(|o| parse("MachineSet", o)).transpose()
    }

    /// A MachineDeployment's desired replicas and the resourceVersion they were read at.
    pub async fn scale(&self, namespace: &str, name: &str) -> Result<(i32, String)> {
        let scale = self
            .api(&self.machine_deployments, Some(namespace))
            .get_scale(name)
            .await?;
        let replicas = scale.spec.and_then(|s| s.replicas).unwrap_or(0);
        Ok((
            replicas,
            scale.metadata.resource_version.unwrap_or_default(),
        ))
    }

    /// Sets a MachineDeployment's desired replicas, refused (409) when it changed since
    /// `resource_version`.
    pub async fn set_scale(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
        resource_version: &str,
    ) -> Result<()> {
        let scale = Scale {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                resource_version: Some(resource_version.to_string()),
                ..Default::default()
            },
            spec: Some(ScaleSpec {
                replicas: Some(replicas),
            }),
            status: None,
        };
        self.api(&self.machine_deployments, Some(namespace))
            .replace_scale(name, &PostParams::default(), &scale)
            .await?;
        Ok(())
    }

    /// The Machines a label selector selects, in one namespace or all.
    pub async fn machines(&self, namespace: Option<&str>, selector: &str) -> Result<Vec<Machine>> {
        let listed = self
            .api(&self.machines, namespace)
            .list(&ListParams::default().labels(selector))
            .await?;
        listed
            .items
            .into_iter()
            .map(|o| parse("Machine", o))
            .collect()
    }

    /// The Machines of a MachineDeployment.
    pub async fn machines_of(
        &self,
        namespace: &str,
        machine_deployment: &str,
    ) -> Result<Vec<Machine>> {
        self.machines(
            Some(namespace),
            &format!("{DEPLOYMENT_NAME_LABEL}={machine_deployment}"),
        )
        .await
    }

    /// One Machine, if it exists.
    pub async fn machine(&self, namespace: &str, name: &str) -> Result<Option<Machine>> {
        let found = self
            .api(&self.machines, Some(namespace))
            .get_opt(name)
            .await?;
        found.map(|o| parse("Machine", o)).transpose()
    }

    /// Merge-patches a Machine (a `metadata.resourceVersion` in the patch makes it conditional).
    pub async fn patch_machine(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Machine> {
        let patched = self
            .api(&self.machines, Some(namespace))
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        parse("Machine", patched)
    }
}

/// How to reach the management cluster, from upstream's settings: a kubeconfig file wins, then
/// a URL (with a bearer token, a CA, or TLS verification skipped), else the cluster Karpenter
/// runs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// The cluster Karpenter runs in (its own client).
    Workload,
    /// A kubeconfig file (`CLUSTER_API_KUBECONFIG`).
    Kubeconfig(PathBuf),
    /// A URL (`CLUSTER_API_URL`) with its credentials.
    Url {
        /// The API server's URL.
        url: String,
        /// A bearer token (`CLUSTER_API_TOKEN`); empty for none.
        token: String,
        /// The CA bundle, base64-encoded PEM as a kubeconfig holds it; `None` trusts the
        /// system's roots.
        ca: Option<String>,
        /// Skip verifying the server's certificate (`CLUSTER_API_SKIP_TLS_VERIFY`).
        insecure: bool,
    },
}

/// The CA data as a kubeconfig holds it (base64 of PEM), given PEM (as upstream passes it to
/// client-go) or base64 of PEM (as a kubeconfig's `certificate-authority-data`).
pub fn ca_data(value: &str) -> std::result::Result<String, String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let value = value.trim();
    if value.contains("-----BEGIN") {
        return Ok(b64.encode(format!("{value}\n")));
    }
    let compact: String = value.split_whitespace().collect();
    match b64.decode(&compact) {
        Ok(pem) if String::from_utf8_lossy(&pem).contains("-----BEGIN") => Ok(compact),
        _ => Err("neither a PEM certificate bundle nor base64 of one".into()),
    }
}

/// The kubeconfig `Access::Url` stands for.
pub fn url_kubeconfig(url: &str, token: &str, ca: Option<&str>, insecure: bool) -> Value {
    let mut cluster = json!({"server": url});
    if let Some(ca) = ca {
        cluster["certificate-authority-data"] = json!(ca);
    }
    if insecure {
        cluster["insecure-skip-tls-verify"] = json!(true);
    }
    let mut user = json!({});
    if !token.is_empty() {
        user["token"] = json!(token);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "management", "cluster": cluster}],
        "users": [{"name": "karpenter", "user": user}],
        "contexts": [{"name": "management", "context": {"cluster": "management", "user": "karpenter"}}],
        "current-context": "management",
    })
}

/// The client configuration for `access`; `None` for [`Access::Workload`].
pub async fn config(access: &Access) -> std::result::Result<Option<kube::Config>, String> {
    let kubeconfig = match access {
        Access::Workload => return Ok(None),
        Access::Kubeconfig(path) => Kubeconfig::read_from(path)
            .map_err(|e| format!("CLUSTER_API_KUBECONFIG {}: {e}", path.display()))?,
        Access::Url {
            url,
            token,
            ca,
            insecure,
        } => {
            Kubeconfig::from_yaml(&url_kubeconfig(url, token, ca.as_deref(), *insecure).to_string())
                .map_err(|e| format!("CLUSTER_API_URL {url}: {e}"))?
        }
    };
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map(Some)
        .map_err(|e| format!("the management cluster's client configuration: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUKarpenterRsTestOnlyNotARealCertificate0wCgYI\n-----END CERTIFICATE-----\n";

    #[test]
    fn ca_data_as_pem_or_base64() {
        let b64 = base64::engine::general_purpose::STANDARD.encode(PEM);
        assert_eq!(ca_data(PEM).unwrap(), b64);
        assert_eq!(ca_data(&b64).unwrap(), b64);
        // Wrapped like a kubeconfig's, still read.
        let wrapped = format!("{}\n{}", &b64[..40], &b64[40..]);
        assert_eq!(ca_data(&wrapped).unwrap(), b64);
        assert!(ca_data("not a certificate").is_err());
        let not_pem = base64::engine::general_purpose::STANDARD.encode("plain text");
        assert!(ca_data(&not_pem).is_err());
    }

    #[tokio::test]
    async fn a_url_token_and_ca_make_a_client_configuration() {
        let access = Access::Url {
            url: "https://management.example:6443".into(),
            token: "t0ken".into(),
            ca: Some(ca_data(PEM).unwrap()),
            insecure: false,
        };
        let c = config(&access).await.unwrap().unwrap();
        assert_eq!(
            c.cluster_url.to_string(),
            "https://management.example:6443/"
        );
        assert_eq!(c.root_cert.as_ref().map(Vec::len), Some(1));
        assert!(!c.accept_invalid_certs);
        assert!(c.auth_info.token.is_some());

        let access = Access::Url {
            url: "https://10.0.0.1:6443".into(),
            token: String::new(),
            ca: None,
            insecure: true,
        };
        let c = config(&access).await.unwrap().unwrap();
        assert!(c.accept_invalid_certs);
        assert!(c.root_cert.is_none() && c.auth_info.token.is_none());

        assert_eq!(config(&Access::Workload).await.unwrap().map(|_| ()), None);
        let missing = Access::Kubeconfig("/nonexistent/mgmt.kubeconfig".into());
        let e = config(&missing).await.unwrap_err();
        assert!(
            e.contains("CLUSTER_API_KUBECONFIG /nonexistent/mgmt.kubeconfig"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_kubeconfig_file_is_read() {
        let dir = std::env::temp_dir().join(format!("capi-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mgmt.kubeconfig");
        let kubeconfig = url_kubeconfig("https://mgmt:6443", "abc", None, false);
        std::fs::write(&path, kubeconfig.to_string()).unwrap();
        let c = config(&Access::Kubeconfig(path)).await.unwrap().unwrap();
        assert_eq!(c.cluster_url.to_string(), "https://mgmt:6443/");
        assert!(c.auth_info.token.is_some());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
