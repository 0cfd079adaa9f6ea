//! CEL device selectors of Dynamic Resource Allocation, evaluated the way kube-scheduler's
//! `k8s.io/dynamic-resource-allocation/cel` evaluates them, so that karpenter picks the same
//! devices for a claim as the scheduler will once the node exists.
//!
//! The environment has one variable, `device`, with `driver`, `allowMultipleAllocations`
//! (false when unset), and `attributes` and `capacity`, both maps from domain to a map from
//! id to value. A qualified name `a.b/c` is domain `a.b`, id `c`; a name without `/` is in the
//! driver's domain. Attributes are CEL ints, bools, strings or Kubernetes semver values;
//! capacities are Kubernetes quantities. Looking up a domain the device does not have yields
//! an empty map, as upstream's map wrapper does, so `"x" in device.attributes["d"]` is false
//! rather than an error.
//!
//! The `cel` crate has no type checker and no cost accounting, which upstream has. What that
//! leaves different:
//! - Upstream rejects ill-typed expressions at compile time (`device.driver == 1`, calls of
//!   unknown functions, results that are statically not bool). Here compilation rejects syntax
//!   errors, undeclared variables, unknown `device` fields and results that are syntactically
//!   not bool (literals, lists, maps, `device.driver`); other type errors surface when a device
//!   is evaluated, and only on the branch taken.
//! - There is no runtime cost limit: a pathological expression runs to the end.
//! - Unknown domains default to an empty map only where the map is `device.attributes` or
//!   `device.capacity` written out (or a `cel.bind` alias of them), because the crate's maps
//!   cannot carry a default; the key itself may be any expression.
//! - Two-variable comprehensions (`all(k, v, …)`) are not parsed by the crate.
//! - The function libraries are those kube-cel compiles in; upstream's base environment also
//!   has `ip`/`cidr`, `url` and `format`, which need kube-cel's `ip`, `urls` and `format`
//!   features.

use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, LazyLock};

use karpenter_api::dra::{Device, DeviceAttribute};
use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapEntryExpr,
    SelectExpr, operators,
};
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::parser::Parser;
use kube_cel::cel::{Context, ExecutionError, ResolveResult, Value};

/// The one variable of the environment.
const DEVICE: &str = "device";
/// The fields upstream declares on its `kubernetes.DRADevice` object type.
const DEVICE_FIELDS: [&str; 4] = [
    "driver",
    "allowMultipleAllocations",
    "attributes",
    "capacity",
];
/// The `device` fields whose unknown keys default to an empty map.
const DOMAIN_MAPS: [&str; 2] = ["attributes", "capacity"];
/// Registered under a name no expression can spell (`@` is not an identifier character), so
/// only the rewritten AST calls it.
const DOMAIN_LOOKUP: &str = "@dra_domain";
/// Prefixes of the namespaced functions (`sets.contains`, `optional.of`, …): as call targets
/// they are not variables and must not be reported as undeclared.
const NAMESPACES: [&str; 10] = [
    "base64",
    "cel",
    "format",
    "ip",
    "jsonpatch",
    "lists",
    "math",
    "optional",
    "sets",
    "strings",
];

/// A compiled CEL device selector.
///
/// Cheap to clone: the compiled program is shared.
#[derive(Clone)]
pub struct DeviceSelector {
    expression: Arc<str>,
    program: Arc<IdedExpr>,
}

impl fmt::Debug for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DeviceSelector")
            .field(&self.expression)
            .finish()
    }
}

impl DeviceSelector {
    /// Compiles `expression`; Err(reason) when it does not parse/compile (message: the
    /// compiler's error text).
    pub fn compile(expression: &str) -> Result<Self, String> {
        // Upstream's base environment has optional types since Kubernetes 1.28.
        let parsed = guarded(|| {
            Parser::new()
                .enable_optional_syntax(true)
                .parse(expression)
                .map_err(|errors| errors.to_string())
        })??;
        check_result_type(&parsed)?;
        let program = rewrite(parsed, &mut Vec::new())?;
        Ok(DeviceSelector {
            expression: expression.into(),
            program: Arc::new(program),
        })
    }

