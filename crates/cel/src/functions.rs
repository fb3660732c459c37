//! The functions the environment declares, for the checker: which names
//! exist, what each returns, and what cel-go's estimator (with the
//! Kubernetes library's overrides) charges for the call itself.

use crate::ty::{Ty, UNBOUNDED};

/// Global functions, namespaced ones included.
const GLOBAL: &[&str] = &[
    "size",
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "bytes",
    "dyn",
    "type",
    "duration",
    "timestamp",
    "matches",
    "optional.of",
    "optional.none",
    "optional.ofNonZeroValue",
    "strings.quote",
    "lists.range",
    "url",
    "isURL",
    "ip",
    "isIP",
    "ip.isCanonical",
    "cidr",
    "isCIDR",
    "quantity",
    "isQuantity",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
];

/// Member functions (`x.f(...)`).
const MEMBER: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getSeconds",
    "hasValue",
    "value",
    "or",
    "orValue",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "join",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "substring",
    "format",
    "reverse",
    "slice",
    "flatten",
    "distinct",
    "sort",
    "isSorted",
    "sum",
    "min",
    "max",
    "find",
    "findAll",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "containsIP",
    "containsCIDR",
    "masked",
    "prefixLength",
    "ip",
    "sign",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
];

pub(crate) fn is_global(name: &str) -> bool {
    GLOBAL.contains(&name)
}

pub(crate) fn is_member(name: &str) -> bool {
    MEMBER.contains(&name)
}

/// Namespaces of global functions: `optional.of(x)` is a call of
/// `optional.of`, not of `of` on a variable `optional`.
pub(crate) fn is_namespace(name: &str) -> bool {
    matches!(name, "optional" | "strings" | "lists" | "ip" | "sets")
}

/// `ceil(size × factor)`, cel-go's `MultiplyByCostFactor`.
fn scaled(size: u64, factor: f64) -> u64 {
    (size as f64 * factor).ceil() as u64
}

pub(crate) const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_LENGTH: f64 = 0.25;

/// The result type and the cost of calling `name`, arguments aside.
pub(crate) fn call(name: &str, target: Option<&Ty>, args: &[Ty]) -> (Ty, u64) {
    let t_size = target.map_or(1, Ty::size);
    let arg_size = |i: usize| args.get(i).map_or(1, Ty::size);
    let string = |n: u64| Ty::String(n);
    match name {
        "contains" => (
            Ty::Bool,
            scaled(t_size, STRING_TRAVERSAL).saturating_mul(scaled(arg_size(0), STRING_TRAVERSAL)),
        ),
        "startsWith" | "endsWith" => (Ty::Bool, scaled(arg_size(0), STRING_TRAVERSAL)),
        "matches" => {
            let (s, r) = if target.is_some() {
                (t_size, arg_size(0))
            } else {
                (arg_size(0), arg_size(1))
            };
            (
                Ty::Bool,
                scaled(s.saturating_add(1), STRING_TRAVERSAL)
                    .saturating_mul(scaled(r, REGEX_LENGTH)),
            )
        }
        "find" => (
            string(t_size),
            scaled(t_size.saturating_add(1), STRING_TRAVERSAL)
                .saturating_mul(scaled(arg_size(0), REGEX_LENGTH)),
        ),
        "findAll" => (
            Ty::List(Box::new(string(t_size)), t_size),
            scaled(t_size.saturating_add(1), STRING_TRAVERSAL)
                .saturating_mul(scaled(arg_size(0), REGEX_LENGTH)),
        ),
        "lowerAscii" | "upperAscii" | "trim" | "substring" | "reverse"
            if target.is_some_and(|t| matches!(t, Ty::String(_))) =>
        {
            (string(t_size), scaled(t_size, STRING_TRAVERSAL))
        }
        "replace" => (string(UNBOUNDED), scaled(t_size, 2.0 * STRING_TRAVERSAL)),
        "split" => (
            Ty::List(Box::new(string(t_size)), t_size),
            scaled(t_size, 2.0 * STRING_TRAVERSAL),
        ),
        "join" => {
            let elem = target.map_or(1, |t| t.index_elem().size());
            (
                string(t_size.saturating_mul(elem)),
                scaled(t_size.saturating_mul(elem), STRING_TRAVERSAL),
            )
        }
        "url" | "isURL" | "isIP" | "isCIDR" | "cidr" | "quantity" | "isQuantity"
        | "ip.isCanonical" => {
            let ty = match name {
                "url" => Ty::Opaque("kubernetes.URL"),
                "cidr" => Ty::Opaque("net.IPPrefix"),
                "quantity" => Ty::Opaque("kubernetes.Quantity"),
                _ => Ty::Bool,
            };
            (ty, scaled(arg_size(0), STRING_TRAVERSAL))
        }
        "ip" if target.is_none() => (Ty::Opaque("net.IP"), scaled(arg_size(0), STRING_TRAVERSAL)),
        "ip" => (Ty::Opaque("net.IP"), 1),
        "isSorted" | "indexOf" | "lastIndexOf"
            if target.is_some_and(|t| matches!(t, Ty::List(..))) =>
        {
            (Ty::Int.bool_if(name == "isSorted"), t_size)
        }
        "sum" | "min" | "max" => (target.map_or(Ty::dyn_(), Ty::iter_elem), t_size),
        "sets.contains" | "sets.equivalent" | "sets.intersects" => {
            (Ty::Bool, arg_size(0).saturating_mul(arg_size(1)))
        }
        _ => (simple_result(name, target, args), 1),
    }
}

