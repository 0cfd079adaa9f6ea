//! The types' wire names, the defaults CCE applies, and the create-time checks.

use serde_json::{Value, json};

use super::*;

fn spec(value: Value) -> CCENodeClassSpec {
    serde_json::from_value(value).expect("a valid spec")
}

/// A spec as upstream's own create-time tests start from: every disk at its minimum.
fn valid() -> CCENodeClassSpec {
    spec(json!({
        "subnetSelectorTerms": [{"id": "123e4567-e89b-12d3-a456-426614174000"}],
        "imsSelector": {"imsFamily": "Huawei Cloud EulerOS 2.0"},
        "blockDeviceMappings": {
            "root": {"volumeSize": 40, "volumeType": "SSD"},
            "k8s": {"volumeSize": 20, "volumeType": "SAS"},
            "users": [{"volumeSize": 10, "volumeType": "SATA"}],
        },
        "login": {"userPassword": {"password": "ciphertext"}},
    }))
}

#[test]
fn wire_names_are_upstreams() {
    let spec = spec(json!({
        "subnetSelectorTerms": [{"id": "123e4567-e89b-12d3-a456-426614174000"}, {"name": "subnet-a"}],
        "ecsGroupId": "46ebaf04-ca42-48ca-8057-0b96e6126e1b",
        "imsSelector": {"imsFamily": "HCE OS 2.0"},
        "blockDeviceMappings": {
            "root": {"volumeSize": 120, "volumeType": "GPSSD2", "iops": 3000, "throughput": 125},
            "k8s": {"volumeSize": 100, "volumeType": "SAS"},
            "users": [{"volumeSize": 50, "volumeType": "SSD"}],
        },
        "runtimeConfiguration": {"type": "docker"},
        "login": {"userPassword": {"username": "root", "password": "ciphertext"}, "sshKey": "keypair"},
        "kubelet": {"maxPods": 64, "kubeReserved": {"cpu": "100m"}, "systemReserved": {"pid": "1000"}},
    }));
    assert_eq!(
        spec.ecs_group_id.as_deref(),
        Some("46ebaf04-ca42-48ca-8057-0b96e6126e1b")
    );
    assert_eq!(spec.ims_selector.ims_family, "HCE OS 2.0");
    assert_eq!(
        spec.subnet_selector_terms[1].name.as_deref(),
        Some("subnet-a")
    );
    let disks = &spec.block_device_mappings;
    assert_eq!(
        (
            disks.root.volume_size,
            disks.root.iops,
            disks.root.throughput
        ),
        (120, Some(3000), Some(125))
    );
    assert_eq!(disks.k8s.as_ref().unwrap().volume_type, "SAS");
    assert_eq!(disks.users[0].volume_size, 50);
    assert_eq!(
        spec.runtime_configuration
            .as_ref()
            .unwrap()
            .type_
            .as_deref(),
        Some("docker")
    );
    let password = spec.login.user_password.as_ref().unwrap();
    assert_eq!(
        (password.username.as_deref(), password.password.as_str()),
        (Some("root"), "ciphertext")
    );
    assert_eq!(spec.login.ssh_key.as_deref(), Some("keypair"));
    let kubelet = spec.kubelet.as_ref().unwrap();
    assert_eq!(kubelet.max_pods, Some(64));
    assert_eq!(kubelet.kube_reserved["cpu"], "100m");
    assert_eq!(kubelet.system_reserved["pid"], "1000");
    // And written back under the same names.
    let written = serde_json::to_value(&spec).unwrap();
    for pointer in [
        "/ecsGroupId",
        "/imsSelector/imsFamily",
        "/blockDeviceMappings/k8s/volumeType",
        "/blockDeviceMappings/root/iops",
        "/blockDeviceMappings/users/0/volumeSize",
        "/runtimeConfiguration/type",
        "/login/userPassword/username",
        "/login/sshKey",
        "/kubelet/maxPods",
        "/kubelet/kubeReserved/cpu",
        "/kubelet/systemReserved/pid",
    ] {
        assert!(written.pointer(pointer).is_some(), "{pointer} in {written}");
    }
}

