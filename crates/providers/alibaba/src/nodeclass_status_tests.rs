use super::*;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};

use crate::ecsnodeclass::{SecurityGroup, SecurityGroupSelectorTerm, VSwitch};
use crate::imagefamily::image;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + second).unwrap()
}

const CREATED: i64 = 0;

fn class(generation: i64, status: Option<ECSNodeClassStatus>) -> ECSNodeClass {
    ECSNodeClass {
        metadata: ObjectMeta {
            name: Some("default".into()),
            generation: Some(generation),
            creation_timestamp: Some(Time(at(CREATED))),
            ..ObjectMeta::default()
        },
        spec: ECSNodeClassSpec {
            security_group_selector_terms: vec![SecurityGroupSelectorTerm {
                name: Some("nodes".into()),
                ..Default::default()
            }],
            ..Default::default()
        },
        status,
    }
}

fn v_switch(id: &str, zone: &str, ips: i64) -> VSwitchInfo {
    VSwitchInfo {
        id: id.into(),
        zone_id: zone.into(),
        available_ip_address_count: ips,
    }
}

fn found() -> Observed {
    Observed {
        v_switches: Ok(vec![
            v_switch("vsw-b", "cn-hangzhou-i", 200),
            v_switch("vsw-a", "cn-hangzhou-h", 100),
        ]),
        security_groups: Ok(vec![SecurityGroupInfo {
            id: "sg-1".into(),
            name: "nodes".into(),
        }]),
        images: Ok(vec![
            image("aliyun_3_x64_20G_alibase_20240819.vhd", "alinux3", "x86_64").unwrap(),
        ]),
    }
}

/// `(status, reason, message)` of a condition.
fn condition<'a>(s: &'a ECSNodeClassStatus, type_: &str) -> (&'a str, &'a str, &'a str) {
    let c = s
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {:?}", s.conditions));
    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
}

fn transition(s: &ECSNodeClassStatus, type_: &str) -> Timestamp {
    s.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap()
        .last_transition_time
        .0
}

#[test]
fn everything_found_is_ready_and_listed() {
    let s = status(&class(3, None), &found(), at(10));
    assert_eq!(
        s.v_switches,
        [
            VSwitch {
                id: "vsw-b".into(),
                zone_id: "cn-hangzhou-i".into()
            },
            VSwitch {
                id: "vsw-a".into(),
                zone_id: "cn-hangzhou-h".into()
            },
        ]
    );
    assert_eq!(
        s.security_groups,
        [SecurityGroup {
            id: "sg-1".into(),
            name: Some("nodes".into())
        }]
    );
    assert_eq!(s.images[0].id, "aliyun_3_x64_20G_alibase_20240819.vhd");
    for type_ in READY_CONDITIONS.into_iter().chain([CONDITION_READY]) {
        assert_eq!(condition(&s, type_), ("True", type_, ""), "{type_}");
        assert_eq!(transition(&s, type_), at(10), "{type_}");
    }
    assert!(
        s.conditions
            .iter()
            .all(|c| c.observed_generation == Some(3))
    );
    assert_eq!(s.conditions.last().unwrap().type_, CONDITION_READY);
    assert_eq!(s.conditions.len(), 4);
}