    /// The expression's source.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether the device of `driver` is selected. Err(reason) on a runtime error (e.g. a
    /// missing key, a non-bool result).
    pub fn matches(&self, driver: &str, device: &Device) -> Result<bool, String> {
        let device = device_value(driver, device)?;
        let result = guarded(|| {
            let mut ctx = base_context().new_inner_scope();
            ctx.add_variable_from_value(DEVICE, device);
            ctx.resolve(&self.program)
        })?;
        match result {
            Ok(Value::Bool(selected)) => Ok(selected),
            Ok(other) => Err(format!(
                "CEL result of type {} could not be converted to bool",
                type_name(&other)
            )),
            Err(err) => Err(err.to_string()),
        }
    }
}

/// The value's CEL type, naming kube-cel's types (`kubernetes.Quantity`) rather than "opaque".
fn type_name(value: &Value) -> String {
    match value {
        Value::Opaque(opaque) => opaque.runtime_type_name().to_string(),
        other => other.type_of().to_string(),
    }
}

/// Runs `f`, turning a panic into an error: the `cel` crate panics on a few inputs
/// (`todo!`, `expect`) and one bad selector must not take the controller down.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let reason = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        format!("CEL interpreter panicked: {reason}")
    })
}

/// The functions every evaluation sees, built once: registering kube-cel's libraries per
/// evaluation would dominate the cost of a selector.
fn base_context() -> &'static Context<'static> {
    static BASE: LazyLock<Context<'static>> = LazyLock::new(|| {
        let mut ctx = Context::default();
        ctx.register_all();
        ctx.add_function(DOMAIN_LOOKUP, domain_lookup);
        ctx
    });
    &BASE
}

/// `device.attributes[domain]` with upstream's default: a domain the device does not have is
/// an empty map, not a missing key.
fn domain_lookup(map: Value, domain: Value) -> ResolveResult {
    let Value::Map(map) = map else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let Value::String(domain) = domain else {
        return Err(ExecutionError::UnsupportedMapIndex(domain));
    };
    Ok(map
        .map
        .get(&Key::String(domain))
        .cloned()
        .unwrap_or_else(|| map_value(HashMap::new())))
}

/// Upstream type-checks that the result is bool (or dyn). Without a checker, catch at least
/// the results that are not bool by their syntax.
fn check_result_type(expr: &IdedExpr) -> Result<(), String> {
    let found = match &expr.expr {
        Expr::Literal(LiteralValue::Boolean(_)) => return Ok(()),
        Expr::Literal(LiteralValue::Int(_)) => "int",
        Expr::Literal(LiteralValue::UInt(_)) => "uint",
        Expr::Literal(LiteralValue::Double(_)) => "double",
        Expr::Literal(LiteralValue::String(_)) => "string",
        Expr::Literal(LiteralValue::Bytes(_)) => "bytes",
        Expr::Literal(LiteralValue::Null) => "null_type",
        Expr::List(_) => "list",
        Expr::Map(_) => "map",
        Expr::Select(SelectExpr {
            operand,
            field,
            test: false,
        }) if matches!(&operand.expr, Expr::Ident(name) if name == DEVICE) => {
            match field.as_str() {
                "driver" => "string",
                "attributes" | "capacity" => "map",
                _ => return Ok(()),
            }
        }
        _ => return Ok(()),
    };
    Err(format!(
        "must evaluate to bool or the unknown type, not {found}"
    ))
}

/// A name bound by a comprehension or `cel.bind`; `domain_map` when it aliases
/// `device.attributes` or `device.capacity`, so lookups through it get the default too.
struct Binding {
    name: String,
    domain_map: bool,
}

fn binding<'a>(scope: &'a [Binding], name: &str) -> Option<&'a Binding> {
    scope.iter().rev().find(|b| b.name == name)
}

/// `device`, unless a comprehension variable or `cel.bind` shadows it.
fn is_device(expr: &IdedExpr, scope: &[Binding]) -> bool {
    matches!(&expr.expr, Expr::Ident(name) if name == DEVICE && binding(scope, DEVICE).is_none())
}