/// Results of the constant-cost functions.
fn simple_result(name: &str, target: Option<&Ty>, args: &[Ty]) -> Ty {
    let first = || args.first().cloned().unwrap_or_else(Ty::dyn_);
    match name {
        "size" | "int" | "indexOf" | "lastIndexOf" | "family" | "prefixLength" | "asInteger"
        | "sign" | "compareTo" | "getDate" | "getDayOfMonth" | "getDayOfWeek" | "getDayOfYear"
        | "getFullYear" | "getHours" | "getMilliseconds" | "getMinutes" | "getMonth"
        | "getSeconds" => Ty::Int,
        "uint" => Ty::Uint,
        "double" | "asApproximateFloat" => Ty::Double,
        "bool"
        | "hasValue"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast"
        | "containsIP"
        | "containsCIDR"
        | "isInteger"
        | "isGreaterThan"
        | "isLessThan" => Ty::Bool,
        "string" | "charAt" | "format" | "strings.quote" | "getScheme" | "getHost"
        | "getHostname" | "getPort" | "getEscapedPath" | "lowerAscii" | "upperAscii" | "trim"
        | "substring" => Ty::String(UNBOUNDED),
        "bytes" => Ty::Bytes(UNBOUNDED),
        "duration" => Ty::Duration,
        "timestamp" => Ty::Timestamp,
        "type" => Ty::Type,
        "dyn" => Ty::Dyn(first().size()),
        "masked" => Ty::Opaque("net.IPPrefix"),
        "add" | "sub" => Ty::Opaque("kubernetes.Quantity"),
        "getQuery" => Ty::Map(
            Box::new(Ty::String(UNBOUNDED)),
            Box::new(Ty::List(Box::new(Ty::String(UNBOUNDED)), UNBOUNDED)),
            UNBOUNDED,
        ),
        "lists.range" => Ty::List(Box::new(Ty::Int), UNBOUNDED),
        "optional.of" | "optional.ofNonZeroValue" => Ty::Optional(Box::new(first())),
        "optional.none" => Ty::Optional(Box::new(Ty::dyn_())),
        "value" | "orValue" => match target {
            Some(Ty::Optional(inner)) => (**inner).clone(),
            _ => Ty::dyn_(),
        },
        "or" => target.cloned().unwrap_or_else(Ty::dyn_),
        "slice" | "flatten" | "distinct" | "sort" | "reverse" => {
            target.cloned().unwrap_or_else(Ty::dyn_)
        }
        _ => Ty::dyn_(),
    }
}

impl Ty {
    fn bool_if(self, cond: bool) -> Ty {
        if cond {
            Ty::Bool
        } else {
            self
        }
    }
}
