//! In-place updates, as upstream's: a ProxmoxNodeClass's tags, security groups and resource
//! pool are outside its hash, so changing them replaces no node; the running VMs of its
//! NodeClaims follow instead. A NodeClaim records what its VM has in two of upstream's
//! annotations (the in-place hash and the pool), so upstream's nodes are recognised and a VM
//! is only touched when they differ.
//!
//! [`needed`] (pure) says what one NodeClaim's VM should become; with the `cloud` feature,
//! `apply` makes it so over the PVE API and `run` keeps every ProxmoxNodeClass's VMs current.

use karpenter_api::NodeClaim;

use crate::apis::{
    ANNOTATION_NODE_CLASS_POOL, ANNOTATION_NODE_IN_PLACE_UPDATE_HASH, ProxmoxNodeClass,
};
use crate::provider_id;
use crate::pve::types::{FirewallRule, split_tags};

/// The tag every VM this provider makes carries, so listing finds them (and never a VM it did
/// not make).
pub const MARKER_TAG: &str = "karpenter";

/// The tags of a VM of `class`: the class's, and the marker the provider lists its VMs by;
/// sorted, each once (PVE sorts them too).
pub fn vm_tags(class: &ProxmoxNodeClass) -> Vec<String> {
    let mut tags: Vec<String> = class.spec.tags.clone();
    tags.push(MARKER_TAG.to_string());
    tags.sort();
    tags.dedup();
    tags
}

/// The security groups of `class` as the VM's firewall rules: one enabled `group` rule per
/// group, in the spec's order.
pub fn firewall_rules(class: &ProxmoxNodeClass) -> Vec<FirewallRule> {
    class
        .spec
        .security_groups
        .iter()
        .enumerate()
        .map(|(pos, g)| FirewallRule {
            pos: Some(u32::try_from(pos).unwrap_or(u32::MAX)),
            kind: "group".into(),
            action: g.name.clone(),
            enable: true,
            iface: g.interface.clone(),
            ..Default::default()
        })
        .collect()
}

/// The annotations a NodeClaim of `class` is launched with, so it is not updated again.
pub fn launch_annotations(class: &ProxmoxNodeClass) -> [(String, String); 2] {
    [
        (
            ANNOTATION_NODE_IN_PLACE_UPDATE_HASH.to_string(),
            class.in_place_hash(),
        ),
        (
            ANNOTATION_NODE_CLASS_POOL.to_string(),
            class.spec.resource_pool.clone().unwrap_or_default(),
        ),
    ]
}

/// What one VM is to become.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InPlaceUpdate {
    /// The NodeClaim's name.
    pub claim: String,
    /// The Proxmox cluster.
    pub region: String,
    /// The Proxmox node (the claim's zone label).
    pub zone: String,
    /// The VM.
    pub vmid: u32,
    /// The class's in-place hash, recorded on the claim once applied.
    pub hash: String,
    /// The tags the VM is to have.
    pub tags: Vec<String>,
    /// The firewall rules the VM is to have, in order.
    pub rules: Vec<FirewallRule>,
    /// The pool the VM is to be in; none when empty.
    pub pool: String,
    /// The pool the claim recorded, to leave when it is another.
    pub old_pool: String,
}

/// What `claim`'s VM is to become for `class`, or `None` when nothing is to change: the claim
/// is not launched yet or is going, its providerID is not a Proxmox one, or it records the
/// class's in-place hash already.
pub fn needed(claim: &NodeClaim, class: &ProxmoxNodeClass) -> Option<InPlaceUpdate> {
    if claim.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let id = claim.status.as_ref()?.provider_id.as_deref()?;
    let (region, vmid) = provider_id::parse(id)?;
    let annotations = claim.metadata.annotations.clone().unwrap_or_default();
    let hash = class.in_place_hash();
    if annotations.get(ANNOTATION_NODE_IN_PLACE_UPDATE_HASH) == Some(&hash) {
        return None;
    }
    let zone = claim
        .metadata
        .labels
        .as_ref()?
        .get(karpenter_api::labels::ZONE_LABEL)?
        .clone();
    Some(InPlaceUpdate {
        claim: claim.metadata.name.clone().unwrap_or_default(),
        region: region.to_string(),
        zone,
        vmid,
        hash,
        tags: vm_tags(class),
        rules: firewall_rules(class),
        pool: class.spec.resource_pool.clone().unwrap_or_default(),
        old_pool: annotations
            .get(ANNOTATION_NODE_CLASS_POOL)
            .cloned()
            .unwrap_or_default(),
    })
}