/// `device.attributes`, `device["capacity"]` or an alias of one.
fn is_domain_map(expr: &IdedExpr, scope: &[Binding]) -> bool {
    match &expr.expr {
        Expr::Select(SelectExpr {
            operand,
            field,
            test: false,
        }) => is_device(operand, scope) && DOMAIN_MAPS.contains(&field.as_str()),
        Expr::Call(CallExpr {
            func_name,
            target: None,
            args,
        }) if func_name == operators::INDEX && args.len() == 2 => {
            is_device(&args[0], scope)
                && matches!(&args[1].expr,
                    Expr::Literal(LiteralValue::String(field))
                        if DOMAIN_MAPS.contains(&field.inner()))
        }
        Expr::Ident(name) => binding(scope, name).is_some_and(|b| b.domain_map),
        _ => false,
    }
}

fn node(id: u64, expr: Expr) -> IdedExpr {
    IdedExpr { id, expr }
}

fn call(id: u64, func_name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    node(
        id,
        Expr::Call(CallExpr {
            func_name: func_name.to_string(),
            target: None,
            args,
        }),
    )
}

fn string_literal(id: u64, s: &str) -> IdedExpr {
    node(id, Expr::Literal(LiteralValue::String(s.into())))
}

/// Checks what the type checker would have caught cheaply (undeclared variables, unknown
/// `device` fields, constructs the crate cannot evaluate) and routes domain lookups through
/// [`domain_lookup`]; also expands `cel.bind`, which the crate's parser does not know.
fn rewrite(expr: IdedExpr, scope: &mut Vec<Binding>) -> Result<IdedExpr, String> {
    let id = expr.id;
    let rewritten = match expr.expr {
        Expr::Ident(name) => {
            if name != DEVICE && binding(scope, &name).is_none() {
                return Err(format!("undeclared reference to '{name}'"));
            }
            Expr::Ident(name)
        }
        Expr::Literal(literal) => Expr::Literal(literal),
        Expr::Select(SelectExpr {
            operand,
            field,
            test,
        }) => {
            if is_device(&operand, scope) {
                if !DEVICE_FIELDS.contains(&field.as_str()) {
                    return Err(format!("undefined field '{field}'"));
                }
                Expr::Select(SelectExpr {
                    operand,
                    field,
                    test,
                })
            } else if is_domain_map(&operand, scope) {
                if test {
                    // Upstream's wrapper finds every key, so has() on a domain is always true.
                    Expr::Literal(LiteralValue::Boolean(true.into()))
                } else {
                    let map = rewrite(*operand, scope)?;
                    return Ok(call(
                        id,
                        DOMAIN_LOOKUP,
                        vec![map, string_literal(id, &field)],
                    ));
                }
            } else {
                Expr::Select(SelectExpr {
                    operand: Box::new(rewrite(*operand, scope)?),
                    field,
                    test,
                })
            }
        }
        Expr::Call(CallExpr {
            func_name,
            target,
            args,
        }) => return rewrite_call(id, func_name, target, args, scope),
        Expr::Comprehension(comprehension) => {
            let ComprehensionExpr {
                iter_range,
                iter_var,
                iter_var2,
                accu_var,
                accu_init,
                loop_cond,
                loop_step,
                result,
            } = *comprehension;
            let iter_range = rewrite(iter_range, scope)?;
            let accu_init = rewrite(accu_init, scope)?;
            let depth = scope.len();
            for name in [Some(&iter_var), iter_var2.as_ref(), Some(&accu_var)]
                .into_iter()
                .flatten()
            {
                scope.push(Binding {
                    name: name.clone(),
                    domain_map: false,
                });
            }
            let body = (|| {
                Ok::<_, String>((
                    rewrite(loop_cond, scope)?,
                    rewrite(loop_step, scope)?,
                    rewrite(result, scope)?,
                ))
            })();
            scope.truncate(depth);
            let (loop_cond, loop_step, result) = body?;
            Expr::Comprehension(Box::new(ComprehensionExpr {
                iter_range,
                iter_var,
                iter_var2,
                accu_var,
                accu_init,
                loop_cond,
                loop_step,
                result,
            }))
        }
        Expr::List(list) => Expr::List(ListExpr::new_with_optionals(
            list.elements
                .into_iter()
                .map(|e| rewrite(e, scope))
                .collect::<Result<_, _>>()?,
            list.optional_indices,
        )),
        Expr::Map(mut map) => {
            for entry in &mut map.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(MapEntryExpr { key, value, .. }) => {
                        *key = rewrite(std::mem::take(key), scope)?;
                        *value = rewrite(std::mem::take(value), scope)?;
                    }
                    // The crate panics on these; no DRA expression needs them.
                    EntryExpr::StructField(_) => {
                        return Err("message construction is not supported".to_string());
                    }
                }
            }
            Expr::Map(map)
        }
        Expr::Struct(s) => {
            return Err(format!(
                "message construction is not supported: {}",
                s.type_name
            ));
        }
        Expr::Unspecified => return Err("invalid expression".to_string()),
    };
    Ok(node(id, rewritten))
}

