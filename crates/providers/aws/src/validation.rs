//! `ValidationSucceeded`: whether the controller may launch what an EC2NodeClass describes,
//! found out before a NodeClaim needs it, as upstream does — the NodeClass's tags are checked
//! against the tags the provider sets itself, then a real launch template is made for one
//! instance type, and CreateFleet and RunInstances are called with `DryRun=true`. A denied call
//! makes the condition False with upstream's reason (`CreateFleetAuthCheckFailed`, …) and
//! message, and the NodeClass not Ready.
//!
//! Verdicts are cached for [`CACHE_TTL`] per NodeClass and everything the checks read, so the
//! dry runs are not repeated every resync; throttles and server faults are not verdicts and
//! are asked again soon.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::ec2nodeclass::EC2NodeClass;
use karpenter_cloudprovider::CloudProviderError;

use crate::ec2_extra::{CreateFleetDryRun, RunInstancesDryRun, is_transient, is_unauthorized};
use crate::http::AwsError;
use crate::nodeclass::ResolvedNodeClass;
use crate::provider::{AwsApi, AwsCloudProvider, NodeClassStore};

/// The condition's type.
pub const CONDITION: &str = "ValidationSucceeded";
/// How long a verdict is reused (upstream's `ValidationTTL`).
pub const CACHE_TTL: Duration = Duration::from_secs(30 * 60);
/// When a NodeClass is validated again after its first validation without a verdict; each
/// further one in a row doubles the wait, up to [`MAX_RETRY_AFTER`] (upstream returns such
/// errors to its work queue, which backs off per object the same way).
pub const RETRY_AFTER: Duration = Duration::from_secs(10);
/// The longest wait between validations that reach no verdict (upstream's re-validation
/// period).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(10 * 60);

/// ec2:CreateFleet was denied.
pub const REASON_CREATE_FLEET: &str = "CreateFleetAuthCheckFailed";
/// ec2:CreateLaunchTemplate was denied.
pub const REASON_CREATE_LAUNCH_TEMPLATE: &str = "CreateLaunchTemplateAuthCheckFailed";
/// ec2:RunInstances was denied.
pub const REASON_RUN_INSTANCES: &str = "RunInstancesAuthCheckFailed";
/// `spec.instanceProfile` names no instance profile.
pub const REASON_INSTANCE_PROFILE_NOT_FOUND: &str = "InstanceProfileNotFound";
/// Subnets, security groups, AMIs or the instance profile did not resolve.
pub const REASON_DEPENDENCIES_NOT_READY: &str = "DependenciesNotReady";
/// `spec.tags` sets a tag the provider owns.
pub const REASON_TAG_VALIDATION_FAILED: &str = "TagValidationFailed";
/// The rendered user data is larger than EC2 takes.
pub const REASON_USER_DATA_TOO_LARGE: &str = "UserDataSizeLimitExceeded";

/// The message while the selectors do not resolve.
pub const DEPENDENCIES_MESSAGE: &str =
    "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution";

/// What the dry runs launch from (see `AwsCloudProvider::validation_launch`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ValidationLaunch {
    /// The launch template made for the check.
    pub launch_template: String,
    /// The instance type tried.
    pub instance_type: String,
    /// CreateFleet's overrides: the type in every subnet.
    pub overrides: Vec<crate::ec2::FleetOverride>,
    /// The subnets RunInstances is tried in, in order.
    pub subnets: Vec<String>,
    /// The launch template's interfaces (RunInstances names them with the subnet).
    pub network_interfaces: Vec<crate::interfaces::LaunchTemplateInterface>,
    /// The tags a launch sets.
    pub tags: BTreeMap<String, String>,
}

/// What validating a NodeClass concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every check passed: the condition is True.
    Succeeded,
    /// A check failed: the condition is False with this reason and message.
    Failed {
        /// Upstream's reason.
        reason: String,
        /// What failed and why.
        message: String,
    },
    /// No verdict (a throttle, a server fault, an unexpected answer): the condition keeps its
    /// value and the NodeClass is validated again after [`ValidationCache::retry_after`].
    Retry(String),
}

