//! The security groups an `ECSNodeClass`'s `securityGroupSelectorTerms` select: one ECS
//! `DescribeSecurityGroups` listing per term — by id if it names one, else by name, else by
//! tags — every page, merged by id and ordered by id.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::ecsnodeclass::{SecurityGroup, SecurityGroupSelectorTerm};
use crate::vswitch::tag_filter;

/// The ECS action that lists security groups.
pub const ACTION: &str = "DescribeSecurityGroups";
/// Groups per page (`MaxResults`): the most ECS returns.
pub const MAX_RESULTS: u32 = 100;
/// Where the answer lists them.
pub const ITEMS: &str = "SecurityGroups.SecurityGroup";

/// A security group as `DescribeSecurityGroups` describes it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct SecurityGroupInfo {
    /// `SecurityGroupId`, `sg-…`.
    #[serde(rename = "SecurityGroupId")]
    pub id: String,
    /// `SecurityGroupName`; empty for a group without one.
    #[serde(rename = "SecurityGroupName", default)]
    pub name: String,
}

impl SecurityGroupInfo {
    /// The status entry (no name for a group without one).
    pub fn to_status(&self) -> SecurityGroup {
        SecurityGroup {
            id: self.id.clone(),
            name: Some(self.name.clone()).filter(|n| !n.is_empty()),
        }
    }
}

/// Why the security groups could not be listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityGroupError {
    /// A term that selects nothing in particular: sent as is, it would list every group of
    /// the region.
    #[error("spec.securityGroupSelectorTerms[{index}]: a term needs an id, a name or tags")]
    EmptyTerm {
        /// The term's position.
        index: usize,
    },
    /// A listed group that could not be read.
    #[error("{ACTION} answer: {reason}")]
    Parse {
        /// What was wrong.
        reason: String,
    },
    /// ECS refused the listing or could not be reached.
    #[cfg(feature = "cloud")]
    #[error("describing security groups for spec.securityGroupSelectorTerms[{index}]: {source}")]
    Describe {
        /// The term's position.
        index: usize,
        /// What ECS said.
        source: crate::client::AlibabaError,
    },
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

/// Checks that `term` (at `index`) selects by something.
pub fn check_term(
    index: usize,
    term: &SecurityGroupSelectorTerm,
) -> Result<(), SecurityGroupError> {
    if non_empty(&term.id).is_none() && non_empty(&term.name).is_none() && term.tags.is_empty() {
        return Err(SecurityGroupError::EmptyTerm { index });
    }
    Ok(())
}

/// The filter of one term, as `(name, value)` pairs: `SecurityGroupId` when it names an id
/// (its name and tags are then not asked about), else `SecurityGroupName` when it names a
/// name (its tags then not asked about), else `Tag.N.Key` / `Tag.N.Value` per tag, the value
/// left out for `"*"`.
pub fn filter(term: &SecurityGroupSelectorTerm) -> Vec<(String, String)> {
    if let Some(id) = non_empty(&term.id) {
        return vec![("SecurityGroupId".into(), id.into())];
    }
    if let Some(name) = non_empty(&term.name) {
        return vec![("SecurityGroupName".into(), name.into())];
    }
    tag_filter(&term.tags)
}

/// The groups of a listing's items.
pub fn parse(items: Vec<Value>) -> Result<Vec<SecurityGroupInfo>, SecurityGroupError> {
    items
        .into_iter()
        .map(|item| {
            serde_json::from_value(item).map_err(|e| SecurityGroupError::Parse {
                reason: e.to_string(),
            })
        })
        .collect()
}

/// The groups of every term, each once (the latest listing wins), ordered by id as status
/// lists them.
pub fn merge(found: impl IntoIterator<Item = SecurityGroupInfo>) -> Vec<SecurityGroupInfo> {
    let by_id: BTreeMap<String, SecurityGroupInfo> =
        found.into_iter().map(|g| (g.id.clone(), g)).collect();
    by_id.into_values().collect()
}

