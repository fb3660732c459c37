//! NodeRestriction tables: one request per row, upstream's message or `Ok`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};

use super::*;
use crate::user::NODES;

struct Store;

impl Lookup for Store {
    fn pod(&self, namespace: &str, name: &str) -> Option<StoredPod> {
        let node = match (namespace, name) {
            ("ns", "mine") => "n1",
            ("ns", "theirs") => "n2",
            _ => return None,
        };
        Some(StoredPod {
            uid: format!("uid-{name}"),
            node_name: node.into(),
        })
    }

    fn node_uid(&self, name: &str) -> Option<String> {
        (name == "n1").then(|| "node-uid".to_string())
    }
}

fn n1() -> UserInfo {
    UserInfo::new("system:node:n1", vec![NODES.into()])
}

/// (operation, group, resource, subresource, namespace, name, object, old) → message
type Row = (
    Operation,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Option<Value>,
    Option<Value>,
    Result<(), &'static str>,
);

fn check(user: &UserInfo, rows: Vec<Row>) {
    for (i, (op, group, res, sub, ns, name, obj, old, want)) in rows.into_iter().enumerate() {
        let req = Request {
            user,
            operation: op,
            api_group: group,
            resource: res,
            subresource: sub,
            namespace: ns,
            name,
            object: obj.as_ref(),
            old_object: old.as_ref(),
        };
        let got = admit(&req, &Store).map_err(|e| e.to_string());
        assert_eq!(
            got,
            want.map_err(str::to_string),
            "row {i}: {op} {res}/{sub} {name}"
        );
    }
}

fn mirror(extra_meta: Value, spec: Value) -> Value {
    let mut meta = json!({
        "name": "static-web",
        "annotations": {"kubernetes.io/config.mirror": "hash"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1",
            "uid": "node-uid", "controller": true}]
    });
    for (k, v) in extra_meta.as_object().unwrap() {
        meta[k] = v.clone();
    }
    let mut s = json!({"nodeName": "n1", "containers": [{"name": "c"}]});
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    json!({"metadata": meta, "spec": s})
}

fn owner(fields: Value) -> Value {
    let mut o = json!({"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "node-uid",
        "controller": true});
    for (k, v) in fields.as_object().unwrap() {
        o[k] = v.clone();
    }
    json!({"ownerReferences": [o]})
}

#[test]
fn non_nodes_pass_and_nameless_nodes_do_not() {
    let bob = UserInfo::new("bob", vec![]);
    check(
        &bob,
        vec![(
            Operation::Delete,
            "",
            "nodes",
            "",
            "",
            "n2",
            None,
            None,
            Ok(()),
        )],
    );
    let nameless = UserInfo::new("system:node:", vec![NODES.into()]);
    check(
        &nameless,
        vec![(
            Operation::Delete,
            "",
            "nodes",
            "",
            "",
            "n2",
            None,
            None,
            Err("could not determine node from user \"system:node:\""),
        )],
    );
}

