//! Managed templates: the plans (what each zone keeps, builds or replaces, which regions cannot
//! be served), the create parameters of a full spec, the statuses of both template kinds, and
//! (feature `cloud`) plans applied and templates removed against fakepve, with in-process mocks
//! for the failures fakepve does not stage.

#[cfg(feature = "cloud")]
#[allow(dead_code)]
mod fakepve_support;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::crd::{CORE, Crd};
use karpenter_api::validation::validate_object;
use karpenter_cloudprovider::conditions::CONDITION_READY;
use karpenter_proxmox::apis::{
    CONDITION_TEMPLATE_IMAGE_READY, CONDITION_TEMPLATE_READY, CRDS, ProxmoxTemplate,
    ProxmoxTemplateStatus, ProxmoxUnmanagedTemplate,
};
use karpenter_proxmox::pve::PveError;
use karpenter_proxmox::pve::types::{ClusterResource, Storage};
use karpenter_proxmox::template_build::{
    BuildFailure, ImageVolume, Outcome, Pass, Plan, Ready, RemovalResult, Step, StorageInfo,
    Target, VmOptions, ZoneAction, ZoneOutcome, ZoneState, plan, removal, status, unmanaged_status,
};
use karpenter_proxmox::templates::{TemplateConfig, TemplateVm};
use serde_json::{Value, json};

const FULL: &str = include_str!("testdata/templates/full.yaml");
const FULL_PARAMS: &str = include_str!("testdata/templates/full.params");

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + second).unwrap()
}

/// A managed template named `noble`: the Ubuntu image, storages `local` then `local-lvm`, one
/// interface; `patch` is merged into its spec.
fn noble(patch: Value) -> ProxmoxTemplate {
    let mut object = json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxTemplate",
        "metadata": {"name": "noble", "generation": 1},
        "spec": {
            "sourceImage": {
                "url": "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
                "imageName": "noble-amd64.qcow2"
            },
            "storageIDs": ["local", "local-lvm"],
            "network": [{"bridge": "vmbr0"}]
        }
    });
    if let (Value::Object(spec), Value::Object(extra)) = (&mut object["spec"], patch) {
        spec.extend(extra);
    }
    let mut t: ProxmoxTemplate = serde_json::from_value(object).unwrap();
    t.metadata.creation_timestamp = Some(Time(at(0)));
    t
}

fn storage(region: &str, id: &str, nodes: &[&str], content: &str, shared: bool) -> StorageInfo {
    StorageInfo {
        region: region.into(),
        storage: id.into(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        shared,
        content: content.split(',').map(str::to_string).collect(),
        active: true,
    }
}

/// A template VM whose description records `hash` (none: made by hand).
fn vm(region: &str, zone: &str, vmid: u32, name: &str, hash: Option<&str>) -> TemplateVm {
    let description = hash.map(|h| format!("Template VM managed by Karpenter Hash: {h}"));
    TemplateVm::new(
        region,
        zone,
        vmid,
        name,
        &TemplateConfig {
            description: description.as_deref().unwrap_or("made by hand"),
            meta: "creation-qemu=9.2.0,ctime=1754811620",
            ..TemplateConfig::default()
        },
    )
}

/// Two nodes, each with `local` (imports) and `local-lvm` (disks).
fn two_local_nodes(region: &str) -> Vec<StorageInfo> {
    vec![
        storage(
            region,
            "local",
            &["pve1", "pve2"],
            "iso,vztmpl,import",
            false,
        ),
        storage(
            region,
            "local-lvm",
            &["pve1", "pve2"],
            "images,rootdir",
            false,
        ),
    ]
}

/// The plan, one line per decision.
fn summary(p: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    for z in &p.zones {
        out.push(match &z.action {
            ZoneAction::Keep(t) => format!("keep {}", t.zone_entry()),
            ZoneAction::Build { replaces } => {
                let old: Vec<String> = replaces.iter().map(TemplateVm::zone_entry).collect();
                format!(
                    "build {}/{} {}->{} replacing [{}]",
                    z.region,
                    z.zone,
                    z.image_storage,
                    z.template_storage,
                    old.join(" ")
                )
            }
        });
    }
    out.extend(
        p.unserved
            .iter()
            .map(|u| format!("unserved {}: {}", u.region, u.reason)),
    );
    out.extend(
        p.retire
            .iter()
            .map(|t| format!("retire {}", t.zone_entry())),
    );
    out.extend(
        p.stale_images
            .iter()
            .map(|i| format!("stale {}/{} {}", i.region, i.zone, i.volid)),
    );
    out
}

struct Case {
    title: &'static str,
    patch: Value,
    regions: &'static [&'static str],
    storages: Vec<StorageInfo>,
    /// A template VM described with `CURRENT` has the spec's hash.
    inventory: Vec<TemplateVm>,
    want: Vec<&'static str>,
}