fn rewrite_call(
    id: u64,
    func_name: String,
    target: Option<Box<IdedExpr>>,
    args: Vec<IdedExpr>,
    scope: &mut Vec<Binding>,
) -> Result<IdedExpr, String> {
    let name = func_name.as_str();
    let lookup = [
        operators::INDEX,
        operators::OPT_INDEX,
        operators::OPT_SELECT,
    ]
    .contains(&name);
    if lookup && target.is_none() && args.len() == 2 && is_domain_map(&args[0], scope) {
        let [map, domain] = <[IdedExpr; 2]>::try_from(args).map_err(|_| "unreachable")?;
        let found = call(
            id,
            DOMAIN_LOOKUP,
            vec![rewrite(map, scope)?, rewrite(domain, scope)?],
        );
        // Upstream's wrapper finds every domain, so the optional forms always have a value.
        return Ok(if name == operators::INDEX {
            found
        } else {
            call(id, "optional.of", vec![found])
        });
    }

    let namespace = match target.as_deref() {
        Some(IdedExpr {
            expr: Expr::Ident(ns),
            ..
        }) if binding(scope, ns).is_none() && NAMESPACES.contains(&ns.as_str()) => {
            Some(ns.as_str())
        }
        _ => None,
    };
    if namespace == Some("cel") && name == "bind" {
        return rewrite_bind(id, args, scope);
    }
    let target = match target {
        Some(t) if namespace.is_some() => Some(t),
        Some(t) => Some(Box::new(rewrite(*t, scope)?)),
        None => None,
    };
    let args = args
        .into_iter()
        .map(|a| rewrite(a, scope))
        .collect::<Result<_, _>>()?;
    Ok(node(
        id,
        Expr::Call(CallExpr {
            func_name,
            target,
            args,
        }),
    ))
}

/// `cel.bind(x, init, body)` as cel-go expands it: a comprehension over an empty list whose
/// accumulator `x` starts at `init`, so `body` sees `x` and the loop never runs.
fn rewrite_bind(
    id: u64,
    args: Vec<IdedExpr>,
    scope: &mut Vec<Binding>,
) -> Result<IdedExpr, String> {
    let Ok([var, init, body]) = <[IdedExpr; 3]>::try_from(args) else {
        return Err("cel.bind() requires 3 arguments".to_string());
    };
    let Expr::Ident(var) = var.expr else {
        return Err("cel.bind() variable names must be simple identifiers".to_string());
    };
    let domain_map = is_domain_map(&init, scope);
    let init = rewrite(init, scope)?;
    scope.push(Binding {
        name: var.clone(),
        domain_map,
    });
    let body = rewrite(body, scope);
    scope.pop();
    Ok(node(
        id,
        Expr::Comprehension(Box::new(ComprehensionExpr {
            iter_range: node(id, Expr::List(ListExpr::new(Vec::new()))),
            iter_var: "#unused".to_string(),
            iter_var2: None,
            accu_var: var.clone(),
            accu_init: init,
            loop_cond: node(id, Expr::Literal(LiteralValue::Boolean(false.into()))),
            loop_step: node(id, Expr::Ident(var)),
            result: body?,
        })),
    ))
}

fn map_value(entries: HashMap<Key, Value>) -> Value {
    Value::Map(Map {
        map: Arc::new(entries),
    })
}

