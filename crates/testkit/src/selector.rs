//! Label and field selectors in their query-string form (`app=web,tier!=db`, `env in (a,b)`,
//! `!canary`; `spec.nodeName=`, `status.phase!=Succeeded`).

use serde_json::Value;

/// A parsed selector term.
#[derive(Clone, Debug, PartialEq)]
enum Term {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A label selector: every term must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<Term>);

/// A field selector: every `path=value` / `path!=value` must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<Term>);

/// A selector the server could not read.
#[derive(Debug, PartialEq)]
pub struct SelectorError(pub String);

/// Splits on commas that are not inside parentheses.
fn split_terms(input: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&input[start..]);
    terms
        .into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn set_term(term: &str, word: &str) -> Option<Result<(String, Vec<String>), SelectorError>> {
    let (key, rest) = term.split_once(word)?;
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError(format!("{term:?}: expected a parenthesised set")));
    Some(inner.map(|inner| {
        (
            key.trim().to_string(),
            inner.split(',').map(|v| v.trim().to_string()).collect(),
        )
    }))
}

fn equality_term(term: &str) -> Option<Term> {
    if let Some((k, v)) = term.split_once("!=") {
        return Some(Term::NotEquals(k.trim().into(), v.trim().into()));
    }
    let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
    Some(Term::Equals(k.trim().into(), v.trim().into()))
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for term in split_terms(input) {
            if let Some(t) = equality_term(term) {
                terms.push(t);
            } else if let Some(r) = set_term(term, " notin ") {
                let (k, v) = r?;
                terms.push(Term::NotIn(k, v));
            } else if let Some(r) = set_term(term, " in ") {
                let (k, v) = r?;
                terms.push(Term::In(k, v));
            } else if let Some(key) = term.strip_prefix('!') {
                terms.push(Term::DoesNotExist(key.trim().into()));
            } else if term.contains(' ') {
                return Err(SelectorError(format!("{term:?}: unknown operator")));
            } else {
                terms.push(Term::Exists(term.into()));
            }
        }
        Ok(Self(terms))
    }

    /// Whether an object's `metadata.labels` satisfy the selector.
    pub fn matches(&self, object: &Value) -> bool {
        let label = |k: &str| object["metadata"]["labels"][k].as_str().map(str::to_string);
        self.0.iter().all(|t| match t {
            Term::Equals(k, v) => label(k).as_deref() == Some(v),
            Term::NotEquals(k, v) => label(k).as_deref() != Some(v),
            Term::In(k, vs) => label(k).is_some_and(|l| vs.contains(&l)),
            Term::NotIn(k, vs) => label(k).is_none_or(|l| !vs.contains(&l)),
            Term::Exists(k) => label(k).is_some(),
            Term::DoesNotExist(k) => label(k).is_none(),
        })
    }
}

/// The value at a dotted field path, as the API server compares it: absent reads as "".
fn field(object: &Value, path: &str) -> String {
    let mut v = object;
    for part in path.split('.') {
        v = &v[part];
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        split_terms(input)
            .into_iter()
            .map(|t| {
                equality_term(t).ok_or_else(|| {
                    SelectorError(format!("{t:?}: expected path=value or path!=value"))
                })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether the object's fields satisfy the selector.
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|t| match t {
            Term::Equals(p, v) => field(object, p) == *v,
            Term::NotEquals(p, v) => field(object, p) != *v,
            _ => true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("app in (db, web)", true),
            ("app notin (db,web)", false),
            ("missing notin (a)", true),
            ("tier", true),
            ("!tier", false),
            ("!canary", true),
            ("app=web,tier=back", false),
            ("app in (web),!canary,tier", true),
            ("", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&obj),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("app foo bar").is_err());
    }

    #[test]
    fn field_selectors() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {}, "status": {"phase": "Running"}});
        let cases = [
            ("spec.nodeName=", true),
            ("spec.nodeName!=", false),
            ("metadata.name=p,metadata.namespace=ns", true),
            ("status.phase!=Succeeded", true),
            ("status.phase==Running", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                FieldSelector::parse(sel).unwrap().matches(&pod),
                want,
                "{sel}"
            );
        }
        assert!(FieldSelector::parse("spec.nodeName").is_err());
    }
}