/// The new `tags` value for a VM tagged `current`, or `None` when it has them already. Tags
/// the VM has besides the class's are dropped, as upstream does.
pub fn tags_change(current: &str, wanted: &[String]) -> Option<String> {
    let mut have = split_tags(current);
    have.sort();
    have.dedup();
    (have != wanted).then(|| wanted.join(";"))
}

/// One change to a VM's firewall rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleChange {
    /// Replace the rule at this place.
    Update(u32, FirewallRule),
    /// Add the rule (at its `pos`).
    Create(FirewallRule),
    /// Delete the rule at this place.
    Delete(u32),
}

fn same_rule(a: &FirewallRule, b: &FirewallRule) -> bool {
    a.kind == b.kind && a.action == b.action && a.iface == b.iface && a.enable == b.enable
}

/// The changes that make a VM's rules `current` into `wanted`, place by place as upstream
/// does: differing places replaced, missing ones added, extra ones deleted — from the last, so
/// each deletion leaves the places still to delete where they were.
pub fn rule_changes(current: &[FirewallRule], wanted: &[FirewallRule]) -> Vec<RuleChange> {
    let mut changes = Vec::new();
    for (i, rule) in wanted.iter().enumerate() {
        let pos = u32::try_from(i).unwrap_or(u32::MAX);
        match current.get(i) {
            Some(have) if same_rule(have, rule) => {}
            Some(_) => changes.push(RuleChange::Update(pos, rule.clone())),
            None => changes.push(RuleChange::Create(rule.clone())),
        }
    }
    for i in (wanted.len()..current.len()).rev() {
        changes.push(RuleChange::Delete(u32::try_from(i).unwrap_or(u32::MAX)));
    }
    changes
}

#[cfg(feature = "cloud")]
pub use cloud::{apply, run};

#[cfg(feature = "cloud")]
mod cloud {
    use std::sync::Arc;
    use std::time::Duration;

    use karpenter_api::NodeClaim;
    use karpenter_cloudprovider::CloudProviderError;
    use karpenter_controller::state::Index;
    use karpenter_controller::{Context, Error, nodeclass_status};
    use kube::Api;
    use kube::api::{Patch, PatchParams};
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::{InPlaceUpdate, RuleChange, needed, rule_changes, tags_change};
    use crate::apis::{
        ANNOTATION_NODE_CLASS_POOL, ANNOTATION_NODE_IN_PLACE_UPDATE_HASH, ProxmoxNodeClass,
    };
    use crate::provider::ProxmoxCloudProvider;
    use crate::pve::{PveClient, PveError};

    /// How often every NodeClass's VMs are looked at again (a VM launched while its class
    /// changed, an update that failed).
    const REQUEUE: Duration = Duration::from_secs(60);

