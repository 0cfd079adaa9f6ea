//! `credential_process`: a command (run by the shell) that prints credentials as JSON
//! (`Version` 1, `AccessKeyId`, `SecretAccessKey`, optional `SessionToken` and `Expiration`).

use std::time::Duration;

use super::credentials::{Fetched, parse_time};
use super::sigv4::Credentials;
use crate::http::{AwsError, Result};

fn err(message: String) -> AwsError {
    AwsError::Credentials(message)
}

/// How long the command may run (the Go SDK's default): the credentials lock is held while
/// it runs, so a hung command must not stall every AWS call.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `command` and reads its credentials, killing it after [`TIMEOUT`].
pub async fn run(command: &str) -> Result<Fetched> {
    run_within(command, TIMEOUT).await
}

/// Runs `command` and reads its credentials, killing it if it runs longer than `timeout`.
pub async fn run_within(command: &str, timeout: Duration) -> Result<Fetched> {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // Dropping the unfinished wait below (the timeout) kills the command.
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| err(format!("credential_process {command:?}: {e}")))?;
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .map_err(|_| {
            err(format!(
                "credential_process {command:?}: no answer within {}s; killed",
                timeout.as_secs_f64()
            ))
        })?
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

    /// A command that does not answer is killed at the timeout, not waited for.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_hung_command_is_killed_at_the_timeout() {
        let dir =
            std::env::temp_dir().join(format!("karpenter-aws-process-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("pid");
        // `exec`: the shell becomes the sleeping command, so killing it kills the sleep.
        let command = format!("echo $$ > {}; exec sleep 30", pid_file.display());
        let started = std::time::Instant::now();
        let e = run_within(&command, Duration::from_millis(300))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("no answer within 0.3s; killed"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10));
        // The process is gone (reaped by the runtime once killed): no /proc entry stays
        // running.
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .to_string();
        let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
        let mut gone = false;
        for _ in 0..100 {
            let state = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
            // Gone, or a zombie awaiting reaping: either way no longer running.
            if state.is_empty() || state.split_whitespace().nth(2) == Some("Z") {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert!(gone, "the command was killed");
    }
}
