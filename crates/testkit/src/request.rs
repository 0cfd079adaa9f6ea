//! Reading a Kubernetes API request: which resource, which object, which verb.

use std::collections::HashMap;

use http::Method;

use crate::resources::ResourceType;

/// The verbs of Kubernetes' RBAC vocabulary, plus `evict` for `pods/eviction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// GET one object.
    Get,
    /// GET a collection.
    List,
    /// GET a collection with `watch=true`.
    Watch,
    /// POST to a collection.
    Create,
    /// PUT an object.
    Update,
    /// PATCH an object (merge, JSON or apply).
    Patch,
    /// DELETE an object.
    Delete,
    /// POST `pods/NAME/eviction`.
    Evict,
}

/// A parsed request path and query.
#[derive(Clone, Debug)]
pub struct ApiRequest {
    /// The verb.
    pub verb: Verb,
    /// The resource type addressed.
    pub resource: ResourceType,
    /// The namespace in the path, if any.
    pub namespace: Option<String>,
    /// The object name, if one is addressed.
    pub name: Option<String>,
    /// `status`, `eviction`, …
    pub subresource: Option<String>,
    /// Query parameters.
    pub query: HashMap<String, String>,
}

impl ApiRequest {
    /// Parses method, path and query; `None` when the path is not a resource path.
    pub fn parse(method: &Method, path: &str, query: Option<&str>) -> Option<Self> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            _ => (None, rest),
        };
        let (plural, name, subresource) = match rest {
            [plural] => (*plural, None, None),
            [plural, name] => (*plural, Some(name.to_string()), None),
            [plural, name, sub] => (*plural, Some(name.to_string()), Some(sub.to_string())),
            _ => return None,
        };
        let query: HashMap<String, String> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .into_owned()
            .collect();
        let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
        let verb = match (method.as_str(), &name, subresource.as_deref()) {
            ("GET", None, _) if watch => Verb::Watch,
            ("GET", None, _) => Verb::List,
            ("GET", Some(_), _) => Verb::Get,
            ("POST", Some(_), Some("eviction")) => Verb::Evict,
            ("POST", None, _) => Verb::Create,
            ("PUT", Some(_), _) => Verb::Update,
            ("PATCH", Some(_), _) => Verb::Patch,
            ("DELETE", Some(_), _) => Verb::Delete,
            _ => return None,
        };
        Some(Self {
            verb,
            resource: ResourceType {
                group: group.into(),
                version: version.into(),
                plural: plural.into(),
            },
            namespace,
            name,
            subresource,
            query,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let r = ApiRequest::parse(
            &Method::GET,
            "/api/v1/namespaces/ns/pods",
            Some("watch=true&resourceVersion=5"),
        )
        .unwrap();
        assert_eq!(
            (r.verb, r.resource.plural.as_str(), r.namespace.as_deref()),
            (Verb::Watch, "pods", Some("ns"))
        );
        assert_eq!(r.query["resourceVersion"], "5");
        let r = ApiRequest::parse(&Method::GET, "/api/v1/pods", None).unwrap();
        assert_eq!((r.verb, r.namespace), (Verb::List, None));
        let r = ApiRequest::parse(
            &Method::PATCH,
            "/apis/karpenter.sh/v1/nodeclaims/a/status",
            None,
        )
        .unwrap();
        assert_eq!(
            (
                r.verb,
                r.resource.group.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            (Verb::Patch, "karpenter.sh", Some("a"), Some("status"))
        );
        let r = ApiRequest::parse(&Method::POST, "/api/v1/namespaces/ns/pods/p/eviction", None)
            .unwrap();
        assert_eq!(r.verb, Verb::Evict);
        let r = ApiRequest::parse(&Method::GET, "/api/v1/namespaces/kube-system", None).unwrap();
        assert_eq!(
            (r.verb, r.resource.plural.as_str(), r.name.as_deref()),
            (Verb::Get, "namespaces", Some("kube-system"))
        );
        assert!(ApiRequest::parse(&Method::GET, "/version", None).is_none());
    }
}
