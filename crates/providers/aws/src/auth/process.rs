//! `credential_process`: a command (run by the shell) that prints credentials as JSON
//! (`Version` 1, `AccessKeyId`, `SecretAccessKey`, optional `SessionToken` and `Expiration`).

use super::credentials::{Fetched, parse_time};
use super::sigv4::Credentials;
use crate::http::{AwsError, Result};

fn err(message: String) -> AwsError {
    AwsError::Credentials(message)
}

/// Runs `command` and reads its credentials.
pub async fn run(command: &str) -> Result<Fetched> {
    let line = command.to_string();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(&line)
            .stdin(std::process::Stdio::null())
            .output()
    })
    .await
    .map_err(|e| err(format!("credential_process {command:?}: {e}")))?
    .map_err(|e| err(format!("credential_process {command:?}: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(err(format!(
            "credential_process {command:?} exited with {}: {}",
            output.status,
            stderr.trim()
        )));
    }
    parse(command, &output.stdout)
}

/// The command's JSON.
pub fn parse(command: &str, stdout: &[u8]) -> Result<Fetched> {
    let json: serde_json::Value = serde_json::from_slice(stdout)
        .map_err(|e| AwsError::Parse(format!("credential_process {command:?}: {e}")))?;
    if json["Version"].as_u64() != Some(1) {
        return Err(err(format!(
            "credential_process {command:?}: Version is {}, expected 1",
            json["Version"]
        )));
    }
    let field = |name: &str| {
        json[name]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| err(format!("credential_process {command:?}: no {name}")))
    };
    let credentials = Credentials {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: field("SecretAccessKey")?,
        session_token: field("SessionToken").ok(),
    };
    let expires = match json["Expiration"].as_str() {
        Some(e) => Some(
            parse_time(e)
                .ok_or_else(|| err(format!("credential_process {command:?}: Expiration {e:?}")))?,
        ),
        None => None,
    };
    Ok((credentials, expires))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_command_prints_credentials() {
        let (c, expires) = run(
            r#"printf '{"Version": 1, "AccessKeyId": "AKID", "SecretAccessKey": "s", "SessionToken": "t", "Expiration": "2030-01-01T00:00:00Z"}'"#,
        )
        .await
        .unwrap();
        assert_eq!(
            (c.access_key_id.as_str(), c.session_token.as_deref()),
            ("AKID", Some("t"))
        );
        assert_eq!(expires, Some(1_893_456_000));
        let (_, never) =
            run(r#"echo '{"Version": 1, "AccessKeyId": "A", "SecretAccessKey": "s"}'"#)
                .await
                .unwrap();
        assert_eq!(never, None, "long-term keys do not expire");
        let e = run("echo denied >&2; exit 3")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("denied") && e.contains("exit"), "{e}");
        let e = run(r#"echo '{"Version": 2}'"#)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("Version is 2"), "{e}");
    }
}
