//! The Proxmox VE client against fakepve, a fake PVE API served over TLS on loopback
//! (`fakepve_support`), and, for what fakepve does not model, against small in-process mocks:
//! a disk resize (fakepve answers it with a task but changes nothing), a node's status (fakepve
//! makes one up from the schema), a ticket's age (fakepve's clock is its own), retries, a task
//! that never ends, and PVE's own error shape (the message in the status line only).

mod fakepve_support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use fakepve_support::{FakePve, ROOT_PASSWORD, Seed, start};
use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};
use karpenter_proxmox::pve::client::{Clock, TICKET_LIFETIME, TICKET_RENEWAL};
use karpenter_proxmox::pve::config::{ClustersConfig, Credentials};
use karpenter_proxmox::pve::form::Params;
use karpenter_proxmox::pve::types::{
    CloneOptions, DeleteOptions, DownloadUrlOptions, FirewallRule,
};
use karpenter_proxmox::pve::{PveClient, PveError, PvePool, Upid};
use serde_json::{Value, json};

const TASK_TIMEOUT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);
const FAST: RetryPolicy = RetryPolicy {
    attempts: 3,
    base: Duration::from_millis(5),
    max: Duration::from_millis(20),
};

/// A client made as the operator's config makes it: one cluster with `auth` and `tls` lines.
fn client(pve: &FakePve, auth: &str, tls: &str) -> PveClient {
    let cfg = ClustersConfig::parse(&format!(
        "clusters:\n  - url: {}\n    region: fake\n{auth}{tls}",
        pve.url
    ))
    .unwrap();
    PvePool::from_config(&cfg, Duration::from_secs(10))
        .unwrap()
        .get("fake")
        .unwrap()
        .clone()
        .with_retry(FAST)
}

fn root(pve: &FakePve) -> PveClient {
    client(
        pve,
        &format!("    username: root@pam\n    password: {ROOT_PASSWORD}\n"),
        "    insecure: true\n",
    )
}

async fn wait(c: &PveClient, upid: &Upid) {
    c.wait_task(upid, TASK_TIMEOUT, POLL)
        .await
        .unwrap_or_else(|e| panic!("{upid}: {e}"));
}

#[tokio::test]
async fn ticket_login_sends_csrf_on_writes_which_fakepve_refuses_without_it() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let c = root(&pve);
    assert_eq!(c.version().await.unwrap().release, "9.0");
    // A write through the client carries the CSRF token.
    c.set_vm_config(
        "pve1",
        110,
        Params::new().set("description", "set with a ticket"),
    )
    .await
    .unwrap();
    assert_eq!(
        c.vm_config("pve1", 110)
            .await
            .unwrap()
            .get("description")
            .as_deref(),
        Some("set with a ticket")
    );

    // The same write with the ticket alone is refused.
    let http = HttpClient::with_tls(
        Duration::from_secs(10),
        karpenter_cloudprovider::http::TlsOptions::InsecureSkipVerify,
    )
    .unwrap();
    let login = http
        .send(
            &http::Request::post(format!("{}/access/ticket", pve.url))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(bytes::Bytes::from(format!(
                    "username=root%40pam&password={ROOT_PASSWORD}"
                )))
                .unwrap(),
        )
        .await
        .unwrap();
    let ticket: Value = serde_json::from_slice(&login.body).unwrap();
    let ticket = ticket["data"]["ticket"].as_str().unwrap();
    let refused = http
        .send(
            &http::Request::put(format!("{}/nodes/pve1/qemu/110/config", pve.url))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .header("Cookie", format!("PVEAuthCookie={ticket}"))
                .body(bytes::Bytes::from("description=no-csrf"))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(refused.status, 401);
    assert!(
        String::from_utf8_lossy(&refused.body).contains("invalid csrf token"),
        "{:?}",
        refused.body
    );

    // A wrong password is an authentication error, not an API one.
    let wrong = client(
        &pve,
        "    username: root@pam\n    password: wrong\n",
        "    insecure: true\n",
    );
    let err = wrong.nodes().await.unwrap_err();
    assert!(err.is_auth(), "{err}");
    assert!(
        err.to_string()
            .contains("login as root@pam: authentication failure"),
        "{err}"
    );
}