#[test]
fn mirror_pods() {
    use Operation::*;
    let none = json!({});
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        (Create, "", "pods", "", "ns", "", Some(mirror(none.clone(), none.clone())), None, Ok(())),
        (Create, "", "pods", "", "ns", "", Some(json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": []}})), None,
            Err("pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can only create mirror pods")),
        (Create, "", "pods", "", "ns", "", Some(mirror(none.clone(), json!({"nodeName": "n2"}))), None,
            Err("node \"n1\" can only create pods with spec.nodeName set to itself")),
        (Create, "", "pods", "", "ns", "", Some(mirror(json!({"ownerReferences": []}), none.clone())), None,
            Err("node \"n1\" can only create pods with an owner reference set to itself")),
        (Create, "", "pods", "", "ns", "", Some(mirror(owner(json!({"name": "n2"})), none.clone())), None,
            Err("node \"n1\" can only create pods with an owner reference set to itself")),
        (Create, "", "pods", "", "ns", "", Some(mirror(owner(json!({"controller": false})), none.clone())), None,
            Err("node \"n1\" can only create pods with a controller owner reference set to itself")),
        (Create, "", "pods", "", "ns", "", Some(mirror(owner(json!({"blockOwnerDeletion": true})), none.clone())), None,
            Err("node \"n1\" must not set blockOwnerDeletion on an owner reference")),
        (Create, "", "pods", "", "ns", "", Some(mirror(owner(json!({"uid": "stale"})), none.clone())), None,
            Err("node n1 UID mismatch: expected stale got node-uid")),
        (Create, "", "pods", "", "ns", "", Some(mirror(none.clone(), json!({"serviceAccountName": "sa"}))), None,
            Err("node \"n1\" can not create pods that reference a service account")),
        (Create, "", "pods", "", "ns", "", Some(mirror(none.clone(), json!({"imagePullSecrets": [{"name": "s"}]}))), None,
            Err("node \"n1\" can not create pods that reference secrets")),
        (Create, "", "pods", "", "ns", "", Some(mirror(none.clone(), json!({"volumes": [{"name": "v", "configMap": {"name": "c"}}]}))), None,
            Err("node \"n1\" can not create pods that reference configmaps")),
        (Create, "", "pods", "", "ns", "", Some(mirror(none.clone(), json!({"volumes": [{"name": "v", "projected": {"sources": [{"clusterTrustBundle": {"path": "p", "name": "b"}}]}}]}))), None,
            Err("node \"n1\" can not create pods that reference clustertrustbundles")),
        (Create, "", "pods", "", "ns", "", Some(mirror(none.clone(), json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}))), None,
            Err("node \"n1\" can not create pods that reference persistentvolumeclaims")),
        (Delete, "", "pods", "", "ns", "mine", None, None, Ok(())),
        (Delete, "", "pods", "", "ns", "theirs", None, None,
            Err("node \"n1\" can only delete pods with spec.nodeName set to itself")),
        (Delete, "", "pods", "", "ns", "x", None, Some(json!({"spec": {"nodeName": "n1"}})), Ok(())),
        (Delete, "", "pods", "", "ns", "gone", None, None, Err("pods \"gone\" not found")),
        (Update, "", "pods", "", "ns", "mine", None, None,
            Err("unexpected operation \"UPDATE\", node \"n1\" can only create and delete mirror pods")),
        (Update, "", "pods", "exec", "ns", "mine", None, None,
            Err("unexpected pod subresource \"exec\", only 'status' and 'eviction' are allowed")),
    ];
    check(&n1(), rows);
}

#[test]
fn pod_status_and_evictions() {
    use Operation::*;
    let mine = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"nodeName": "n1"},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c1"}]}});
    let relabeled = json!({"metadata": {"labels": {"a": "2"}}, "spec": {"nodeName": "n1"},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c1"}]}});
    let reclaimed = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "resourceClaimStatuses": [{"name": "gpu"}]}});
    let theirs = json!({"spec": {"nodeName": "n2"}});
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        (Update, "", "pods", "status", "ns", "p", Some(mine.clone()), Some(mine.clone()), Ok(())),
        (Update, "", "pods", "status", "ns", "p", Some(theirs.clone()), Some(theirs),
            Err("node \"n1\" can only update pod status for pods with spec.nodeName set to itself")),
        (Update, "", "pods", "status", "ns", "p", Some(relabeled), Some(mine.clone()),
            Err("node \"n1\" cannot update labels through pod status")),
        (Update, "", "pods", "status", "ns", "p", Some(reclaimed), Some(mine),
            Err("node \"n1\" cannot update resource claim statues")),
        (Create, "", "pods", "eviction", "ns", "mine", Some(json!({})), None, Ok(())),
        (Create, "", "pods", "eviction", "ns", "", Some(json!({"metadata": {"name": "mine"}})), None, Ok(())),
        (Create, "", "pods", "eviction", "ns", "", Some(json!({})), None,
            Err("could not determine pod from request data")),
        (Create, "", "pods", "eviction", "ns", "theirs", Some(json!({})), None,
            Err("node n1 can only evict pods with spec.nodeName set to itself")),
        (Create, "", "pods", "eviction", "ns", "gone", Some(json!({})), None, Err("pods \"gone\" not found")),
    ];
    check(&n1(), rows);
}

