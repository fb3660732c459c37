//! What one sync writes, collected as typed values before it is rendered: in `nft -f`
//! block syntax for a full sync (one `table { … }` per table with every chain, set and map
//! element inline, which `nft` parses without looking anything up — separate `add rule`
//! commands would each search the chain list, quadratic at 30,000 chains), or as typed
//! operations for a partial one, which the driver sends to the kernel as they are.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

use cairn_nft::{DynamicAddrSet, Key, Op, Rule, Verdict};

use super::{MAX_SHARDS, SHARD_PREFIX, TABLE};

/// The main table's maps, in the order the skeleton declares them.
const MAIN_MAPS: [(&str, &str); 2] = [
    (
        "no-endpoint-services",
        "type ipv4_addr . inet_proto . inet_service : verdict",
    ),
    (
        "no-endpoint-nodeports",
        "type inet_proto . inet_service : verdict",
    ),
];

/// Each shard table's maps.
const SHARD_MAPS: [(&str, &str); 2] = [
    (
        "service-ips",
        "type ipv4_addr . inet_proto . inet_service : verdict",
    ),
    (
        "service-nodeports",
        "type inet_proto . inet_service : verdict",
    ),
];

/// Which table an object lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Table {
    Main,
    Shard(usize),
}

impl Table {
    pub(super) fn name(self) -> String {
        match self {
            Table::Main => TABLE.to_string(),
            Table::Shard(k) => format!("{SHARD_PREFIX}{k}"),
        }
    }
}