/// Every security group `terms` select in the client's region, ordered by id. No terms select
/// nothing.
#[cfg(feature = "cloud")]
pub async fn describe(
    client: &crate::client::Client,
    terms: &[SecurityGroupSelectorTerm],
) -> Result<Vec<SecurityGroupInfo>, SecurityGroupError> {
    use crate::client::Params;
    use crate::endpoint::Product;

    for (index, term) in terms.iter().enumerate() {
        check_term(index, term)?;
    }
    let mut found = Vec::new();
    for (index, term) in terms.iter().enumerate() {
        let params: Params = [
            ("RegionId".to_string(), client.endpoints().region.clone()),
            // Upstream asks for the member counts too; kept so the calls are the same.
            ("IsQueryEcsCount".to_string(), "true".to_string()),
        ]
        .into_iter()
        .chain(filter(term))
        .collect();
        let items = client
            .pages_by_token(Product::Ecs, ACTION, &params, ITEMS, Some(MAX_RESULTS))
            .await
            .map_err(|source| SecurityGroupError::Describe { index, source })?;
        found.extend(parse(items)?);
    }
    Ok(merge(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn term(
        id: Option<&str>,
        name: Option<&str>,
        tags: &[(&str, &str)],
    ) -> SecurityGroupSelectorTerm {
        SecurityGroupSelectorTerm {
            id: id.map(str::to_string),
            name: name.map(str::to_string),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn terms_become_filters_id_first_then_name_then_tags() {
        let cases: Vec<(SecurityGroupSelectorTerm, Vec<(&str, &str)>)> = vec![
            (
                term(Some("sg-1"), Some("nodes"), &[("a", "b")]),
                vec![("SecurityGroupId", "sg-1")],
            ),
            (
                term(None, Some("nodes"), &[("a", "b")]),
                vec![("SecurityGroupName", "nodes")],
            ),
            (
                term(
                    Some(""),
                    None,
                    &[("karpenter.sh/discovery", "c1"), ("any", "*")],
                ),
                vec![
                    ("Tag.1.Key", "any"),
                    ("Tag.2.Key", "karpenter.sh/discovery"),
                    ("Tag.2.Value", "c1"),
                ],
            ),
        ];
        for (t, expected) in cases {
            let expected: Vec<(String, String)> = expected
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(filter(&t), expected, "{t:?}");
        }
    }

    #[test]
    fn a_term_without_id_name_or_tags_is_refused() {
        assert!(check_term(0, &term(None, Some("n"), &[])).is_ok());
        let e = check_term(1, &term(Some(""), Some(""), &[])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.securityGroupSelectorTerms[1]: a term needs an id, a name or tags"
        );
    }

    #[test]
    fn answers_are_read_merged_and_ordered_by_id() {
        let items = vec![
            json!({"SecurityGroupId": "sg-b", "SecurityGroupName": "nodes", "VpcId": "vpc-1",
                   "SecurityGroupType": "normal", "EcsCount": 3,
                   "Tags": {"Tag": [{"TagKey": "k", "TagValue": "v"}]}}),
            json!({"SecurityGroupId": "sg-a", "SecurityGroupName": ""}),
            json!({"SecurityGroupId": "sg-b", "SecurityGroupName": "nodes"}),
        ];
        let groups = merge(parse(items).unwrap());
        let status: Vec<SecurityGroup> = groups.iter().map(|g| g.to_status()).collect();
        assert_eq!(
            status,
            [
                SecurityGroup {
                    id: "sg-a".into(),
                    name: None
                },
                SecurityGroup {
                    id: "sg-b".into(),
                    name: Some("nodes".into())
                },
            ]
        );
        let e = parse(vec![json!({"SecurityGroupName": "x"})]).unwrap_err();
        assert!(e.to_string().contains("SecurityGroupId"), "{e}");
    }
}