#[test]
fn own_node_object() {
    use Operation::*;
    let node = |labels: Value, spec: Value| json!({"metadata": {"name": "n1", "labels": labels}, "spec": spec});
    let base = node(json!({"kubernetes.io/hostname": "n1"}), json!({}));
    let tainted = node(
        json!({"kubernetes.io/hostname": "n1"}),
        json!({"taints": [{"key": "k", "effect": "NoSchedule"}]}),
    );
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        (Update, "", "nodes", "", "", "n2", Some(base.clone()), Some(base.clone()),
            Err("node \"n1\" is not allowed to modify node \"n2\"")),
        (Delete, "", "nodes", "", "", "n2", None, None, Err("node \"n1\" is not allowed to modify node \"n2\"")),
        (Create, "", "nodes", "", "", "n1", Some(node(json!({
            "kubernetes.io/hostname": "n1", "node.kubernetes.io/exclude-from-external-load-balancers": "true",
            "kubelet.kubernetes.io/x": "y", "topology.kubernetes.io/zone": "z", "example.com/a": "b"
        }), json!({}))), None, Ok(())),
        (Create, "", "nodes", "", "", "n1", Some(node(json!({
            "node-restriction.kubernetes.io/foo": "x", "foo.node-restriction.kubernetes.io/bar": "x",
            "node-role.kubernetes.io/master": "", "k8s.io/y": "z"
        }), json!({}))), None,
            Err("node \"n1\" is not allowed to set the following labels: foo.node-restriction.kubernetes.io/bar, k8s.io/y, node-restriction.kubernetes.io/foo, node-role.kubernetes.io/master")),
        (Create, "", "nodes", "", "", "n1", Some(node(json!({}), json!({"configSource": {"configMap": {}}}))), None,
            Err("node \"n1\" is not allowed to create pods with a non-nil configSource")),
        (Update, "", "nodes", "status", "", "n1", Some(base.clone()), Some(base.clone()), Ok(())),
        (Update, "", "nodes", "", "", "n1", Some(node(json!({"kubernetes.io/hostname": "n1"}), json!({"taints": []}))), Some(base.clone()), Ok(())),
        (Update, "", "nodes", "", "", "n1", Some(tainted.clone()), Some(base.clone()),
            Err("node \"n1\" is not allowed to modify taints")),
        (Update, "", "nodes", "", "", "n1", Some(base.clone()), Some(tainted), Err("node \"n1\" is not allowed to modify taints")),
        (Update, "", "nodes", "", "", "n1", Some(node(json!({"node-restriction.kubernetes.io/foo": "x"}), json!({}))), Some(base.clone()),
            Err("is not allowed to modify labels: node-restriction.kubernetes.io/foo")),
        (Update, "", "nodes", "", "", "n1", Some(node(json!({}), json!({"configSource": {"configMap": {}}}))), Some(node(json!({}), json!({}))),
            Err("node \"n1\" is not allowed to update configSource to a new non-nil configSource")),
    ];
    check(&n1(), rows);
}

