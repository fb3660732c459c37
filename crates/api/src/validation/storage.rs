//! PersistentVolumes, claim updates and StorageClasses (upstream
//! `ValidatePersistentVolume`, `ValidatePersistentVolumeClaimUpdate`,
//! `ValidateStorageClass`). One deliberate difference: the `Recycle` reclaim policy,
//! deprecated upstream since 1.15, is refused (a scrubbing pod is not something cairn
//! runs); `Delete` with a provisioner or `Retain` cover its uses.

use super::*;

pub(crate) const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
pub(crate) const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];
/// Volume sources a PersistentVolume may name (one of them).
pub(crate) const PV_SOURCES: [&str; 17] = [
    "hostPath",
    "local",
    "nfs",
    "csi",
    "iscsi",
    "fc",
    "rbd",
    "cephfs",
    "cinder",
    "flexVolume",
    "azureFile",
    "azureDisk",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "vsphereVolume",
    "portworxVolume",
    "glusterfs",
];

pub(crate) fn access_modes(spec: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let modes = arr(spec, "accessModes");
    if modes.is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.accessModes"),
            "must specify at least 1 access mode",
        ));
    }
    for m in modes.iter().filter_map(Value::as_str) {
        if !ACCESS_MODES.contains(&m) {
            errs.push(Cause::not_supported(
                format!("{p}.accessModes"),
                m,
                &ACCESS_MODES,
            ));
        }
    }
    let mode = s(spec, "volumeMode");
    if !mode.is_empty() && !VOLUME_MODES.contains(&mode) {
        errs.push(Cause::not_supported(
            format!("{p}.volumeMode"),
            mode,
            &VOLUME_MODES,
        ));
    }
}

/// A storage amount: present, and more than zero.
pub(crate) fn positive_storage(v: Option<&Value>, path: &str, errs: &mut Vec<Cause>) {
    let Some(v) = v else {
        errs.push(Cause::required(path.to_string()));
        return;
    };
    let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
    if quantity::nanos(&text).is_some_and(|n| n <= 0) {
        errs.push(Cause::invalid(
            path.to_string(),
            &text,
            "must be greater than zero",
        ));
    }
}

pub(crate) fn validate_persistent_volume(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    access_modes(spec, "spec", errs);
    match obj(spec, "capacity") {
        None => errs.push(Cause::required("spec.capacity")),
        Some(cap) if !cap.contains_key("storage") || cap.len() > 1 => {
            let keys: Vec<&str> = cap.keys().map(String::as_str).collect();
            errs.push(Cause::not_supported(
                "spec.capacity",
                &keys.join(","),
                &["storage"],
            ));
        }
        Some(cap) => positive_storage(cap.get("storage"), "spec.capacity[storage]", errs),
    }
    let policy = s(spec, "persistentVolumeReclaimPolicy");
    match policy {
        "Delete" | "Retain" => {}
        "Recycle" => errs.push(Cause::forbidden(
            "spec.persistentVolumeReclaimPolicy",
            "Recycle is deprecated and not supported: use Delete with a provisioner, or Retain",
        )),
        other => errs.push(Cause::not_supported(
            "spec.persistentVolumeReclaimPolicy",
            other,
            &["Delete", "Retain"],
        )),
    }
    let sources: Vec<&str> = PV_SOURCES
        .iter()
        .copied()
        .filter(|k| obj(spec, k).is_some())
        .collect();
    match sources.as_slice() {
        [] => errs.push(Cause::required_detail("spec", "must specify a volume type")),
        [_] => {}
        [_, rest @ ..] => {
            for extra in rest {
                errs.push(Cause::forbidden(
                    format!("spec.{extra}"),
                    "may not specify more than 1 volume type",
                ));
            }
        }
    }
    if let Some(local) = obj(spec, "local") {
        if s(local, "path").is_empty() {
            errs.push(Cause::required("spec.local.path"));
        }
        if obj(spec, "nodeAffinity").is_none() {
            errs.push(Cause::required_detail(
                "spec.nodeAffinity",
                "Local volume requires node affinity",
            ));
        }
    }
    if let Some(hp) = obj(spec, "hostPath") {
        if s(hp, "path").is_empty() {
            errs.push(Cause::required("spec.hostPath.path"));
        }
    }
    let class = s(spec, "storageClassName");
    if !class.is_empty() {
        for msg in is_dns1123_subdomain(class) {
            errs.push(Cause::invalid("spec.storageClassName", class, &msg));
        }
    }
}

/// A claim's storage request must be positive (the rest is `validate_claim`'s).
pub(crate) fn validate_claim_storage(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let storage = path(o, &["spec", "resources", "requests", "storage"]);
    if storage.is_some() {
        positive_storage(storage, "spec.resources[storage]", errs);
    }
}

/// After creation a claim's spec only grows its request (once bound), and gets its
/// volume name once.
pub(crate) fn validate_claim_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    let empty = Map::new();
    let mut o = obj(old, "spec").unwrap_or(&empty).clone();
    let mut n = obj(new, "spec").unwrap_or(&empty).clone();
    for spec in [&mut o, &mut n] {
        if let Some(r) = spec.get_mut("resources").and_then(Value::as_object_mut) {
            r.remove("requests");
        }
        spec.remove("volumeAttributesClassName");
    }
    if s(&o, "volumeName").is_empty() {
        n.remove("volumeName");
        o.remove("volumeName");
    }
    if o != n {
        errs.push(Cause::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    let storage = |m: &Map<String, Value>| {
        path(m, &["spec", "resources", "requests", "storage"])
            .and_then(|v| quantity::nanos(v.as_str().unwrap_or_default()))
    };
    let bound = path(old, &["status", "phase"]).and_then(Value::as_str) == Some("Bound");
    if let (true, Some(n), Some(o)) = (bound, storage(new), storage(old)) {
        if n < o {
            errs.push(Cause::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than previous value",
            ));
        }
    }
}

pub(crate) fn validate_storage_class(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let provisioner = s(o, "provisioner");
    if provisioner.is_empty() {
        errs.push(Cause::required("provisioner"));
    } else {
        for msg in is_qualified_name(provisioner) {
            errs.push(Cause::invalid("provisioner", provisioner, &msg));
        }
    }
    let policy = s(o, "reclaimPolicy");
    if !matches!(policy, "Delete" | "Retain") {
        errs.push(Cause::not_supported(
            "reclaimPolicy",
            policy,
            &["Delete", "Retain"],
        ));
    }
    let mode = s(o, "volumeBindingMode");
    let modes = ["Immediate", "WaitForFirstConsumer"];
    if !modes.contains(&mode) {
        errs.push(Cause::not_supported("volumeBindingMode", mode, &modes));
    }
}

/// A class's provisioner, parameters, reclaim policy and binding mode are fixed.
pub(crate) fn validate_storage_class_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    for (key, msg) in [
        ("parameters", "updates to parameters are forbidden."),
        ("provisioner", "updates to provisioner are forbidden."),
        ("reclaimPolicy", "updates to reclaimPolicy are forbidden."),
        ("volumeBindingMode", "field is immutable"),
    ] {
        if field(old, key) != field(new, key) {
            errs.push(Cause::forbidden(key, msg));
        }
    }
}