type MapKey = (Table, &'static str);
type Element = (Key, Verdict);

#[derive(Debug, Default)]
pub(super) struct Batch {
    /// The shard the service port being added or removed lives in.
    pub(super) shard: usize,
    /// Removals, in order (partial syncs only).
    deletes: Vec<Op>,
    /// Map → keys to delete, each with the verdict it had.
    deleted_elements: BTreeMap<MapKey, Vec<Element>>,
    sets: Vec<(Table, String, DynamicAddrSet)>,
    chains: Vec<(Table, String, Vec<Rule>)>,
    chain_index: HashMap<(Table, String), usize>,
    /// Map → elements to add.
    elements: BTreeMap<MapKey, Vec<Element>>,
}

impl Batch {
    /// The current service port's table.
    pub(super) fn table(&self) -> Table {
        Table::Shard(self.shard)
    }

    /// The table holding `map`: the no-endpoint maps are the main table's.
    fn map_key(&self, map: &'static str) -> MapKey {
        if MAIN_MAPS.iter().any(|(m, _)| *m == map) {
            (Table::Main, map)
        } else {
            (self.table(), map)
        }
    }

    pub(super) fn chain(&mut self, name: &str) {
        let key = (self.table(), name.to_string());
        if !self.chain_index.contains_key(&key) {
            self.chain_index.insert(key, self.chains.len());
            self.chains
                .push((self.table(), name.to_string(), Vec::new()));
        }
    }

    pub(super) fn rule(&mut self, chain: &str, rule: Rule) {
        self.chain(chain);
        if let Some(i) = self.chain_index.get(&(self.table(), chain.to_string())) {
            self.chains[*i].2.push(rule);
        }
    }

    pub(super) fn set(&mut self, name: String, definition: DynamicAddrSet) {
        self.sets.push((self.table(), name, definition));
    }

    pub(super) fn element(&mut self, map: &'static str, key: Key, verdict: Verdict) {
        self.elements
            .entry(self.map_key(map))
            .or_default()
            .push((key, verdict));
    }

    pub(super) fn delete_element(&mut self, map: &'static str, key: Key, verdict: Verdict) {
        self.deleted_elements
            .entry(self.map_key(map))
            .or_default()
            .push((key, verdict));
    }

    pub(super) fn delete(&mut self, op: Op) {
        self.deletes.push(op);
    }

    /// Every table, replacing what is there (an absent table is made first, so its delete
    /// cannot fail; shards beyond `shards`, left by a larger count, only go).
    pub(super) fn render_full(&self, main: &str, shard: &str, shards: usize) -> String {
        let mut out = String::new();
        for k in shards..MAX_SHARDS {
            let name = Table::Shard(k).name();
            let _ = writeln!(out, "add table ip {name}\ndelete table ip {name}");
        }
        self.render_table(&mut out, Table::Main, &MAIN_MAPS, main);
        for k in 0..shards {
            self.render_table(&mut out, Table::Shard(k), &SHARD_MAPS, shard);
        }
        out
    }

    fn render_table(
        &self,
        out: &mut String,
        table: Table,
        maps: &[(&'static str, &'static str)],
        fixed: &str,
    ) {
        let name = table.name();
        // `write!` to a String cannot fail.
        let _ = write!(
            out,
            "add table ip {name}\ndelete table ip {name}\ntable ip {name} {{\n"
        );
        for (map, ty) in maps {
            let _ = write!(out, "\tmap {map} {{\n\t\t{ty}\n");
            let items = self.elements.get(&(table, *map));
            if let Some(items) = items.filter(|v| !v.is_empty()) {
                let items: Vec<String> = items.iter().map(|(k, v)| format!("{k} : {v}")).collect();
                let _ = writeln!(out, "\t\telements = {{ {} }}", items.join(", "));
            }
            out.push_str("\t}\n");
        }
        for (_, set, def) in self.sets.iter().filter(|(t, ..)| *t == table) {
            let _ = writeln!(out, "\tset {set} {{ {def} }}");
        }
        out.push_str(fixed);
        for (_, chain, rules) in self.chains.iter().filter(|(t, ..)| *t == table) {
            let _ = writeln!(out, "\tchain {chain} {{");
            for r in rules {
                let _ = writeln!(out, "\t\t{r}");
            }
            out.push_str("\t}\n");
        }
        out.push_str("}\n");
    }

    /// Operations: element deletions; the chains this sync fills, made or emptied (so kept
    /// chains no longer refer to endpoint chains about to go); object deletions; then
    /// new sets, rules and elements — each group before what refers to it.
    ///
    /// An element deleted and re-added with the same verdict (its service port's chain kept
    /// its name) is neither: map elements with `goto` make the kernel validate the whole
    /// jump graph of the table at commit.
    pub(super) fn render_partial(&self) -> Vec<Op> {
        let mut out = Vec::new();
        let unchanged = self.unchanged_elements();
        for ((table, map), deleted) in &self.deleted_elements {
            let keys: Vec<Key> = deleted
                .iter()
                .filter(|e| !unchanged.contains(&((*table, *map), e)))
                .map(|(k, _)| *k)
                .collect();
            if !keys.is_empty() {
                let (table, map) = (table.name(), map.to_string());
                out.push(Op::DeleteElements { table, map, keys });
            }
        }
        for (table, chain, _) in &self.chains {
            let (table, chain) = (table.name(), chain.clone());
            out.push(Op::AddChain {
                table: table.clone(),
                chain: chain.clone(),
            });
            out.push(Op::FlushChain { table, chain });
        }
        out.extend(self.deletes.iter().cloned());
        for (table, set, definition) in &self.sets {
            let (table, set, definition) = (table.name(), set.clone(), *definition);
            out.push(Op::AddSet {
                table,
                set,
                definition,
            });
        }
        for (table, chain, rules) in &self.chains {
            for rule in rules {
                let (table, chain, rule) = (table.name(), chain.clone(), rule.clone());
                out.push(Op::AddRule { table, chain, rule });
            }
        }
        self.render_added_elements(&mut out, &unchanged);
        out
    }

    /// The elements this sync deletes and adds back as they were, by map (one pass each
    /// way: a large partial sync has thousands of both).
    fn unchanged_elements(&self) -> HashSet<(MapKey, &Element)> {
        let mut out = HashSet::new();
        for (map, deleted) in &self.deleted_elements {
            let Some(added) = self.elements.get(map) else {
                continue;
            };
            let added: HashSet<&Element> = added.iter().collect();
            out.extend(
                deleted
                    .iter()
                    .filter(|e| added.contains(e))
                    .map(|e| (*map, e)),
            );
        }
        out
    }

    /// `add element` operations, leaving out elements deleted and re-added unchanged.
    fn render_added_elements(&self, out: &mut Vec<Op>, unchanged: &HashSet<(MapKey, &Element)>) {
        for ((table, map), items) in &self.elements {
            let items: Vec<Element> = items
                .iter()
                .filter(|e| !unchanged.contains(&((*table, *map), *e)))
                .cloned()
                .collect();
            if !items.is_empty() {
                let (table, map) = (table.name(), map.to_string());
                out.push(Op::AddElements { table, map, items });
            }
        }
    }
}
