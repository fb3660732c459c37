//! Strategic merge patch: the algorithm (`Smp`).

use super::*;

/// One strategic merge patch application; tracks the current path for errors.
pub(super) struct Smp {
    pub(super) path: Vec<String>,
}

impl Smp {
    pub(super) fn err(&self, message: impl Into<String>) -> PatchError {
        let mut path = String::new();
        for seg in &self.path {
            if !path.is_empty() && !seg.starts_with('[') {
                path.push('.');
            }
            path.push_str(seg);
        }
        if path.is_empty() {
            path.push_str("<root>");
        }
        PatchError::Strategic {
            path,
            message: message.into(),
        }
    }

    pub(super) fn check_depth(&self, depth: usize) -> Result<(), PatchError> {
        if depth > MAX_DEPTH {
            return Err(PatchError::TooDeep { what: "the patch" });
        }
        Ok(())
    }

    /// Kubernetes `mergeMap`.
    pub(super) fn merge_map(
        &mut self,
        mut original: Map<String, Value>,
        mut patch: Map<String, Value>,
        schema: Schema,
        depth: usize,
    ) -> Result<Map<String, Value>, PatchError> {
        self.check_depth(depth)?;
        if let Some(directive) = patch.get(DIRECTIVE_MARKER) {
            return match directive.as_str() {
                Some(REPLACE_DIRECTIVE) => {
                    patch.shift_remove(DIRECTIVE_MARKER);
                    Ok(strip_directives_map(patch))
                }
                Some(DELETE_DIRECTIVE) => Ok(Map::new()),
                _ => Err(self.err(format!(
                    "unknown patch type: {} in map: {}",
                    render(directive),
                    render(&Value::Object(patch.clone()))
                ))),
            };
        }

        self.apply_retain_keys(&mut original, &mut patch)?;
        self.merge_set_element_order_lists(&mut original, &mut patch, schema, depth)?;

        for (k, patch_v) in patch {
            let (k, is_delete_list) = if k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
                (
                    self.extract_key(&k, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?,
                    true,
                )
            } else {
                (k, false)
            };
            if patch_v.is_null() {
                original.shift_remove(&k);
                continue;
            }
            let Some(orig_v) = original.get_mut(&k) else {
                if !is_delete_list {
                    if let Some(v) = sanitize_inserted(patch_v) {
                        original.insert(k, v);
                    }
                }
                continue;
            };
            if class(orig_v) != class(&patch_v) {
                if !is_delete_list {
                    match sanitize_inserted(patch_v) {
                        Some(v) => *orig_v = v,
                        None => {
                            original.shift_remove(&k);
                        }
                    }
                }
                continue;
            }
            let meta = lookup(schema, &k);
            match (std::mem::take(orig_v), patch_v) {
                (Value::Object(o), Value::Object(p)) => {
                    self.path.push(k.clone());
                    let merged = if meta.strategy == Strategy::Replace {
                        Ok(strip_directives_map(p))
                    } else {
                        self.merge_map(o, p, meta.schema, depth + 1)
                    };
                    self.path.pop();
                    *orig_v = Value::Object(merged?);
                }
                (Value::Array(o), Value::Array(p)) => {
                    self.path.push(k.clone());
                    let merged = self.merge_slice_handler(o, p, meta, is_delete_list, depth + 1);
                    self.path.pop();
                    *orig_v = Value::Array(merged?);
                }
                (_, p) => match sanitize_inserted(p) {
                    Some(v) => *orig_v = v,
                    None => {
                        original.shift_remove(&k);
                    }
                },
            }
        }
        Ok(original)
    }

    pub(super) fn extract_key(&self, s: &str, prefix: &str) -> Result<String, PatchError> {
        match s.split_once('/') {
            Some((p, rest)) if p == prefix => Ok(rest.to_string()),
            _ => Err(self.err(if prefix == DELETE_FROM_PRIMITIVE_LIST_PREFIX {
                format!("invalid patch format of primitive list: {s:?} must be \"{prefix}/<field>\"")
            } else {
                format!("invalid patch format of setElementOrder list: {s:?} must be \"{prefix}/<field>\"")
            })),
        }
    }

