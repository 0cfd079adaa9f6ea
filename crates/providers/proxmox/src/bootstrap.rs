//! What a new VM boots with: the cloud-init CD-ROM rendered from the NodeClass's templates
//! Secret, with the values upstream passes (the VM's metadata and network, the cluster's
//! version and CA, a fresh bootstrap token, the kubelet settings, the values Secret), packed
//! as a NoCloud ISO. The bootstrap token's Secret is created in kube-system; it expires within
//! the hour and is removed with the node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use karpenter_api::NodeClaim;
use karpenter_cloudprovider::InstanceType;
use kube::Api;
use kube::api::{DeleteParams, PostParams};

use crate::apis::ProxmoxNodeClass;
use crate::cloudinit::bootstrap::{NAMESPACE, TOKEN_ANNOTATION, new_token};
use crate::cloudinit::values::{
    KubeletConfiguration, Kubernetes, MetaData, NetworkConfig, Resources, UserDataValues,
};
use crate::cloudinit::{iso, render as render_templates};
use crate::provider::{root_ca, secret_data};
use crate::pve::types::VmConfig;
use crate::templates::TemplateVm;

/// The VM a cloud-init CD-ROM is made for.
pub struct Request<'a> {
    /// The NodeClaim it becomes.
    pub claim: &'a NodeClaim,
    /// Its NodeClass.
    pub class: &'a ProxmoxNodeClass,
    /// Its type.
    pub instance_type: &'a InstanceType,
    /// Its Proxmox cluster.
    pub region: &'a str,
    /// Its Proxmox node.
    pub zone: &'a str,
    /// Its VM id.
    pub vmid: u32,
    /// The template it was cloned from.
    pub template: &'a TemplateVm,
}

/// The CD-ROM made for a VM: the ISO and the id of the bootstrap token it carries.
pub struct Rendered {
    /// The NoCloud ISO.
    pub iso: Vec<u8>,
    /// The bootstrap token's id (its Secret is `bootstrap-token-<id>`).
    pub token_id: String,
}

fn random_byte() -> impl FnMut() -> u8 {
    let rng = ring::rand::SystemRandom::new();
    move || {
        let mut b = [0u8; 1];
        ring::rand::SecureRandom::fill(&rng, &mut b).expect("the system's random source works");
        b[0]
    }
}

/// The VM's SMBIOS uuid (`smbios1: uuid=…`), which cloud-init and the kubelet read.
fn smbios_uuid(config: &VmConfig) -> String {
    config
        .get("smbios1")
        .and_then(|s| {
            s.split(',')
                .find_map(|p| p.strip_prefix("uuid=").map(str::to_string))
        })
        .unwrap_or_default()
}

/// Renders the CD-ROM of the VM `request` describes from its cloned `config`, creating its
/// bootstrap token. Errors name what is missing (the Secret, a template that fails).
pub async fn render(
    kube: &kube::Client,
    system_namespace: &str,
    request: &Request<'_>,
    config: &VmConfig,
) -> Result<Rendered, String> {
    let class = request.class;
    let options = &class.spec.metadata_options;
    let (name, namespace) = options
        .templates_secret()
        .ok_or("spec.metadataOptions.templatesRef: required when metadataOptions.type is cdrom")?;
    let templates = secret_data(kube, namespace, name).await?.ok_or_else(|| {
        format!("spec.metadataOptions.templatesRef: Secret {namespace}/{name} not found")
    })?;
    let values = match options.values_secret() {
        Some((name, namespace)) => secret_data(kube, namespace, name).await?.ok_or_else(|| {
            format!("spec.metadataOptions.valuesRef: Secret {namespace}/{name} not found")
        })?,
        None => BTreeMap::new(),
    };
    let version = kube
        .apiserver_version()
        .await
        .map_err(|e| format!("reading the cluster's version: {e}"))?
        .git_version;
    let root_ca = root_ca(kube, system_namespace).await?;
    let now = k8s_openapi::jiff::Timestamp::now();
    let (secret, token) = new_token(random_byte(), now);
    let token_id = token.split('.').next().unwrap_or_default().to_string();
    Api::<Secret>::namespaced(kube.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .map_err(|e| format!("creating the bootstrap token's Secret: {e}"))?;

    let it = request.instance_type;
    let provider_id = crate::provider_id::format(request.region, request.vmid);
    let kubelet = class
        .spec
        .kubelet_configuration
        .as_ref()
        .map(|k| k.to_json());
    let network = NetworkConfig::from_vm_config(
        config
            .0
            .keys()
            .filter_map(|k| Some((k.clone(), config.get(k)?))),
        &BTreeMap::new(),
    );
    let values = UserDataValues {
        metadata: MetaData {
            hostname: request.claim.metadata.name.clone().unwrap_or_default(),
            instance_id: request.vmid.to_string(),
            instance_uuid: smbios_uuid(config),
            instance_type: it.name.clone(),
            provider_id: provider_id.clone(),
            region: request.region.to_string(),
            zone: request.zone.to_string(),
            tags: class.spec.tags.clone(),
            node_class: class.metadata.name.clone().unwrap_or_default(),
        },
        network,
        resources: Resources::from_capacity(&it.capacity),
        kubernetes: Kubernetes {
            version,
            root_ca,
            bootstrap_token: token,
            kubelet_configuration: KubeletConfiguration::for_instance(
                kubelet.as_ref(),
                &it.overhead,
                &provider_id,
            ),
        },
        values,
    };
    let documents = render_templates(&templates, &values).map_err(|e| e.to_string())?;
    Ok(Rendered {
        iso: iso::nocloud_iso(&documents, now),
        token_id,
    })
}

/// Removes the bootstrap token of a VM's NodeClaim (by the annotation the create recorded);
/// one already gone, or not removable, is left to expire.
pub async fn forget(kube: &kube::Client, claim: &NodeClaim) {
    let Some(id) = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TOKEN_ANNOTATION))
    else {
        return;
    };
    let name = format!("bootstrap-token-{id}");
    if let Err(e) = Api::<Secret>::namespaced(kube.clone(), NAMESPACE)
        .delete(&name, &DeleteParams::default())
        .await
    {
        tracing::debug!(secret = %name, error = %e, "removing a bootstrap token");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smbios_uuid() {
        let config: VmConfig = serde_json::from_value(serde_json::json!({
            "smbios1": "uuid=5f2c6f2e-1d3b-4f5e-9a3c-0c1d2e3f4a5b,manufacturer=cHJveG1veA==",
        }))
        .unwrap();
        assert_eq!(smbios_uuid(&config), "5f2c6f2e-1d3b-4f5e-9a3c-0c1d2e3f4a5b");
        assert_eq!(smbios_uuid(&VmConfig::default()), "");
    }
}