#[tokio::test]
async fn token_auth_needs_the_right_secret() {
    let Some(pve) = start(Seed {
        tokens: vec![("root@pam!karpenter".into(), "s3cret-uuid".into())],
    }) else {
        return;
    };
    let c = client(
        &pve,
        "    token_id: root@pam!karpenter\n    token_secret: s3cret-uuid\n",
        "    insecure: true\n",
    );
    let nodes: Vec<String> = c
        .nodes()
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.node)
        .collect();
    assert_eq!(nodes, ["pve1", "pve2"]);
    // Writes need no CSRF token with a token.
    c.set_vm_config("pve1", 110, Params::new().set("description", "by token"))
        .await
        .unwrap();
    let bad = client(
        &pve,
        "    token_id: root@pam!karpenter\n    token_secret: guessed\n",
        "    insecure: true\n",
    );
    let err = bad.nodes().await.unwrap_err();
    assert!(err.is_auth(), "{err}");
    assert!(!format!("{bad:?} {err}").contains("guessed"));
}

#[tokio::test]
async fn tls_trusts_the_named_ca_or_nothing_when_insecure() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let auth = format!("    username: root@pam\n    password: {ROOT_PASSWORD}\n");
    // The fake's self-signed certificate as the CA.
    let trusted = client(
        &pve,
        &auth,
        &format!("    ca_file: {}\n", pve.cert_file.display()),
    );
    assert_eq!(trusted.nodes().await.unwrap().len(), 2);
    // Insecure: no check.
    assert_eq!(root(&pve).nodes().await.unwrap().len(), 2);
    // The system's roots do not know it.
    let strict = client(&pve, &auth, "").with_retry(RetryPolicy::NEVER);
    let err = strict.nodes().await.unwrap_err();
    assert!(
        matches!(err, PveError::Transport { .. }) && err.is_retryable(),
        "{err}"
    );
    // Nor does another certificate.
    let other = pve.other_certificate();
    let wrong = client(&pve, &auth, &format!("    ca_file: {}\n", other.display()))
        .with_retry(RetryPolicy::NEVER);
    let err = wrong.nodes().await.unwrap_err();
    assert!(matches!(err, PveError::Transport { .. }), "{err}");
}