    /// Kubernetes `applyRetainKeysDirective` (applying, not diffing).
    pub(super) fn apply_retain_keys(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
    ) -> Result<(), PatchError> {
        let Some(retain) = patch.shift_remove(RETAIN_KEYS_DIRECTIVE) else {
            return Ok(());
        };
        let Value::Array(list) = retain else {
            return Err(self.err(format!(
                "invalid patch format of retainKeys: $retainKeys must be a list, got {}",
                type_name(&retain)
            )));
        };
        let keep: HashSet<&str> = list.iter().filter_map(Value::as_str).collect();
        for (k, v) in patch.iter() {
            if v.is_null()
                || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
                || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
            {
                continue;
            }
            if !keep.contains(k.as_str()) {
                return Err(self.err(format!(
                    "invalid patch format of retainKeys: the patch sets {k:?}, which is not in $retainKeys"
                )));
            }
        }
        original.retain(|k, _| keep.contains(k.as_str()));
        Ok(())
    }

    /// Kubernetes `mergePatchIntoOriginal`: handles every `$setElementOrder/<field>`
    /// together with the patch list of `<field>`.
    pub(super) fn merge_set_element_order_lists(
        &mut self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
        schema: Schema,
        depth: usize,
    ) -> Result<(), PatchError> {
        let keys: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
            .cloned()
            .collect();
        for key in keys {
            let Some(order_v) = patch.shift_remove(&key) else {
                continue;
            };
            let Value::Array(order) = order_v else {
                return Err(self.err(format!("{key} must be a list, got {}", type_name(&order_v))));
            };
            let field = self.extract_key(&key, SET_ELEMENT_ORDER_PREFIX)?;
            let original_list = match original.get_mut(&field) {
                None => None,
                Some(Value::Array(a)) => Some(std::mem::take(a)),
                Some(other) => {
                    return Err(self.err(format!(
                        "{field} must be a list to apply {key}, got {}",
                        type_name(other)
                    )))
                }
            };
            let patch_list = match patch.get_mut(&field) {
                None => None,
                Some(Value::Array(a)) => Some(std::mem::take(a)),
                Some(other) => {
                    return Err(self.err(format!(
                        "{field} in the patch must be a list to apply {key}, got {}",
                        type_name(other)
                    )))
                }
            };
            let meta = lookup(schema, &field);
            self.path.push(field.clone());
            let result = self.order_one_list(original_list, patch_list, &order, meta, &key, depth);
            self.path.pop();
            match result? {
                Some(both) => {
                    original.insert(field.clone(), Value::Array(both));
                }
                None => {
                    original.shift_remove(&field);
                }
            }
            patch.shift_remove(&field);
        }
        Ok(())
    }

    pub(super) fn order_one_list(
        &mut self,
        original_list: Option<Vec<Value>>,
        patch_list: Option<Vec<Value>>,
        order: &[Value],
        meta: FieldMeta,
        directive: &str,
        depth: usize,
    ) -> Result<Option<Vec<Value>>, PatchError> {
        let merge_key = meta.merge_key;
        self.validate_patch_with_set_order_list(
            patch_list.as_deref().unwrap_or(&[]),
            order,
            merge_key,
            directive,
        )?;
        let kind = slice_element_type(&[
            original_list.as_deref().unwrap_or(&[]),
            patch_list.as_deref().unwrap_or(&[]),
        ]);
        let is_map = matches!(kind, Ok(Class::Object));
        let server_order =
            OrderIndex::build(original_list.as_deref().unwrap_or(&[]), merge_key, is_map);
        let merged = match (original_list, patch_list) {
            (Some(o), None) => o,
            (None, Some(p)) => p.into_iter().filter_map(sanitize_inserted).collect(),
            (Some(o), Some(p)) => self.merge_slice_handler(o, p, meta, false, depth + 1)?,
            (None, None) => return Ok(None),
        };
        let (patch_items, server_only) = if merge_key.is_empty() {
            self.partition_scalars(merged, order)?
        } else {
            self.partition_maps(merged, order, merge_key)?
        };
        let kind = kind.map_err(|m| self.err(m))?;
        let is_map = kind == Class::Object;
        let order_index = OrderIndex::build(order, merge_key, is_map);
        let both = self.normalize_element_order(
            patch_items,
            server_only,
            &order_index,
            &server_order,
            merge_key,
            is_map,
        )?;
        Ok(Some(both))
    }