impl Outcome {
    fn failed(reason: &str, message: impl Into<String>) -> Self {
        Self::Failed {
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// The outcome while the NodeClass's selectors do not resolve.
    pub fn dependencies_not_ready() -> Self {
        Self::failed(REASON_DEPENDENCIES_NOT_READY, DEPENDENCIES_MESSAGE)
    }
}

/// The call a check makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// CreateLaunchTemplate (for real: the template is the one launches use).
    CreateLaunchTemplate,
    /// CreateFleet with `DryRun`.
    CreateFleet,
    /// RunInstances with `DryRun`.
    RunInstances,
}

impl Check {
    /// The condition reason when the call is denied.
    pub fn reason(self) -> &'static str {
        match self {
            Self::CreateLaunchTemplate => REASON_CREATE_LAUNCH_TEMPLATE,
            Self::CreateFleet => REASON_CREATE_FLEET,
            Self::RunInstances => REASON_RUN_INSTANCES,
        }
    }

    /// The start of the condition message when the call is denied.
    pub fn denied(self) -> &'static str {
        match self {
            Self::CreateLaunchTemplate => {
                "Controller isn't authorized to call ec2:CreateLaunchTemplate"
            }
            Self::CreateFleet => "Controller isn't authorized to call ec2:CreateFleet",
            Self::RunInstances => "Controller isn't authorized to call ec2:RunInstances",
        }
    }
}

/// Upstream's wording of why a call was denied, read from the error's message.
pub fn denial_detail(e: &AwsError) -> &'static str {
    let text = e.to_string();
    if text.contains("with an explicit deny in a permissions boundary") {
        "User is not authorized to perform this operation due to a permission boundary"
    } else if text.contains("with an explicit deny in a service control policy") {
        "User is not authorized to perform this operation due to a service control policy"
    } else if text.contains("Not authorized for images") {
        "User is not authorized for AMI used in instance launch"
    } else {
        "User is not authorized to perform this operation because no identity-based policy allows it"
    }
}

/// A verdict on one failed call, and whether it may be cached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    /// What the failure means for the condition.
    pub outcome: Outcome,
    /// Whether to reuse it for [`CACHE_TTL`] (a missing instance profile may appear any
    /// moment, so that verdict is not kept).
    pub cache: bool,
}

/// What a call's error means: throttles and server faults are asked again; a denial fails the
/// check; RunInstances naming a missing instance profile fails only when the user named it
/// (`spec.instanceProfile`) — a profile the provider just made for `spec.role` may not be
/// visible yet; user data over EC2's limit fails CreateLaunchTemplate. Anything else is
/// unexpected of a dry run and asked again.
pub fn judge(check: Check, e: &AwsError, instance_profile: Option<&str>) -> Judgement {
    let outcome = |outcome, cache| Judgement { outcome, cache };
    if is_transient(e) {
        return outcome(Outcome::Retry(e.to_string()), false);
    }
    if is_unauthorized(e) {
        let message = format!("{}: {}", check.denied(), denial_detail(e));
        return outcome(Outcome::failed(check.reason(), message), true);
    }
    let code = e.code().unwrap_or_default();
    let text = e.to_string();
    if check == Check::RunInstances
        && code == "InvalidParameterValue"
        && text.contains("Invalid IAM Instance Profile name")
    {
        return match instance_profile {
            Some(profile) => outcome(
                Outcome::failed(
                    REASON_INSTANCE_PROFILE_NOT_FOUND,
                    format!("Instance profile {profile:?} not found"),
                ),
                false,
            ),
            None => outcome(Outcome::Retry(text), false),
        };
    }
    if check == Check::CreateLaunchTemplate
        && code == "InvalidUserData.Malformed"
        && text.contains("User data is limited to")
    {
        let message = "ec2:CreateLaunchTemplate rejected the rendered user data as too large: \
                       Rendered user data exceeds the EC2 user data size limit";
        return outcome(Outcome::failed(REASON_USER_DATA_TOO_LARGE, message), true);
    }
    outcome(
        Outcome::Retry(format!("unexpected answer to {check:?}: {text}")),
        false,
    )
}

/// Whether a tag key is one the provider sets on everything it launches (upstream's
/// restricted tag patterns): the cluster's ownership tag, the NodePool, cluster, NodeClass and
/// NodeClaim tags.
pub fn is_restricted_tag(key: &str) -> bool {
    if let Some(cluster) = key.strip_prefix("kubernetes.io/cluster/") {
        let mut chars = cluster.chars();
        return chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    }
    matches!(
        key,
        "karpenter.sh/nodepool"
            | "eks:eks-cluster-name"
            | "karpenter.k8s.aws/ec2nodeclass"
            | "karpenter.sh/nodeclaim"
    )
}