#[test]
fn plans_per_region_and_zone() {
    // Described with this, a template VM gets the case's spec hash.
    const CURRENT: &str = "999999999";
    let cases = vec![
        Case {
            title: "nothing there: a template on every node having both storages",
            patch: json!({}),
            regions: &["pve"],
            storages: two_local_nodes("pve"),
            inventory: vec![vm("pve", "pve1", 9000, "ubuntu", Some("42"))],
            want: vec![
                "build pve/pve1 local->local-lvm replacing []",
                "build pve/pve2 local->local-lvm replacing []",
            ],
        },
        Case {
            title: "up to date on one node",
            patch: json!({}),
            regions: &["pve"],
            storages: two_local_nodes("pve"),
            inventory: vec![vm("pve", "pve1", 1000, "noble", Some(CURRENT))],
            want: vec![
                "keep pve/pve1/1000",
                "build pve/pve2 local->local-lvm replacing []",
            ],
        },
        Case {
            title: "hash changed: rebuilt where it is, retired where it cannot be rebuilt",
            patch: json!({}),
            regions: &["pve"],
            storages: two_local_nodes("pve"),
            inventory: vec![
                vm("pve", "pve1", 1000, "noble", Some("123")),
                vm("pve", "pve2", 1001, "noble", Some(CURRENT)),
                vm("pve", "pve2", 1002, "noble", Some("123")),
                vm("pve", "pve3", 1003, "noble", Some("123")),
            ],
            want: vec![
                "build pve/pve1 local->local-lvm replacing [pve/pve1/1000]",
                "keep pve/pve2/1001",
                "retire pve/pve2/1002",
                "retire pve/pve3/1003",
            ],
        },
        Case {
            title: "a hand-made template of the same name is neither kept nor replaced",
            patch: json!({}),
            regions: &["pve"],
            storages: two_local_nodes("pve"),
            inventory: vec![vm("pve", "pve1", 9000, "noble", None)],
            want: vec![
                "build pve/pve1 local->local-lvm replacing []",
                "build pve/pve2 local->local-lvm replacing []",
            ],
        },
        Case {
            title: "a shared disk storage holds one template, on the first node",
            patch: json!({"storageIDs": ["local", "ceph-vm"]}),
            regions: &["pve"],
            storages: vec![
                storage("pve", "local", &["pve1", "pve2", "pve3"], "import", false),
                storage("pve", "ceph-vm", &["pve3", "pve1", "pve2"], "images", true),
            ],
            inventory: vec![],
            want: vec!["build pve/pve1 local->ceph-vm replacing []"],
        },
        Case {
            title: "a shared disk storage keeps its template where it is",
            patch: json!({"storageIDs": ["local", "ceph-vm"]}),
            regions: &["pve"],
            storages: vec![
                storage("pve", "local", &["pve1", "pve2", "pve3"], "import", false),
                storage("pve", "ceph-vm", &["pve1", "pve2", "pve3"], "images", true),
            ],
            inventory: vec![vm("pve", "pve2", 1000, "noble", Some(CURRENT))],
            want: vec!["keep pve/pve2/1000"],
        },
        Case {
            title: "no import storage: the region is not served",
            patch: json!({}),
            regions: &["pve"],
            storages: vec![
                storage("pve", "local", &["pve1"], "iso,vztmpl", false),
                storage("pve", "local-lvm", &["pve1"], "images", false),
            ],
            inventory: vec![],
            want: vec![
                "unserved pve: none of the storages [local, local-lvm] holds import content on an active node",
            ],
        },
        Case {
            title: "inactive storages and storages on no node do not count",
            patch: json!({}),
            regions: &["pve"],
            storages: vec![
                StorageInfo {
                    active: false,
                    ..storage("pve", "local", &["pve1"], "import", false)
                },
                storage("pve", "local-lvm", &[], "images", false),
            ],
            inventory: vec![],
            want: vec![
                "unserved pve: none of the storages [local, local-lvm] holds import or images content on an active node",
            ],
        },
        Case {
            title: "only nodes having both storages",
            patch: json!({}),
            regions: &["pve"],
            storages: vec![
                storage("pve", "local", &["pve1", "pve2"], "import", false),
                storage("pve", "local-lvm", &["pve2", "pve3"], "images", false),
            ],
            inventory: vec![],
            want: vec!["build pve/pve2 local->local-lvm replacing []"],
        },
        Case {
            title: "the storages do not meet on any node",
            patch: json!({}),
            regions: &["pve"],
            storages: vec![
                storage("pve", "local", &["pve1"], "import", false),
                storage("pve", "local-lvm", &["pve2"], "images", false),
            ],
            inventory: vec![],
            want: vec![
                "unserved pve: no node has both storage local (import) and storage local-lvm (images)",
            ],
        },
        Case {
            title: "the first storage of the list that holds each kind, per node entries merged",
            patch: json!({"storageIDs": ["nfs", "local", "local-lvm"]}),
            regions: &["pve"],
            storages: vec![
                storage("pve", "local-lvm", &["pve1"], "images", false),
                storage("pve", "local", &["pve1"], "import,images", false),
                storage("pve", "nfs", &["pve1"], "iso", true),
                storage("pve", "nfs", &["pve2"], "iso,import", true),
                storage("pve", "local", &["pve2"], "import,images", false),
            ],
            inventory: vec![],
            want: vec![
                "build pve/pve1 nfs->local replacing []",
                "build pve/pve2 nfs->local replacing []",
            ],
        },
        Case {
            title: "two regions",
            patch: json!({}),
            regions: &["b", "a"],
            storages: [two_local_nodes("a"), two_local_nodes("b")].concat(),
            inventory: vec![
                vm("a", "pve1", 1000, "noble", Some(CURRENT)),
                vm("b", "pve1", 1000, "noble", Some("7")),
            ],
            want: vec![
                "keep a/pve1/1000",
                "build a/pve2 local->local-lvm replacing []",
                "build b/pve1 local->local-lvm replacing [b/pve1/1000]",
                "build b/pve2 local->local-lvm replacing []",
            ],
        },
        Case {
            title: "the spec's region only; the other region's templates are not its business",
            patch: json!({"region": "b"}),
            regions: &["a", "b"],
            storages: [two_local_nodes("a"), two_local_nodes("b")].concat(),
            inventory: vec![vm("a", "pve1", 1000, "noble", Some("7"))],
            want: vec![
                "build b/pve1 local->local-lvm replacing []",
                "build b/pve2 local->local-lvm replacing []",
            ],
        },
        Case {
            title: "a region the config does not have",
            patch: json!({"region": "c"}),
            regions: &["a", "b"],
            storages: two_local_nodes("a"),
            inventory: vec![],
            want: vec!["unserved c: is not in the clusters config"],
        },
    ];
    for case in cases {
        let t = noble(case.patch);
        let hash = t.spec.hash();
        let inventory: Vec<TemplateVm> = case
            .inventory
            .into_iter()
            .map(|mut vm| {
                if vm.hash == CURRENT {
                    vm.hash = hash.clone();
                }
                vm
            })
            .collect();
        let regions: Vec<String> = case.regions.iter().map(|r| r.to_string()).collect();
        let p = plan(&t, &regions, &case.storages, &inventory).unwrap();
        assert_eq!(summary(&p), case.want, "{}", case.title);
        assert_eq!((p.name.as_str(), p.hash.as_str()), ("noble", hash.as_str()));
        assert_eq!(p.image_id, t.spec.image_id().unwrap());
    }
}