    /// Kubernetes `validatePatchWithSetOrderList`: the patch list must follow the
    /// order of the `$setElementOrder` list.
    pub(super) fn validate_patch_with_set_order_list(
        &self,
        patch_list: &[Value],
        order: &[Value],
        merge_key: &str,
        directive: &str,
    ) -> Result<(), PatchError> {
        if order.is_empty() || patch_list.is_empty() {
            return Ok(());
        }
        let mut non_delete: Vec<&Value> = Vec::with_capacity(patch_list.len());
        if merge_key.is_empty() {
            non_delete.extend(patch_list.iter());
        } else {
            for v in patch_list {
                let Value::Object(m) = v else {
                    return Err(self.err(format!(
                        "expected an object in the list, but received a {}",
                        type_name(v)
                    )));
                };
                if m.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE) {
                    non_delete.push(v);
                }
            }
        }
        let (mut pi, mut si) = (0, 0);
        while let (Some(p), Some(s)) = (non_delete.get(pi), order.get(si)) {
            if p.as_object()
                .is_some_and(|m| m.contains_key(DIRECTIVE_MARKER))
            {
                pi += 1;
                continue;
            }
            let equal = if merge_key.is_empty() {
                *p == s
            } else {
                let pk = self.merge_key_value(p, merge_key)?;
                let sk = self.merge_key_value(s, merge_key)?;
                pk == sk
            };
            if equal {
                pi += 1;
            }
            si += 1;
        }
        if pi < non_delete.len() && si >= order.len() {
            return Err(self.err(format!(
                "the order in patch list:\n{}\n doesn't match {directive} list:\n{}",
                render(&Value::Array(patch_list.to_vec())),
                render(&Value::Array(order.to_vec()))
            )));
        }
        Ok(())
    }

    pub(super) fn merge_key_value<'v>(
        &self,
        v: &'v Value,
        merge_key: &str,
    ) -> Result<&'v Value, PatchError> {
        match v {
            Value::Object(m) => m
                .get(merge_key)
                .ok_or_else(|| self.err(no_merge_key_msg(m, merge_key))),
            other => Err(self.err(format!(
                "expected an object, but received a {}",
                type_name(other)
            ))),
        }
    }

    /// Kubernetes `partitionPrimitivesByPresentInList`.
    pub(super) fn partition_scalars(
        &self,
        items: Vec<Value>,
        by: &[Value],
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        if let Some(bad) = items
            .iter()
            .chain(by.iter())
            .find(|v| matches!(v, Value::Object(_) | Value::Array(_)))
        {
            // Go panics here ("hash of unhashable type").
            return Err(self.err(format!(
                "cannot order a list of {}s without a merge key",
                type_name(bad)
            )));
        }
        let present: HashSet<String> = by.iter().map(key_repr).collect();
        Ok(items
            .into_iter()
            .partition(|v| present.contains(&key_repr(v))))
    }

    /// Kubernetes `partitionMapsByPresentInList`.
    pub(super) fn partition_maps(
        &self,
        items: Vec<Value>,
        by: &[Value],
        merge_key: &str,
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        let first_non_map = by.iter().position(|v| !v.is_object());
        let index = OrderIndex::build(by, merge_key, true);
        let mut in_patch = Vec::new();
        let mut server_only = Vec::new();
        for item in items {
            let key_value = self.merge_key_value(&item, merge_key)?;
            let found = index.first.get(&key_repr(key_value)).copied();
            if let Some(bad) = first_non_map {
                if found.is_none_or(|i| i > bad) {
                    return Err(self.err(format!("value for key {bad} is not a map")));
                }
            }
            if found.is_some() {
                in_patch.push(item);
            } else {
                server_only.push(item);
            }
        }
        Ok((in_patch, server_only))
    }

    /// Kubernetes `mergeSliceHandler`.
    pub(super) fn merge_slice_handler(
        &mut self,
        original: Vec<Value>,
        patch: Vec<Value>,
        meta: FieldMeta,
        is_delete_list: bool,
        depth: usize,
    ) -> Result<Vec<Value>, PatchError> {
        if meta.strategy == Strategy::Merge || is_delete_list {
            self.merge_slice(original, patch, meta, is_delete_list, depth)
        } else {
            Ok(patch.into_iter().map(strip_directives).collect())
        }
    }

    /// Kubernetes `mergeSlice`.
    pub(super) fn merge_slice(
        &mut self,
        original: Vec<Value>,
        patch: Vec<Value>,
        meta: FieldMeta,
        is_delete_list: bool,
        depth: usize,
    ) -> Result<Vec<Value>, PatchError> {
        self.check_depth(depth)?;
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let kind = slice_element_type(&[&original, &patch]).map_err(|m| self.err(m))?;
        let merge_key = meta.merge_key;
        if kind != Class::Object {
            if is_delete_list {
                let remove: HashSet<String> = patch.iter().map(key_repr).collect();
                return Ok(original
                    .into_iter()
                    .filter(|v| !remove.contains(&key_repr(v)))
                    .collect());
            }
            let server_order = OrderIndex::build(&original, merge_key, false);
            let patch_order = OrderIndex::build(&patch, merge_key, false);
            let mut seen = HashSet::new();
            let merged: Vec<Value> = original
                .into_iter()
                .chain(patch)
                .filter(|v| seen.insert(key_repr(v)))
                .collect();
            let (patch_items, server_only): (Vec<Value>, Vec<Value>) = if merge_key.is_empty() {
                merged
                    .into_iter()
                    .partition(|v| patch_order.index_of(v, "", false).is_some())
            } else {
                // A merge key declared on a list of scalars: Kubernetes fails here.
                let Some(v) = merged.first() else {
                    return Ok(merged);
                };
                return Err(self.err(format!(
                    "expected an object, but received a {}",
                    type_name(v)
                )));
            };
            return self.normalize_element_order(
                patch_items,
                server_only,
                &patch_order,
                &server_order,
                merge_key,
                false,
            );
        }

        if merge_key.is_empty() {
            let name = meta.schema.map_or("the list", |s| s.name);
            return Err(self.err(format!("cannot merge lists without merge key for {name}")));
        }
        let (original, patch) =
            self.merge_slice_with_special_elements(original, patch, merge_key)?;
        let server_order = OrderIndex::build(&original, merge_key, true);
        let patch_order = OrderIndex::build(&patch, merge_key, true);
        let merged = self.merge_slice_without_special_elements(original, patch, meta, depth)?;
        let mut patch_items = Vec::new();
        let mut server_only = Vec::new();
        for item in merged {
            let key_value = self.merge_key_value(&item, merge_key)?;
            if patch_order.first.contains_key(&key_repr(key_value)) {
                patch_items.push(item);
            } else {
                server_only.push(item);
            }
        }
        self.normalize_element_order(
            patch_items,
            server_only,
            &patch_order,
            &server_order,
            merge_key,
            true,
        )
    }

    /// Kubernetes `mergeSliceWithSpecialElements`: applies `$patch: delete` and
    /// `$patch: replace` list items; returns the new original and the plain patch items.
    pub(super) fn merge_slice_with_special_elements(
        &self,
        mut original: Vec<Value>,
        patch: Vec<Value>,
        merge_key: &str,
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        let mut plain = Vec::with_capacity(patch.len());
        let mut replace = false;
        for v in patch {
            let Value::Object(m) = &v else {
                return Err(self.err(format!(
                    "expected an object in the list, but received a {}",
                    type_name(&v)
                )));
            };
            let Some(directive) = m.get(DIRECTIVE_MARKER) else {
                plain.push(v);
                continue;
            };
            match directive.as_str() {
                Some(DELETE_DIRECTIVE) => {
                    let Some(key_value) = m.get(merge_key) else {
                        return Err(self.err(no_merge_key_msg(m, merge_key)));
                    };
                    original.retain(|item| item.get(merge_key) != Some(key_value));
                }
                Some(REPLACE_DIRECTIVE) => replace = true,
                Some(MERGE_DIRECTIVE) => {
                    return Err(self.err("merging lists cannot yet be specified in the patch"))
                }
                _ => {
                    return Err(self.err(format!(
                        "unknown patch type: {} in map: {}",
                        render(directive),
                        render(&v)
                    )))
                }
            }
        }
        if replace {
            return Ok((
                plain.into_iter().map(strip_directives).collect(),
                Vec::new(),
            ));
        }
        Ok((original, plain))
    }

    /// Kubernetes `mergeSliceWithoutSpecialElements`: merges patch items into the
    /// original items with the same merge-key value, appends the others.
    pub(super) fn merge_slice_without_special_elements(
        &mut self,
        mut original: Vec<Value>,
        patch: Vec<Value>,
        meta: FieldMeta,
        depth: usize,
    ) -> Result<Vec<Value>, PatchError> {
        let merge_key = meta.merge_key;
        let mut index: HashMap<String, usize> = HashMap::with_capacity(original.len());
        for (i, item) in original.iter().enumerate() {
            if let Some(v) = item.get(merge_key) {
                index.entry(key_repr(v)).or_insert(i);
            }
        }
        for v in patch {
            let Value::Object(pm) = v else {
                return Err(self.err(format!(
                    "expected an object in the list, but received a {}",
                    type_name(&v)
                )));
            };
            let Some(key_value) = pm.get(merge_key) else {
                return Err(self.err(no_merge_key_msg(&pm, merge_key)));
            };
            let repr = key_repr(key_value);
            match index.get(&repr).copied() {
                Some(i) => {
                    let Some(slot) = original.get_mut(i) else {
                        continue;
                    };
                    let Value::Object(om) = std::mem::take(slot) else {
                        return Err(self.err("value in the list is not a map"));
                    };
                    self.path
                        .push(format!("[{merge_key}={}]", render(key_value)));
                    let merged = self.merge_map(om, pm, meta.schema, depth + 1);
                    self.path.pop();
                    *slot = Value::Object(merged?);
                }
                None => {
                    index.insert(repr, original.len());
                    original.push(Value::Object(strip_directives_map(pm)));
                }
            }
        }
        Ok(original)
    }

    /// Kubernetes `normalizeElementOrder`: sorts the patch items by the patch order
    /// and the server-only items by the original order, then interleaves them.
    pub(super) fn normalize_element_order(
        &self,
        patch_items: Vec<Value>,
        server_only: Vec<Value>,
        patch_order: &OrderIndex,
        server_order: &OrderIndex,
        merge_key: &str,
        is_map: bool,
    ) -> Result<Vec<Value>, PatchError> {
        let patch_items =
            self.normalize_slice_order(patch_items, patch_order, merge_key, is_map)?;
        let server_only =
            self.normalize_slice_order(server_only, server_order, merge_key, is_map)?;
        Ok(merge_sorted_slice(
            server_only,
            patch_items,
            server_order,
            merge_key,
            is_map,
        ))
    }

    /// Kubernetes `normalizeSliceOrder`.
    pub(super) fn normalize_slice_order(
        &self,
        to_sort: Vec<Value>,
        order: &OrderIndex,
        merge_key: &str,
        is_map: bool,
    ) -> Result<Vec<Value>, PatchError> {
        let mut to_delete = Vec::new();
        let mut keep = Vec::with_capacity(to_sort.len());
        if is_map {
            for item in &to_sort {
                self.merge_key_value(item, merge_key)?;
            }
            if let Some(msg) = &order.invalid {
                return Err(self.err(msg.clone()));
            }
            for item in to_sort {
                let is_delete =
                    item.get(DIRECTIVE_MARKER).and_then(Value::as_str) == Some(DELETE_DIRECTIVE);
                if is_delete {
                    to_delete.push(item);
                } else {
                    keep.push(item);
                }
            }
        } else {
            keep = to_sort;
        }
        let mut keyed: Vec<(Option<usize>, Value)> = keep
            .into_iter()
            .map(|v| (order.index_of(&v, merge_key, is_map), v))
            .collect();
        go_stable_sort(&mut keyed, &|a, b| match (a.0, b.0) {
            (Some(i), Some(j)) => i < j,
            _ => true,
        });
        let mut out: Vec<Value> = keyed.into_iter().map(|(_, v)| v).collect();
        out.extend(to_delete);
        Ok(out)
    }
}

