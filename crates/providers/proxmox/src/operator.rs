//! How the `karpenter-rs controller` binary builds and runs the Proxmox provider: its settings,
//! under upstream's flag and environment names, and its own loops (the ProxmoxNodeClass and
//! template statuses).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use karpenter_cloudprovider::BoxError;
use karpenter_controller::Context;
use karpenter_controller::cloudprovider::{Provider, ProviderLoop};
use tokio_util::sync::CancellationToken;

use crate::capacity::NodeSettingsFile;
use crate::instancetype;
use crate::provider::{ProxmoxCloudProvider, ProxmoxOptions};
use crate::pve::{ClustersConfig, PvePool};
use crate::{nodeclass_status, template_status};

/// The provider as the controller runs it.
pub type ProxmoxProvider = ProxmoxCloudProvider;

pub use karpenter_cloudprovider::SettingsError;

/// The Proxmox provider's settings, under upstream's names.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ProxmoxSettings {
    /// The clusters' config file (`clusters:` with url, credentials and region each).
    #[arg(long = "cloud-config", env = "CLOUD_CONFIG", default_value = "")]
    pub cloud_config: String,
    /// A file of instance types of the operator's own; upstream's synthetic list when empty.
    #[arg(
        long = "instance-types-file",
        env = "INSTANCE_TYPES_FILE",
        default_value = ""
    )]
    pub instance_types_file: String,
    /// What each Proxmox node keeps for itself (CPUs, memory); 1 GiB of memory when empty.
    #[arg(
        long = "node-setting-file",
        env = "NODE_SETTING_FILE",
        default_value = ""
    )]
    pub node_setting_file: String,
    /// The lowest VM id a new node gets.
    #[arg(long = "proxmox-vmid", env = "PROXMOX_VMID", default_value_t = 20_000)]
    pub proxmox_vmid: u32,
    /// The namespace of `kube-root-ca.crt`, whose CA new nodes trust.
    #[arg(
        id = "proxmox_system_namespace",
        long = "proxmox-system-namespace",
        env = "SYSTEM_NAMESPACE",
        default_value = "kube-system"
    )]
    pub system_namespace: String,
}

impl ProxmoxSettings {
    /// The clusters and the provider's options, or the first setting at fault.
    pub fn load(&self) -> Result<(ClustersConfig, ProxmoxOptions), SettingsError> {
        if self.cloud_config.is_empty() {
            return Err(SettingsError::Missing("CLOUD_CONFIG"));
        }
        let invalid = |name: &'static str, reason: String| SettingsError::Invalid { name, reason };
        let config = ClustersConfig::from_file(&PathBuf::from(&self.cloud_config))
            .map_err(|e| invalid("CLOUD_CONFIG", e.to_string()))?;
        let mut options = ProxmoxOptions {
            min_vmid: self.proxmox_vmid,
            system_namespace: self.system_namespace.clone(),
            ..ProxmoxOptions::default()
        };
        if !self.instance_types_file.is_empty() {
            let text = std::fs::read_to_string(&self.instance_types_file).map_err(|e| {
                invalid(
                    "INSTANCE_TYPES_FILE",
                    format!("{}: {e}", self.instance_types_file),
                )
            })?;
            options.instance_types = instancetype::parse_file(&text)
                .map_err(|e| invalid("INSTANCE_TYPES_FILE", e.to_string()))?;
        }
        if !self.node_setting_file.is_empty() {
            let text = std::fs::read_to_string(&self.node_setting_file).map_err(|e| {
                invalid(
                    "NODE_SETTING_FILE",
                    format!("{}: {e}", self.node_setting_file),
                )
            })?;
            options.node_settings = Some(
                NodeSettingsFile::parse(&text)
                    .map_err(|e| invalid("NODE_SETTING_FILE", e.to_string()))?,
            );
        }
        Ok((config, options))
    }
}

impl Provider for ProxmoxProvider {
    type Settings = ProxmoxSettings;

    async fn build(client: kube::Client, settings: ProxmoxSettings) -> Result<Self, BoxError> {
        let (config, options) = settings.load()?;
        let clusters = PvePool::from_config(&config, Duration::from_secs(30))?;
        Ok(ProxmoxCloudProvider::new(clusters, client, options))
    }

    fn controllers(ctx: &Arc<Context<Self>>, shutdown: &CancellationToken) -> Vec<ProviderLoop> {
        vec![
            Box::pin(nodeclass_status::run(ctx.clone(), shutdown.clone())),
            Box::pin(template_status::run_unmanaged(
                ctx.clone(),
                shutdown.clone(),
            )),
            Box::pin(template_status::run_managed(ctx.clone(), shutdown.clone())),
            Box::pin(crate::inplace::run(ctx.clone(), shutdown.clone())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    #[test]
    fn settings_name_what_is_wrong() {
        let dir =
            std::env::temp_dir().join(format!("karpenter-proxmox-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = write(
            &dir,
            "config.yaml",
            "clusters:\n  - url: https://pve.example.com:8006/api2/json\n    token_id: kubernetes@pve!karpenter\n    token_secret: s\n    region: pve\n",
        );
        let settings = ProxmoxSettings {
            cloud_config: config.clone(),
            proxmox_vmid: 30_000,
            system_namespace: "kube-system".into(),
            ..Default::default()
        };
        let (clusters, options) = settings.load().unwrap();
        assert_eq!(clusters.regions(), ["pve"]);
        assert_eq!(options.min_vmid, 30_000);
        assert_eq!(
            options.instance_types.len(),
            instancetype::default_specs().len()
        );

        let bad_types = write(&dir, "types.json", "[{\"name\": \"x\"}]");
        let bad_config = write(
            &dir,
            "bad.yaml",
            "clusters:\n  - url: https://pve:8006/api2/json\n",
        );
        type Case = (ProxmoxSettings, &'static str);
        let cases: [Case; 4] = [
            (ProxmoxSettings::default(), "CLOUD_CONFIG must be set"),
            (
                ProxmoxSettings {
                    cloud_config: bad_config,
                    ..Default::default()
                },
                "CLOUD_CONFIG",
            ),
            (
                ProxmoxSettings {
                    cloud_config: dir.join("missing.yaml").display().to_string(),
                    ..Default::default()
                },
                "CLOUD_CONFIG",
            ),
            (
                ProxmoxSettings {
                    cloud_config: config,
                    instance_types_file: bad_types,
                    ..Default::default()
                },
                "INSTANCE_TYPES_FILE",
            ),
        ];
        for (s, want) in cases {
            let e = s.load().unwrap_err().to_string();
            assert!(e.contains(want), "{e} should name {want}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
