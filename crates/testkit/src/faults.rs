//! Fault injection: make chosen requests fail or slow down, to test that the controller
//! retries and never loses work.

use std::time::Duration;

use http::StatusCode;

use crate::request::{ApiRequest, Verb};

/// A rule for requests of one verb and/or resource type.
#[derive(Clone, Debug)]
pub struct Fault {
    /// Only this verb (any when `None`).
    pub verb: Option<Verb>,
    /// Only this resource plural, e.g. `nodeclaims` (any when `None`).
    pub plural: Option<String>,
    /// Only this subresource, e.g. `status` (any when `None`).
    pub subresource: Option<String>,
    /// Answer with this status instead of serving the request (`None`: serve it, after the
    /// latency).
    pub code: Option<StatusCode>,
    /// Wait this long first.
    pub latency: Duration,
    /// How many requests it hits before it is spent (`None`: forever).
    pub times: Option<usize>,
}

impl Fault {
    /// Fails matching requests with `code`.
    pub fn error(verb: Option<Verb>, plural: Option<&str>, code: StatusCode) -> Self {
        Self {
            verb,
            plural: plural.map(str::to_string),
            subresource: None,
            code: Some(code),
            latency: Duration::ZERO,
            times: None,
        }
    }

    /// Delays matching requests.
    pub fn latency(verb: Option<Verb>, plural: Option<&str>, latency: Duration) -> Self {
        Self {
            verb,
            plural: plural.map(str::to_string),
            subresource: None,
            code: None,
            latency,
            times: None,
        }
    }

    /// Narrows the rule to one subresource (`status`, `eviction`).
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.into());
        self
    }

    /// Spends the rule after `n` requests.
    pub fn times(mut self, n: usize) -> Self {
        self.times = Some(n);
        self
    }

    pub(crate) fn matches(&self, req: &ApiRequest) -> bool {
        self.times != Some(0)
            && self.verb.is_none_or(|v| v == req.verb)
            && self
                .plural
                .as_deref()
                .is_none_or(|p| p == req.resource.plural)
            && self
                .subresource
                .as_deref()
                .is_none_or(|s| Some(s) == req.subresource.as_deref())
    }
}