/// Kubernetes `mergeSortedSlice`: interleaves two sorted lists, using the
/// original order where both items appear in it.
pub(super) fn merge_sorted_slice(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &OrderIndex,
    merge_key: &str,
    is_map: bool,
) -> Vec<Value> {
    let left: Vec<(Option<usize>, Value)> = left
        .into_iter()
        .map(|v| (server_order.index_of(&v, merge_key, is_map), v))
        .collect();
    let right: Vec<(Option<usize>, Value)> = right
        .into_iter()
        .map(|v| (server_order.index_of(&v, merge_key, is_map), v))
        .collect();
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((Some(li), _)), Some((Some(ri), _))) => li < ri,
            (Some(_), Some(_)) => false,
        };
        let next = if take_left { left.next() } else { right.next() };
        if let Some((_, v)) = next {
            out.push(v);
        }
    }
    out
}

/// Kubernetes `sliceElementType`: all items of the lists must have one type, not a list.
pub(super) fn slice_element_type(lists: &[&[Value]]) -> Result<Class, String> {
    let mut prev: Option<Class> = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        let c = class(v);
        match prev {
            None => {
                if c == Class::Array {
                    return Err("lists of lists are not supported".to_string());
                }
                if c == Class::Null {
                    return Err("null list items are not supported".to_string());
                }
                prev = Some(c);
            }
            Some(p) if p != c => {
                return Err(format!(
                    "list element types are not identical: {}",
                    render(&Value::Array(
                        lists.iter().flat_map(|l| l.iter().cloned()).collect()
                    ))
                ));
            }
            Some(_) => {}
        }
    }
    prev.ok_or_else(|| "no elements in any of the given lists".to_string())
}