#[test]
fn a_new_image_leaves_the_previous_one_to_delete_from_every_import_storage() {
    let mut t = noble(json!({"storageIDs": ["local", "nfs", "local-lvm"]}));
    t.status = Some(ProxmoxTemplateStatus {
        image_id: Some("noble-amd64-1.qcow2".into()),
        ..Default::default()
    });
    let storages = vec![
        storage("pve", "local", &["pve1", "pve2"], "import", false),
        storage("pve", "nfs", &["pve2", "pve1"], "import", true),
        storage("pve", "local-lvm", &["pve1", "pve2"], "images", false),
    ];
    let p = plan(&t, &["pve".to_string()], &storages, &[]).unwrap();
    assert_eq!(p.previous_image_id.as_deref(), Some("noble-amd64-1.qcow2"));
    let stale: Vec<String> = p
        .stale_images
        .iter()
        .map(|i| format!("{}/{} {}", i.region, i.zone, i.volid))
        .collect();
    assert_eq!(
        stale,
        [
            "pve/pve1 local:import/noble-amd64-1.qcow2",
            "pve/pve2 local:import/noble-amd64-1.qcow2",
            "pve/pve1 nfs:import/noble-amd64-1.qcow2",
        ]
    );
    // The same image recorded: nothing stale.
    t.status.as_mut().unwrap().image_id = Some(t.spec.image_id().unwrap());
    let p = plan(&t, &["pve".to_string()], &storages, &[]).unwrap();
    assert!(p.previous_image_id.is_none() && p.stale_images.is_empty());
}

#[test]
fn what_cannot_be_planned_names_the_field() {
    let t = noble(json!({"sourceImage": {"url": "https://x/img", "imageName": "noext"}}));
    let err = plan(&t, &["pve".to_string()], &two_local_nodes("pve"), &[]).unwrap_err();
    assert_eq!(err.field, "spec.sourceImage.imageName");
    let mut unnamed = noble(json!({}));
    unnamed.metadata.name = None;
    let err = plan(&unnamed, &["pve".to_string()], &two_local_nodes("pve"), &[]).unwrap_err();
    assert_eq!(err.field, "metadata.name");
}

#[test]
fn storages_from_the_cluster_resources() {
    let resources: Vec<ClusterResource> = serde_json::from_value(json!([
        {"id": "storage/pve2/local", "type": "storage", "node": "pve2", "storage": "local",
         "content": "iso,import,vztmpl", "shared": 0, "status": "available"},
        {"id": "storage/pve1/local", "type": "storage", "node": "pve1", "storage": "local",
         "content": "iso,import,vztmpl", "shared": 0, "status": "available"},
        {"id": "storage/pve3/local", "type": "storage", "node": "pve3", "storage": "local",
         "content": "iso,import,vztmpl", "shared": 0, "status": "unknown"},
        {"id": "storage/pve1/ceph", "type": "storage", "node": "pve1", "storage": "ceph",
         "content": "images,rootdir", "shared": 1, "status": "available"},
        {"id": "storage/pve1/pbs", "type": "storage", "node": "pve1", "storage": "pbs",
         "content": "backup", "shared": 1, "status": "available"},
        {"id": "qemu/100", "type": "qemu", "node": "pve1", "vmid": 100, "status": "running"}
    ]))
    .unwrap();
    assert_eq!(
        StorageInfo::from_resources("pve", &resources),
        [
            storage("pve", "ceph", &["pve1"], "images,rootdir", true),
            storage(
                "pve",
                "local",
                &["pve1", "pve2"],
                "iso,import,vztmpl",
                false
            ),
        ]
    );
    // A node's own listing: usable when enabled and active there.
    let listed: Vec<Storage> = serde_json::from_value(json!([
        {"storage": "local", "type": "dir", "content": "import,iso", "active": 1, "enabled": 1,
         "shared": 0},
        {"storage": "nfs", "type": "nfs", "content": "import", "active": 0, "enabled": 1,
         "shared": 1}
    ]))
    .unwrap();
    let infos: Vec<StorageInfo> = listed
        .iter()
        .map(|s| StorageInfo::from_node_storage("pve", "pve2", s))
        .collect();
    assert_eq!(
        infos[0],
        storage("pve", "local", &["pve2"], "import,iso", false)
    );
    assert_eq!(
        infos[1],
        StorageInfo {
            active: false,
            ..storage("pve", "nfs", &["pve2"], "import", true)
        }
    );
}

fn crds() -> Vec<Crd> {
    CORE.iter().copied().chain(CRDS).collect()
}