/// The failure for `spec.tags` setting restricted tags, if it does.
pub fn tag_failure(tags: &BTreeMap<String, String>) -> Option<Outcome> {
    let restricted: Vec<String> = tags
        .keys()
        .filter(|k| is_restricted_tag(k))
        .map(|k| format!("{k:?}"))
        .collect();
    (!restricted.is_empty()).then(|| {
        Outcome::failed(
            REASON_TAG_VALIDATION_FAILED,
            format!(
                "spec.tags: tags failed validation requirements: {}",
                restricted.join(", ")
            ),
        )
    })
}

/// What a verdict depends on: the NodeClass (name, spec, annotations) and what its selectors
/// resolved to. Any change validates again.
pub fn cache_key(class: &EC2NodeClass, resolved: &ResolvedNodeClass) -> String {
    let mut subnets: Vec<&str> = resolved.subnets.iter().map(|s| s.id.as_str()).collect();
    let mut groups: Vec<&str> = resolved
        .security_groups
        .iter()
        .map(|g| g.id.as_str())
        .collect();
    let mut images: Vec<&str> = resolved.images.iter().map(|i| i.id.as_str()).collect();
    // Sets: the order EC2 lists them in means nothing.
    subnets.sort_unstable();
    groups.sort_unstable();
    images.sort_unstable();
    let spec = serde_json::to_string(&class.spec).unwrap_or_default();
    let hash = karpenter_api::hash::fnv64(&format!(
        "{spec}{:?}{subnets:?}{groups:?}{images:?}{}{:?}",
        class.metadata.annotations,
        resolved.instance_profile,
        resolved.placement_group.as_ref().map(|g| &g.id),
    ));
    format!(
        "{}:{hash:016x}",
        class.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Verdicts by [`cache_key`], each with when it was reached, and how many validations in a
/// row reached none, by NodeClass.
#[derive(Default)]
pub struct ValidationCache {
    entries: Mutex<BTreeMap<String, (Instant, Outcome)>>,
    misses: Mutex<BTreeMap<String, u32>>,
}

impl ValidationCache {
    /// The verdict for `key` reached less than [`CACHE_TTL`] before `now`.
    pub fn get(&self, key: &str, now: Instant) -> Option<Outcome> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (at, outcome) = entries.get(key)?;
        (now.saturating_duration_since(*at) < CACHE_TTL).then(|| outcome.clone())
    }

    /// Keeps a verdict, dropping the NodeClass's older ones (keys start with its name).
    pub fn put(&self, key: String, outcome: Outcome, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let class = key.split(':').next().unwrap_or_default().to_string();
        entries.retain(|k, _| k.split(':').next() != Some(class.as_str()));
        entries.insert(key, (now, outcome));
    }

    /// Counts a validation of `class` that reached no verdict, or forgets the count after one
    /// that did.
    pub fn note(&self, class: &str, outcome: &Outcome) {
        let mut misses = self.misses.lock().unwrap_or_else(|e| e.into_inner());
        match outcome {
            Outcome::Retry(_) => *misses.entry(class.to_string()).or_default() += 1,
            _ => {
                misses.remove(class);
            }
        }
    }

    /// How long to wait before validating `class` again after no verdict: [`RETRY_AFTER`],
    /// doubled for each further validation in a row without one, at most
    /// [`MAX_RETRY_AFTER`].
    pub fn retry_after(&self, class: &str) -> Duration {
        let misses = self.misses.lock().unwrap_or_else(|e| e.into_inner());
        let n = misses.get(class).copied().unwrap_or(1).max(1);
        RETRY_AFTER
            .checked_mul(1u32 << (n - 1).min(16))
            .map_or(MAX_RETRY_AFTER, |d| d.min(MAX_RETRY_AFTER))
    }

    /// How many verdicts are kept.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no verdict is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Validates a NodeClass whose selectors resolved to `resolved`: the tag check, then (unless
/// `DISABLE_DRY_RUN`) CreateLaunchTemplate, CreateFleet and RunInstances as upstream orders
/// them, stopping at the first failure. `now` dates cached verdicts.
pub async fn validate<A, S>(
    provider: &AwsCloudProvider<A, S>,
    class: &EC2NodeClass,
    resolved: &ResolvedNodeClass,
    cache: &ValidationCache,
    now: Instant,
) -> Outcome
where
    A: AwsApi,
    S: NodeClassStore,
{
    if let Some(failure) = tag_failure(&class.spec.tags) {
        return failure;
    }
    let key = cache_key(class, resolved);
    if let Some(outcome) = cache.get(&key, now) {
        return outcome;
    }
    let judgement = if provider.dry_run_disabled() {
        Judgement {
            outcome: Outcome::Succeeded,
            cache: true,
        }
    } else {
        dry_runs(provider, class, resolved).await
    };
    if judgement.cache {
        cache.put(key, judgement.outcome.clone(), now);
    }
    cache.note(
        class.metadata.name.as_deref().unwrap_or_default(),
        &judgement.outcome,
    );
    judgement.outcome
}

async fn dry_runs<A, S>(
    provider: &AwsCloudProvider<A, S>,
    class: &EC2NodeClass,
    resolved: &ResolvedNodeClass,
) -> Judgement
where
    A: AwsApi,
    S: NodeClassStore,
{
    let profile = class.spec.instance_profile.as_deref();
    let launch = match provider.validation_launch(class, resolved).await {
        Ok(launch) => launch,
        Err(e) => {
            return match aws_error(&e) {
                Some(aws) => judge(Check::CreateLaunchTemplate, aws, profile),
                None => Judgement {
                    outcome: Outcome::Retry(format!("preparing the validation launch: {e}")),
                    cache: false,
                },
            };
        }
    };
    let api = provider.api();
    let fleet = CreateFleetDryRun {
        launch_template: launch.launch_template.clone(),
        overrides: launch.overrides.clone(),
        tags: launch.tags.clone(),
    };
    if let Err(e) = api.dry_run_create_fleet(fleet).await {
        return judge(Check::CreateFleet, &e, profile);
    }
    // Permissions do not differ by subnet: one permitted run is enough, and the first
    // subnet's error speaks for all when none is.
    let mut first_error = None;
    for subnet in &launch.subnets {
        let run = RunInstancesDryRun {
            launch_template: launch.launch_template.clone(),
            instance_type: launch.instance_type.clone(),
            subnet_id: subnet.clone(),
            network_interfaces: launch.network_interfaces.clone(),
            tags: launch.tags.clone(),
        };
        match api.dry_run_run_instances(run).await {
            Ok(()) => {
                return Judgement {
                    outcome: Outcome::Succeeded,
                    cache: true,
                };
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => judge(Check::RunInstances, &e, profile),
        None => Judgement {
            outcome: Outcome::Retry("no subnet to validate RunInstances in".into()),
            cache: false,
        },
    }
}

/// The AWS error underneath a provider error, if one is.
fn aws_error(e: &CloudProviderError) -> Option<&AwsError> {
    e.cause().source()?.downcast_ref::<AwsError>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: &str, message: &str, status: u16) -> AwsError {
        AwsError::Api {
            code: code.into(),
            message: message.into(),
            status,
        }
    }

    /// Upstream's "NodeClass validation failure conditions" table: the denied call, the
    /// denial's message, and the reason and message the condition gets.
    #[test]
    fn denials_name_the_call_and_why() {
        let cases = [
            (
                Check::CreateFleet,
                "",
                "CreateFleetAuthCheckFailed",
                "Controller isn't authorized to call ec2:CreateFleet: User is not authorized to perform this operation because no identity-based policy allows it",
            ),
            (
                Check::RunInstances,
                "",
                "RunInstancesAuthCheckFailed",
                "Controller isn't authorized to call ec2:RunInstances: User is not authorized to perform this operation because no identity-based policy allows it",
            ),
            (
                Check::CreateLaunchTemplate,
                "",
                "CreateLaunchTemplateAuthCheckFailed",
                "Controller isn't authorized to call ec2:CreateLaunchTemplate: User is not authorized to perform this operation because no identity-based policy allows it",
            ),
            (
                Check::CreateFleet,
                "You are not authorized to perform this operation with an explicit deny in a permissions boundary",
                "CreateFleetAuthCheckFailed",
                "Controller isn't authorized to call ec2:CreateFleet: User is not authorized to perform this operation due to a permission boundary",
            ),
            (
                Check::RunInstances,
                "You are not authorized to perform this operation with an explicit deny in a service control policy",
                "RunInstancesAuthCheckFailed",
                "Controller isn't authorized to call ec2:RunInstances: User is not authorized to perform this operation due to a service control policy",
            ),
        ];
        for (check, denial, reason, message) in cases {
            let j = judge(check, &api("UnauthorizedOperation", denial, 403), None);
            assert_eq!(
                j.outcome,
                Outcome::Failed {
                    reason: reason.into(),
                    message: message.into()
                },
                "{check:?} {denial}"
            );
            assert!(j.cache, "denials are cached");
        }
    }

    #[test]
    fn throttles_and_faults_are_asked_again_uncached() {
        for e in [
            api("RequestLimitExceeded", "", 503),
            api("InternalError", "", 500),
            AwsError::Transport("reset".into()),
        ] {
            let j = judge(Check::CreateFleet, &e, None);
            assert!(matches!(j.outcome, Outcome::Retry(_)), "{e}");
            assert!(!j.cache);
        }
        // A dry run answering something else is unexpected: no verdict either.
        let j = judge(
            Check::CreateFleet,
            &api("InvalidParameterValue", "x", 400),
            None,
        );
        assert!(matches!(j.outcome, Outcome::Retry(_)));
    }

    #[test]
    fn a_missing_instance_profile_fails_only_when_named() {
        let e = api(
            "InvalidParameterValue",
            "Value (nonexistent-profile) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name",
            400,
        );
        let j = judge(Check::RunInstances, &e, Some("nonexistent-profile"));
        match &j.outcome {
            Outcome::Failed { reason, message } => {
                assert_eq!(reason, REASON_INSTANCE_PROFILE_NOT_FOUND);
                assert!(message.contains("nonexistent-profile"));
            }
            other => panic!("{other:?}"),
        }
        assert!(!j.cache, "the profile may appear any moment");
        // With spec.role the provider made the profile: eventual consistency, not a failure.
        let j = judge(Check::RunInstances, &e, None);
        assert!(matches!(j.outcome, Outcome::Retry(_)));
    }

    #[test]
    fn oversized_user_data_fails_the_launch_template_check() {
        let e = api(
            "InvalidUserData.Malformed",
            "User data is limited to 16384 bytes",
            400,
        );
        let j = judge(Check::CreateLaunchTemplate, &e, None);
        assert!(
            matches!(&j.outcome, Outcome::Failed { reason, .. } if reason == REASON_USER_DATA_TOO_LARGE)
        );
        // Malformed for another reason is not a size problem.
        let j = judge(
            Check::CreateLaunchTemplate,
            &api("InvalidUserData.Malformed", "not base64", 400),
            None,
        );
        assert!(matches!(j.outcome, Outcome::Retry(_)));
    }

    /// Upstream's tag validation table: each restricted key fails, other keys pass.
    #[test]
    fn restricted_tags_fail_validation() {
        for key in [
            "kubernetes.io/cluster/acluster",
            "karpenter.sh/nodepool",
            "eks:eks-cluster-name",
            "karpenter.k8s.aws/ec2nodeclass",
            "karpenter.sh/nodeclaim",
        ] {
            let tags = BTreeMap::from([(key.to_string(), "x".to_string())]);
            match tag_failure(&tags) {
                Some(Outcome::Failed { reason, message }) => {
                    assert_eq!(reason, REASON_TAG_VALIDATION_FAILED);
                    assert!(message.contains(key), "{message}");
                }
                other => panic!("{key}: {other:?}"),
            }
        }
        for key in ["team", "kubernetes.io/cluster/", "karpenter.sh/nodepool-x"] {
            let tags = BTreeMap::from([(key.to_string(), "x".to_string())]);
            assert_eq!(tag_failure(&tags), None, "{key}");
        }
    }

    #[test]
    fn verdicts_expire_and_a_class_keeps_only_its_latest() {
        let cache = ValidationCache::default();
        let t0 = Instant::now();
        cache.put("a:1".into(), Outcome::Succeeded, t0);
        cache.put("b:1".into(), Outcome::Succeeded, t0);
        assert_eq!(
            cache.get("a:1", t0 + CACHE_TTL / 2),
            Some(Outcome::Succeeded)
        );
        assert_eq!(cache.get("a:1", t0 + CACHE_TTL), None, "expired");
        cache.put("a:2".into(), Outcome::dependencies_not_ready(), t0);
        assert_eq!(cache.get("a:1", t0), None, "replaced by the newer key");
        assert_eq!(cache.len(), 2);
    }
}
