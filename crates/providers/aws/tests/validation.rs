//! `ValidationSucceeded` against a fake EC2 whose dry runs can be denied: upstream's
//! "Authorization Validation" cases — the denied call, the condition's reason and message, the
//! verdict cached until it expires — and the checks' order and inputs.

mod support;

use std::time::Instant;

use karpenter_aws::EC2NodeClass;
use karpenter_aws::http::AwsError;
use karpenter_aws::nodeclass::ResolvedNodeClass;
use karpenter_aws::provider::AwsCloudProvider;
use karpenter_aws::validation::{self, CACHE_TTL, Outcome, ValidationCache};
use support::{FakeEc2, Store, node_class, provider, provider_with_options};

fn denied(message: &str) -> AwsError {
    AwsError::Api {
        code: "UnauthorizedOperation".into(),
        message: message.into(),
        status: 403,
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

async fn resolved(p: &AwsCloudProvider<FakeEc2, Store>, class: &EC2NodeClass) -> ResolvedNodeClass {
    p.resolve_node_class(class).await.expect("resolves")
}

fn failed(reason: &str, message: &str) -> Outcome {
    Outcome::Failed {
        reason: reason.into(),
        message: message.into(),
    }
}

#[test]
fn a_denied_call_fails_validation_until_the_verdict_expires() {
    let no_policy = "User is not authorized to perform this operation because no identity-based policy allows it";
    type Deny = fn(&FakeEc2);
    let cases: [(Deny, &str, String); 3] = [
        (
            |f| f.checks().fleet_errors.push(denied("")),
            "CreateFleetAuthCheckFailed",
            format!("Controller isn't authorized to call ec2:CreateFleet: {no_policy}"),
        ),
        (
            |f| f.checks().run_errors.push(denied("")),
            "RunInstancesAuthCheckFailed",
            format!("Controller isn't authorized to call ec2:RunInstances: {no_policy}"),
        ),
        (
            |f| f.checks().template_errors.push(denied("")),
            "CreateLaunchTemplateAuthCheckFailed",
            format!("Controller isn't authorized to call ec2:CreateLaunchTemplate: {no_policy}"),
        ),
    ];
    for (deny, reason, message) in cases {
        block_on(async {
            let fake = FakeEc2::default();
            let class = node_class(serde_json::json!({}));
            let p = provider(fake.clone(), class.clone());
            let r = resolved(&p, &class).await;
            deny(&fake);
            let cache = ValidationCache::default();
            let now = Instant::now();
            let outcome = validation::validate(&p, &class, &r, &cache, now).await;
            assert_eq!(outcome, failed(reason, &message));
            assert_eq!(cache.len(), 1);
            // The call would pass now, but the verdict is cached.
            let calls = fake.checks().dry_runs.len();
            let again = validation::validate(&p, &class, &r, &cache, now).await;
            assert_eq!(again, failed(reason, &message));
            assert_eq!(fake.checks().dry_runs.len(), calls, "no call while cached");
            // Once it expires, validation runs again and passes.
            let later = validation::validate(&p, &class, &r, &cache, now + CACHE_TTL).await;
            assert_eq!(later, Outcome::Succeeded, "{reason}");
        });
    }
}

#[test]
fn the_dry_runs_use_the_template_made_for_the_node_class() {
    block_on(async {
        let fake = FakeEc2::default();
        let class = node_class(serde_json::json!({"tags": {"team": "a"}}));
        let p = provider(fake.clone(), class.clone());
        let r = resolved(&p, &class).await;
        let outcome =
            validation::validate(&p, &class, &r, &ValidationCache::default(), Instant::now()).await;
        assert_eq!(outcome, Outcome::Succeeded);
        let templates = fake.templates.lock().unwrap().clone();
        assert_eq!(templates.len(), 1, "one template, for one instance type");
        let (name, data) = templates.iter().next().unwrap();
        assert_eq!(data.tags["team"], "a");
        assert_eq!(data.tags["karpenter.k8s.aws/ec2nodeclass"], "default");
        // The NodePool tag IAM policies ask for is there, empty, as upstream sets it.
        assert_eq!(data.tags["karpenter.sh/nodepool"], "");
        assert_eq!(data.tags["kubernetes.io/cluster/test"], "owned");
        let runs = fake.checks().dry_runs.clone();
        assert_eq!(
            runs,
            vec![
                (
                    "CreateFleet".to_string(),
                    name.clone(),
                    vec!["subnet-a".to_string()]
                ),
                (
                    "RunInstances".to_string(),
                    name.clone(),
                    vec!["subnet-a".to_string()]
                ),
            ]
        );
    });
}

#[test]
fn a_permission_boundary_is_named_in_the_message() {
    block_on(async {
        let fake = FakeEc2::default();
        let class = node_class(serde_json::json!({}));
        let p = provider(fake.clone(), class.clone());
        let r = resolved(&p, &class).await;
        fake.checks().fleet_errors.push(denied(
            "You are not authorized to perform this operation with an explicit deny in a permissions boundary",
        ));
        let outcome =
            validation::validate(&p, &class, &r, &ValidationCache::default(), Instant::now()).await;
        assert_eq!(
            outcome,
            failed(
                "CreateFleetAuthCheckFailed",
                "Controller isn't authorized to call ec2:CreateFleet: User is not authorized to perform this operation due to a permission boundary"
            )
        );
        // CreateFleet failed: RunInstances was not tried.
        assert!(
            fake.checks()
                .dry_runs
                .iter()
                .all(|(call, _, _)| call == "CreateFleet")
        );
    });
}

#[test]
fn throttling_is_no_verdict_and_is_not_cached() {
    block_on(async {
        let fake = FakeEc2::default();
        let class = node_class(serde_json::json!({}));
        let p = provider(fake.clone(), class.clone());
        let r = resolved(&p, &class).await;
        fake.checks().run_errors.push(AwsError::Api {
            code: "RequestLimitExceeded".into(),
            message: "Request limit exceeded.".into(),
            status: 503,
        });
        let cache = ValidationCache::default();
        let outcome = validation::validate(&p, &class, &r, &cache, Instant::now()).await;
        assert!(matches!(outcome, Outcome::Retry(_)), "{outcome:?}");
        assert!(cache.is_empty());
        let outcome = validation::validate(&p, &class, &r, &cache, Instant::now()).await;
        assert_eq!(outcome, Outcome::Succeeded);
    });
}

/// An answer a dry run should never get (upstream returns it to its work queue, which backs
/// off): no verdict, asked again later and later, and the wait starts over after a verdict.
#[test]
fn an_unexpected_answer_is_asked_again_backing_off() {
    block_on(async {
        let fake = FakeEc2::default();
        let class = node_class(serde_json::json!({}));
        let p = provider(fake.clone(), class.clone());
        let r = resolved(&p, &class).await;
        let unexpected = AwsError::Api {
            code: "InvalidParameterCombination".into(),
            message: "not like this".into(),
            status: 400,
        };
        let cache = ValidationCache::default();
        let mut waits = Vec::new();
        for _ in 0..9 {
            fake.checks().run_errors.push(unexpected.clone());
            let outcome = validation::validate(&p, &class, &r, &cache, Instant::now()).await;
            assert!(matches!(outcome, Outcome::Retry(_)), "{outcome:?}");
            waits.push(cache.retry_after("default").as_secs());
        }
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 600, 600, 600]);
        // Every validation used the one launch template (as a launch of the same data would):
        // re-validating makes no new ones.
        assert_eq!(fake.templates.lock().unwrap().len(), 1);
        let outcome = validation::validate(&p, &class, &r, &cache, Instant::now()).await;
        assert_eq!(outcome, Outcome::Succeeded);
        fake.checks().run_errors.push(unexpected);
        // The verdict above is cached; a changed NodeClass is validated afresh.
        let mut changed = class.clone();
        changed.spec.tags.insert("team".into(), "b".into());
        let outcome = validation::validate(&p, &changed, &r, &cache, Instant::now()).await;
        assert!(matches!(outcome, Outcome::Retry(_)), "{outcome:?}");
        assert_eq!(cache.retry_after("default").as_secs(), 10, "counted afresh");
    });
}

