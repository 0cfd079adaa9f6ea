//! Task ids (UPIDs). Every asynchronous Proxmox VE call answers with one, and the task's status
//! is asked of the node that runs it, which only the UPID names:
//!
//! `UPID:pve1:000A1B2C:0123ABCD:66F0C0DE:qmclone:9000:root@pam:`
//!
//! node, process id, process start (clock ticks), start time (Unix seconds), task type, the
//! object it works on (a VM id, a storage; may be empty) and the user (or `user@realm!token`),
//! numbers in hex, as `PVE::Tools::upid_encode` writes them.

use std::fmt;
use std::str::FromStr;

/// Why a text is not a UPID.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a task id (UPID) {text:?}: {reason}")]
pub struct UpidError {
    /// The text.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// A parsed UPID; [`Upid::as_str`] gives back the text exactly as the server wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Upid {
    raw: String,
    /// The node running the task: where its status is asked.
    pub node: String,
    /// The worker's process id.
    pub pid: u32,
    /// The worker's process start, in clock ticks since boot.
    pub pstart: u64,
    /// When the task started, Unix seconds.
    pub starttime: u64,
    /// The task's type (`qmclone`, `qmstart`, `imgcopy`, …).
    pub task_type: String,
    /// What the task works on: a VM id, a storage; may be empty.
    pub id: String,
    /// Who started it: `user@realm`, or `user@realm!token` for an API token.
    pub user: String,
}

impl Upid {
    /// Reads a UPID; the trailing `:` PVE writes may be missing.
    pub fn parse(text: &str) -> Result<Self, UpidError> {
        let fail = |reason| UpidError {
            text: text.to_string(),
            reason,
        };
        let body = text
            .strip_prefix("UPID:")
            .ok_or_else(|| fail("it does not start with UPID:"))?;
        let body = body.strip_suffix(':').unwrap_or(body);
        let parts: Vec<&str> = body.split(':').collect();
        let [node, pid, pstart, starttime, task_type, id, user] = parts[..] else {
            return Err(fail(
                "it has not the 7 fields node:pid:pstart:starttime:type:id:user",
            ));
        };
        let hex = |field: &str, reason| {
            u64::from_str_radix(field, 16)
                .ok()
                .filter(|_| !field.is_empty())
                .ok_or_else(|| fail(reason))
        };
        if node.is_empty() {
            return Err(fail("the node is empty"));
        }
        let pid = u32::try_from(hex(pid, "the pid is not hex")?)
            .map_err(|_| fail("the pid is out of range"))?;
        let pstart = hex(pstart, "the process start is not hex")?;
        let starttime = hex(starttime, "the start time is not hex")?;
        if task_type.is_empty() {
            return Err(fail("the task type is empty"));
        }
        if user.is_empty() {
            return Err(fail("the user is empty"));
        }
        Ok(Self {
            raw: text.to_string(),
            node: node.to_string(),
            pid,
            pstart,
            starttime,
            task_type: task_type.to_string(),
            id: id.to_string(),
            user: user.to_string(),
        })
    }

    /// The UPID as the server wrote it (what the task calls take).
    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

impl fmt::Display for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl FromStr for Upid {
    type Err = UpidError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl<'de> serde::Deserialize<'de> for Upid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Upid::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for Upid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_real_and_token_upids() {
        let u = Upid::parse("UPID:pve1:000A1B2C:0123ABCD:66F0C0DE:qmclone:9000:root@pam:").unwrap();
        assert_eq!(
            (
                u.node.as_str(),
                u.pid,
                u.pstart,
                u.starttime,
                u.task_type.as_str(),
                u.id.as_str(),
                u.user.as_str()
            ),
            (
                "pve1",
                0xA1B2C,
                0x0123_ABCD,
                0x66F0_C0DE,
                "qmclone",
                "9000",
                "root@pam"
            )
        );
        assert_eq!(
            u.as_str(),
            "UPID:pve1:000A1B2C:0123ABCD:66F0C0DE:qmclone:9000:root@pam:"
        );
        // A token's task, an empty id, a 9-digit process start, no trailing colon.
        let t = Upid::parse("UPID:node-2:00001234:1ABCDEF01:66F0C0DE:imgcopy::karpenter@pve!k8s")
            .unwrap();
        assert_eq!(
            (t.node.as_str(), t.pstart, t.id.as_str(), t.user.as_str()),
            ("node-2", 0x1_ABCD_EF01, "", "karpenter@pve!k8s")
        );
        let parsed: Upid =
            serde_json::from_str("\"UPID:pve2:00000001:00000002:00000003:qmstart:100:root@pam:\"")
                .unwrap();
        assert_eq!(
            (parsed.node.as_str(), parsed.task_type.as_str()),
            ("pve2", "qmstart")
        );
        assert_eq!(
            serde_json::to_string(&parsed).unwrap(),
            "\"UPID:pve2:00000001:00000002:00000003:qmstart:100:root@pam:\""
        );
    }

    #[test]
    fn malformed_upids_say_what_is_wrong() {
        for (text, reason) in [
            ("", "it does not start with UPID:"),
            (
                "pve1:1:2:3:qmstart:100:root@pam:",
                "it does not start with UPID:",
            ),
            (
                "UPID:pve1:1:2:qmstart:100:root@pam:",
                "it has not the 7 fields node:pid:pstart:starttime:type:id:user",
            ),
            (
                "UPID:pve1:0001:0002:0003:qmstart:100:root@pam:extra:",
                "it has not the 7 fields node:pid:pstart:starttime:type:id:user",
            ),
            (
                "UPID::0001:0002:0003:qmstart:100:root@pam:",
                "the node is empty",
            ),
            (
                "UPID:pve1:zz:0002:0003:qmstart:100:root@pam:",
                "the pid is not hex",
            ),
            (
                "UPID:pve1:1FFFFFFFF:0002:0003:qmstart:100:root@pam:",
                "the pid is out of range",
            ),
            (
                "UPID:pve1:0001::0003:qmstart:100:root@pam:",
                "the process start is not hex",
            ),
            (
                "UPID:pve1:0001:0002:-3:qmstart:100:root@pam:",
                "the start time is not hex",
            ),
            (
                "UPID:pve1:0001:0002:0003::100:root@pam:",
                "the task type is empty",
            ),
            (
                "UPID:pve1:0001:0002:0003:qmstart:100::",
                "the user is empty",
            ),
        ] {
            assert_eq!(Upid::parse(text).unwrap_err().reason, reason, "{text}");
        }
        assert!(serde_json::from_str::<Upid>("null").is_err());
    }
}