/// `device` for one evaluation. Like upstream, a bad attribute fails every expression on the
/// device, used or not, since the whole activation is built before evaluating.
fn device_value(driver: &str, device: &Device) -> Result<Value, String> {
    let mut attributes: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
    for (name, attribute) in &device.attributes {
        let value = attribute_value(attribute).map_err(|err| format!("attribute {name}: {err}"))?;
        let (domain, id) = split_qualified_name(name, driver);
        attributes
            .entry(domain.into())
            .or_default()
            .insert(id.into(), value);
    }
    let mut capacity: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
    for (name, cap) in &device.capacity {
        let value =
            construct(&QUANTITY, &cap.value.0).map_err(|err| format!("capacity {name}: {err}"))?;
        let (domain, id) = split_qualified_name(name, driver);
        capacity
            .entry(domain.into())
            .or_default()
            .insert(id.into(), value);
    }
    let nested = |maps: HashMap<Key, HashMap<Key, Value>>| {
        map_value(maps.into_iter().map(|(k, v)| (k, map_value(v))).collect())
    };
    Ok(map_value(HashMap::from([
        (
            Key::from("driver"),
            Value::String(Arc::new(driver.to_string())),
        ),
        (
            Key::from("allowMultipleAllocations"),
            Value::Bool(device.allow_multiple_allocations.unwrap_or(false)),
        ),
        (Key::from("attributes"), nested(attributes)),
        (Key::from("capacity"), nested(capacity)),
    ])))
}

/// Splits at the first `/`, as upstream's `parseQualifiedName`.
fn split_qualified_name<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

/// The first value set, in upstream's order, when several are (validation forbids that).
fn attribute_value(attribute: &DeviceAttribute) -> Result<Value, String> {
    if let Some(i) = attribute.int {
        Ok(Value::Int(i))
    } else if let Some(b) = attribute.bool {
        Ok(Value::Bool(b))
    } else if let Some(s) = &attribute.string {
        Ok(Value::String(Arc::new(s.clone())))
    } else if let Some(v) = &attribute.version {
        construct(&SEMVER, v).map_err(|err| format!("parse semantic version: {err}"))
    } else {
        Err("unsupported attribute value".to_string())
    }
}

/// kube-cel keeps its quantity and semver types private, so their values are made by calling
/// its constructors; strict `semver()` is upstream's `semver.Parse`.
static QUANTITY: LazyLock<IdedExpr> = LazyLock::new(|| constructor("quantity"));
static SEMVER: LazyLock<IdedExpr> = LazyLock::new(|| constructor("semver"));

fn constructor(function: &str) -> IdedExpr {
    call(0, function, vec![node(0, Expr::Ident("s".to_string()))])
}