#[test]
fn a_full_spec_makes_upstreams_create_parameters() {
    let object: Value = serde_saphyr::from_str(FULL).unwrap();
    let report = validate_object(&crds(), &object).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let t: ProxmoxTemplate = serde_json::from_value(object).unwrap();
    let hash = t.spec.hash();
    let image = t.spec.image_id().unwrap();
    let params = VmOptions {
        name: "talos-gpu",
        spec: &t.spec,
        hash: &hash,
        image_id: &image,
        vmid: 1005,
        image_storage: "local",
        template_storage: "ceph-vm",
    }
    .params();
    let got: Vec<String> = params
        .pairs()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let want: Vec<String> = FULL_PARAMS
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.replace("{hash}", &hash).replace("{image}", &image))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_minimal_spec_makes_the_base_vm_with_the_default_description() {
    let t = noble(json!({}));
    let params = VmOptions {
        name: "noble",
        spec: &t.spec,
        hash: "77",
        image_id: "noble-amd64-1.qcow2",
        vmid: 1000,
        image_storage: "local",
        template_storage: "local-lvm",
    }
    .params();
    let keys: Vec<&str> = params.pairs().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "vmid",
            "name",
            "description",
            "acpi",
            "cores",
            "sockets",
            "numa",
            "memory",
            "balloon",
            "ostype",
            "scsihw",
            "boot",
            "tablet",
            "machine",
            "bios",
            "scsi0",
            "cpu",
            "net0",
            "ipconfig0"
        ]
    );
    let description = params.get("description").unwrap();
    assert!(description.ends_with(" Hash: 77"), "{description}");
    // The inventory reads the hash back from it.
    let read = TemplateVm::new(
        "pve",
        "pve1",
        1000,
        "noble",
        &TemplateConfig {
            description,
            ..TemplateConfig::default()
        },
    );
    assert_eq!(read.hash, "77");
    // A `Hash:` of the user's own does not hide the one the provider writes.
    let t = noble(json!({"description": "Talos; Hash: 5 of the old build"}));
    let described = VmOptions {
        name: "noble",
        spec: &t.spec,
        hash: "77",
        image_id: "noble-amd64-1.qcow2",
        vmid: 1000,
        image_storage: "local",
        template_storage: "local-lvm",
    }
    .params()
    .get("description")
    .unwrap()
    .to_string();
    assert_eq!(described, "Talos; hash: 5 of the old build Hash: 77");
    let read = TemplateVm::new(
        "pve",
        "pve1",
        1000,
        "noble",
        &TemplateConfig {
            description: &described,
            ..TemplateConfig::default()
        },
    );
    assert_eq!(read.hash, "77");
    assert_eq!(params.get("machine"), Some("q35"));
    assert_eq!(params.get("bios"), Some("seabios"));
    assert_eq!(params.get("cpu"), Some("cputype=x86-64-v2-AES"));
    assert_eq!(
        params.get("scsi0"),
        Some(
            "file=local-lvm:0,format=raw,import-from=local:import/noble-amd64-1.qcow2,iothread=on"
        )
    );
}

// ---------------------------------------------------------------------------------- statuses

fn condition<'a>(s: &'a ProxmoxTemplateStatus, type_: &str) -> &'a Condition {
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {:?}", s.conditions))
}

fn state(s: &ProxmoxTemplateStatus, type_: &str) -> (String, String) {
    let c = condition(s, type_);
    (c.status.clone(), c.reason.clone())
}

fn pair(status: &str, reason: &str) -> (String, String) {
    (status.to_string(), reason.to_string())
}

fn ready_vm(region: &str, zone: &str, vmid: u32) -> ZoneState {
    ZoneState::Ready(Ready {
        template: vm(region, zone, vmid, "noble", Some("1")),
        built: true,
        downloaded: true,
    })
}

fn failed(step: Step, message: &str) -> ZoneState {
    ZoneState::Failed(BuildFailure {
        step,
        vmid: None,
        error: PveError::Request(message.into()),
        cleanup: None,
    })
}

fn outcome(zones: Vec<(&str, &str, ZoneState)>) -> Outcome {
    Outcome {
        zones: zones
            .into_iter()
            .map(|(region, zone, state)| ZoneOutcome {
                region: region.into(),
                zone: zone.into(),
                state,
            })
            .collect(),
        removals: Vec::new(),
    }
}

fn planned(t: &ProxmoxTemplate, storages: &[StorageInfo]) -> Plan {
    plan(t, &["pve".to_string()], storages, &[]).unwrap()
}

#[test]
fn ready_templates_make_the_status_ready_with_their_zones() {
    let t = noble(json!({}));
    let p = planned(&t, &two_local_nodes("pve"));
    let done = outcome(vec![
        ("pve", "pve1", ready_vm("pve", "pve1", 1000)),
        ("pve", "pve2", ready_vm("pve", "pve2", 1001)),
    ]);
    let s = status(
        &t,
        Pass::Done {
            plan: &p,
            outcome: &done,
        },
        at(10),
    );
    assert_eq!(s.zones, ["pve/pve1/1000", "pve/pve2/1001"]);
    assert_eq!(s.resources["zones"].0, "2");
    assert_eq!(s.image_id, Some(p.image_id.clone()));
    assert_eq!(
        state(&s, CONDITION_TEMPLATE_IMAGE_READY),
        pair("True", CONDITION_TEMPLATE_IMAGE_READY)
    );
    assert_eq!(
        state(&s, CONDITION_TEMPLATE_READY),
        pair("True", CONDITION_TEMPLATE_READY)
    );
    assert_eq!(condition(&s, CONDITION_TEMPLATE_READY).message, "");
    assert_eq!(state(&s, CONDITION_READY), pair("True", CONDITION_READY));
    assert_eq!(condition(&s, CONDITION_READY).observed_generation, Some(1));
    assert_eq!(s.conditions.last().unwrap().type_, CONDITION_READY);
}

