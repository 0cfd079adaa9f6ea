//! The community gallery's list of an image definition's versions
//! (`CommunityGalleryImageVersions_List`) as parsed data, and which version is the latest.

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Deserializer};

use super::version::ImageVersion;

/// One page of the list (`CommunityGalleryImageVersionList`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommunityImageVersionPage {
    /// The versions.
    #[serde(default, deserialize_with = "nullable")]
    pub value: Vec<CommunityImageVersion>,
    /// The next page, when there is one.
    #[serde(default)]
    pub next_link: Option<String>,
}

/// A version of a community gallery image (`CommunityGalleryImageVersion`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommunityImageVersion {
    /// The version (`202411.12.0`), the last segment of the image id.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// What the gallery says of it.
    #[serde(default, deserialize_with = "nullable")]
    pub properties: CommunityImageVersionProperties,
}

/// The properties the choice reads.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommunityImageVersionProperties {
    /// When the version was published (RFC 3339).
    #[serde(default)]
    pub published_date: Option<String>,
}

impl CommunityImageVersion {
    fn published(&self) -> Option<Timestamp> {
        self.properties.published_date.as_deref()?.parse().ok()
    }
}

/// The latest version: the one published last, as upstream chooses (AKS publishes every
/// image of a release within a day, so the newest publication is the newest build). Versions
/// published at the same moment, or without a readable date (upstream assumes every version
/// has one), are told apart by their version numbers.
pub fn latest_community_version(
    versions: &[CommunityImageVersion],
) -> Option<&CommunityImageVersion> {
    versions
        .iter()
        .filter(|v| !v.name.is_empty())
        .max_by_key(|v| (v.published(), v.name.parse::<ImageVersion>().ok()))
}

fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn version(name: &str, published: Option<&str>) -> CommunityImageVersion {
        CommunityImageVersion {
            name: name.into(),
            properties: CommunityImageVersionProperties {
                published_date: published.map(str::to_string),
            },
        }
    }

    /// The shape of the REST API specs' `CommunityGalleryImageVersion_List` example.
    #[test]
    fn a_page_parses_as_the_api_writes_it() {
        let page: CommunityImageVersionPage = serde_json::from_value(json!({
            "value": [{
                "properties": {
                    "publishedDate": "2018-03-20T09:12:28Z",
                    "endOfLifeDate": "2022-03-20T09:12:28Z",
                    "excludeFromLatest": false,
                    "storageProfile": {"osDiskImage": {"diskSizeGB": 29, "hostCaching": "None"}}
                },
                "name": "202411.12.0",
                "identifier": {"uniqueId": "/CommunityGalleries/g/Images/i/Versions/202411.12.0"}
            }],
            "nextLink": "https://management.azure.com/subscriptions/s/providers/Microsoft.Compute/locations/eastus/communityGalleries/g/images/i/versions?$skiptoken=t"
        }))
        .unwrap();
        assert_eq!(page.value.len(), 1);
        assert_eq!(page.value[0].name, "202411.12.0");
        assert!(page.next_link.unwrap().ends_with("$skiptoken=t"));
        let empty: CommunityImageVersionPage =
            serde_json::from_value(json!({"value": null, "nextLink": null})).unwrap();
        assert_eq!(empty, CommunityImageVersionPage::default());
    }

    #[test]
    fn the_latest_is_the_last_published() {
        let versions = [
            version("202410.09.0", Some("2024-10-09T10:00:00Z")),
            version("202411.12.0", Some("2024-11-14T19:35:45.8471146+00:00")),
            // Published last, though not the highest number: the date decides.
            version("202411.05.0", Some("2024-11-15T01:00:00+02:00")),
            version("202409.01.0", Some("2024-09-01T00:00:00Z")),
        ];
        assert_eq!(
            latest_community_version(&versions).unwrap().name,
            "202411.05.0"
        );
    }

    #[test]
    fn offsets_are_compared_as_instants() {
        // 01:00+02:00 is 23:00 the day before, earlier than 23:30Z.
        let versions = [
            version("1.0.0", Some("2024-11-15T01:00:00+02:00")),
            version("0.9.0", Some("2024-11-14T23:30:00Z")),
        ];
        assert_eq!(latest_community_version(&versions).unwrap().name, "0.9.0");
    }

    #[test]
    fn ties_and_missing_dates_fall_back_to_the_version_number() {
        let same = Some("2024-11-14T00:00:00Z");
        let versions = [version("202411.12.0", same), version("202411.12.1", same)];
        assert_eq!(
            latest_community_version(&versions).unwrap().name,
            "202411.12.1"
        );
        let undated = [version("202411.12.0", None), version("2022.10.03", None)];
        assert_eq!(
            latest_community_version(&undated).unwrap().name,
            "202411.12.0"
        );
        let mixed = [
            version("202501.01.0", None),
            version("202411.12.0", Some("2024-11-14T00:00:00Z")),
        ];
        assert_eq!(
            latest_community_version(&mixed).unwrap().name,
            "202411.12.0",
            "a dated version beats an undated one"
        );
    }

    #[test]
    fn nothing_to_choose_from_is_none() {
        assert_eq!(latest_community_version(&[]), None);
        assert_eq!(latest_community_version(&[version("", None)]), None);
    }
}
