//! Our example manifests (`tests/testdata/manifests/`): a K3s class with the unmanaged template
//! it clones, a Talos one, and a managed template with its class. Every document validates;
//! each object of the provider's kinds reads into its type, writes back what the API server
//! stores (the manifest with the CRD's defaults filled in), and passes the checks made before
//! a node or template is made.

use karpenter_api::crd::{CORE, Crd};
use karpenter_api::validation::validate_object;
use karpenter_proxmox::apis::{
    CRDS, CommonTemplate, InstanceTemplateKind, MetadataType, NODE_CLASS_CRD, ProxmoxNodeClass,
    ProxmoxTemplate, ProxmoxUnmanagedTemplate, TEMPLATE_CRD, UNMANAGED_TEMPLATE_CRD, ZoneBalance,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

const K3S: &str = include_str!("testdata/manifests/k3s.yaml");
const TALOS: &str = include_str!("testdata/manifests/talos.yaml");
const MANAGED: &str = include_str!("testdata/manifests/managed-template.yaml");

fn crds() -> Vec<Crd> {
    CORE.iter().copied().chain(CRDS).collect()
}

/// Every document of the file, each validated without a problem.
fn documents(text: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).expect("valid YAML");
    for doc in &docs {
        let report = validate_object(&crds(), doc).expect("a kind of these CRDs");
        assert!(
            report.problems.is_empty(),
            "{} {}: {:?}",
            report.kind,
            report.name,
            report.problems
        );
    }
    docs
}

/// The object read as its type, which writes back what the API server stores and reads the
/// same again.
fn applies<T>(crd: &Crd, object: &Value) -> T
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    let stored = kube_cel::apply_defaults(&crd.schema(), object);
    let typed: T = serde_json::from_value(object.clone()).expect("reads as the type");
    let written = serde_json::to_value(&typed).unwrap();
    assert_eq!(written, stored);
    let again: T = serde_json::from_value(written).unwrap();
    assert_eq!(again, typed);
    typed
}

/// The NodePool names the class by the CRD's group and kind.
fn assert_pool_names_class(pool: &Value, class: &ProxmoxNodeClass) {
    let reference = &pool["spec"]["template"]["spec"]["nodeClassRef"];
    assert_eq!(reference["group"], NODE_CLASS_CRD.group());
    assert_eq!(reference["kind"], NODE_CLASS_CRD.kind());
    assert_eq!(reference["name"].as_str(), class.metadata.name.as_deref());
}

#[test]
fn the_k3s_class_and_its_unmanaged_template_apply() {
    let docs = documents(K3S);
    assert_eq!(docs.len(), 3);
    let class: ProxmoxNodeClass = applies(&NODE_CLASS_CRD, &docs[1]);
    let template: ProxmoxUnmanagedTemplate = applies(&UNMANAGED_TEMPLATE_CRD, &docs[2]);
    assert_pool_names_class(&docs[0], &class);

    let spec = &class.spec;
    assert_eq!(spec.validate_for_create(), Ok(()));
    let reference = class.template_ref().unwrap();
    assert_eq!(
        reference.kind,
        InstanceTemplateKind::ProxmoxUnmanagedTemplate
    );
    assert_eq!(
        Some(reference.name.as_str()),
        template.metadata.name.as_deref()
    );
    assert_eq!(spec.region.as_deref(), Some("homelab"));
    assert_eq!(spec.placement_strategy.zone_balance, ZoneBalance::Balanced);
    assert_eq!(spec.boot_device.size_bytes(), Some(40 << 30));
    assert_eq!(spec.boot_device.size_gigabytes(), Some(43));
    assert_eq!(spec.boot_device.storage.as_deref(), Some("local-zfs"));
    let metadata = &spec.metadata_options;
    assert_eq!(metadata.type_, MetadataType::Cdrom);
    assert_eq!(
        metadata.templates_secret(),
        Some(("k3s-cloud-init", "karpenter"))
    );
    assert_eq!(metadata.values_secret(), Some(("k3s-join", "karpenter")));
    assert_eq!(
        spec.security_groups[0].interface, "net0",
        "the CRD's default"
    );
    let kubelet = spec.kubelet_configuration.as_ref().unwrap().to_json();
    assert_eq!(kubelet["shutdownGracePeriod"], "30s");
    assert_eq!(kubelet["maxPods"], 110);

    assert_eq!(template.spec.validate_for_create(), Ok(()));
    assert_eq!(template.spec.template_name(), Some("ubuntu-2404-cloudinit"));
    assert_eq!(template.spec.tags, ["k3s-template"]);
    assert!(!template.is_ready(), "no status yet");
    assert_eq!(template.image_id(), None);
}

