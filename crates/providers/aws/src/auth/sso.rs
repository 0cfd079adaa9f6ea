//! IAM Identity Center (SSO): a profile's `sso_account_id` and `sso_role_name`, with either an
//! `sso_session` (its `[sso-session …]` section gives `sso_start_url` and `sso_region`) or the
//! legacy `sso_start_url`/`sso_region` in the profile. The access token is the one `aws sso
//! login` cached in `~/.aws/sso/cache/<sha1 of the session name or start URL>.json`; it is
//! exchanged at the portal's GetRoleCredentials. Refreshing an expired token (SSO OIDC) is left
//! to `aws sso login`.

use bytes::Bytes;
use ring::digest;

use super::config::SharedConfig;
use super::credentials::{Fetched, Sso, parse_time};
use super::sigv4::{Credentials, uri_encode};
use crate::http::{AwsError, AwsHttp, Result, endpoints};

fn err(message: String) -> AwsError {
    AwsError::Credentials(message)
}

/// The cache file's name for a session name or start URL.
pub fn cache_key(session_or_url: &str) -> String {
    // The SDKs name the file by SHA-1; ring offers it for such legacy uses only.
    digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, session_or_url.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The SSO settings of profile `name`.
pub fn from_profile(config: &SharedConfig, name: &str) -> Result<Sso> {
    let get = |k: &str| config.files.get(name, k).map(str::to_string);
    let need = |k: &str| get(k).ok_or_else(|| err(format!("profile {name:?}: SSO needs {k}")));
    let (key, region) = match get("sso_session") {
        Some(session) => {
            let section = config.files.sso_sessions.get(&session).ok_or_else(|| {
                err(format!(
                    "profile {name:?}: sso_session {session:?} has no [sso-session {session}] section"
                ))
            })?;
            let region = section
                .get("sso_region")
                .filter(|r| !r.is_empty())
                .cloned()
                .ok_or_else(|| err(format!("[sso-session {session}]: no sso_region")))?;
            (session, region)
        }
        None => (need("sso_start_url")?, need("sso_region")?),
    };
    let home = config.home().ok_or_else(|| {
        err(format!(
            "profile {name:?}: SSO needs HOME for the token cache"
        ))
    })?;
    Ok(Sso {
        region,
        account_id: need("sso_account_id")?,
        role_name: need("sso_role_name")?,
        cache_file: home
            .join(".aws/sso/cache")
            .join(format!("{}.json", cache_key(&key)))
            .display()
            .to_string(),
    })
}

/// The role's credentials for the cached token.
pub async fn credentials(http: &AwsHttp, sso: &Sso) -> Result<Fetched> {
    let text = std::fs::read_to_string(&sso.cache_file).map_err(|e| {
        err(format!(
            "SSO token cache {}: {e} (run `aws sso login`)",
            sso.cache_file
        ))
    })?;
    let cache: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| AwsError::Parse(format!("{}: {e}", sso.cache_file)))?;
    let token = cache["accessToken"]
        .as_str()
        .ok_or_else(|| AwsError::Parse(format!("{}: no accessToken", sso.cache_file)))?;
    let expired = cache["expiresAt"]
        .as_str()
        .and_then(parse_time)
        .is_none_or(|at| at <= http.timing().unix_now());
    if expired {
        return Err(err(format!(
            "the SSO token in {} has expired (run `aws sso login`)",
            sso.cache_file
        )));
    }
    let base = http.configured_url("sso").unwrap_or_else(|| {
        format!(
            "https://portal.sso.{}.{}",
            sso.region,
            endpoints::partition(&sso.region).dns_suffix
        )
    });
    let url = format!(
        "{base}/federation/credentials?account_id={}&role_name={}",
        uri_encode(&sso.account_id),
        uri_encode(&sso.role_name)
    );
    let response = http
        .unsigned_call(false, || {
            http::Request::get(&url)
                .header("x-amz-sso_bearer_token", token)
                .body(Bytes::new())
        })
        .await
        .map_err(|e| err(format!("SSO GetRoleCredentials for {}: {e}", sso.role_name)))?;
    parse(&response.body)
}

/// GetRoleCredentials' answer (the expiration in milliseconds since the epoch).
pub fn parse(body: &[u8]) -> Result<Fetched> {
    let json: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| AwsError::Parse(format!("GetRoleCredentials: {e}")))?;
    let role = &json["roleCredentials"];
    let field = |name: &str| {
        role[name]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| AwsError::Parse(format!("GetRoleCredentials: no {name}")))
    };
    Ok((
        Credentials {
            access_key_id: field("accessKeyId")?,
            secret_access_key: field("secretAccessKey")?,
            session_token: field("sessionToken").ok(),
        },
        role["expiration"].as_i64().map(|ms| ms / 1000),
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::profile::FileKind;
    use super::*;

    #[test]
    fn settings_and_cache_file() {
        // The SDKs' cache key of a session name (SHA-1 of the UTF-8 bytes).
        assert_eq!(
            cache_key("admin"),
            "d033e22ae348aeb5660fc2140aec35850c4da997"
        );
        let cfg = "\
[profile dev]
sso_session = corp
sso_account_id = 111122223333
sso_role_name = Admin
[sso-session corp]
sso_start_url = https://corp.awsapps.com/start
sso_region = eu-west-1
[profile legacy]
sso_start_url = https://old.awsapps.com/start
sso_region = us-east-1
sso_account_id = 1
sso_role_name = R
[profile broken]
sso_session = nowhere
sso_account_id = 1
sso_role_name = R
";
        let config = SharedConfig::from_parts(
            BTreeMap::from([("HOME".to_string(), "/home/me".to_string())]),
            &[(FileKind::Config, cfg.to_string())],
        );
        let s = from_profile(&config, "dev").unwrap();
        assert_eq!(
            (s.region.as_str(), s.account_id.as_str()),
            ("eu-west-1", "111122223333")
        );
        assert_eq!(
            s.cache_file,
            format!("/home/me/.aws/sso/cache/{}.json", cache_key("corp"))
        );
        let l = from_profile(&config, "legacy").unwrap();
        assert!(l.cache_file.ends_with(&format!(
            "{}.json",
            cache_key("https://old.awsapps.com/start")
        )));
        let e = from_profile(&config, "broken").unwrap_err().to_string();
        assert!(e.contains("[sso-session nowhere]"), "{e}");
    }

    #[test]
    fn the_portals_answer() {
        let (c, expires) = parse(br#"{"roleCredentials":{"accessKeyId":"ASIA","secretAccessKey":"s","sessionToken":"t","expiration":1700000000000}}"#).unwrap();
        assert_eq!(c.access_key_id, "ASIA");
        assert_eq!(expires, Some(1_700_000_000));
    }
}