/// The dry runs name the launch template's interfaces with the subnet, and the template
/// carries its groups on them: a combination EC2 takes (the fake rejects groups on the
/// template beside interfaces in the call, as EC2 does).
#[test]
fn the_run_instances_dry_run_names_the_templates_interfaces() {
    block_on(async {
        let fake = FakeEc2::default();
        let class = node_class(serde_json::json!({}));
        let p = provider(fake.clone(), class.clone());
        let r = resolved(&p, &class).await;
        let outcome =
            validation::validate(&p, &class, &r, &ValidationCache::default(), Instant::now()).await;
        assert_eq!(outcome, Outcome::Succeeded);
        let templates = fake.templates.lock().unwrap().clone();
        let data = templates.values().next().unwrap();
        assert_eq!(data.network_interfaces.len(), 1);
        assert_eq!(data.network_interfaces[0].security_groups, ["sg-1"]);
        let runs = fake.checks().runs.clone();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].network_interfaces, data.network_interfaces);
    });
}

#[test]
fn restricted_tags_fail_before_any_call() {
    block_on(async {
        let fake = FakeEc2::default();
        let class = node_class(serde_json::json!({"tags": {"karpenter.sh/nodepool": "x"}}));
        let p = provider(fake.clone(), class.clone());
        let r = resolved(&p, &class).await;
        let outcome =
            validation::validate(&p, &class, &r, &ValidationCache::default(), Instant::now()).await;
        assert!(
            matches!(&outcome, Outcome::Failed { reason, .. } if reason == "TagValidationFailed"),
            "{outcome:?}"
        );
        assert!(fake.checks().dry_runs.is_empty());
        assert!(fake.templates.lock().unwrap().is_empty());
    });
}

#[test]
fn disabling_dry_runs_validates_without_calls() {
    block_on(async {
        let fake = FakeEc2::default();
        fake.checks().fleet_errors.push(denied(""));
        let class = node_class(serde_json::json!({}));
        let p = provider_with_options(fake.clone(), class.clone(), |o| o.disable_dry_run = true);
        let r = resolved(&p, &class).await;
        let outcome =
            validation::validate(&p, &class, &r, &ValidationCache::default(), Instant::now()).await;
        assert_eq!(outcome, Outcome::Succeeded);
        assert!(fake.checks().dry_runs.is_empty());
    });
}

#[test]
fn a_named_instance_profile_that_does_not_exist_fails_validation() {
    block_on(async {
        let fake = FakeEc2::default();
        let class =
            node_class(serde_json::json!({"role": null, "instanceProfile": "nonexistent-profile"}));
        let p = provider(fake.clone(), class.clone());
        let r = resolved(&p, &class).await;
        fake.checks().run_errors.push(AwsError::Api {
            code: "InvalidParameterValue".into(),
            message: "Value (nonexistent-profile) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name".into(),
            status: 400,
        });
        let cache = ValidationCache::default();
        let outcome = validation::validate(&p, &class, &r, &cache, Instant::now()).await;
        match &outcome {
            Outcome::Failed { reason, message } => {
                assert_eq!(reason, "InstanceProfileNotFound");
                assert!(message.contains("nonexistent-profile"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(cache.is_empty(), "the profile may be made any moment");
    });
}