#[test]
fn conditions_name_what_is_missing() {
    let t = noble(json!({}));
    let p = planned(&t, &two_local_nodes("pve"));
    let nowhere = planned(
        &t,
        &[storage("pve", "local-lvm", &["pve1"], "images", false)],
    );
    let cases = [
        (
            "one zone failed: still ready, the failure named",
            &p,
            outcome(vec![
                ("pve", "pve1", ready_vm("pve", "pve1", 1000)),
                ("pve", "pve2", failed(Step::Create, "no space left")),
            ]),
            vec!["pve/pve1/1000"],
            ("True", "ProxmoxVirtualMachineTemplateImageReady"),
            ("True", "ProxmoxVirtualMachineTemplateReady"),
            "pve/pve2: creating the VM: no space left",
            "True",
        ),
        (
            "every download failed",
            &p,
            outcome(vec![
                ("pve", "pve1", failed(Step::Download, "404 Not Found")),
                ("pve", "pve2", failed(Step::Download, "404 Not Found")),
            ]),
            vec![],
            ("False", "ImageDownloadFailed"),
            ("False", "TemplateBuildFailed"),
            "pve/pve1: downloading the image: 404 Not Found; pve/pve2: downloading the image: 404 Not Found",
            "False",
        ),
        (
            "downloaded but not made",
            &p,
            outcome(vec![("pve", "pve1", failed(Step::Convert, "locked"))]),
            vec![],
            ("True", "ProxmoxVirtualMachineTemplateImageReady"),
            ("False", "TemplateBuildFailed"),
            "pve/pve1: making the VM a template: locked",
            "False",
        ),
        (
            "no storage anywhere",
            &nowhere,
            Outcome::default(),
            vec![],
            ("False", "StorageNotFound"),
            ("False", "StorageNotFound"),
            "region pve none of the storages [local, local-lvm] holds import content on an active node",
            "False",
        ),
        (
            "planned, not applied yet",
            &p,
            Outcome::unapplied(&p),
            vec![],
            ("Unknown", "ImageNotDownloaded"),
            ("Unknown", "TemplateNotBuilt"),
            "to be built in pve/pve1, pve/pve2",
            "Unknown",
        ),
    ];
    for (title, p, done, zones, image, template, message, ready) in cases {
        let s = status(
            &t,
            Pass::Done {
                plan: p,
                outcome: &done,
            },
            at(10),
        );
        assert_eq!(s.zones, zones, "{title}");
        assert_eq!(s.resources["zones"].0, zones.len().to_string(), "{title}");
        assert_eq!(
            state(&s, CONDITION_TEMPLATE_IMAGE_READY),
            pair(image.0, image.1),
            "{title}"
        );
        assert_eq!(
            state(&s, CONDITION_TEMPLATE_READY),
            pair(template.0, template.1),
            "{title}"
        );
        assert_eq!(
            condition(&s, CONDITION_TEMPLATE_READY).message,
            message,
            "{title}"
        );
        assert_eq!(condition(&s, CONDITION_READY).status, ready, "{title}");
        if zones.is_empty() {
            assert_eq!(
                s.image_id, None,
                "{title}: no image recorded before a template is made"
            );
        }
    }
}

#[test]
fn an_invalid_spec_or_an_unread_cluster() {
    let mut t = noble(json!({"sourceImage": {"url": "https://x/img", "imageName": "noext"}}));
    let err = plan(&t, &["pve".to_string()], &[], &[]).unwrap_err();
    let s = status(&t, Pass::Invalid(&err), at(10));
    assert_eq!(
        state(&s, CONDITION_TEMPLATE_READY),
        pair("False", "InvalidSpec")
    );
    assert_eq!(
        state(&s, CONDITION_TEMPLATE_IMAGE_READY),
        pair("False", "InvalidSpec")
    );
    assert!(
        condition(&s, CONDITION_TEMPLATE_READY)
            .message
            .starts_with("spec.sourceImage.imageName must name the image file"),
        "{:?}",
        condition(&s, CONDITION_TEMPLATE_READY).message
    );
    t.status = Some(s.clone());
    assert_eq!(status(&t, Pass::Unread, at(20)), s);
}

#[test]
fn the_previous_image_is_kept_in_the_status_until_it_is_deleted() {
    let mut t = noble(json!({}));
    t.status = Some(ProxmoxTemplateStatus {
        image_id: Some("noble-amd64-1.qcow2".into()),
        ..Default::default()
    });
    let p = planned(&t, &two_local_nodes("pve"));
    let stale = p.stale_images[0].clone();
    let mut done = outcome(vec![("pve", "pve1", ready_vm("pve", "pve1", 1000))]);
    done.removals.push(RemovalResult {
        target: Target::Image(stale.clone()),
        result: Err(PveError::Request("storage offline".into())),
    });
    let s = status(
        &t,
        Pass::Done {
            plan: &p,
            outcome: &done,
        },
        at(10),
    );
    assert_eq!(s.image_id.as_deref(), Some("noble-amd64-1.qcow2"));
    done.removals[0].result = Ok(());
    let s = status(
        &t,
        Pass::Done {
            plan: &p,
            outcome: &done,
        },
        at(10),
    );
    assert_eq!(s.image_id, Some(p.image_id.clone()));
}

fn unmanaged(spec: Value) -> ProxmoxUnmanagedTemplate {
    let mut t: ProxmoxUnmanagedTemplate = serde_json::from_value(json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxUnmanagedTemplate",
        "metadata": {"name": "k3s", "generation": 2},
        "spec": spec
    }))
    .unwrap();
    t.metadata.creation_timestamp = Some(Time(at(0)));
    t
}

