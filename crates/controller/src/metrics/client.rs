//! The API client's metrics as upstream's operatorpkg adapts client-go's:
//! `client_go_request_total{code,method}` for every request and
//! `client_go_request_duration_seconds{verb,group,version,kind,subresource}` for every request
//! that is not a watch, timed from when it starts waiting for the rate limiter to its response
//! (client-go times its throttle wait too). The layer that records them is
//! [`crate::kube_client::MetricsLayer`].
//!
//! client-go's adapters are process-wide, and the API client is built before the controller's
//! registry; so are these families, and every registry shows them ([`ClientMetrics::global`]).

use std::sync::LazyLock;

use super::{Builder, Counter, Family, Histogram, exponential_buckets};

/// The families the API client's requests are recorded in.
#[derive(Clone)]
pub struct ClientMetrics {
    /// `client_go_request_total{code,method}`: `code` is the HTTP status, `<error>` when no
    /// response came; `method` the HTTP method.
    pub requests: Family<Counter>,
    /// `client_go_request_duration_seconds{verb,group,version,kind,subresource}`
    pub duration: Family<Histogram>,
}

static GLOBAL: LazyLock<ClientMetrics> = LazyLock::new(ClientMetrics::new);

impl ClientMetrics {
    /// Families of their own (tests); the controller's are [`ClientMetrics::global`].
    pub fn new() -> Self {
        Self {
            requests: Family::new(Builder::desc(
                "client_go_request_total",
                "Number of HTTP requests, partitioned by status code and method.",
                super::Kind::Counter,
                &["code", "method"],
            )),
            duration: Family::new({
                let mut d = Builder::desc(
                    "client_go_request_duration_seconds",
                    "Request latency in seconds. Broken down by verb, group, version, kind, and subresource.",
                    super::Kind::Histogram,
                    &["verb", "group", "version", "kind", "subresource"],
                );
                d.buckets = exponential_buckets(0.001, 1.5, 20);
                d
            }),
        }
    }

    /// The process's families, which the API client records in and every registry shows.
    pub fn global() -> &'static ClientMetrics {
        &GLOBAL
    }

    pub(super) fn register(&self, b: &mut Builder) {
        b.registry.register(&self.requests);
        b.registry.register(&self.duration);
    }

    /// Records a request's result: its HTTP `method` and status `code` (`None`: no response).
    pub fn result(&self, method: &str, code: Option<u16>) {
        let code = code.map_or_else(|| "<error>".to_string(), |c| c.to_string());
        self.requests.with(&[&code, method]).inc();
    }

    /// Records a request's latency, by what it did to which resource. Requests outside
    /// `/api` and `/apis` (discovery, `/version`) are not recorded, as upstream's adapter
    /// records them not.
    pub fn latency(&self, method: &str, path: &str, seconds: f64) {
        if let Some(target) = Target::parse(path) {
            let verb = target.verb(method);
            self.duration
                .with(&[
                    verb,
                    target.group,
                    target.version,
                    target.resource,
                    target.subresource,
                ])
                .observe(seconds);
        }
    }
}

impl Default for ClientMetrics {
    fn default() -> Self {
        Self::new()
    }
}

/// What an API path addresses.
#[derive(Debug, PartialEq, Eq)]
pub struct Target<'a> {
    /// The API group, empty for the core group.
    pub group: &'a str,
    /// The API version.
    pub version: &'a str,
    /// The resource (plural), which upstream labels `kind`.
    pub resource: &'a str,
    /// Whether one object is named.
    pub named: bool,
    /// The subresource, if any.
    pub subresource: &'a str,
}

impl<'a> Target<'a> {
    /// Splits `/api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUB]]` and its `/apis/GROUP/VERSION`
    /// form, as upstream's adapter reads client-go's URL templates: a path with `namespaces`
    /// followed by more than a name is namespaced.
    pub fn parse(path: &'a str) -> Option<Self> {
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let (group, rest) = match *parts.first()? {
            "api" => ("", &parts[1..]),
            "apis" => (*parts.get(1)?, &parts[2..]),
            _ => return None,
        };
        let (version, rest) = rest.split_first()?;
        let rest = match rest {
            ["namespaces", _, resource, more @ ..] => {
                let mut r = vec![*resource];
                r.extend(more);
                r
            }
            other => other.to_vec(),
        };
        let (resource, rest) = rest.split_first()?;
        Some(Self {
            group,
            version,
            resource,
            named: !rest.is_empty(),
            subresource: if rest.len() == 2 { rest[1] } else { "" },
        })
    }

    /// Upstream's verb label for an HTTP `method` on this target: a POST creates, a GET of
    /// no one object lists, a PUT of one updates (of none, creates); others keep the method.
    pub fn verb(&self, method: &'a str) -> &'a str {
        match (method, self.named) {
            ("POST", _) => "CREATE",
            ("GET", false) => "LIST",
            ("PUT", true) => "UPDATE",
            ("PUT", false) => "CREATE",
            (other, _) => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_group_version_resource_and_subresource() {
        let t = |group, version, resource, named, subresource| Target {
            group,
            version,
            resource,
            named,
            subresource,
        };
        for (path, want) in [
            ("/api/v1/nodes", Some(t("", "v1", "nodes", false, ""))),
            ("/api/v1/nodes/n1", Some(t("", "v1", "nodes", true, ""))),
            (
                "/api/v1/nodes/n1/status",
                Some(t("", "v1", "nodes", true, "status")),
            ),
            (
                "/api/v1/namespaces/default/pods/p/eviction",
                Some(t("", "v1", "pods", true, "eviction")),
            ),
            (
                "/api/v1/namespaces/default/pods",
                Some(t("", "v1", "pods", false, "")),
            ),
            (
                "/api/v1/namespaces/kube-system",
                Some(t("", "v1", "namespaces", true, "")),
            ),
            (
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases/karpenter-leader-election",
                Some(t("coordination.k8s.io", "v1", "leases", true, "")),
            ),
            (
                "/apis/karpenter.sh/v1/nodeclaims/c/status",
                Some(t("karpenter.sh", "v1", "nodeclaims", true, "status")),
            ),
            ("/apis/karpenter.sh/v1", None),
            ("/version", None),
        ] {
            assert_eq!(Target::parse(path), want, "{path}");
        }
    }

    #[test]
    fn verbs_say_what_the_request_did() {
        let named = Target::parse("/api/v1/nodes/n").unwrap();
        let collection = Target::parse("/api/v1/nodes").unwrap();
        assert_eq!(collection.verb("POST"), "CREATE");
        assert_eq!(collection.verb("GET"), "LIST");
        assert_eq!(named.verb("GET"), "GET");
        assert_eq!(named.verb("PUT"), "UPDATE");
        assert_eq!(named.verb("PATCH"), "PATCH");
        assert_eq!(named.verb("DELETE"), "DELETE");
    }
}
