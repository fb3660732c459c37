//! What one sync writes, collected before it is rendered: in `nft -f` block syntax for a
//! full sync (one `table { … }` with every chain, set and map element inline, which `nft`
//! parses without looking anything up — separate `add rule` commands would each search
//! the chain list, quadratic at 30,000 chains), or as commands for a partial one.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use super::TABLE;

/// The maps of the table, in the order the skeleton declares them.
pub(super) const MAPS: [(&str, &str); 4] = [
    (
        "service-ips",
        "type ipv4_addr . inet_proto . inet_service : verdict",
    ),
    (
        "service-nodeports",
        "type inet_proto . inet_service : verdict",
    ),
    (
        "no-endpoint-services",
        "type ipv4_addr . inet_proto . inet_service : verdict",
    ),
    (
        "no-endpoint-nodeports",
        "type inet_proto . inet_service : verdict",
    ),
];

#[derive(Debug, Default)]
pub(super) struct Batch {
    /// Removals, as commands, in order (partial syncs only).
    deletes: Vec<String>,
    /// Map → keys to delete, each with the verdict it had.
    deleted_elements: BTreeMap<&'static str, Vec<(String, String)>>,
    sets: Vec<(String, String)>,
    chains: Vec<(String, Vec<String>)>,
    chain_index: HashMap<String, usize>,
    /// Map → `key : verdict` to add.
    elements: BTreeMap<&'static str, Vec<String>>,
}

impl Batch {
    pub(super) fn chain(&mut self, name: &str) {
        if !self.chain_index.contains_key(name) {
            self.chain_index.insert(name.to_string(), self.chains.len());
            self.chains.push((name.to_string(), Vec::new()));
        }
    }

    pub(super) fn rule(&mut self, chain: &str, rule: String) {
        self.chain(chain);
        if let Some(i) = self.chain_index.get(chain) {
            self.chains[*i].1.push(rule);
        }
    }

    pub(super) fn set(&mut self, name: String, definition: String) {
        self.sets.push((name, definition));
    }

    pub(super) fn element(&mut self, map: &'static str, key: String, verdict: &str) {
        self.elements
            .entry(map)
            .or_default()
            .push(format!("{key} : {verdict}"));
    }

    pub(super) fn delete_element(&mut self, map: &'static str, key: String, verdict: String) {
        self.deleted_elements
            .entry(map)
            .or_default()
            .push((key, verdict));
    }

    pub(super) fn delete(&mut self, command: String) {
        self.deletes.push(command);
    }

    /// The whole table, replacing what is there (an absent table is made first, so the
    /// delete cannot fail); `skeleton` holds the fixed chains.
    pub(super) fn render_full(&self, skeleton: &str) -> String {
        let mut out =
            format!("add table ip {TABLE}\ndelete table ip {TABLE}\ntable ip {TABLE} {{\n");
        for (name, ty) in MAPS {
            let _ = write!(out, "\tmap {name} {{\n\t\t{ty}\n");
            if let Some(items) = self.elements.get(name).filter(|v| !v.is_empty()) {
                let _ = writeln!(out, "\t\telements = {{ {} }}", items.join(", "));
            }
            out.push_str("\t}\n");
        }
        for (name, def) in &self.sets {
            let _ = writeln!(out, "\tset {name} {{ {def} }}");
        }
        out.push_str(skeleton);
        for (name, rules) in &self.chains {
            let _ = writeln!(out, "\tchain {name} {{");
            for r in rules {
                let _ = writeln!(out, "\t\t{r}");
            }
            out.push_str("\t}\n");
        }
        out.push_str("}\n");
        out
    }

    /// Commands: element deletions; the chains this sync fills, made or emptied (so kept
    /// chains no longer refer to endpoint chains about to go); object deletions; then
    /// new sets, rules and elements — each group before what refers to it.
    ///
    /// An element deleted and re-added with the same verdict (its service port's chain kept
    /// its name) is neither: map elements with `goto` make the kernel validate the whole
    /// jump graph at commit.
    pub(super) fn render_partial(&self) -> String {
        let mut out = String::new();
        let unchanged = |map: &str, item: &str| {
            self.deleted_elements
                .get(map)
                .is_some_and(|d| d.iter().any(|(k, v)| format!("{k} : {v}") == item))
        };
        for (map, deleted) in &self.deleted_elements {
            let added = self.elements.get(map);
            let keys: Vec<&str> = deleted
                .iter()
                .filter(|(k, v)| !added.is_some_and(|a| a.contains(&format!("{k} : {v}"))))
                .map(|(k, _)| k.as_str())
                .collect();
            if !keys.is_empty() {
                let _ = writeln!(
                    out,
                    "delete element ip {TABLE} {map} {{ {} }}",
                    keys.join(", ")
                );
            }
        }
        for (name, _) in &self.chains {
            let _ = writeln!(
                out,
                "add chain ip {TABLE} {name}\nflush chain ip {TABLE} {name}"
            );
        }
        for d in &self.deletes {
            let _ = writeln!(out, "{d}");
        }
        for (name, def) in &self.sets {
            let _ = writeln!(out, "add set ip {TABLE} {name} {{ {def} }}");
        }
        for (name, rules) in &self.chains {
            for r in rules {
                let _ = writeln!(out, "add rule ip {TABLE} {name} {r}");
            }
        }
        for (map, items) in &self.elements {
            let items: Vec<&str> = items
                .iter()
                .map(String::as_str)
                .filter(|i| !unchanged(map, i))
                .collect();
            if !items.is_empty() {
                let _ = writeln!(
                    out,
                    "add element ip {TABLE} {map} {{ {} }}",
                    items.join(", ")
                );
            }
        }
        out
    }
}