    /// Makes the VM of `update` have its tags, firewall rules and pool.
    pub async fn apply(client: &PveClient, update: &InPlaceUpdate) -> Result<(), PveError> {
        let (node, vmid) = (update.zone.as_str(), update.vmid);
        let config = client.vm_config(node, vmid).await?;
        if let Some(tags) = tags_change(&config.get("tags").unwrap_or_default(), &update.tags) {
            client
                .set_vm_config(
                    node,
                    vmid,
                    crate::pve::form::Params::new().set("tags", tags),
                )
                .await?;
        }
        let current = client.vm_firewall_rules(node, vmid).await?;
        for change in rule_changes(&current, &update.rules) {
            match change {
                RuleChange::Update(pos, rule) => {
                    client
                        .update_vm_firewall_rule(node, vmid, pos, &rule)
                        .await?
                }
                RuleChange::Create(rule) => {
                    client.create_vm_firewall_rule(node, vmid, &rule).await?
                }
                RuleChange::Delete(pos) => client.delete_vm_firewall_rule(node, vmid, pos).await?,
            }
        }
        if !update.old_pool.is_empty() && update.old_pool != update.pool {
            match client.pool(&update.old_pool, Some("qemu")).await {
                Ok(old) if old.has_vm(vmid) => {
                    client
                        .update_pool_vms(&update.old_pool, &[vmid], true)
                        .await?
                }
                Ok(_) => {}
                // A pool deleted meanwhile holds nothing.
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        if !update.pool.is_empty() && !client.pool(&update.pool, Some("qemu")).await?.has_vm(vmid) {
            client.update_pool_vms(&update.pool, &[vmid], false).await?;
        }
        Ok(())
    }

    fn of_class(claim: &NodeClaim, class: &str) -> bool {
        let r = &claim.spec.node_class_ref;
        r.kind == "ProxmoxNodeClass" && r.name == class
    }

    async fn reconcile(
        ctx: &Context<ProxmoxCloudProvider>,
        class: &ProxmoxNodeClass,
    ) -> Result<Option<Duration>, Error> {
        let name = class.metadata.name.clone().unwrap_or_default();
        let claims: Api<NodeClaim> = Api::all(ctx.client.clone());
        let mut failed = Vec::new();
        for claim in ctx.cluster.node_claims_by_provider_id().into_values() {
            if !of_class(&claim, &name) {
                continue;
            }
            let Some(update) = needed(&claim, class) else {
                continue;
            };
            let result = match ctx.provider.clusters().get(&update.region) {
                Ok(client) => apply(client, &update).await,
                Err(e) => Err(e),
            };
            match result {
                // A VM gone is the garbage collector's to notice.
                Err(e) if !e.is_not_found() => {
                    failed.push(format!("{} (VM {}): {e}", update.claim, update.vmid));
                    continue;
                }
                _ => {}
            }
            let patch = json!({"metadata": {"annotations": {
                ANNOTATION_NODE_IN_PLACE_UPDATE_HASH: update.hash,
                ANNOTATION_NODE_CLASS_POOL: update.pool,
            }}});
            match claims
                .patch(&update.claim, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => tracing::info!(
                    nodeclaim = update.claim,
                    vmid = update.vmid,
                    "updated the VM's tags, firewall rules and pool in place"
                ),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => failed.push(format!("{}: {e}", update.claim)),
            }
        }
        if failed.is_empty() {
            Ok(Some(REQUEUE))
        } else {
            Err(Error::Cloud(CloudProviderError::Other(
                format!(
                    "in-place updates of ProxmoxNodeClass {name:?}: {}",
                    failed.join("; ")
                )
                .into(),
            )))
        }
    }

    /// Keeps the VMs of every ProxmoxNodeClass's NodeClaims at the class's tags, security
    /// groups and pool while this replica leads.
    pub async fn run(ctx: Arc<Context<ProxmoxCloudProvider>>, shutdown: CancellationToken) {
        nodeclass_status::run(
            ctx,
            shutdown,
            "nodeclaim.inplaceupdate.proxmox",
            Arc::new(Index::<ProxmoxNodeClass>::default()),
            |ctx, class| async move { reconcile(&ctx, &class).await },
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn class(spec: serde_json::Value) -> ProxmoxNodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
            "kind": "ProxmoxNodeClass",
            "metadata": {"name": "default"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn claim(provider_id: Option<&str>, annotations: serde_json::Value) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "default-x", "annotations": annotations,
                         "labels": {"topology.kubernetes.io/zone": "pve2"}},
            "spec": {"nodeClassRef": {"group": "karpenter.proxmox.sinextra.dev", "kind": "ProxmoxNodeClass", "name": "default"}},
            "status": {"providerID": provider_id},
        }))
        .unwrap()
    }