#[test]
fn leases_csinodes_slices_pvcs_tokens() {
    use Operation::*;
    let named = |n: &str| json!({"metadata": {"name": n}});
    let slice = |n: &str| json!({"spec": {"nodeName": n}});
    let tr = |r: Value| json!({"spec": {"boundObjectRef": r}});
    let pvc = json!({"metadata": {"name": "d", "resourceVersion": "1"}, "spec": {"volumeName": "pv"},
        "status": {"capacity": {"storage": "1Gi"}}});
    let resized = json!({"metadata": {"name": "d", "resourceVersion": "2"}, "spec": {"volumeName": "pv"},
        "status": {"capacity": {"storage": "2Gi"}, "conditions": [{"type": "Resizing"}]}});
    let relabeled = json!({"metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"volumeName": "pv"},
        "status": {"capacity": {"storage": "1Gi"}}});
    let lease_ns = "kube-node-lease";
    let lease_name = "can only access node lease with the same name as the requesting node";
    let csi = "can only access CSINode with the same name as the requesting node";
    #[rustfmt::skip]
    let rows: Vec<Row> = vec![
        (Create, "coordination.k8s.io", "leases", "", lease_ns, "", Some(named("n1")), None, Ok(())),
        (Create, "coordination.k8s.io", "leases", "", lease_ns, "", Some(named("n2")), None, Err(lease_name)),
        (Update, "coordination.k8s.io", "leases", "", lease_ns, "n2", None, None, Err(lease_name)),
        (Update, "coordination.k8s.io", "leases", "", "default", "n1", None, None,
            Err("can only access leases in the \"kube-node-lease\" system namespace")),
        (Create, "storage.k8s.io", "csinodes", "", "", "", Some(named("n1")), None, Ok(())),
        (Delete, "storage.k8s.io", "csinodes", "", "", "n2", None, None, Err(csi)),
        (Create, "resource.k8s.io", "resourceslices", "", "", "", Some(slice("n1")), None, Ok(())),
        (Create, "resource.k8s.io", "resourceslices", "", "", "", Some(slice("n2")), None,
            Err("can only create ResourceSlice with the same NodeName as the requesting node")),
        (Delete, "resource.k8s.io", "resourceslices", "", "", "s", None, Some(slice("n2")),
            Err("can only delete ResourceSlice with the same NodeName as the requesting node")),
        (Update, "", "persistentvolumeclaims", "status", "ns", "d", Some(resized), Some(pvc.clone()), Ok(())),
        (Update, "", "persistentvolumeclaims", "status", "ns", "d", Some(relabeled), Some(pvc.clone()),
            Err("node \"n1\" is not allowed to update fields other than status.quantity and status.conditions: metadata.labels")),
        (Update, "", "persistentvolumeclaims", "", "ns", "d", Some(pvc.clone()), Some(pvc), Err("may only update PVC status")),
        (Create, "", "serviceaccounts", "token", "ns", "default",
            Some(tr(json!({"apiVersion": "v1", "kind": "Pod", "name": "mine", "uid": "uid-mine"}))), None, Ok(())),
        (Create, "", "serviceaccounts", "token", "ns", "default",
            Some(tr(json!({"apiVersion": "v1", "kind": "Secret", "name": "mine", "uid": "u"}))), None,
            Err("node requested token not bound to a pod")),
        (Create, "", "serviceaccounts", "token", "ns", "default",
            Some(tr(json!({"apiVersion": "v1", "kind": "Pod", "name": "mine"}))), None,
            Err("node requested token with a pod binding without a uid")),
        (Create, "", "serviceaccounts", "token", "ns", "default",
            Some(tr(json!({"apiVersion": "v1", "kind": "Pod", "name": "mine", "uid": "old"}))), None,
            Err("the UID in the bound object reference (old) does not match the UID in record. The object might have been deleted and then recreated")),
        (Create, "", "serviceaccounts", "token", "ns", "default",
            Some(tr(json!({"apiVersion": "v1", "kind": "Pod", "name": "theirs", "uid": "uid-theirs"}))), None,
            Err("node requested token bound to a pod scheduled on a different node")),
        (Create, "", "serviceaccounts", "", "ns", "", Some(json!({})), None, Ok(())),
        (Create, "", "configmaps", "", "ns", "", Some(json!({})), None, Ok(())),
    ];
    check(&n1(), rows);
}