fn construct(constructor: &IdedExpr, s: &str) -> Result<Value, String> {
    let mut ctx = base_context().new_inner_scope();
    ctx.add_variable_from_value("s", s.to_string());
    ctx.resolve(constructor).map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an expression should do on a device.
    #[derive(Debug)]
    enum Want {
        Selected(bool),
        /// The compile error contains this.
        CompileError(&'static str),
        /// The runtime error contains this.
        RuntimeError(&'static str),
    }
    use Want::*;

    const DRIVER: &str = "gpu.example.com";

    fn device(json: serde_json::Value) -> Device {
        serde_json::from_value(json).unwrap()
    }

    /// A GPU as a driver would publish it in a ResourceSlice.
    fn gpu() -> Device {
        device(serde_json::json!({
            "name": "gpu-0",
            "attributes": {
                "model": {"string": "a100"},
                "cores": {"int": 108},
                "mig": {"bool": true},
                "driverVersion": {"version": "1.2.3"},
                "gpu.example.com/family": {"string": "ampere"},
                "pci.example.com/bus": {"string": "0000:3b"},
            },
            "capacity": {
                "memory": {"value": "40Gi"},
                "pci.example.com/lanes": {"value": "16"},
            },
        }))
    }

    fn check(expression: &str, dev: &Device, want: &Want) {
        let got = DeviceSelector::compile(expression).map(|s| s.matches(DRIVER, dev));
        let ok = match (want, &got) {
            (Selected(w), Ok(Ok(g))) => w == g,
            (CompileError(w), Err(e)) => e.contains(w),
            (RuntimeError(w), Ok(Err(e))) => e.contains(w),
            _ => false,
        };
        assert!(ok, "{expression}: want {want:?}, got {got:?}");
    }

    #[test]
    fn selectors_on_a_gpu() {
        let cases: &[(&str, Want)] = &[
            // The driver.
            (r#"device.driver == "gpu.example.com""#, Selected(true)),
            (r#"device.driver == "nic.example.com""#, Selected(false)),
            (r#"device.driver.endsWith(".example.com")"#, Selected(true)),
            // A short name is in the driver's domain, a qualified one in its own.
            (
                r#"device.attributes["gpu.example.com"].model == "a100""#,
                Selected(true),
            ),
            (
                r#"device.attributes["gpu.example.com"].family == "ampere""#,
                Selected(true),
            ),
            (
                r#"device.attributes["pci.example.com"].bus == "0000:3b""#,
                Selected(true),
            ),
            (
                r#"device.attributes[device.driver].model == "a100""#,
                Selected(true),
            ),
            (
                r#""family" in device.attributes["pci.example.com"]"#,
                Selected(false),
            ),
            // Ints, bools, strings.
            (
                r#"device.attributes["gpu.example.com"].cores > 100"#,
                Selected(true),
            ),
            (
                r#"device.attributes["gpu.example.com"].cores >= 200"#,
                Selected(false),
            ),
            (
                r#"device.attributes["gpu.example.com"].mig"#,
                Selected(true),
            ),
            (
                r#"!device.attributes["gpu.example.com"].mig"#,
                Selected(false),
            ),
            (
                r#"device.attributes["gpu.example.com"].model in ["a100", "h100"]"#,
                Selected(true),
            ),
            (
                r#"device.attributes["gpu.example.com"].model.matches("^a[0-9]+$")"#,
                Selected(true),
            ),
            (
                r#"device.attributes["gpu.example.com"].model.upperAscii() == "A100""#,
                Selected(true),
            ),
            // A missing attribute: has() and `in` are false, reading it is an error.
            (
                r#"has(device.attributes["gpu.example.com"].ecc)"#,
                Selected(false),
            ),
            (
                r#""ecc" in device.attributes["gpu.example.com"]"#,
                Selected(false),
            ),
            (
                r#""model" in device.attributes["gpu.example.com"]"#,
                Selected(true),
            ),
            (
                r#"!has(device.attributes["gpu.example.com"].ecc) || device.attributes["gpu.example.com"].ecc"#,
                Selected(true),
            ),
            (
                r#"device.attributes["gpu.example.com"].ecc == true"#,
                RuntimeError("ecc"),
            ),
            // An unknown domain is an empty map.
            (
                r#""size" in device.attributes["other.example.com"]"#,
                Selected(false),
            ),
            (
                r#"has(device.attributes["other.example.com"].size)"#,
                Selected(false),
            ),
            (
                r#"size(device.attributes["other.example.com"]) == 0"#,
                Selected(true),
            ),
            (
                r#""x" in device.capacity["other." + "example.com"]"#,
                Selected(false),
            ),
            (
                r#"device.attributes["other.example.com"].size > 1"#,
                RuntimeError("size"),
            ),
            // ... but the domain is not in the outer map.
            (
                r#""other.example.com" in device.attributes"#,
                Selected(false),
            ),
            (r#""pci.example.com" in device.attributes"#, Selected(true)),
            (
                r#"device.attributes.exists(d, d == "pci.example.com")"#,
                Selected(true),
            ),
            // Optional lookups: the wrapper finds every domain, not every id.
            (
                r#"device.attributes[?"other.example.com"].hasValue()"#,
                Selected(true),
            ),
            (
                r#"device.attributes["gpu.example.com"][?"ecc"].orValue(false) == false"#,
                Selected(true),
            ),
            // Quantities.
            (
                r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) > 0"#,
                Selected(true),
            ),
            (
                r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) == 0"#,
                Selected(true),
            ),
            (
                r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("64Gi"))"#,
                Selected(false),
            ),
            (
                r#"device.capacity["gpu.example.com"].memory.isLessThan(quantity("64Gi"))"#,
                Selected(true),
            ),
            (
                r#"device.capacity["gpu.example.com"].memory == quantity("40960Mi")"#,
                Selected(true),
            ),
            (
                r#"device.capacity["pci.example.com"].lanes.asInteger() == 16"#,
                Selected(true),
            ),
            // Semantic versions compare by version, not by string.
            (
                r#"device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))"#,
                Selected(true),
            ),
            (
                r#"device.attributes["gpu.example.com"].driverVersion.compareTo(semver("1.10.0")) < 0"#,
                Selected(true),
            ),
            (
                r#"device.attributes["gpu.example.com"].driverVersion == semver("1.2.3")"#,
                Selected(true),
            ),
            (
                r#"device.attributes["gpu.example.com"].driverVersion.major() == 1"#,
                Selected(true),
            ),
            // Not shared unless the slice says so.
            ("device.allowMultipleAllocations", Selected(false)),
            // Macros and libraries.
            (
                r#"cel.bind(gpu, device.attributes["gpu.example.com"], gpu.cores > 100 && gpu.mig)"#,
                Selected(true),
            ),
            (
                r#"cel.bind(attrs, device.attributes, "x" in attrs["other.example.com"])"#,
                Selected(false),
            ),
            (
                r#"["a100", "h100"].exists(m, m == device.attributes["gpu.example.com"].model)"#,
                Selected(true),
            ),
            (
                r#"[1, 2, 3].all(i, i < device.attributes["gpu.example.com"].cores)"#,
                Selected(true),
            ),
            (
                r#"[1, 2, 3].map(i, i * 2).filter(i, i > 2).size() == 2"#,
                Selected(true),
            ),
            (
                r#"sets.contains(["a100", "h100", "v100"], [device.attributes["gpu.example.com"].model])"#,
                Selected(true),
            ),
            ("[3, 1, 2].sum() == 6", Selected(true)),
            ("true", Selected(true)),
            // Compile errors.
            (r#"device.driver =="#, CompileError("ERROR")),
            (
                r#"device.attributes["gpu.example.com"].model == "a100"("#,
                CompileError("ERROR"),
            ),
            (
                "model == 1",
                CompileError("undeclared reference to 'model'"),
            ),
            (
                r#"device.name == "gpu-0""#,
                CompileError("undefined field 'name'"),
            ),
            (r#""a100""#, CompileError("must evaluate to bool")),
            ("device.driver", CompileError("must evaluate to bool")),
            ("cel.bind(1, 2, true)", CompileError("simple identifiers")),
            // Non-bool results only a type checker would see.
            (
                r#"device.attributes["gpu.example.com"].model"#,
                RuntimeError("could not be converted to bool"),
            ),
            (
                r#"device.attributes["gpu.example.com"].cores + 1"#,
                RuntimeError("could not be converted to bool"),
            ),
            (
                r#"device.capacity["gpu.example.com"].memory"#,
                RuntimeError("type kubernetes.Quantity"),
            ),
            // Other runtime errors.
            (
                r#"device.attributes["gpu.example.com"].model > 1"#,
                RuntimeError("No such overload"),
            ),
            (
                r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("lots")) > 0"#,
                RuntimeError("quantity"),
            ),
        ];
        let gpu = gpu();
        for (expression, want) in cases {
            check(expression, &gpu, want);
        }
    }

    #[test]
    fn shared_device() {
        let shared = device(serde_json::json!({"name": "nic-0", "allowMultipleAllocations": true}));
        check("device.allowMultipleAllocations", &shared, &Selected(true));
        // A device without attributes still has an empty map for its own domain.
        check(
            r#""model" in device.attributes["gpu.example.com"]"#,
            &shared,
            &Selected(false),
        );
    }

    #[test]
    fn bad_attributes_fail_every_expression() {
        let empty = device(serde_json::json!({"name": "d", "attributes": {"broken": {}}}));
        check(
            "true",
            &empty,
            &RuntimeError("attribute broken: unsupported attribute value"),
        );
        let version =
            device(serde_json::json!({"name": "d", "attributes": {"v": {"version": "v1"}}}));
        check(
            "true",
            &version,
            &RuntimeError("attribute v: parse semantic version"),
        );
    }

    #[test]
    fn selector_is_shareable() {
        fn assert_traits<T: Send + Sync + Clone + fmt::Debug>() {}
        assert_traits::<DeviceSelector>();
        let selector = DeviceSelector::compile(r#"device.driver == "gpu.example.com""#).unwrap();
        assert_eq!(
            selector.expression(),
            r#"device.driver == "gpu.example.com""#
        );
        assert_eq!(
            format!("{selector:?}"),
            r#"DeviceSelector("device.driver == \"gpu.example.com\"")"#
        );
        let gpu = gpu();
        std::thread::scope(|s| {
            for _ in 0..4 {
                let selector = selector.clone();
                let gpu = &gpu;
                s.spawn(move || assert_eq!(selector.matches(DRIVER, gpu), Ok(true)));
            }
        });
    }
}
