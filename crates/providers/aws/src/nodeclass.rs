//! Resolving an EC2NodeClass's selectors against the account: which subnets, security groups
//! and AMIs its terms match now, and its instance profile. Terms are ORed, the fields of one
//! term ANDed, a tag value of `*` matches any value — upstream's semantics.

use crate::ec2nodeclass::EC2NodeClassSpec;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::Operator;
use karpenter_api::labels::{ARCH_LABEL, OS_LABEL, WINDOWS_BUILD_LABEL};

use crate::ec2::{CapacityReservationInfo, Ec2Api, Filter, Image, SecurityGroupInfo, SubnetInfo};
use crate::http::AwsError;
use crate::iam::InstanceProfiles;
use crate::instancetype::{
    LABEL_ACCELERATOR_COUNT, LABEL_ACCELERATOR_MANUFACTURER, LABEL_GPU_COUNT,
    LABEL_GPU_MANUFACTURER,
};
use crate::ssm::{ParameterStore, Variant, alias_parameters};

/// What an EC2NodeClass resolved to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResolvedNodeClass {
    /// Matching subnets.
    pub subnets: Vec<SubnetInfo>,
    /// Matching security groups.
    pub security_groups: Vec<SecurityGroupInfo>,
    /// Matching images, newest first, non-deprecated before deprecated.
    pub images: Vec<Image>,
    /// The instance profile instances get.
    pub instance_profile: String,
    /// Active capacity reservations the NodeClass may launch into.
    pub capacity_reservations: Vec<CapacityReservationInfo>,
    /// The placement group instances launch into, when the NodeClass selects one.
    pub placement_group: Option<crate::ec2_extra::PlacementGroupInfo>,
}

/// Why a NodeClass cannot launch.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NodeClassError {
    /// A selector matched nothing, or a field cannot be used; names the field.
    #[error("{0}")]
    NotReady(String),
    /// The AWS call failed.
    #[error(transparent)]
    Aws(#[from] AwsError),
}

fn tag_filters(tags: &std::collections::BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                Filter::new("tag-key", &[k])
            } else {
                Filter::new(&format!("tag:{k}"), &[v])
            }
        })
        .collect()
}

/// The node selector an image's instance types must satisfy: its architecture, and for alias
/// images the variant's — standard images boot types without GPUs or accelerators, NVIDIA
/// images NVIDIA GPU types, Neuron images AWS accelerator types.
pub fn image_requirements(image: &Image) -> Vec<(&'static str, Operator, Vec<String>)> {
    let arch = if image.architecture == "x86_64" {
        "amd64"
    } else {
        image.architecture.as_str()
    };
    let mut out = vec![(ARCH_LABEL, Operator::In, vec![arch.to_string()])];
    match image.variant {
        Variant::Any => {}
        Variant::Standard => {
            out.push((LABEL_GPU_COUNT, Operator::DoesNotExist, Vec::new()));
            out.push((LABEL_ACCELERATOR_COUNT, Operator::DoesNotExist, Vec::new()));
        }
        Variant::Nvidia => out.push((LABEL_GPU_MANUFACTURER, Operator::In, vec!["nvidia".into()])),
        Variant::Neuron => out.push((
            LABEL_ACCELERATOR_MANUFACTURER,
            Operator::In,
            vec!["aws".into()],
        )),
        Variant::Windows(build) => {
            out.push((OS_LABEL, Operator::In, vec!["windows".into()]));
            out.push((WINDOWS_BUILD_LABEL, Operator::In, vec![build.into()]));
        }
    }
    out
}

/// The instance profile a role's NodeClass gets: one per cluster and NodeClass.
pub fn instance_profile_name(cluster: &str, node_class: &str) -> String {
    let hash = karpenter_api::hash::fnv64(&format!("{cluster}/{node_class}"));
    // IAM names are at most 128 characters.
    let mut name = format!("{cluster}_{hash:016x}");
    name.truncate(128);
    name
}

/// Whether an image with this deprecation time is deprecated at `now`: only once the time has
/// come (upstream's rule; an image scheduled for deprecation is still current). An unreadable
/// time counts as none.
pub fn is_deprecated(deprecation_time: Option<&str>, now: Timestamp) -> bool {
    deprecation_time
        .and_then(|t| t.parse::<Timestamp>().ok())
        .is_some_and(|t| t <= now)
}