#[test]
fn unset_optional_fields_are_not_written() {
    let written = serde_json::to_value(valid()).unwrap();
    assert_eq!(
        written,
        json!({
            "subnetSelectorTerms": [{"id": "123e4567-e89b-12d3-a456-426614174000"}],
            "imsSelector": {"imsFamily": "Huawei Cloud EulerOS 2.0"},
            "blockDeviceMappings": {
                "root": {"volumeSize": 40, "volumeType": "SSD"},
                "k8s": {"volumeSize": 20, "volumeType": "SAS"},
                "users": [{"volumeSize": 10, "volumeType": "SATA"}],
            },
            "login": {"userPassword": {"password": "ciphertext"}},
        })
    );
}

#[test]
fn disks_as_cce_creates_them() {
    let disk = |size: i32, kind: &str| BlockDevice {
        volume_size: size,
        volume_type: kind.into(),
        ..Default::default()
    };
    let cases = [
        (disk(120, "SAS"), (120, "SAS")),
        (disk(0, ""), (40, "SSD")),
        (disk(-5, "ESSD"), (40, "ESSD")),
        (disk(60, ""), (60, "SSD")),
    ];
    for (written, (size, kind)) in cases {
        let effective = written.effective();
        assert_eq!(
            (effective.volume_size, effective.volume_type.as_str()),
            (size, kind),
            "{written:?}"
        );
    }
    let iops = BlockDevice {
        iops: Some(3000),
        throughput: Some(125),
        ..disk(100, "GPSSD2")
    };
    assert_eq!(iops.effective(), iops, "IOPS and throughput are kept");

    // Unset, the k8s disk is 100 GiB of the root disk's type, as CCE is asked for it.
    let mut mappings = BlockDeviceMappings {
        root: disk(50, "ESSD"),
        ..Default::default()
    };
    assert_eq!(mappings.k8s_or_default(), disk(100, "ESSD"));
    mappings.root = disk(50, "");
    assert_eq!(mappings.k8s_or_default(), disk(100, "SSD"));
    mappings.k8s = Some(disk(200, "SAS"));
    assert_eq!(mappings.k8s_or_default(), disk(200, "SAS"));
}

#[test]
fn login_runtime_and_group() {
    let login = |value: Value| serde_json::from_value::<Login>(value).unwrap();
    let cases = [
        (json!({"sshKey": "kp"}), Some(LoginMethod::SshKey("kp"))),
        (
            json!({"userPassword": {"password": "c"}}),
            Some(LoginMethod::Password {
                username: "root",
                password: "c",
            }),
        ),
        (
            json!({"userPassword": {"username": "", "password": "c"}}),
            Some(LoginMethod::Password {
                username: "root",
                password: "c",
            }),
        ),
        // Both set (the CRD refuses it): the key pair, as upstream sends.
        (
            json!({"userPassword": {"password": "c"}, "sshKey": "kp"}),
            Some(LoginMethod::SshKey("kp")),
        ),
        (
            json!({"userPassword": {"password": "c"}, "sshKey": ""}),
            Some(LoginMethod::Password {
                username: "root",
                password: "c",
            }),
        ),
        (json!({}), None),
    ];
    for (value, want) in cases {
        assert_eq!(login(value.clone()).method(), want, "{value}");
    }

    let with = |pointer: &str, value: Value| {
        let mut spec = serde_json::to_value(valid()).unwrap();
        spec.as_object_mut().unwrap().insert(pointer.into(), value);
        self::spec(spec)
    };
    assert_eq!(valid().runtime(), None);
    assert_eq!(with("runtimeConfiguration", json!({})).runtime(), None);
    assert_eq!(
        with("runtimeConfiguration", json!({"type": ""})).runtime(),
        None
    );
    assert_eq!(
        with("runtimeConfiguration", json!({"type": "docker"})).runtime(),
        Some("docker")
    );
    assert_eq!(valid().ecs_group_id(), None);
    assert_eq!(with("ecsGroupId", json!("")).ecs_group_id(), None);
    assert_eq!(with("ecsGroupId", json!("g-1")).ecs_group_id(), Some("g-1"));
}

