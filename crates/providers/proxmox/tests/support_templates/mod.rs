//! fakepve (PyPI `fakepve[crypto]`, AGPL-3.0-or-later) as an external test server for the
//! managed-template tests, the way the client's tests run it (`tests/fakepve_support`, kept
//! apart so the two test crates do not share a file): installed with pip when missing, started
//! per test on 127.0.0.1 over TLS with its tasks finishing at once, killed when dropped. Driven
//! only through fakepve's public Python API; nothing of it is copied here.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The pinned release.
pub const FAKEPVE: &str = "fakepve[crypto]==0.5.0";

/// The password of the fake's `root@pam`.
pub const ROOT_PASSWORD: &str = "secret";

/// Starts a `FakePve` from the JSON given as argv[1] and prints its port once it listens.
const START: &str = r#"
import asyncio, json, sys
from fakepve import FakePve
from fakepve.certs import make_cert

spec = json.loads(sys.argv[1])

async def main():
    pve = FakePve(user='root@pam', password=spec['password'], host=spec['host'], port=0)
    pve.time_scale = 0
    for node in spec['nodes']:
        pve.add_node(node)
    with open(spec['guests']) as f:
        guests = json.load(f)['guests']
    for g in guests:
        vm = pve.add_vm(g['vmid'], g['name'], node=g['node'], status=g.get('status', 'stopped'),
                        config=g.get('config', {}), template=g.get('template', False))
        if 'start_error' in g:
            vm.start_error = g['start_error']
    pve.apitokens.update(spec['tokens'])
    cert, key, _ = make_cert(spec['dir'], hosts=(spec['host'],))
    await pve.start(cert, key)
    print(pve.port, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"#;

/// A fakepve server, stopped when dropped.
pub struct FakePve {
    child: Child,
    dir: PathBuf,
    /// `https://127.0.0.1:<port>/api2/json`.
    pub url: String,
}

impl Drop for FakePve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a server starts with besides nodes `pve1` and `pve2`.
#[derive(Default)]
pub struct Seed {
    /// API tokens: (`user@realm!id`, secret).
    pub tokens: Vec<(String, String)>,
}

/// The guests every server has: template 9000 on pve1 (a disk on local-lvm, a NIC), a running
/// VM 110 on pve1, and VM 120 on pve2 whose start fails.
fn guests() -> serde_json::Value {
    serde_json::json!({"guests": [
        {"vmid": 9000, "name": "ubuntu-template", "node": "pve1", "template": true,
         "config": {"cores": 1, "sockets": 1, "memory": 1024, "scsihw": "virtio-scsi-single",
                    "scsi0": "local-lvm:base-9000-disk-0,size=2G", "boot": "order=scsi0",
                    "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0", "tags": "template",
                    "smbios1": "uuid=00000000-0000-0000-0000-000000009000"}},
        {"vmid": 110, "name": "running-vm", "node": "pve1", "status": "running",
         "config": {"cores": 2, "memory": 2048, "net0": "virtio=BC:24:11:00:00:02,bridge=vmbr0"}},
        {"vmid": 120, "name": "broken-vm", "node": "pve2",
         "config": {"cores": 1, "memory": 512},
         "start_error": "start failed: QEMU exited with code 1"}
    ]})
}

fn python3_runs() -> bool {
    Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn installed() -> bool {
    Command::new("python3")
        .args(["-c", "import fakepve, fakepve.certs, cryptography"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs fakepve once per test binary; `false` (after saying why) when there is no python3.
fn ready() -> bool {
    static READY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *READY.get_or_init(|| {
        if !python3_runs() {
            eprintln!("skipping the fakepve tests: python3 is not installed");
            return false;
        }
        if !installed() {
            let status = Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    FAKEPVE,
                ])
                .status()
                .expect("python3 runs");
            assert!(
                status.success() && installed(),
                "installing {FAKEPVE} failed"
            );
        }
        true
    })
}

/// A started server, or `None` (the test should return, passing) when python3 is missing.
pub fn start(seed: Seed) -> Option<FakePve> {
    if !ready() {
        return None;
    }
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "fakepve-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let guests_file = dir.join("guests.json");
    std::fs::write(&guests_file, guests().to_string()).unwrap();
    let tokens: serde_json::Map<String, serde_json::Value> = seed
        .tokens
        .into_iter()
        .map(|(id, secret)| (id, secret.into()))
        .collect();
    let spec = serde_json::json!({
        "host": "127.0.0.1",
        "password": ROOT_PASSWORD,
        "nodes": ["pve1", "pve2"],
        "guests": guests_file,
        "tokens": tokens,
        "dir": dir,
    });
    let stderr = std::fs::File::create(dir.join("stderr.log")).unwrap();
    let mut child = Command::new("python3")
        .args(["-c", START, &spec.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("python3 starts");
    // The port comes on the first line once the server listens; a thread reads it so a
    // server that hangs cannot hang the test.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
    let Ok(port) = line.trim().parse::<u16>() else {
        let _ = child.kill();
        let _ = child.wait();
        let log = std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default();
        panic!("fakepve did not start (stdout {line:?}):\n{log}");
    };
    Some(FakePve {
        child,
        url: format!("https://127.0.0.1:{port}/api2/json"),
        dir,
    })
}