#[tokio::test]
async fn a_node_is_cloned_configured_started_stopped_and_deleted() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let c = root(&pve);

    // Ids: the lowest free one; a taken one refused; upstream's search from a minimum, which
    // does not hand the same id out twice.
    assert_eq!(c.next_id().await.unwrap(), 100);
    assert!(!c.check_id(110).await.unwrap());
    assert!(c.check_id(20000).await.unwrap());
    assert_eq!(c.next_id_from(20000).await.unwrap(), 20000);
    assert_eq!(c.next_id_from(20000).await.unwrap(), 20001);
    assert_eq!(c.next_id_from(109).await.unwrap(), 109);
    assert_eq!(c.next_id_from(109).await.unwrap(), 111, "110 is taken");

    // Clone.
    let upid = c
        .clone_vm(
            "pve1",
            9000,
            &CloneOptions {
                newid: 20000,
                name: "node-a".into(),
                description: "Karpenter managed instance, class=default".into(),
                full: Some(true),
                storage: "local-lvm".into(),
                ..CloneOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (
            upid.node.as_str(),
            upid.task_type.as_str(),
            upid.id.as_str()
        ),
        ("pve1", "qmclone", "9000")
    );
    let task = c.wait_task(&upid, TASK_TIMEOUT, POLL).await.unwrap();
    assert_eq!(task.exitstatus.as_deref(), Some("OK"));

    let cfg = c.vm_config("pve1", 20000).await.unwrap();
    assert_eq!(cfg.get("name").as_deref(), Some("node-a"));
    assert_eq!(
        cfg.get("description").as_deref(),
        Some("Karpenter managed instance, class=default")
    );
    assert_eq!(cfg.boot_disk(), Some("scsi0"));
    assert!(
        cfg.get("scsi0")
            .unwrap()
            .starts_with("local-lvm:vm-20000-disk-"),
        "{:?}",
        cfg.get("scsi0")
    );

    // Resize: fakepve takes it as a task (the size itself is the mock's test below).
    let resize = c.resize_disk("pve1", 20000, "scsi0", "30G").await.unwrap();
    c.wait_optional_task(resize.as_ref(), TASK_TIMEOUT, POLL)
        .await
        .unwrap();

    // Configure, in a task, as upstream does.
    let config = c
        .set_vm_config_async(
            "pve1",
            20000,
            Params::new()
                .set("cores", 2)
                .set("memory", 4096)
                .set("tags", "k8s;karpenter"),
        )
        .await
        .unwrap();
    c.wait_optional_task(config.as_ref(), TASK_TIMEOUT, POLL)
        .await
        .unwrap();
    let cfg = c.vm_config("pve1", 20000).await.unwrap();
    assert_eq!(
        (cfg.get("cores").as_deref(), cfg.get("memory").as_deref()),
        (Some("2"), Some("4096"))
    );
    assert_eq!(cfg.tags(), ["k8s", "karpenter"]);

    // Start: running in the resources list, where upstream's Get looks.
    wait(&c, &c.start_vm("pve1", 20000).await.unwrap()).await;
    let vm = c.vm_by_id(20000).await.unwrap().expect("listed");
    assert_eq!(
        (vm.node.as_str(), vm.name.as_str(), vm.status.as_str()),
        ("pve1", "node-a", "running")
    );
    assert_eq!((vm.maxcpu, vm.maxmem, vm.template), (2, 4096 << 20, false));
    assert_eq!(vm.tag_list(), ["k8s", "karpenter"]);
    assert!(c.vm_status("pve1", 20000).await.unwrap().is_running());
    // The template is listed as one, and vm_by_id leaves it out.
    let all = c.vm_resources().await.unwrap();
    assert!(all.iter().any(|r| r.vmid == Some(9000) && r.template));
    assert_eq!(c.vm_by_id(9000).await.unwrap(), None);

    // Stop, delete: gone, and asking for it is "not found".
    wait(&c, &c.stop_vm("pve1", 20000).await.unwrap()).await;
    assert_eq!(c.vm_by_id(20000).await.unwrap().unwrap().status, "stopped");
    let delete = c
        .delete_vm(
            "pve1",
            20000,
            DeleteOptions {
                purge: true,
                destroy_unreferenced_disks: true,
                skiplock: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(delete.task_type, "qmdestroy");
    wait(&c, &delete).await;
    assert_eq!(c.vm_by_id(20000).await.unwrap(), None);
    let err = c.vm_config("pve1", 20000).await.unwrap_err();
    assert!(err.is_not_found() && !err.is_retryable(), "{err}");
    assert!(c.vm_status("pve1", 20000).await.unwrap_err().is_not_found());
    let err = c
        .delete_vm("pve1", 20000, DeleteOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn a_failing_task_surfaces_its_exit_status() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let c = root(&pve);
    let upid = c.start_vm("pve2", 120).await.unwrap();
    assert_eq!(upid.node, "pve2", "the task runs where the VM is");
    let err = c.wait_task(&upid, TASK_TIMEOUT, POLL).await.unwrap_err();
    assert_eq!(
        err.task_exitstatus(),
        Some("start failed: QEMU exited with code 1"),
        "{err}"
    );
    // Starting a template fails in the task too.
    let err = c
        .wait_task(&c.start_vm("pve1", 9000).await.unwrap(), TASK_TIMEOUT, POLL)
        .await
        .unwrap_err();
    assert_eq!(
        err.task_exitstatus(),
        Some("you can't start a vm if it's a template")
    );
    // A clone from a VM that is not there is refused before any task.
    let err = c
        .clone_vm(
            "pve1",
            4242,
            &CloneOptions {
                newid: 20010,
                ..CloneOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    // And a clone onto a taken id.
    let err = c
        .clone_vm(
            "pve1",
            9000,
            &CloneOptions {
                newid: 110,
                full: Some(true),
                ..CloneOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(500), "{err}");
    assert!(err.to_string().contains("already exists"), "{err}");
}

#[tokio::test]
async fn a_template_is_created_and_a_running_vm_shut_down() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let c = root(&pve);
    // Upstream's managed templates: a VM made from options, then made a template.
    let id = c.next_id_from(1000).await.unwrap();
    assert_eq!(id, 1000);
    let upid = c
        .create_vm(
            "pve2",
            Params::new()
                .set("vmid", id)
                .set("name", "noble-template")
                .set("cores", 1)
                .set("memory", 1024)
                .set("scsihw", "virtio-scsi-single")
                .set("scsi0", "local-lvm:2,iothread=on")
                .set("net0", "virtio,bridge=vmbr0")
                .set("ostype", "l26"),
        )
        .await
        .unwrap();
    assert_eq!(
        (upid.node.as_str(), upid.task_type.as_str()),
        ("pve2", "qmcreate")
    );
    wait(&c, &upid).await;
    let made = c.convert_to_template("pve2", id).await.unwrap();
    c.wait_optional_task(made.as_ref(), TASK_TIMEOUT, POLL)
        .await
        .unwrap();
    let listed = c.vm_resources().await.unwrap();
    let template = listed
        .iter()
        .find(|r| r.vmid == Some(id))
        .unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(
        (
            template.node.as_str(),
            template.name.as_str(),
            template.template
        ),
        ("pve2", "noble-template", true)
    );
    assert_eq!(
        c.vm_config("pve2", id)
            .await
            .unwrap()
            .get("template")
            .as_deref(),
        Some("1")
    );

    // A graceful shutdown of the running VM.
    assert!(c.vm_status("pve1", 110).await.unwrap().is_running());
    wait(
        &c,
        &c.shutdown_vm("pve1", 110, Some(30), true).await.unwrap(),
    )
    .await;
    assert_eq!(c.vm_status("pve1", 110).await.unwrap().status, "stopped");
}

#[tokio::test]
async fn an_iso_is_uploaded_listed_and_deleted() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let c = root(&pve);
    let iso_storages: Vec<String> = c
        .storages("pve1", Some("iso"))
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.storage)
        .collect();
    assert_eq!(iso_storages, ["local"]);

    let data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let upid = c
        .upload_iso("pve1", "local", "user-data-20000.iso", &data)
        .await
        .unwrap();
    assert_eq!(upid.task_type, "imgcopy");
    wait(&c, &upid).await;
    let isos = c
        .storage_content("pve1", "local", Some("iso"))
        .await
        .unwrap();
    let iso = isos
        .iter()
        .find(|v| v.volid == "local:iso/user-data-20000.iso")
        .unwrap_or_else(|| panic!("{isos:?}"));
    assert_eq!((iso.size, iso.content.as_str()), (70_000, "iso"));

    let deleted = c
        .delete_volume("pve1", "local", "local:iso/user-data-20000.iso")
        .await
        .unwrap();
    c.wait_optional_task(deleted.as_ref(), TASK_TIMEOUT, POLL)
        .await
        .unwrap();
    assert!(
        c.storage_content("pve1", "local", Some("iso"))
            .await
            .unwrap()
            .iter()
            .all(|v| v.volid != "local:iso/user-data-20000.iso")
    );

    // A download into the storage (fakepve pretends the transfer).
    let upid = c
        .download_url(
            "pve1",
            "local",
            &DownloadUrlOptions {
                content: "iso".into(),
                filename: "noble.iso".into(),
                url: "https://images.invalid/noble.iso".into(),
                checksum: "0".repeat(64),
                checksum_algorithm: "sha256".into(),
                ..DownloadUrlOptions::default()
            },
        )
        .await
        .unwrap();
    wait(&c, &upid).await;
    assert!(
        c.storage_content("pve1", "local", None)
            .await
            .unwrap()
            .iter()
            .any(|v| v.volid == "local:iso/noble.iso")
    );
    // Uploading where ISOs do not go is refused.
    let err = c
        .upload_iso("pve1", "local-lvm", "x.iso", b"x")
        .await
        .unwrap_err();
    assert!(err.status().is_some(), "{err}");
}

#[tokio::test]
async fn cluster_nodes_pools_and_security_groups() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let c = root(&pve);
    assert_eq!(
        c.cluster_name().await.unwrap().as_deref(),
        Some("fakecluster")
    );
    let nodes = c.nodes().await.unwrap();
    assert!(
        nodes
            .iter()
            .all(|n| n.is_online() && n.maxcpu == 4 && n.maxmem == 8 << 30)
    );
    // Parameters reach the server, which checks them against PVE's schema.
    assert!(c.node_networks("pve1", Some("any_bridge")).await.is_ok());
    let err = c.node_networks("pve1", Some("bogus")).await.unwrap_err();
    assert_eq!(err.status(), Some(400), "{err}");
    let storages = c.resources(Some("storage")).await.unwrap();
    assert!(
        storages.iter().any(|s| s.node == "pve2"
            && s.storage == "local-lvm"
            && s.content_list().contains(&"images")),
        "{storages:?}"
    );

    // Pools: upstream adds a node's VM to its class's pool, and takes it out again.
    c.post::<()>("/pools", Params::new().set("poolid", "kube"))
        .await
        .unwrap();
    c.update_pool_vms("kube", &[110], false).await.unwrap();
    let pool = c.pool("kube", Some("qemu")).await.unwrap();
    assert_eq!(pool.poolid, "kube");
    assert!(pool.has_vm(110), "{pool:?}");
    assert_eq!(c.vm_by_id(110).await.unwrap().unwrap().pool, "kube");
    c.update_pool_vms("kube", &[110], true).await.unwrap();
    assert!(!c.pool("kube", None).await.unwrap().has_vm(110));

    // Security groups: a group, put on a VM's NIC as a rule, replaced, removed.
    for group in ["k8s-nodes", "k8s-ingress"] {
        c.post::<()>(
            "/cluster/firewall/groups",
            Params::new().set("group", group),
        )
        .await
        .unwrap();
    }
    let groups: Vec<String> = c
        .firewall_groups()
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.group)
        .collect();
    assert!(groups.contains(&"k8s-nodes".to_string()), "{groups:?}");

    let options = c.vm_firewall_options("pve1", 110).await.unwrap();
    assert_ne!(options.enable, Some(true));
    c.set_vm_firewall_options(
        "pve1",
        110,
        &karpenter_proxmox::pve::types::FirewallOptions {
            enable: Some(true),
            policy_in: Some("DROP".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let options = c.vm_firewall_options("pve1", 110).await.unwrap();
    assert_eq!(
        (options.enable, options.policy_in.as_deref()),
        (Some(true), Some("DROP"))
    );

    let wanted = FirewallRule::group("k8s-nodes", "net0", 0);
    c.create_vm_firewall_rule("pve1", 110, &wanted)
        .await
        .unwrap();
    let rules = c.vm_firewall_rules("pve1", 110).await.unwrap();
    assert_eq!(rules.len(), 1);
    assert!(rules[0].same_rule(&wanted), "{rules:?}");
    let replaced = FirewallRule::group("k8s-ingress", "net0", 0);
    c.update_vm_firewall_rule("pve1", 110, 0, &replaced)
        .await
        .unwrap();
    let rules = c.vm_firewall_rules("pve1", 110).await.unwrap();
    assert_eq!((rules.len(), rules[0].action.as_str()), (1, "k8s-ingress"));
    c.delete_vm_firewall_rule("pve1", 110, 0).await.unwrap();
    assert!(c.vm_firewall_rules("pve1", 110).await.unwrap().is_empty());
}

// ------------------------------------------------------------------------------------------
// In-process mocks, for what fakepve does not model.

/// What a mock saw of a request.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    query: String,
    headers: HeaderMap,
    body: String,
}

type Script = Arc<dyn Fn(&Seen, usize) -> axum::response::Response + Send + Sync>;

#[derive(Clone)]
struct Mock {
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Script,
}

async fn mock_handler(
    State(mock): State<Mock>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> axum::response::Response {
    let seen = Seen {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().unwrap_or_default().to_string(),
        headers,
        body,
    };
    let n = {
        let mut all = mock.seen.lock().unwrap();
        all.push(seen.clone());
        all.len()
    };
    (mock.script)(&seen, n)
}

/// A mock PVE at `http://127.0.0.1:<port>/api2/json` answering by `script`.
async fn mock(
    script: impl Fn(&Seen, usize) -> axum::response::Response + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let state = Mock {
        seen: seen.clone(),
        script: Arc::new(script),
    };
    let app = axum::Router::new().fallback(mock_handler).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api2/json", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn json_answer(status: StatusCode, v: Value) -> axum::response::Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn data(v: Value) -> axum::response::Response {
    json_answer(StatusCode::OK, json!({ "data": v }))
}

fn token_client(url: &str) -> PveClient {
    PveClient::new(
        url,
        Credentials::Token {
            id: "karpenter@pve!k8s".into(),
            secret: "00000000-1111-2222-3333-444444444444".into(),
        },
        HttpClient::new(Duration::from_secs(5)).unwrap(),
    )
    .unwrap()
    .with_retry(FAST)
}

fn form(body: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

const UPID_PVE2: &str = "UPID:pve2:0000A1B2:00C0FFEE:66F0C0DE:resize:20000:karpenter@pve!k8s:";

#[tokio::test]
async fn resize_sends_disk_and_size_and_its_task_is_asked_of_its_node() {
    let (url, seen) = mock(|req, _| match (req.method.as_str(), req.path.as_str()) {
        ("PUT", "/api2/json/nodes/pve2/qemu/20000/resize") => data(json!(UPID_PVE2)),
        ("GET", p) if p.starts_with("/api2/json/nodes/pve2/tasks/") => data(json!({
            "upid": UPID_PVE2, "node": "pve2", "type": "resize", "id": "20000",
            "user": "karpenter@pve!k8s", "status": "stopped", "exitstatus": "OK",
            "starttime": 1727119582
        })),
        _ => StatusCode::NOT_FOUND.into_response(),
    })
    .await;
    let c = token_client(&url);
    let upid = c
        .resize_disk("pve2", 20000, "scsi0", "30G")
        .await
        .unwrap()
        .unwrap();
    let status = c.wait_task(&upid, TASK_TIMEOUT, POLL).await.unwrap();
    assert!(status.is_successful());
    let seen = seen.lock().unwrap();
    assert_eq!(
        form(&seen[0].body),
        BTreeMap::from([
            ("disk".to_string(), "scsi0".to_string()),
            ("size".to_string(), "30G".to_string())
        ])
    );
    assert_eq!(
        seen[0].headers["content-type"],
        "application/x-www-form-urlencoded"
    );
    assert_eq!(
        seen[0].headers["authorization"],
        "PVEAPIToken=karpenter@pve!k8s=00000000-1111-2222-3333-444444444444"
    );
    assert_eq!(
        seen[1].path,
        format!("/api2/json/nodes/pve2/tasks/{UPID_PVE2}/status")
    );
}

#[tokio::test]
async fn a_task_that_never_ends_times_out() {
    let (url, seen) = mock(|_, _| {
        data(json!({"upid": UPID_PVE2, "node": "pve2", "type": "resize", "status": "running"}))
    })
    .await;
    let c = token_client(&url);
    let upid = Upid::parse(UPID_PVE2).unwrap();
    let err = c
        .wait_task(&upid, Duration::from_millis(300), Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, PveError::TaskTimeout { upid, waited } if upid == UPID_PVE2 && *waited >= Duration::from_millis(300)),
        "{err}"
    );
    let asked = seen.lock().unwrap().len();
    assert!((3..=10).contains(&asked), "asked {asked} times");
}

#[tokio::test]
async fn node_status_reads_pves_shape() {
    let (url, _) = mock(|req, _| {
        assert_eq!(req.path, "/api2/json/nodes/pve1/status");
        data(json!({
            "cpu": 0.0123, "uptime": 86400, "loadavg": ["0.10", "0.20", "0.30"],
            "cpuinfo": {"cpus": 32, "cores": 16, "sockets": 1, "model": "AMD EPYC 7302P",
                        "mhz": "3000.000", "flags": "fpu vme", "hvm": "1", "user_hz": 100},
            "memory": {"total": 135_089_041_408u64, "used": 20_000_000_000u64, "free": 115_089_041_408u64},
            "swap": {"total": 0, "used": 0, "free": 0},
            "kversion": "Linux 6.8.12-1-pve", "pveversion": "pve-manager/8.2.4/faa83925c9641325",
            "rootfs": {"total": 1, "used": 1, "avail": 0, "free": 0},
            "boot-info": {"mode": "efi", "secureboot": 0}
        }))
    })
    .await;
    let node = token_client(&url).node_status("pve1").await.unwrap();
    assert_eq!(
        (node.cpuinfo.cpus, node.cpuinfo.cores, node.cpuinfo.sockets),
        (32, 16, 1)
    );
    assert_eq!(
        (node.memory.total, node.memory.used),
        (135_089_041_408, 20_000_000_000)
    );
    assert_eq!(node.loadavg, ["0.10", "0.20", "0.30"]);
}

#[tokio::test]
async fn reads_are_retried_on_server_errors_writes_never() {
    let (url, seen) = mock(|req, n| match (req.method.as_str(), n) {
        ("GET", 1 | 2) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        ("GET", _) => data(json!([])),
        _ => StatusCode::BAD_GATEWAY.into_response(),
    })
    .await;
    let c = token_client(&url);
    assert!(c.nodes().await.unwrap().is_empty());
    assert_eq!(seen.lock().unwrap().len(), 3);
    let err = c
        .clone_vm(
            "pve1",
            9000,
            &CloneOptions {
                newid: 20000,
                ..CloneOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(502), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 4, "the clone was sent once");
}

#[tokio::test]
async fn pves_not_found_in_the_status_line_is_not_found_and_not_retried() {
    // Real PVE: the message only in the reason phrase, `{"data":null}` as the body. axum
    // cannot write a reason phrase, so this server is a socket.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api2/json", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = socket.read(&mut buf);
            let body = r#"{"data":null}"#;
            let answer = format!(
                "HTTP/1.1 500 Configuration file 'nodes/pve1/qemu-server/20000.conf' does not exist\r\nContent-Type: application/json;charset=UTF-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(answer.as_bytes());
        }
    });
    let err = token_client(&url)
        .vm_config("pve1", 20000)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert_eq!(
        err.to_string(),
        "GET /nodes/pve1/qemu/20000/config: Configuration file 'nodes/pve1/qemu-server/20000.conf' does not exist (HTTP 500)"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "not retried");
}

/// A clock the test moves forward.
fn test_clock() -> (Clock, Arc<AtomicU64>) {
    let base = tokio::time::Instant::now();
    let offset = Arc::new(AtomicU64::new(0));
    let o = offset.clone();
    let clock: Clock = Arc::new(move || base + Duration::from_secs(o.load(Ordering::SeqCst)));
    (clock, offset)
}

fn password_client(url: &str) -> PveClient {
    PveClient::new(
        url,
        Credentials::Password {
            username: "root@pam".into(),
            password: "hunter2".into(),
        },
        HttpClient::new(Duration::from_secs(5)).unwrap(),
    )
    .unwrap()
    .with_retry(FAST)
}

/// A PVE whose tickets are `ticket-<n>` and CSRF tokens `csrf-<n>`, the n-th login's; a call
/// is refused (401) unless it carries the latest ticket and, for a write, its CSRF token.
fn ticketing(seen: &Seen, logins: &AtomicUsize) -> axum::response::Response {
    if seen.path == "/api2/json/access/ticket" {
        let f = form(&seen.body);
        assert_eq!(
            (f["username"].as_str(), f["password"].as_str()),
            ("root@pam", "hunter2")
        );
        let n = logins.fetch_add(1, Ordering::SeqCst) + 1;
        return data(json!({
            "ticket": format!("ticket-{n}"), "CSRFPreventionToken": format!("csrf-{n}"),
            "username": "root@pam"
        }));
    }
    let n = logins.load(Ordering::SeqCst);
    let cookie = seen
        .headers
        .get("cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let csrf = seen
        .headers
        .get("csrfpreventiontoken")
        .and_then(|v| v.to_str().ok());
    let write = seen.method != "GET";
    if cookie != format!("PVEAuthCookie=ticket-{n}")
        || (write && csrf != Some(&format!("csrf-{n}")))
        || (!write && csrf.is_some())
    {
        return json_answer(
            StatusCode::UNAUTHORIZED,
            json!({"data": null, "message": "permission denied - invalid PVE ticket\n"}),
        );
    }
    if write {
        return data(Value::Null);
    }
    data(json!({"version": "8.2.4", "release": "8.2", "repoid": "x"}))
}

#[tokio::test]
async fn the_ticket_is_renewed_before_its_two_hours_end() {
    let logins = Arc::new(AtomicUsize::new(0));
    let l = logins.clone();
    let (url, seen) = mock(move |req, _| ticketing(req, &l)).await;
    let (clock, offset) = test_clock();
    let c = password_client(&url).with_clock(clock);

    c.version().await.unwrap();
    c.set_vm_config("pve1", 100, Params::new().set("onboot", 1))
        .await
        .unwrap();
    assert_eq!(logins.load(Ordering::SeqCst), 1, "one login serves both");

    // Just before the renewal point: the same ticket.
    let renew_at = (TICKET_LIFETIME - TICKET_RENEWAL).as_secs();
    offset.store(renew_at - 1, Ordering::SeqCst);
    c.version().await.unwrap();
    assert_eq!(logins.load(Ordering::SeqCst), 1);
    // At it, still within the two hours: a new one before the call.
    offset.store(renew_at, Ordering::SeqCst);
    c.version().await.unwrap();
    assert_eq!(logins.load(Ordering::SeqCst), 2);
    // Clones share the login.
    c.clone().version().await.unwrap();
    assert_eq!(logins.load(Ordering::SeqCst), 2);
    let seen = seen.lock().unwrap();
    assert!(
        seen.iter().all(|s| !s.query.contains("hunter2")),
        "the password only in the login's body"
    );
}

#[tokio::test]
async fn a_refused_ticket_logs_in_again_once() {
    let logins = Arc::new(AtomicUsize::new(0));
    let l = logins.clone();
    // The server forgets its tickets once: after the first login, the first write is refused.
    let forgot = Arc::new(AtomicUsize::new(0));
    let (url, seen) = mock(move |req, _| {
        if req.method == "PUT" && forgot.fetch_add(1, Ordering::SeqCst) == 0 {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        ticketing(req, &l)
    })
    .await;
    let c = password_client(&url);
    c.set_vm_config("pve1", 100, Params::new().set("onboot", 1))
        .await
        .unwrap();
    assert_eq!(logins.load(Ordering::SeqCst), 2);
    let puts = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.method == "PUT")
        .count();
    assert_eq!(puts, 2, "refused, then sent again with the new ticket");

    // A server that refuses every ticket: one more login, then an authentication error.
    let logins = Arc::new(AtomicUsize::new(0));
    let l = logins.clone();
    let (url, _) = mock(move |req, _| {
        if req.path.ends_with("/access/ticket") {
            return ticketing(req, &l);
        }
        StatusCode::UNAUTHORIZED.into_response()
    })
    .await;
    let err = password_client(&url).version().await.unwrap_err();
    assert!(err.is_auth(), "{err}");
    assert_eq!(logins.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_server_that_does_not_answer_times_out() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api2/json", listener.local_addr().unwrap());
    // Connections are taken and held, never answered.
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().take(4).collect();
        std::thread::sleep(Duration::from_secs(10));
        drop(held);
    });
    let c = PveClient::new(
        &url,
        Credentials::Token {
            id: "a@pve!b".into(),
            secret: "c".into(),
        },
        HttpClient::new(Duration::from_millis(200)).unwrap(),
    )
    .unwrap()
    .with_retry(RetryPolicy {
        attempts: 2,
        base: Duration::from_millis(1),
        max: Duration::from_millis(1),
    });
    let err = c.version().await.unwrap_err();
    assert_eq!(
        err,
        PveError::Transport {
            method: "GET".into(),
            path: "/version".into(),
            reason: "timed out".into()
        }
    );
}
