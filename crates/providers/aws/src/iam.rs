//! The instance profile of an EC2NodeClass that names a `role`: the provider creates one per
//! NodeClass and puts the role in it, as upstream does, so users only manage the role.

use std::future::Future;

use crate::ec2::Ec2Client;
use crate::http::Result;

/// Manages instance profiles.
pub trait InstanceProfiles: Send + Sync + 'static {
    /// Makes sure profile `name` exists and holds `role`.
    fn ensure_instance_profile(
        &self,
        name: String,
        role: String,
    ) -> impl Future<Output = Result<()>> + Send;
}

async fn iam(client: &Ec2Client, params: &[(&str, &str)]) -> Result<String> {
    let mut all = vec![("Version".to_string(), "2010-05-08".to_string())];
    all.extend(params.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    client.http().query("iam", &all).await
}

impl InstanceProfiles for Ec2Client {
    async fn ensure_instance_profile(&self, name: String, role: String) -> Result<()> {
        let existing = match iam(
            self,
            &[
                ("Action", "GetInstanceProfile"),
                ("InstanceProfileName", &name),
            ],
        )
        .await
        {
            Ok(body) => Some(body),
            Err(e) if e.code() == Some("NoSuchEntity") => None,
            Err(e) => return Err(e),
        };
        let body = match existing {
            Some(body) => body,
            None => {
                iam(
                    self,
                    &[
                        ("Action", "CreateInstanceProfile"),
                        ("InstanceProfileName", &name),
                    ],
                )
                .await?
            }
        };
        // A role name appears inside the profile's Roles when it is in it.
        let has_role = roxmltree::Document::parse(&body)
            .map(|d| {
                d.descendants()
                    .any(|n| n.has_tag_name("RoleName") && n.text() == Some(role.as_str()))
            })
            .unwrap_or(false);
        if !has_role {
            iam(
                self,
                &[
                    ("Action", "AddRoleToInstanceProfile"),
                    ("InstanceProfileName", &name),
                    ("RoleName", &role),
                ],
            )
            .await?;
        }
        Ok(())
    }
}
