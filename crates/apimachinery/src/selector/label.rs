//! Label selectors: requirements, matching, printing, and `metav1.LabelSelector` JSON.

use super::*;

/// The operator of one label selector requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `key=value`
    Equals,
    /// `key==value`
    DoubleEquals,
    /// `key!=value` (also true when the label is absent)
    NotEquals,
    /// `key in (v1,v2)`
    In,
    /// `key notin (v1,v2)` (also true when the label is absent)
    NotIn,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>N` (integer comparison; false if absent or not an integer)
    GreaterThan,
    /// `key<N` (integer comparison; false if absent or not an integer)
    LessThan,
}

impl Operator {
    /// The operator an API object names (`metav1.LabelSelectorOperator`, and with
    /// `numeric` the node selector's `Gt`/`Lt`).
    pub fn from_api(op: &str, numeric: bool) -> Option<Operator> {
        Some(match op {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" if numeric => Operator::GreaterThan,
            "Lt" if numeric => Operator::LessThan,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One requirement of a label selector: a key, an operator and its values.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub(super) key: String,
    pub(super) operator: Operator,
    pub(super) values: Vec<String>,
}

impl Requirement {
    /// Builds and validates a requirement like Kubernetes `labels.NewRequirement`:
    /// the key must be a valid label key, every value a valid label value,
    /// `in`/`notin` need at least one value, `=`/`==`/`!=`/`>`/`<` exactly one
    /// (an integer for `>`/`<`), and `exists`/`!` none.
    pub fn new(
        key: impl Into<String>,
        operator: Operator,
        values: Vec<String>,
    ) -> Result<Self, SelectorError> {
        let key = key.into();
        match Self::validate(&key, operator, &values) {
            Some(msg) => Err(SelectorError::InvalidRequirement(msg)),
            None => Ok(Requirement {
                key,
                operator,
                values,
            }),
        }
    }

    /// A requirement of keys and values that were validated with the object they came
    /// from (upstream's `SelectorFromValidatedSet`), or are not label values at all (a
    /// node's name in `matchFields`): nothing is checked.
    pub fn validated(key: impl Into<String>, operator: Operator, values: Vec<String>) -> Self {
        Requirement {
            key: key.into(),
            operator,
            values,
        }
    }

    pub(super) fn validate(key: &str, operator: Operator, values: &[String]) -> Option<String> {
        let mut errs = Vec::new();
        let key_errs = qualified_name_errors(key);
        if !key_errs.is_empty() {
            errs.push(field_invalid("key", key, &key_errs));
        }
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(field_invalid_list(
                        "values",
                        values,
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(field_invalid_list(
                        "values",
                        values,
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(field_invalid_list(
                        "values",
                        values,
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(field_invalid_list(
                        "values",
                        values,
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if parse_go_int(v).is_none() {
                        errs.push(field_invalid(
                            &format!("values[{i}]"),
                            v,
                            &[
                                "for 'Gt', 'Lt' operators, the value must be an integer"
                                    .to_string(),
                            ],
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let v_errs = label_value_errors(v);
            if !v_errs.is_empty() {
                errs.push(field_invalid(&format!("values[{i}][{key}]"), v, &v_errs));
            }
        }
        aggregate(errs)
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values (sorted and de-duplicated when parsed from a string).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether the labels satisfy this requirement (Kubernetes `Requirement.Matches`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                labels.get(&self.key).is_some_and(|v| has(v))
            }
            Operator::NotIn | Operator::NotEquals => labels.get(&self.key).is_none_or(|v| !has(v)),
            Operator::Exists => labels.contains_key(&self.key),
            Operator::DoesNotExist => !labels.contains_key(&self.key),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(label) = labels.get(&self.key).and_then(|v| parse_go_int(v)) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Some(want) = parse_go_int(want) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    label > want
                } else {
                    label < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    /// Renders like Kubernetes `Requirement.String()` (values sorted).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
        };
        f.write_str(op)?;
        let set = matches!(self.operator, Operator::In | Operator::NotIn);
        if set {
            f.write_str("(")?;
        }
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        f.write_str(&values.join(","))?;
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector: the AND of its [`Requirement`]s.
///
/// The empty selector (`""`, or `LabelSelector::default()`) matches everything;
/// [`LabelSelector::nothing`] matches nothing (what a `null` `metav1.LabelSelector` means).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl LabelSelector {
    /// A selector that matches every label set.
    pub fn everything() -> Self {
        Self::default()
    }

    /// A selector that matches no label set (Kubernetes `labels.Nothing()`).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses the string form, exactly like Kubernetes `labels.Parse`.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut requirements = Parser::new(s).parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Builds a selector from requirements (sorted by key, like Kubernetes).
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            nothing: false,
        }
    }

    /// Upstream's `SelectorFromValidatedSet`: `key=value` for each pair, unchecked.
    pub fn from_validated_set(set: &BTreeMap<String, String>) -> Self {
        let requirements = set
            .iter()
            .map(|(k, v)| Requirement::validated(k.as_str(), Operator::Equals, vec![v.clone()]))
            .collect();
        LabelSelector::from_requirements(requirements)
    }

    /// Adds a requirement built by [`Requirement::validated`], keeping key order.
    pub fn and_validated(&mut self, key: &str, operator: Operator, values: Vec<String>) {
        self.requirements
            .push(Requirement::validated(key, operator, values));
        self.requirements.sort_by(|a, b| a.key.cmp(&b.key));
    }

    /// Converts a `metav1.LabelSelector` JSON object (`matchLabels`, `matchExpressions`
    /// with operators `In`, `NotIn`, `Exists`, `DoesNotExist`), like Kubernetes
    /// `metav1.LabelSelectorAsSelector`.
    ///
    /// An empty object (`{}`, or no labels and no expressions) matches **everything**;
    /// `null` matches **nothing** ([`LabelSelector::nothing`]). A caller holding an
    /// `Option<&Value>` for an absent field should decide which of the two it means:
    /// `opt.map_or(Ok(LabelSelector::nothing()), LabelSelector::from_label_selector_json)`
    /// for "a missing selector selects nothing" (as Kubernetes does for a nil pointer).
    pub fn from_label_selector_json(v: &Value) -> Result<LabelSelector, SelectorError> {
        let obj = match v {
            Value::Null => return Ok(LabelSelector::nothing()),
            Value::Object(o) => o,
            other => return Err(json_err("<root>", expected("an object", other))),
        };
        let mut requirements = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (k, val) in labels {
                    let Value::String(val) = val else {
                        return Err(json_err(
                            &format!("matchLabels[{k}]"),
                            expected("a string", val),
                        ));
                    };
                    let values = vec![val.clone()];
                    requirements.push(Requirement::new(k.clone(), Operator::Equals, values)?);
                }
            }
            Some(other) => return Err(json_err("matchLabels", expected("an object", other))),
        }
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for (i, expr) in exprs.iter().enumerate() {
                    requirements.push(match_expression(&format!("matchExpressions[{i}]"), expr)?);
                }
            }
            Some(other) => return Err(json_err("matchExpressions", expected("an array", other))),
        }
        Ok(LabelSelector::from_requirements(requirements))
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether this selector restricts nothing (matches every label set).
    /// [`LabelSelector::nothing`] is not empty.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// Whether this is [`LabelSelector::nothing`].
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// If the selector requires `label` to have one exact value (`=`, `==` or a
    /// one-value `in`), that value (Kubernetes `RequiresExactMatch`).
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == label)?;
        match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [v]) => Some(v),
            _ => None,
        }
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LabelSelector::parse(s)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// Converts a `metav1.LabelSelector` JSON object; see
/// [`LabelSelector::from_label_selector_json`] (`{}` matches everything, `null` nothing).
pub fn from_label_selector_json(v: &Value) -> Result<LabelSelector, SelectorError> {
    LabelSelector::from_label_selector_json(v)
}

fn json_err(path: &str, message: String) -> SelectorError {
    SelectorError::LabelSelectorJson {
        path: path.to_string(),
        message,
    }
}

fn expected(what: &str, got: &Value) -> String {
    format!("expected {what}, got {}", crate::patch::type_name(got))
}

/// A string field of a match expression; absent or null is empty.
fn string_field<'v>(
    expr: &'v serde_json::Map<String, Value>,
    path: &str,
    field: &str,
) -> Result<&'v str, SelectorError> {
    match expr.get(field) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Ok(""),
        Some(other) => Err(json_err(
            &format!("{path}.{field}"),
            expected("a string", other),
        )),
    }
}

/// One `matchExpressions` entry as a requirement.
fn match_expression(path: &str, expr: &Value) -> Result<Requirement, SelectorError> {
    let Value::Object(expr) = expr else {
        return Err(json_err(path, expected("an object", expr)));
    };
    let key = string_field(expr, path, "key")?.to_string();
    let op = string_field(expr, path, "operator")?;
    let Some(op) = Operator::from_api(op, false) else {
        return Err(json_err(
            &format!("{path}.operator"),
            format!("{op:?} is not a valid label selector operator"),
        ));
    };
    let mut values = Vec::new();
    match expr.get("values") {
        None | Some(Value::Null) => {}
        Some(Value::Array(vals)) => {
            for (j, val) in vals.iter().enumerate() {
                let Value::String(val) = val else {
                    return Err(json_err(
                        &format!("{path}.values[{j}]"),
                        expected("a string", val),
                    ));
                };
                values.push(val.clone());
            }
        }
        Some(other) => {
            return Err(json_err(
                &format!("{path}.values"),
                expected("an array", other),
            ))
        }
    }
    Requirement::new(key, op, values)
}
