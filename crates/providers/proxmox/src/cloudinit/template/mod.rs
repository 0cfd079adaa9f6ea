//! Go `text/template` rendering as upstream does it for the cloud-init documents
//! (`pkg/providers/instance/cloudinit/functions.go`, `ExecuteTemplate`): the template language
//! through [`gtmpl`], with upstream's function set ([`FUNCTIONS`]) added to Go's builtins.
//!
//! Values reach templates as [`Value`]s. A Go struct becomes a [`Value::Object`] keyed by its
//! Go field names (`.Metadata.Hostname`), built with [`GoStruct`], which also records each
//! field's YAML key and `omitempty` rule and the field order under a key no template can
//! spell: `toYaml` and `toJson` need them to print a struct the way Go's encoders do
//! (`instanceid: "100"`, `registerWithTaints`, fields in declaration order).
//!
//! Where gtmpl differs from Go's engine (known, not worked around):
//!
//! * `range` over a map visits the keys in no particular order (Go sorts them), and the
//!   `{{ else }}` branch of a `range` runs even when there were elements;
//! * printing a list or a map (`{{ .Metadata.Tags }}`) shows Rust's debug form, not Go's
//!   `[a b]`, and a nil pointer prints `nil`, not `<nil>`; `join` and `toYaml` are the way to
//!   print collections;
//! * `and`/`or` evaluate every argument (Go stops at the first deciding one), and Go's
//!   `break`, `continue`, `slice`, `html` and `js` do not exist.

mod b64;
mod funcs;
mod gostruct;
mod json;
mod net;
mod yaml;

pub use funcs::FUNCTIONS;
pub use gostruct::GoStruct;
pub use gtmpl::Value;
pub use json::{to_json, to_pretty_json};
pub use net::{cidr_host, slaac};
pub use yaml::to_yaml;

/// A template that did not parse or did not render; names the template (`user-data`,
/// `meta-data`, …) and says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// Not a valid Go template: unbalanced `{{ end }}`, unknown function, bad syntax.
    #[error("the {template} template does not parse: {reason}")]
    Parse {
        /// Which template.
        template: String,
        /// The parser's complaint.
        reason: String,
    },
    /// Parsed, but executing it failed: a missing field, a function's error, a wrong type.
    #[error("the {template} template failed to render: {reason}")]
    Render {
        /// Which template.
        template: String,
        /// What went wrong.
        reason: String,
    },
}

impl TemplateError {
    /// The template's name.
    pub fn template(&self) -> &str {
        match self {
            Self::Parse { template, .. } | Self::Render { template, .. } => template,
        }
    }
}

/// Renders `text`, a Go template named `name` (used in errors only), with `data` as `.`.
pub fn execute(name: &str, text: &str, data: &Value) -> Result<String, TemplateError> {
    let mut template = gtmpl::Template::with_name(name);
    template.add_funcs(FUNCTIONS);
    template.parse(text).map_err(|e| TemplateError::Parse {
        template: name.to_string(),
        reason: e.to_string(),
    })?;
    template
        .render(&gtmpl::Context::from(data.clone()))
        .map_err(|e| TemplateError::Render {
            template: name.to_string(),
            reason: e.to_string(),
        })
}