#[test]
fn unmanaged_templates_are_found_by_name_region_and_tags() {
    let tagged = |region: &str, zone: &str, vmid: u32, name: &str, tags: &'static str| {
        TemplateVm::new(
            region,
            zone,
            vmid,
            name,
            &TemplateConfig {
                tags,
                ..TemplateConfig::default()
            },
        )
    };
    let inventory = [
        tagged("pve", "pve1", 9000, "k3s", "k8s;ubuntu"),
        tagged("pve", "pve2", 9001, "k3s", "k8s"),
        tagged("lab", "n1", 100, "talos", "k8s;ubuntu"),
    ];
    let cases = [
        (
            json!({"templateName": "k3s"}),
            vec!["pve/pve1/9000", "pve/pve2/9001"],
            ("True", "ProxmoxVirtualMachineTemplateReady"),
        ),
        (
            json!({"tags": ["k8s", "ubuntu"]}),
            vec!["pve/pve1/9000", "lab/n1/100"],
            ("True", "ProxmoxVirtualMachineTemplateReady"),
        ),
        (
            json!({"templateName": "k3s", "region": "lab"}),
            vec![],
            ("False", "TemplatesNotFound"),
        ),
        (json!({}), vec![], ("False", "TemplateValidation")),
    ];
    for (spec, zones, want) in cases {
        let t = unmanaged(spec.clone());
        let s = unmanaged_status(&t, Some(&inventory), at(10));
        assert_eq!(s.zones, zones, "{spec}");
        assert_eq!(s.resources["zones"].0, zones.len().to_string(), "{spec}");
        assert_eq!(
            state(&s, CONDITION_TEMPLATE_READY),
            pair(want.0, want.1),
            "{spec}"
        );
        assert_eq!(condition(&s, CONDITION_READY).status, want.0, "{spec}");
        assert_eq!(condition(&s, CONDITION_READY).observed_generation, Some(2));
    }
    // Found, then listing fails: the status stays; then it is gone: no zones, not ready.
    let mut t = unmanaged(json!({"templateName": "k3s"}));
    t.status = Some(unmanaged_status(&t, Some(&inventory), at(10)));
    assert_eq!(
        unmanaged_status(&t, None, at(20)),
        t.status.clone().unwrap()
    );
    let s = unmanaged_status(&t, Some(&[]), at(30));
    assert!(s.zones.is_empty());
    assert_eq!(
        condition(&s, CONDITION_TEMPLATE_READY)
            .last_transition_time
            .0,
        at(30)
    );
}

#[test]
fn removal_covers_the_objects_templates_and_images_only() {
    let mut t = noble(json!({}));
    t.status = Some(ProxmoxTemplateStatus {
        zones: vec!["pve/pve2/1005".into()],
        image_id: Some("noble-amd64-1.qcow2".into()),
        ..Default::default()
    });
    let inventory = [
        vm("pve", "pve1", 1000, "noble", Some("5")),
        // Listed in the status, description edited by hand: still the object's.
        vm("pve", "pve2", 1005, "noble", None),
        vm("pve", "pve2", 9000, "noble", None),
        vm("pve", "pve2", 1001, "jammy", Some("5")),
        vm("other", "n1", 1000, "noble", Some("5")),
    ];
    let r = removal(
        &t,
        &["pve".to_string()],
        &two_local_nodes("pve"),
        &inventory,
    );
    let templates: Vec<String> = r.templates.iter().map(TemplateVm::zone_entry).collect();
    assert_eq!(templates, ["pve/pve1/1000", "pve/pve2/1005"]);
    let image = t.spec.image_id().unwrap();
    let images: Vec<&str> = r.images.iter().map(|i| i.volid.as_str()).collect();
    let old = "local:import/noble-amd64-1.qcow2".to_string();
    let new = format!("local:import/{image}");
    assert_eq!(images, [&old, &old, &new, &new]);
    assert_eq!(
        r.images[0],
        ImageVolume::new("pve", "pve1", "local", "noble-amd64-1.qcow2")
    );
}

// ------------------------------------------------------------------------------------ wire