/// Upstream's `TestCCENodeClassSpecValidateForCreateNode` and `ValidateKubeletForCreateNode`
/// cases, and the message each refusal gives.
#[test]
fn create_time_checks() {
    type Change = fn(&mut CCENodeClassSpec);
    let cases: &[(&str, Change, Option<&str>)] = &[
        ("valid data volumes", |_| {}, None),
        (
            "ssh key login",
            |s| {
                s.login.user_password = None;
                s.login.ssh_key = Some("cluster-keypair".into());
            },
            None,
        ),
        (
            "no login",
            |s| s.login.user_password = None,
            Some("spec.login must set exactly one of userPassword or sshKey"),
        ),
        (
            "both logins",
            |s| s.login.ssh_key = Some("cluster-keypair".into()),
            Some("spec.login must set exactly one of userPassword or sshKey"),
        ),
        (
            "an empty ssh key is none",
            |s| {
                s.login.user_password = None;
                s.login.ssh_key = Some(String::new());
            },
            Some("spec.login must set exactly one of userPassword or sshKey"),
        ),
        (
            "empty password",
            |s| s.login.user_password.as_mut().unwrap().password.clear(),
            Some("spec.login.userPassword.password is required"),
        ),
        (
            "root below 40",
            |s| s.block_device_mappings.root.volume_size = 39,
            Some("spec.blockDeviceMappings.root.volumeSize must be at least 40Gi"),
        ),
        (
            "k8s below 20",
            |s| s.block_device_mappings.k8s.as_mut().unwrap().volume_size = 19,
            Some("spec.blockDeviceMappings.k8s.volumeSize must be at least 20Gi"),
        ),
        ("no k8s disk", |s| s.block_device_mappings.k8s = None, None),
        (
            "user disk below 10",
            |s| s.block_device_mappings.users[0].volume_size = 9,
            Some("spec.blockDeviceMappings.users[0].volumeSize must be at least 10Gi"),
        ),
        (
            "no OS family",
            |s| s.ims_selector.ims_family.clear(),
            Some("spec.imsSelector.imsFamily is required"),
        ),
        (
            "maxPods 16 and reservations CCE takes",
            |s| {
                s.kubelet = Some(KubeletConfiguration {
                    max_pods: Some(16),
                    kube_reserved: [("cpu".into(), "100m".into())].into(),
                    system_reserved: [("memory".into(), "1.5Gi".into())].into(),
                })
            },
            None,
        ),
        ("maxPods 256", |s| s.kubelet = Some(max_pods(256)), None),
        (
            "maxPods 15",
            |s| s.kubelet = Some(max_pods(15)),
            Some("spec.kubelet.maxPods must be between 16 and 256"),
        ),
        (
            "maxPods 257",
            |s| s.kubelet = Some(max_pods(257)),
            Some("spec.kubelet.maxPods must be between 16 and 256"),
        ),
        (
            "memory not whole Mi",
            |s| {
                s.kubelet = Some(KubeletConfiguration {
                    kube_reserved: [("memory".into(), "1G".into())].into(),
                    ..Default::default()
                })
            },
            Some("spec.kubelet.kubeReserved.memory must be a whole number of Mi"),
        ),
    ];
    for (name, change, want) in cases {
        let mut spec = valid();
        change(&mut spec);
        assert_eq!(spec.validate_for_create().err().as_deref(), *want, "{name}");
    }
}

fn max_pods(n: i32) -> KubeletConfiguration {
    KubeletConfiguration {
        max_pods: Some(n),
        ..Default::default()
    }
}

#[test]
fn every_create_time_problem_is_reported() {
    let mut spec = valid();
    spec.block_device_mappings.root.volume_size = 20;
    spec.block_device_mappings.users[0].volume_size = 5;
    spec.kubelet = Some(KubeletConfiguration {
        system_reserved: [("pid".into(), "-1".into())].into(),
        ..Default::default()
    });
    assert_eq!(
        spec.validate_for_create().unwrap_err(),
        "spec.blockDeviceMappings.root.volumeSize must be at least 40Gi; \
         spec.blockDeviceMappings.users[0].volumeSize must be at least 10Gi; \
         spec.kubelet.systemReserved.pid must not be negative"
    );
}