    fn rule(pos: u32, group: &str, iface: &str) -> FirewallRule {
        FirewallRule {
            pos: Some(pos),
            kind: "group".into(),
            action: group.into(),
            enable: true,
            iface: iface.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_claim_is_updated_until_it_records_the_class_hash() {
        let c = class(json!({
            "instanceTemplateRef": {"kind": "ProxmoxUnmanagedTemplate", "name": "k3s"},
            "tags": ["k8s", "web", "k8s"],
            "securityGroups": [{"name": "kubernetes"}, {"name": "web", "interface": "net1"}],
            "resourcePool": "karpenter",
        }));
        let [(_, hash), _] = launch_annotations(&c);
        let cases = [
            (None, json!({}), false),
            (Some("aws:///us-east-1a/i-1"), json!({}), false),
            (
                Some("proxmox://lab/20001"),
                json!({ANNOTATION_NODE_IN_PLACE_UPDATE_HASH: hash}),
                false,
            ),
            (
                Some("proxmox://lab/20001"),
                json!({ANNOTATION_NODE_IN_PLACE_UPDATE_HASH: "1"}),
                true,
            ),
            (Some("proxmox://lab/20001"), json!({}), true),
        ];
        for (id, annotations, update) in cases {
            let got = needed(&claim(id, annotations.clone()), &c);
            assert_eq!(got.is_some(), update, "{id:?} {annotations}");
        }
        let got = needed(
            &claim(
                Some("proxmox://lab/20001"),
                json!({ANNOTATION_NODE_CLASS_POOL: "old"}),
            ),
            &c,
        )
        .unwrap();
        assert_eq!(
            got,
            InPlaceUpdate {
                claim: "default-x".into(),
                region: "lab".into(),
                zone: "pve2".into(),
                vmid: 20001,
                hash: c.in_place_hash(),
                tags: vec!["k8s".into(), "karpenter".into(), "web".into()],
                rules: vec![rule(0, "kubernetes", "net0"), rule(1, "web", "net1")],
                pool: "karpenter".into(),
                old_pool: "old".into(),
            }
        );
        let mut going = claim(Some("proxmox://lab/20001"), json!({}));
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert_eq!(needed(&going, &c), None);
    }

    #[test]
    fn tags_are_set_only_when_they_differ() {
        let wanted = vec!["k8s".to_string(), "karpenter".to_string()];
        let cases = [
            ("karpenter;k8s", None),
            ("k8s,karpenter", None),
            ("karpenter", Some("k8s;karpenter")),
            ("k8s;karpenter;manual", Some("k8s;karpenter")),
            ("", Some("k8s;karpenter")),
        ];
        for (current, want) in cases {
            assert_eq!(tags_change(current, &wanted).as_deref(), want, "{current}");
        }
    }

    #[test]
    fn rules_change_place_by_place_and_extra_ones_go_from_the_last() {
        let (a, b, c) = (
            rule(0, "kubernetes", "net0"),
            rule(1, "web", "net0"),
            rule(2, "ssh", "net0"),
        );
        let cases = [
            (
                vec![],
                vec![a.clone(), b.clone()],
                vec![RuleChange::Create(a.clone()), RuleChange::Create(b.clone())],
            ),
            (
                vec![a.clone(), b.clone()],
                vec![a.clone(), b.clone()],
                vec![],
            ),
            (
                vec![a.clone(), b.clone(), c.clone()],
                vec![a.clone()],
                vec![RuleChange::Delete(2), RuleChange::Delete(1)],
            ),
            (
                vec![b.clone()],
                vec![a.clone(), b.clone()],
                vec![
                    RuleChange::Update(0, a.clone()),
                    RuleChange::Create(b.clone()),
                ],
            ),
            (vec![a.clone()], vec![], vec![RuleChange::Delete(0)]),
        ];
        for (current, wanted, changes) in cases {
            assert_eq!(
                rule_changes(&current, &wanted),
                changes,
                "{current:?} -> {wanted:?}"
            );
        }
        // A rule PVE reports with its own extras (digest, comment) is the same rule.
        let mut reported = a.clone();
        reported.comment = "added by hand".into();
        assert_eq!(rule_changes(&[reported], std::slice::from_ref(&a)), vec![]);
    }
}