/// Each part matching nothing, as upstream reports it.
#[test]
fn a_selector_matching_nothing_names_itself() {
    type Edit = fn(&mut Observed);
    let cases: [(Edit, &str, &str, &str); 3] = [
        (
            |o| o.v_switches = Ok(Vec::new()),
            CONDITION_VSWITCHES_READY,
            "vSwitchesNotFound",
            "VSwitchSelector did not match any VSwitches",
        ),
        (
            |o| o.security_groups = Ok(Vec::new()),
            CONDITION_SECURITY_GROUPS_READY,
            "SecurityGroupsNotFound",
            "SecurityGroupSelector did not match any SecurityGroups",
        ),
        (
            |o| o.images = Ok(Vec::new()),
            CONDITION_IMAGES_READY,
            "ImagesNotFound",
            "ImageSelector did not match any Images",
        ),
    ];
    for (edit, type_, reason, message) in cases {
        // Found before, gone now: the list is emptied.
        let before = status(&class(1, None), &found(), at(10));
        let mut observed = found();
        edit(&mut observed);
        let s = status(&class(1, Some(before)), &observed, at(20));
        assert_eq!(condition(&s, type_), ("False", reason, message));
        assert_eq!(transition(&s, type_), at(20));
        assert_eq!(
            condition(&s, CONDITION_READY),
            (
                "False",
                "UnhealthyDependents",
                format!("{type_}=False").as_str()
            )
        );
        assert_eq!(transition(&s, CONDITION_READY), at(20));
        let emptied = match type_ {
            CONDITION_VSWITCHES_READY => s.v_switches.is_empty(),
            CONDITION_SECURITY_GROUPS_READY => s.security_groups.is_empty(),
            _ => s.images.is_empty(),
        };
        assert!(emptied, "{type_}: {s:?}");
        for other in READY_CONDITIONS.into_iter().filter(|t| *t != type_) {
            assert_eq!(condition(&s, other).0, "True", "{other}");
            assert_eq!(transition(&s, other), at(10), "{other} did not change");
        }
    }
}

#[test]
fn no_security_group_terms_select_none_and_that_is_ready() {
    let mut c = class(1, None);
    c.spec.security_group_selector_terms.clear();
    let mut observed = found();
    observed.security_groups = Ok(Vec::new());
    let s = status(&c, &observed, at(10));
    assert_eq!(condition(&s, CONDITION_SECURITY_GROUPS_READY).0, "True");
    assert_eq!(condition(&s, CONDITION_READY).0, "True");
    assert_eq!(requeue_after(&c.spec, &observed), Ok(REQUEUE_RESOLVED));
}

#[test]
fn a_failed_listing_leaves_its_part_as_it_was() {
    let failing = |o: &mut Observed| o.images = Err("describing image m-1: Throttling".into());
    // First pass: the part was never decided, so it awaits reconciliation and so does Ready.
    let mut observed = found();
    failing(&mut observed);
    let s = status(&class(1, None), &observed, at(10));
    assert_eq!(
        condition(&s, CONDITION_IMAGES_READY),
        (
            "Unknown",
            "AwaitingReconciliation",
            "object is awaiting reconciliation"
        )
    );
    assert_eq!(transition(&s, CONDITION_IMAGES_READY), at(CREATED));
    assert_eq!(
        condition(&s, CONDITION_READY),
        ("Unknown", "ReconcilingDependents", "ImagesReady=Unknown")
    );

    // Ready before: the images stay listed and the condition stays, for the same generation.
    let ready = status(&class(1, None), &found(), at(10));
    let s = status(&class(1, Some(ready.clone())), &observed, at(20));
    assert_eq!(s, ready);

    // A new generation: the failing part was not decided for it, so Ready is not True.
    let s = status(&class(2, Some(ready.clone())), &observed, at(20));
    assert_eq!(s.images, ready.images);
    let images = s
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_IMAGES_READY)
        .unwrap();
    assert_eq!(
        (images.status.as_str(), images.observed_generation),
        ("True", Some(1))
    );
    assert_eq!(
        condition(&s, CONDITION_READY),
        ("Unknown", "ReconcilingDependents", "ImagesReady=True")
    );
    assert_eq!(transition(&s, CONDITION_READY), at(20));
}

#[test]
fn a_pass_where_every_listing_failed_changes_nothing() {
    let observed = Observed {
        v_switches: Err("a".into()),
        security_groups: Err("b".into()),
        images: Err("c".into()),
    };
    let ready = status(&class(1, None), &found(), at(10));
    // Even for a new generation: upstream sets no condition, so Ready is not recomputed.
    assert_eq!(
        status(&class(2, Some(ready.clone())), &observed, at(20)),
        ready
    );
    assert_eq!(
        requeue_after(&class(1, None).spec, &observed)
            .unwrap_err()
            .to_string(),
        "resolving the ECSNodeClass: a; b; c"
    );
}