/// Resolves a NodeClass's selectors; `k8s_version` (`1.33`) picks the alias AMIs, `now`
/// decides which images are deprecated.
pub async fn resolve<A>(
    api: &A,
    name: &str,
    spec: &EC2NodeClassSpec,
    cluster: &str,
    k8s_version: &str,
    now: Timestamp,
) -> Result<ResolvedNodeClass, NodeClassError>
where
    A: Ec2Api + ParameterStore + InstanceProfiles + crate::ec2_extra::PlacementGroups,
{
    let mut subnets: Vec<SubnetInfo> = Vec::new();
    for term in &spec.subnet_selector_terms {
        let mut filters = tag_filters(&term.tags);
        if let Some(id) = &term.id {
            filters.push(Filter::new("subnet-id", &[id]));
        }
        for s in api.describe_subnets(filters).await? {
            if !subnets.iter().any(|x| x.id == s.id) {
                subnets.push(s);
            }
        }
    }
    if subnets.is_empty() {
        return Err(NodeClassError::NotReady(
            "spec.subnetSelectorTerms: no subnet matches".into(),
        ));
    }
    let mut security_groups: Vec<SecurityGroupInfo> = Vec::new();
    for term in &spec.security_group_selector_terms {
        let mut filters = tag_filters(&term.tags);
        if let Some(id) = &term.id {
            filters.push(Filter::new("group-id", &[id]));
        }
        if let Some(n) = &term.name {
            filters.push(Filter::new("group-name", &[n]));
        }
        for g in api.describe_security_groups(filters).await? {
            if !security_groups.iter().any(|x| x.id == g.id) {
                security_groups.push(g);
            }
        }
    }
    if security_groups.is_empty() {
        return Err(NodeClassError::NotReady(
            "spec.securityGroupSelectorTerms: no security group matches".into(),
        ));
    }
    let mut capacity_reservations: Vec<CapacityReservationInfo> = Vec::new();
    for term in &spec.capacity_reservation_selector_terms {
        let active = Filter::new("state", &["active"]);
        if let Some(id) = &term.id {
            // By id, as upstream asks: the id alone, active; a reservation that no longer
            // exists is simply not selected.
            let found = match api
                .describe_capacity_reservations(vec![id.clone()], vec![active])
                .await
            {
                Err(e) if crate::ec2::is_reservation_not_found(&e) => Vec::new(),
                other => other?,
            };
            for r in found {
                if !capacity_reservations.iter().any(|x| x.id == r.id) {
                    capacity_reservations.push(r);
                }
            }
            continue;
        }
        let mut filters = tag_filters(&term.tags);
        filters.push(active);
        if let Some(owner) = &term.owner_id {
            filters.push(Filter::new("owner-id", &[owner]));
        }
        if let Some(criteria) = &term.instance_match_criteria {
            filters.push(Filter::new("instance-match-criteria", &[criteria]));
        }
        for r in api
            .describe_capacity_reservations(Vec::new(), filters)
            .await?
        {
            if !capacity_reservations.iter().any(|x| x.id == r.id) {
                capacity_reservations.push(r);
            }
        }
    }
    let images = resolve_images(api, spec, k8s_version, now).await?;
    if images.is_empty() {
        return Err(NodeClassError::NotReady(
            "spec.amiSelectorTerms: no AMI matches".into(),
        ));
    }
    let instance_profile = match (&spec.instance_profile, &spec.role) {
        (Some(profile), _) => profile.clone(),
        (None, Some(role)) => {
            let profile = instance_profile_name(cluster, name);
            api.ensure_instance_profile(profile.clone(), role.clone())
                .await?;
            profile
        }
        (None, None) => {
            return Err(NodeClassError::NotReady(
                "spec: must specify exactly one of ['role', 'instanceProfile']".into(),
            ));
        }
    };
    // Last, as the status conditions are ordered: the parts before it resolved.
    let placement_group =
        crate::placementgroup::resolve(api, spec.placement_group_selector.as_ref()).await?;
    Ok(ResolvedNodeClass {
        subnets,
        security_groups,
        images,
        instance_profile,
        capacity_reservations,
        placement_group,
    })
}

