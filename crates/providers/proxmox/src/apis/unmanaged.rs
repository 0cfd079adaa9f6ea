//! `ProxmoxUnmanagedTemplate`: a VM template the user made (by hand, Terraform, …), found on the
//! Proxmox nodes by its name, its tags, or both.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use karpenter_api::crd::{Crd, READY_COLUMN_PATH};
use karpenter_api::validation::{Problem, ProblemKind};

use super::gohash::Go;
use super::{
    CommonTemplate, FieldError, GROUP, InvalidSpec, ProxmoxTemplateStatus, VERSION, schema,
};

/// `proxmoxunmanagedtemplates.karpenter.proxmox.sinextra.dev`.
pub(super) const CRD: Crd = Crd::new(
    GROUP,
    VERSION,
    "ProxmoxUnmanagedTemplate",
    "proxmoxunmanagedtemplates",
    schema::unmanaged_template,
)
.with_printer_columns(printer_columns)
.with_runtime_checks(runtime_checks);

fn printer_columns() -> Value {
    serde_json::json!([
        {"jsonPath": ".status.resources.zones", "name": "Zones", "type": "string"},
        {"jsonPath": ".spec.templateName", "name": "Name", "type": "string"},
        {"jsonPath": READY_COLUMN_PATH, "name": "Ready", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    ])
}

fn runtime_checks(object: &Value, problems: &mut Vec<Problem>) {
    karpenter_api::validation::typed::<ProxmoxUnmanagedTemplate>(
        object,
        problems,
        |template, problems| {
            if let Err(InvalidSpec(found)) = template.spec.validate_for_create() {
                problems.extend(found.into_iter().map(|e| Problem {
                    path: e.field,
                    message: e.reason,
                    kind: ProblemKind::NotReady,
                }));
            }
        },
    );
}

/// How to find the user's VM template.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxUnmanagedTemplateSpec {
    /// The Proxmox cluster to look in; unset is every one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The VM template's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_name: Option<String>,
    /// Tags the VM template must all have, 1 to 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

impl ProxmoxUnmanagedTemplateSpec {
    /// The template's name, unless unset or empty.
    pub fn template_name(&self) -> Option<&str> {
        self.template_name.as_deref().filter(|n| !n.is_empty())
    }

    /// Upstream's `Validate`: the template must be found by something, a name or tags. (The
    /// CRD's rule says so too, but only inside a `spec`; an object without one is stored.)
    pub fn validate_for_create(&self) -> Result<(), InvalidSpec> {
        let mut problems = Vec::new();
        if self.template_name().is_none() && self.tags.is_empty() {
            problems.push(FieldError::new(
                "spec",
                "must set at least one of templateName or tags",
            ));
        }
        InvalidSpec::check(problems)
    }

    /// Upstream's hash of the spec, number for number (stamped on the object as
    /// [`super::PROXMOX_TEMPLATE_HASH_ANNOTATION`]).
    pub fn hash(&self) -> String {
        Go::Struct(
            "ProxmoxUnmanagedTemplateSpec",
            vec![
                ("Region", Go::str_or_empty(&self.region)),
                ("TemplateName", Go::str_or_empty(&self.template_name)),
                ("Tags", Go::strings(&self.tags)),
            ],
        )
        .hash()
        .to_string()
    }
}

/// A VM template the user made, found by name or tags.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxmoxUnmanagedTemplate {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// How to find the VM template.
    pub spec: ProxmoxUnmanagedTemplateSpec,
    /// Where the provider found it.
    pub status: Option<ProxmoxTemplateStatus>,
}

karpenter_api::cluster_resource!(
    ProxmoxUnmanagedTemplate, ProxmoxUnmanagedTemplateSpec, ProxmoxTemplateStatus,
    group: "karpenter.proxmox.sinextra.dev", version: "v1alpha1", plural: "proxmoxunmanagedtemplates"
);

impl ProxmoxUnmanagedTemplate {
    /// [`ProxmoxUnmanagedTemplateSpec::hash`] of the template's spec.
    pub fn hash(&self) -> String {
        self.spec.hash()
    }
}

impl CommonTemplate for ProxmoxUnmanagedTemplate {
    fn template_status(&self) -> Option<&ProxmoxTemplateStatus> {
        self.status.as_ref()
    }

    /// The image id the status records, if any.
    fn image_id(&self) -> Option<String> {
        self.status
            .as_ref()
            .and_then(|s| s.image_id.clone())
            .filter(|id| !id.is_empty())
    }
}
