//! The firewall calls upstream makes for a node class's security groups: the cluster's groups,
//! and a VM's firewall options and rules (rules of type `group`, see
//! [`FirewallRule::group`]).

use super::client::PveClient;
use super::error::PveError;
use super::form::{Params, encode_segment};
use super::types::{FirewallGroup, FirewallOptions, FirewallRule};

fn firewall_path(node: &str, vmid: u32) -> String {
    format!("/nodes/{}/qemu/{vmid}/firewall", encode_segment(node))
}

impl PveClient {
    /// `GET /cluster/firewall/groups`: the security groups.
    pub async fn firewall_groups(&self) -> Result<Vec<FirewallGroup>, PveError> {
        self.get("/cluster/firewall/groups", &Params::new()).await
    }

    /// `GET /nodes/{node}/qemu/{vmid}/firewall/options`.
    pub async fn vm_firewall_options(
        &self,
        node: &str,
        vmid: u32,
    ) -> Result<FirewallOptions, PveError> {
        self.get(
            &format!("{}/options", firewall_path(node, vmid)),
            &Params::new(),
        )
        .await
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/firewall/options`: the options that are set.
    pub async fn set_vm_firewall_options(
        &self,
        node: &str,
        vmid: u32,
        options: &FirewallOptions,
    ) -> Result<(), PveError> {
        self.put(
            &format!("{}/options", firewall_path(node, vmid)),
            options.params(),
        )
        .await
    }

    /// `GET /nodes/{node}/qemu/{vmid}/firewall/rules`, in order.
    pub async fn vm_firewall_rules(
        &self,
        node: &str,
        vmid: u32,
    ) -> Result<Vec<FirewallRule>, PveError> {
        self.get(
            &format!("{}/rules", firewall_path(node, vmid)),
            &Params::new(),
        )
        .await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/firewall/rules`: adds a rule (at its `pos`, or first).
    pub async fn create_vm_firewall_rule(
        &self,
        node: &str,
        vmid: u32,
        rule: &FirewallRule,
    ) -> Result<(), PveError> {
        self.post(
            &format!("{}/rules", firewall_path(node, vmid)),
            rule.params(),
        )
        .await
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/firewall/rules/{pos}`: replaces the rule at `pos`.
    pub async fn update_vm_firewall_rule(
        &self,
        node: &str,
        vmid: u32,
        pos: u32,
        rule: &FirewallRule,
    ) -> Result<(), PveError> {
        let mut params = rule.params();
        // The place is the path's; a `pos` in the body would be a move.
        params = params
            .pairs()
            .iter()
            .filter(|(k, _)| k != "pos")
            .cloned()
            .collect();
        self.put(
            &format!("{}/rules/{pos}", firewall_path(node, vmid)),
            params,
        )
        .await
    }

    /// `DELETE /nodes/{node}/qemu/{vmid}/firewall/rules/{pos}`.
    pub async fn delete_vm_firewall_rule(
        &self,
        node: &str,
        vmid: u32,
        pos: u32,
    ) -> Result<(), PveError> {
        self.delete(
            &format!("{}/rules/{pos}", firewall_path(node, vmid)),
            &Params::new(),
        )
        .await
    }
}