#[cfg(feature = "cloud")]
mod wire {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use axum::extract::State;
    use axum::http::{Method, StatusCode, Uri};
    use axum::response::IntoResponse;
    use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};
    use karpenter_proxmox::pve::config::{ClustersConfig, Credentials};
    use karpenter_proxmox::pve::form::Params;
    use karpenter_proxmox::pve::{PveClient, PvePool};
    use karpenter_proxmox::template_build::{ApplyOptions, apply, remove};
    use karpenter_proxmox::templates::is_disk_key;

    use super::fakepve_support::{FakePve, ROOT_PASSWORD, Seed, start};
    use super::*;

    const FAST: RetryPolicy = RetryPolicy {
        attempts: 2,
        base: Duration::from_millis(5),
        max: Duration::from_millis(20),
    };

    fn options() -> ApplyOptions {
        ApplyOptions {
            download_timeout: Duration::from_secs(20),
            create_timeout: Duration::from_secs(20),
            convert_timeout: Duration::from_secs(20),
            delete_timeout: Duration::from_secs(20),
            poll: Duration::from_millis(20),
            ..ApplyOptions::default()
        }
    }

    fn fake_pool(pve: &FakePve) -> PvePool {
        let cfg = ClustersConfig::parse(&format!(
            "clusters:\n  - url: {}\n    region: pve\n    username: root@pam\n    password: {ROOT_PASSWORD}\n    insecure: true\n",
            pve.url
        ))
        .unwrap();
        PvePool::from_config(&cfg, Duration::from_secs(10)).unwrap()
    }

    /// The region's storages, as the provider reads them.
    async fn storages(c: &PveClient) -> Vec<StorageInfo> {
        StorageInfo::from_resources("pve", &c.resources(Some("storage")).await.unwrap())
    }

    /// The region's template VMs, as the provider reads them.
    async fn inventory(c: &PveClient) -> Vec<TemplateVm> {
        let mut out = Vec::new();
        for r in c.vm_resources().await.unwrap() {
            if !r.template {
                continue;
            }
            let vmid = r.vmid.unwrap();
            let cfg = c.vm_config(&r.node, vmid).await.unwrap();
            let text = |k: &str| cfg.get(k).unwrap_or_default();
            let (tags, description, meta) = (text("tags"), text("description"), text("meta"));
            let disks: Vec<String> = cfg
                .0
                .keys()
                .filter(|k| is_disk_key(k))
                .filter_map(|k| cfg.get(k))
                .collect();
            out.push(TemplateVm::new(
                "pve",
                &r.node,
                vmid,
                &r.name,
                &TemplateConfig {
                    tags: &tags,
                    description: &description,
                    meta: &meta,
                    disks: disks.iter().map(String::as_str).collect(),
                },
            ));
        }
        out.sort_by_key(|t| t.vmid);
        out
    }

    fn ours(inventory: &[TemplateVm]) -> Vec<String> {
        inventory
            .iter()
            .filter(|t| t.name == "noble")
            .map(TemplateVm::zone_entry)
            .collect()
    }

    async fn has_volume(c: &PveClient, volid: &str) -> bool {
        c.storage_content("pve1", "local", None)
            .await
            .unwrap()
            .iter()
            .any(|v| v.volid == volid)
    }

    #[tokio::test]
    async fn templates_are_built_kept_replaced_and_removed() {
        let Some(pve) = start(Seed::default()) else {
            return;
        };
        let pool = fake_pool(&pve);
        let c = pool.get("pve").unwrap().clone();
        // PVE's `local` takes no imports until it is told to.
        c.put::<Value>(
            "/storage/local",
            Params::new().set("content", "iso,vztmpl,backup,import"),
        )
        .await
        .unwrap();
        let regions = ["pve".to_string()];
        let mut t = noble(json!({"tags": ["ubuntu", "k8s"]}));

        // Nothing there: built on both nodes, the image downloaded first.
        let p = plan(&t, &regions, &storages(&c).await, &inventory(&c).await).unwrap();
        let done = apply(&pool, &p, &options()).await;
        let states: Vec<(u32, bool)> = done
            .zones
            .iter()
            .map(|z| match &z.state {
                ZoneState::Ready(r) => (r.template.vmid, r.built),
                other => panic!("{}/{}: {other:?}", z.region, z.zone),
            })
            .collect();
        assert_eq!(states, [(1000, true), (1001, true)]);
        assert!(matches!(&done.zones[0].state, ZoneState::Ready(r) if r.downloaded));
        let image = format!("local:import/{}", p.image_id);
        assert!(has_volume(&c, &image).await);
        let found = inventory(&c).await;
        assert_eq!(ours(&found), ["pve/pve1/1000", "pve/pve2/1001"]);
        for t in found.iter().filter(|t| t.name == "noble") {
            assert_eq!(t.hash, p.hash);
            assert_eq!(t.tags, ["k8s", "ubuntu"]);
            assert_eq!(t.storage.as_deref(), Some("local-lvm"));
        }
        let cfg = c.vm_config("pve1", 1000).await.unwrap();
        assert_eq!(cfg.get("template").as_deref(), Some("1"));
        assert!(
            cfg.get("scsi0")
                .unwrap()
                .contains(&format!("import-from={image}")),
            "{:?}",
            cfg.get("scsi0")
        );
        assert_eq!(cfg.get("cpu").as_deref(), Some("cputype=x86-64-v2-AES"));
        t.status = Some(status(
            &t,
            Pass::Done {
                plan: &p,
                outcome: &done,
            },
            at(10),
        ));
        let s = t.status.as_ref().unwrap();
        assert_eq!(s.zones, ["pve/pve1/1000", "pve/pve2/1001"]);
        assert_eq!(condition(s, CONDITION_READY).status, "True");

        // Again: kept, nothing made.
        let p = plan(&t, &regions, &storages(&c).await, &inventory(&c).await).unwrap();
        assert!(
            p.zones
                .iter()
                .all(|z| matches!(z.action, ZoneAction::Keep(_)))
        );
        let done = apply(&pool, &p, &options()).await;
        assert_eq!(done.zone_entries(), ["pve/pve1/1000", "pve/pve2/1001"]);
        assert_eq!(
            ours(&inventory(&c).await),
            ["pve/pve1/1000", "pve/pve2/1001"]
        );

        // A new checksum changes the hash: new templates replace the old ones.
        t.spec.source_image.checksum = Some("0".repeat(64));
        t.spec.source_image.checksum_type = Some("sha256".into());
        let p = plan(&t, &regions, &storages(&c).await, &inventory(&c).await).unwrap();
        let done = apply(&pool, &p, &options()).await;
        assert_eq!(done.zone_entries(), ["pve/pve1/1002", "pve/pve2/1003"]);
        let removed: Vec<String> = done
            .removals
            .iter()
            .map(|r| format!("{} {:?}", r.target, r.result))
            .collect();
        assert_eq!(
            removed,
            [
                "template VM pve/pve1/1000 Ok(())",
                "template VM pve/pve2/1001 Ok(())"
            ]
        );
        let found = inventory(&c).await;
        assert_eq!(ours(&found), ["pve/pve1/1002", "pve/pve2/1003"]);
        assert!(
            found
                .iter()
                .filter(|t| t.name == "noble")
                .all(|t| t.hash == p.hash)
        );
        t.status = Some(status(
            &t,
            Pass::Done {
                plan: &p,
                outcome: &done,
            },
            at(20),
        ));

        // Deleted: every template and the image go.
        let r = removal(&t, &regions, &storages(&c).await, &inventory(&c).await);
        assert_eq!(r.templates.len(), 2);
        let results = remove(&pool, &r, &options()).await;
        assert!(results.iter().all(|r| r.result.is_ok()), "{results:?}");
        assert!(ours(&inventory(&c).await).is_empty());
        assert!(!has_volume(&c, &image).await);
        // The template VM made by hand is still there.
        assert!(c.vm_config("pve1", 9000).await.is_ok());
    }

    // -------------------------------------------------------------------------------- mocks

    #[derive(Clone)]
    struct Mock {
        seen: Arc<Mutex<Vec<String>>>,
        /// Task types whose tasks fail, and the create call refused outright.
        failing: &'static [&'static str],
        refuse_create: bool,
    }

    fn data(v: Value) -> axum::response::Response {
        (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            json!({ "data": v }).to_string(),
        )
            .into_response()
    }

    fn upid(kind: &str, id: &str) -> String {
        format!("UPID:pve1:0000A1B2:00C0FFEE:66F0C0DE:{kind}:{id}:karpenter@pve!k8s:")
    }

    async fn answer(State(m): State<Mock>, method: Method, uri: Uri) -> axum::response::Response {
        let path = uri.path().trim_start_matches("/api2/json").to_string();
        let call = match uri.query() {
            Some(q) => format!("{method} {path}?{q}"),
            None => format!("{method} {path}"),
        };
        m.seen.lock().unwrap().push(call.clone());
        match (method.as_str(), path.as_str()) {
            ("GET", "/nodes/pve1/storage/local/content") => data(json!([])),
            ("POST", "/nodes/pve1/storage/local/download-url") => {
                data(json!(upid("download", "local")))
            }
            ("GET", "/cluster/nextid") => data(json!("1000")),
            ("POST", "/nodes/pve1/qemu") if m.refuse_create => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "unable to create VM 1000 - VM 1000 already exists on node 'pve2'",
            )
                .into_response(),
            ("POST", "/nodes/pve1/qemu") => data(json!(upid("qmcreate", "1000"))),
            ("POST", "/nodes/pve1/qemu/1000/template") => data(json!(upid("qmtemplate", "1000"))),
            ("DELETE", "/nodes/pve1/qemu/1000") => data(json!(upid("qmdestroy", "1000"))),
            ("GET", p) if p.starts_with("/nodes/pve1/tasks/") => {
                let kind = p.split(':').nth(5).unwrap_or_default();
                let exit = if m.failing.contains(&kind) {
                    "command failed"
                } else {
                    "OK"
                };
                data(json!({"status": "stopped", "exitstatus": exit, "type": kind}))
            }
            _ => StatusCode::NOT_FOUND.into_response(),
        }
    }

    /// Applies a one-zone plan against a mock PVE; the calls it saw, without task polls.
    async fn apply_against_mock(
        failing: &'static [&'static str],
        refuse_create: bool,
    ) -> (Outcome, Vec<String>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new().fallback(answer).with_state(Mock {
            seen: seen.clone(),
            failing,
            refuse_create,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/api2/json", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = PveClient::new(
            &url,
            Credentials::Token {
                id: "karpenter@pve!k8s".into(),
                secret: "00000000-1111-2222-3333-444444444444".into(),
            },
            HttpClient::new(Duration::from_secs(5)).unwrap(),
        )
        .unwrap()
        .with_retry(FAST);
        let pool = PvePool::new([("pve".to_string(), client)]);
        let t = noble(json!({}));
        let storages = [
            storage("pve", "local", &["pve1"], "import", false),
            storage("pve", "local-lvm", &["pve1"], "images", false),
        ];
        let p = plan(&t, &["pve".to_string()], &storages, &[]).unwrap();
        let done = apply(&pool, &p, &options()).await;
        let calls = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|c| !c.contains("/tasks/"))
            .cloned()
            .collect();
        (done, calls)
    }

    fn failure(done: &Outcome) -> &BuildFailure {
        match &done.zones[0].state {
            ZoneState::Failed(f) => f,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_vm_that_cannot_be_made_a_template_is_deleted_again() {
        let (done, calls) = apply_against_mock(&["qmtemplate"], false).await;
        assert_eq!(
            calls,
            [
                "GET /nodes/pve1/storage/local/content?content=import",
                "POST /nodes/pve1/storage/local/download-url",
                "GET /cluster/nextid?vmid=1000",
                "POST /nodes/pve1/qemu",
                "POST /nodes/pve1/qemu/1000/template",
                "DELETE /nodes/pve1/qemu/1000?purge=1&destroy-unreferenced-disks=1",
            ]
        );
        let f = failure(&done);
        assert_eq!(
            (f.step, f.vmid, f.cleanup.is_none()),
            (Step::Convert, Some(1000), true)
        );
        assert_eq!(f.error.task_exitstatus(), Some("command failed"));
        assert!(done.removals.is_empty());
    }

    #[tokio::test]
    async fn a_refused_create_deletes_nothing() {
        let (done, calls) = apply_against_mock(&[], true).await;
        assert_eq!(calls.last().unwrap(), "POST /nodes/pve1/qemu");
        let f = failure(&done);
        assert_eq!((f.step, f.vmid), (Step::Create, Some(1000)));
        assert!(
            f.error.to_string().contains("already exists"),
            "{}",
            f.error
        );
    }

    #[tokio::test]
    async fn a_failed_download_creates_nothing() {
        let (done, calls) = apply_against_mock(&["download"], false).await;
        assert_eq!(
            calls.last().unwrap(),
            "POST /nodes/pve1/storage/local/download-url"
        );
        let f = failure(&done);
        assert_eq!((f.step, f.vmid), (Step::Download, None));
        let t = noble(json!({}));
        let storages = [
            storage("pve", "local", &["pve1"], "import", false),
            storage("pve", "local-lvm", &["pve1"], "images", false),
        ];
        let p = plan(&t, &["pve".to_string()], &storages, &[]).unwrap();
        let s = status(
            &t,
            Pass::Done {
                plan: &p,
                outcome: &done,
            },
            at(10),
        );
        assert_eq!(
            state(&s, CONDITION_TEMPLATE_IMAGE_READY),
            pair("False", "ImageDownloadFailed")
        );
        assert!(
            condition(&s, CONDITION_TEMPLATE_IMAGE_READY)
                .message
                .starts_with("pve/pve1: downloading the image: task UPID:pve1:"),
            "{}",
            condition(&s, CONDITION_TEMPLATE_IMAGE_READY).message
        );
    }
}
