//! Compiling every `x-kubernetes-validations` rule of a structural schema,
//! with the checks upstream's CRD validation makes on them, into a tree that
//! mirrors the schema's parts that hold rules.

use crate::cost::{exceeds_budget, STATIC_CRD_LIMIT, STATIC_RULE_LIMIT};
use crate::decl::{self, list_type, schema_decl, Decl, DeclKind, ListType, MAX_REQUEST_SIZE};
use crate::error::{forbidden, invalid};
use crate::escape::escape;
use crate::path::FieldPath;
use crate::rule::Rule;
pub(crate) use crate::walk::{Site, Walker};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A schema location with rules, or with descendants that have some.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) decl: Arc<Decl>,
    pub(crate) type_name: &'static str,
    pub(crate) rules: Vec<Rule>,
    pub(crate) properties: BTreeMap<String, Node>,
    pub(crate) items: Option<Box<Node>>,
    pub(crate) additional: Option<Box<Node>>,
    pub(crate) list: ListType,
}

impl Walker {
    pub(crate) fn node(&mut self, site: &Site<'_>) -> Option<Node> {
        let rules = self.rules(site);
        let properties = self.properties(site);
        let items = self.items(site).map(Box::new);
        let additional = self.additional(site).map(Box::new);
        if rules.is_empty() && properties.is_empty() && items.is_none() && additional.is_none() {
            return None;
        }
        Some(Node {
            decl: Arc::clone(&site.decl),
            type_name: decl::type_name(site.schema),
            rules,
            properties,
            items,
            additional,
            list: list_type(site.schema),
        })
    }

    fn properties(&mut self, site: &Site<'_>) -> BTreeMap<String, Node> {
        let mut nodes = BTreeMap::new();
        let Some(props) = decl::properties(site.schema) else {
            return nodes;
        };
        for (name, prop) in props {
            // Escapable names must be exposed to CEL for rules below to run;
            // unescapable ones run with a declaration of their own.
            let child = match (escape(name), &site.decl.kind) {
                (Some(escaped), DeclKind::Object(fields)) => {
                    fields.get(&escaped).map(|f| Arc::clone(&f.decl))
                }
                (Some(_), _) => None,
                (None, _) => schema_decl(prop, decl::is_embedded(prop)),
            };
            let Some(child) = child else { continue };
            let child_site = Site {
                schema: prop,
                decl: child,
                path: site.path.child("properties").key(name),
                cardinality: site.cardinality,
                uncorrelatable: site.uncorrelatable.clone(),
            };
            if let Some(node) = self.node(&child_site) {
                nodes.insert(name.clone(), node);
            }
        }
        nodes
    }

    fn items(&mut self, site: &Site<'_>) -> Option<Node> {
        let (schema, DeclKind::List(elem)) = (decl::items(site.schema)?, &site.decl.kind) else {
            return None;
        };
        let uncorrelatable = match (&site.uncorrelatable, list_type(site.schema)) {
            (Some(p), _) => Some(p.clone()),
            (None, ListType::Map(_)) => None,
            (None, _) => Some(site.path.clone()),
        };
        let child = Site {
            schema,
            decl: Arc::clone(elem),
            path: site.path.child("items"),
            cardinality: scale(site.cardinality, decl::get_u64(site.schema, "maxItems")),
            uncorrelatable,
        };
        self.node(&child)
    }

    fn additional(&mut self, site: &Site<'_>) -> Option<Node> {
        let schema = decl::additional_properties(site.schema)?;
        let DeclKind::Map(elem) = &site.decl.kind else {
            return None;
        };
        let child = Site {
            schema,
            decl: Arc::clone(elem),
            path: site.path.child("additionalProperties"),
            cardinality: scale(
                site.cardinality,
                decl::get_u64(site.schema, "maxProperties"),
            ),
            uncorrelatable: site.uncorrelatable.clone(),
        };
        self.node(&child)
    }

    /// Adds a compiled expression's estimated cost to the CRD's total.
    pub(crate) fn observe_cost(&mut self, path: &FieldPath, cost: u64) {
        self.total_cost = self.total_cost.saturating_add(cost);
        if cost < STATIC_CRD_LIMIT / 100 {
            return;
        }
        self.expensive.push((path.clone(), cost));
        self.expensive.sort_by_key(|e| std::cmp::Reverse(e.1));
        self.expensive.truncate(4);
    }

    /// Upstream's limit on the sum of all rules' estimated costs.
    pub(crate) fn check_total(&mut self, schema_path: &FieldPath) {
        if self.total_cost <= STATIC_CRD_LIMIT {
            return;
        }
        for (path, _) in std::mem::take(&mut self.expensive) {
            self.errors.push(forbidden(&path, "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"));
        }
        let name = "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema";
        self.errors.push(forbidden(
            schema_path,
            &exceeds_budget(name, self.total_cost, STATIC_CRD_LIMIT),
        ));
    }

    /// Upstream's per-rule limit, on the rule's cost times how often it can run.
    pub(crate) fn check_rule_cost(&mut self, path: &FieldPath, cost: u64, site: &Site<'_>) {
        // Under unbounded lists or maps, upstream assumes as many values as
        // fit in a request.
        let cardinality = site
            .cardinality
            .unwrap_or(MAX_REQUEST_SIZE / (site.decl.min_size + 1));
        let cost = if cost == 0 {
            0
        } else {
            cost.saturating_mul(cardinality)
        };
        if cost > STATIC_RULE_LIMIT {
            self.errors.push(forbidden(
                path,
                &exceeds_budget("estimated rule cost", cost, STATIC_RULE_LIMIT),
            ));
        }
        self.observe_cost(path, cost);
    }

    pub(crate) fn invalid_rule(&mut self, path: &FieldPath, rule: &Value, detail: &str) {
        self.errors
            .push(invalid(path, &crate::rule::go_rule_value(rule), detail));
    }
}

fn scale(cardinality: Option<u64>, factor: Option<u64>) -> Option<u64> {
    Some(cardinality?.saturating_mul(factor?))
}