async fn resolve_images<A: Ec2Api + ParameterStore>(
    api: &A,
    spec: &EC2NodeClassSpec,
    k8s_version: &str,
    now: Timestamp,
) -> Result<Vec<Image>, NodeClassError> {
    let mut images: Vec<Image> = Vec::new();
    for term in &spec.ami_selector_terms {
        let mut ids: Vec<String> = Vec::new();
        // The variant each alias image was published for, by image id.
        let mut variants: Vec<(String, Variant)> = Vec::new();
        if let Some(alias) = &term.alias {
            let (family, version) = alias.split_once('@').unwrap_or((alias, "latest"));
            let parameters = alias_parameters(family, version, k8s_version).map_err(|e| {
                NodeClassError::NotReady(format!("spec.amiSelectorTerms[].alias: {e}"))
            })?;
            for (parameter, _, variant) in parameters {
                match api.get_parameter(parameter).await {
                    Ok(id) => {
                        variants.push((id.clone(), variant));
                        if !ids.contains(&id) {
                            ids.push(id);
                        }
                    }
                    // Not every family publishes every architecture, variant or version.
                    Err(e) if e.code() == Some("ParameterNotFound") => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if ids.is_empty() {
                continue;
            }
        }
        if let Some(parameter) = &term.ssm_parameter {
            ids.push(api.get_parameter(parameter.clone()).await?);
        }
        if let Some(id) = &term.id {
            ids.push(id.clone());
        }
        let mut filters = tag_filters(&term.tags);
        if !ids.is_empty() {
            filters.push(Filter {
                name: "image-id".into(),
                values: ids,
            });
        }
        if let Some(n) = &term.name {
            filters.push(Filter::new("name", &[n]));
        }
        let owners: Vec<String> = match (&term.owner, &term.name) {
            (Some(owner), _) => vec![owner.clone()],
            // A name alone could match anyone's image: only the account's and Amazon's count.
            (None, Some(_)) => vec!["self".into(), "amazon".into()],
            (None, None) => Vec::new(),
        };
        for image in api.describe_images(filters, owners).await? {
            // An alias image is listed once per variant it serves (AL2's GPU image boots NVIDIA
            // and Neuron types), as upstream lists one AMI per requirement set.
            let mut own: Vec<Variant> = variants
                .iter()
                .filter(|(id, _)| *id == image.id)
                .map(|(_, v)| *v)
                .collect();
            if own.is_empty() {
                own.push(image.variant);
            }
            for variant in own {
                let image = Image {
                    variant,
                    deprecated: image.deprecated
                        || is_deprecated(image.deprecation_time.as_deref(), now),
                    ..image.clone()
                };
                if !images
                    .iter()
                    .any(|x| x.id == image.id && x.variant == image.variant)
                {
                    images.push(image);
                }
            }
        }
    }
    sort_images(&mut images);
    Ok(images)
}

/// Upstream's preference: non-deprecated before deprecated, then the newest, then the name
/// that sorts last; the launch takes the first image a type can boot.
pub fn sort_images(images: &mut [Image]) {
    let created = |i: &Image| i.creation_date.parse::<Timestamp>().ok();
    images.sort_by(|a, b| {
        a.deprecated
            .cmp(&b.deprecated)
            .then_with(|| created(b).cmp(&created(a)))
            .then_with(|| b.name.cmp(&a.name))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(id: &str, created: &str, deprecated: bool) -> Image {
        Image {
            id: id.into(),
            name: id.into(),
            creation_date: created.into(),
            deprecated,
            ..Default::default()
        }
    }

    /// Upstream's rule: deprecated once the deprecation time has come, not before.
    #[test]
    fn deprecated_only_once_the_time_has_come() {
        let now: Timestamp = "2026-11-25T00:00:00Z".parse().unwrap();
        assert!(!is_deprecated(None, now));
        assert!(!is_deprecated(Some("2027-01-01T00:00:00.000Z"), now));
        assert!(is_deprecated(Some("2026-11-25T00:00:00Z"), now));
        assert!(is_deprecated(Some("2024-05-01T00:00:00.000Z"), now));
        assert!(!is_deprecated(Some("not a time"), now));
    }

    /// After upstream's compareAMI cases: non-deprecated first, then newest, then name.
    #[test]
    fn images_sort_as_upstream() {
        let mut images = vec![
            image("ami-old", "2024-01-01T00:00:00Z", false),
            image("ami-new-deprecated", "2026-01-01T00:00:00Z", true),
            image("ami-new", "2025-01-01T00:00:00Z", false),
            image("ami-a", "2025-01-01T00:00:00Z", false),
            image("ami-old-deprecated", "2023-01-01T00:00:00Z", true),
        ];
        sort_images(&mut images);
        let ids: Vec<&str> = images.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "ami-new",
                "ami-a",
                "ami-old",
                "ami-new-deprecated",
                "ami-old-deprecated"
            ]
        );
    }
}