#[test]
fn the_talos_class_and_its_template_by_tags_apply() {
    let docs = documents(TALOS);
    assert_eq!(docs.len(), 3);
    let class: ProxmoxNodeClass = applies(&NODE_CLASS_CRD, &docs[1]);
    let template: ProxmoxUnmanagedTemplate = applies(&UNMANAGED_TEMPLATE_CRD, &docs[2]);
    assert_pool_names_class(&docs[0], &class);

    let spec = &class.spec;
    assert_eq!(spec.validate_for_create(), Ok(()));
    assert_eq!(
        spec.placement_strategy.zone_balance,
        ZoneBalance::AvailabilityFirst
    );
    assert_eq!(spec.region, None, "every region");
    assert_eq!(spec.boot_device.size_bytes(), Some(20_000_000_000));
    assert_eq!(spec.boot_device.storage, None, "the template's storage");
    assert_eq!(spec.resource_pool.as_deref(), Some("kubernetes/talos"));
    assert_eq!(spec.metadata_options.values_secret(), None);
    let interfaces: Vec<&str> = spec
        .security_groups
        .iter()
        .map(|g| g.interface.as_str())
        .collect();
    assert_eq!(interfaces, ["net0", "net1"]);

    assert_eq!(template.spec.template_name(), None);
    assert_eq!(template.spec.tags, ["talos", "v1-10"]);
    assert_eq!(template.spec.validate_for_create(), Ok(()));
}

#[test]
fn the_managed_template_and_its_class_apply() {
    let docs = documents(MANAGED);
    assert_eq!(docs.len(), 2);
    let template: ProxmoxTemplate = applies(&TEMPLATE_CRD, &docs[0]);
    let class: ProxmoxNodeClass = applies(&NODE_CLASS_CRD, &docs[1]);

    let spec = &template.spec;
    assert_eq!(spec.validate_for_create(), Ok(()));
    // The status holds the image id upstream computes from this spec.
    let image = spec.image_id().unwrap();
    assert!(
        image.starts_with("debian-13-amd64-") && image.ends_with(".qcow2"),
        "{image}"
    );
    assert_eq!(template.image_id().as_deref(), Some(image.as_str()));
    assert_eq!(
        template.status.as_ref().unwrap().image_id.as_deref(),
        Some(image.as_str())
    );
    assert!(template.is_ready());
    let zones: Vec<(String, u64)> = template
        .selected_zones()
        .into_iter()
        .map(|z| (z.zone, z.template_id))
        .collect();
    assert_eq!(zones, [("pve-1".into(), 1000), ("pve-2".into(), 1001)]);
    // The CRD's defaults, filled in.
    assert_eq!(spec.tpm.as_ref().unwrap().version, "v2.0");
    assert_eq!(spec.qemu_guest_agent.as_ref().unwrap().type_, "virtio");
    assert_eq!(
        (spec.network[0].model.as_str(), spec.network[0].mtu),
        ("virtio", 1500)
    );
    assert_eq!(spec.network[1].vlan, Some(40));
    assert_eq!(
        spec.network[1].ip_config.gateway4.as_deref(),
        Some("10.40.0.1")
    );

    assert_eq!(class.spec.validate_for_create(), Ok(()));
    let reference = class.template_ref().unwrap();
    assert_eq!(reference.kind, InstanceTemplateKind::ProxmoxTemplate);
    assert_eq!(
        Some(reference.name.as_str()),
        template.metadata.name.as_deref()
    );
    assert_eq!(class.spec.boot_device.size_gigabytes(), Some(1000));
}

/// Spelling out what the CRD defaults changes neither the stored object nor the hash.
#[test]
fn defaults_spelled_out_change_nothing() {
    let docs = documents(TALOS);
    let class: ProxmoxNodeClass = applies(&NODE_CLASS_CRD, &docs[1]);
    let mut spelled = docs[1].clone();
    spelled["spec"]["securityGroups"][0]
        .as_object_mut()
        .unwrap()
        .remove("interface");
    let spare: ProxmoxNodeClass = applies(&NODE_CLASS_CRD, &spelled);
    assert_eq!(spare, class);
    assert_eq!(spare.hash(), class.hash());
    assert_eq!(spare.in_place_hash(), class.in_place_hash());
}