#[test]
fn transition_times_move_only_with_the_status() {
    let s1 = status(&class(1, None), &found(), at(10));
    // Same outcome later: nothing moves.
    let s2 = status(&class(1, Some(s1.clone())), &found(), at(20));
    assert_eq!(s2, s1);
    // A new generation with the same outcome restamps the generation only.
    let s3 = status(&class(2, Some(s2)), &found(), at(30));
    assert!(
        s3.conditions
            .iter()
            .all(|c| c.observed_generation == Some(2) && c.last_transition_time.0 == at(10))
    );
    // vSwitches gone, then security groups gone: Ready stays False and keeps its time; its
    // message names the most recent change first.
    let mut none = found();
    none.v_switches = Ok(Vec::new());
    let s4 = status(&class(2, Some(s3)), &none, at(40));
    none.security_groups = Ok(Vec::new());
    let s5 = status(&class(2, Some(s4)), &none, at(50));
    assert_eq!(transition(&s5, CONDITION_VSWITCHES_READY), at(40));
    assert_eq!(transition(&s5, CONDITION_SECURITY_GROUPS_READY), at(50));
    assert_eq!(transition(&s5, CONDITION_READY), at(40));
    assert_eq!(
        condition(&s5, CONDITION_READY),
        (
            "False",
            "UnhealthyDependents",
            "SecurityGroupsReady=False, VSwitchesReady=False"
        )
    );
    // Oldest transition first, Ready last.
    let order: Vec<&str> = s5.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        order,
        [
            CONDITION_IMAGES_READY,
            CONDITION_VSWITCHES_READY,
            CONDITION_SECURITY_GROUPS_READY,
            CONDITION_READY
        ]
    );
    // Found again: everything is True from then on.
    let s6 = status(&class(2, Some(s5)), &found(), at(60));
    assert_eq!(condition(&s6, CONDITION_READY), ("True", "Ready", ""));
    assert_eq!(transition(&s6, CONDITION_READY), at(60));
    assert_eq!(transition(&s6, CONDITION_IMAGES_READY), at(10));
}

#[test]
fn other_conditions_are_kept() {
    let mut before = status(&class(1, None), &found(), at(10));
    before.conditions.push(Condition {
        type_: "Custom".into(),
        status: "True".into(),
        reason: "Custom".into(),
        message: String::new(),
        last_transition_time: Time(at(5)),
        observed_generation: Some(1),
    });
    let s = status(&class(1, Some(before)), &found(), at(20));
    assert_eq!(condition(&s, "Custom"), ("True", "Custom", ""));
    assert_eq!(condition(&s, CONDITION_READY).0, "True");
}

#[test]
fn requeue_as_upstream_does() {
    let spec = class(1, None).spec;
    type Edit = fn(&mut Observed);
    let cases: [(Edit, Result<Duration, ()>); 5] = [
        (|_| {}, Ok(REQUEUE_RESOLVED)),
        (|o| o.v_switches = Ok(Vec::new()), Ok(REQUEUE_NOT_FOUND)),
        (
            |o| o.security_groups = Ok(Vec::new()),
            Ok(REQUEUE_NOT_FOUND),
        ),
        // No images waits for the vSwitches' minute: upstream asks for no sooner look.
        (|o| o.images = Ok(Vec::new()), Ok(REQUEUE_RESOLVED)),
        (|o| o.v_switches = Err("VPC down".into()), Err(())),
    ];
    for (i, (edit, expected)) in cases.into_iter().enumerate() {
        let mut observed = found();
        edit(&mut observed);
        assert_eq!(
            requeue_after(&spec, &observed).map_err(|_| ()),
            expected,
            "case {i}"
        );
    }
    let mut observed = found();
    observed.v_switches = Err("VPC down".into());
    assert_eq!(
        observed.failure(),
        Some(ResolutionFailed(vec!["VPC down".into()]))
    );
    assert_eq!(found().failure(), None);
}
