//! Tables compared with what kube-apiserver serves.

use super::*;
use crate::registry::find_by_kind;
use chrono::TimeZone;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 10, 12, 0, 0).unwrap()
}

fn ago(secs: i64) -> String {
    (now() - chrono::Duration::seconds(secs))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn cells(api_version: &str, kind: &str, obj: Value) -> Vec<Value> {
    let t = table(find_by_kind(api_version, kind).unwrap(), &[obj], now());
    t["rows"][0]["cells"].as_array().unwrap().clone()
}

#[test]
fn human_durations() {
    let d = |s: i64| human_duration(chrono::Duration::seconds(s));
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (182, "3m2s"),
        (599, "9m59s"),
        (600, "10m"),
        (65 * 60, "65m"),
        (179 * 60 + 59, "179m"),
        (180 * 60, "3h"),
        (3 * 3600 + 600, "3h10m"),
        (8 * 3600 + 1, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (51 * 3600, "2d3h"),
        (8 * 86400, "8d"),
        (400 * 86400, "400d"),
        (730 * 86400, "2y"),
        (1097 * 86400, "3y2d"),
        (9 * 365 * 86400, "9y"),
    ];
    for (secs, want) in cases {
        assert_eq!(d(secs), want, "{secs}s");
    }
    assert_eq!(human_duration(chrono::Duration::milliseconds(-1500)), "0s");
    assert_eq!(age(Some(&json!("garbage")), now()), "<unknown>");
    assert_eq!(age(None, now()), "<unknown>");
    assert_eq!(age(Some(&json!(ago(302))), now()), "5m2s");
}

#[test]
fn table_envelope() {
    let pods = find_by_kind("v1", "Pod").unwrap();
    let pod = json!({"metadata": {"name": "a", "namespace": "default", "resourceVersion": "5"}, "spec": {}});
    let t = table(pods, &[pod], now());
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(t["metadata"], json!({}));
    let cols = t["columnDefinitions"].as_array().unwrap();
    let names: Vec<&str> = cols.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ]
    );
    assert_eq!(cols[0]["format"], "name");
    assert_eq!(cols[5]["priority"], 1);
    assert_eq!(cols[1]["format"], "");
    assert_eq!(
        t["rows"][0]["object"],
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"name": "a", "namespace": "default", "resourceVersion": "5"}})
    );
    let t = table_with_options(
        pods,
        &[],
        now(),
        TableOptions {
            no_headers: true,
            include_object: IncludeObject::None,
        },
    );
    assert!(t.get("columnDefinitions").is_none());
    assert_eq!(t["rows"], json!([]));

    let events = find_by_kind("v1", "Event").unwrap();
    let names: Vec<String> = column_definitions(events)
        .iter()
        .map(|c| format!("{}:{}", c["name"], c["priority"]))
        .collect();
    assert_eq!(
        names,
        [
            "\"Last Seen\":0",
            "\"Type\":0",
            "\"Reason\":0",
            "\"Object\":0",
            "\"Subobject\":1",
            "\"Source\":1",
            "\"Message\":0",
            "\"First Seen\":1",
            "\"Count\":1",
            "\"Name\":1"
        ]
    );
}

fn pod_with(status: Value) -> Value {
    json!({"metadata": {"name": "web-1", "creationTimestamp": ago(3600 * 5 + 60)},
        "spec": {"nodeName": "node-1", "containers": [{"name": "a"}, {"name": "b"}]}, "status": status})
}

#[test]
fn pod_statuses() {
    running_creating_and_crashing_pods();
    completed_terminating_and_initializing_pods();
    sidecar_and_pending_pods();
}

fn running_creating_and_crashing_pods() {
    let running = json!({"phase": "Running", "podIP": "10.0.0.7",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 3, "state": {"running": {}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(300)}}},
            {"name": "b", "ready": true, "restartCount": 0, "state": {"running": {}}, "lastState": {}}]});
    assert_eq!(
        cells("v1", "Pod", pod_with(running)),
        json!([
            "web-1",
            "2/2",
            "Running",
            "3 (5m ago)",
            "5h1m",
            "10.0.0.7",
            "node-1",
            "<none>",
            "<none>"
        ])
        .as_array()
        .unwrap()
        .clone()
    );

    let creating = json!({"phase": "Pending", "containerStatuses": [
        {"name": "a", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}},
        {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]});
    let c = cells("v1", "Pod", pod_with(creating));
    assert_eq!(
        (c[1].as_str(), c[2].as_str(), c[3].as_str(), c[5].as_str()),
        (
            Some("0/2"),
            Some("ContainerCreating"),
            Some("0"),
            Some("<none>")
        )
    );

    let crash = json!({"phase": "Running", "containerStatuses": [
        {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
        {"name": "b", "ready": false, "restartCount": 7, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 2, "finishedAt": ago(40)}}}]});
    let c = cells("v1", "Pod", pod_with(crash));
    assert_eq!(
        (c[1].as_str(), c[2].as_str(), c[3].as_str()),
        (Some("1/2"), Some("CrashLoopBackOff"), Some("7 (40s ago)"))
    );
}

fn completed_terminating_and_initializing_pods() {
    let done = json!({"phase": "Succeeded", "containerStatuses": [
        {"name": "a", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "b", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]});
    let t = table(find_by_kind("v1", "Pod").unwrap(), &[pod_with(done)], now());
    assert_eq!(t["rows"][0]["cells"][2], "Completed");
    assert_eq!(t["rows"][0]["conditions"][0]["reason"], "Succeeded");

    let mut terminating = pod_with(json!({"phase": "Running"}));
    terminating["metadata"]["deletionTimestamp"] = json!(ago(1));
    assert_eq!(cells("v1", "Pod", terminating)[2], "Terminating");

    let mut init = pod_with(json!({"phase": "Pending", "initContainerStatuses": [
        {"name": "setup", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}]}));
    init["spec"]["initContainers"] = json!([{"name": "setup"}]);
    assert_eq!(cells("v1", "Pod", init.clone())[2], "Init:0/1");
    init["status"]["initContainerStatuses"][0]["state"] =
        json!({"waiting": {"reason": "ErrImagePull"}});
    assert_eq!(cells("v1", "Pod", init.clone())[2], "Init:ErrImagePull");
    init["status"]["initContainerStatuses"][0]["state"] = json!({"terminated": {"exitCode": 3}});
    assert_eq!(cells("v1", "Pod", init)[2], "Init:ExitCode:3");
}

fn sidecar_and_pending_pods() {
    let mut sidecar = pod_with(
        json!({"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
        "initContainerStatuses": [{"name": "proxy", "ready": true, "started": true, "restartCount": 1, "state": {"running": {}}}],
        "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "b", "ready": true, "restartCount": 0, "state": {"running": {}}}]}),
    );
    sidecar["spec"]["initContainers"] = json!([{"name": "proxy", "restartPolicy": "Always"}]);
    sidecar["spec"]["readinessGates"] = json!([{"conditionType": "example.com/gate"}]);
    let c = cells("v1", "Pod", sidecar);
    assert_eq!(
        (c[1].as_str(), c[2].as_str(), c[3].as_str(), c[8].as_str()),
        (Some("3/3"), Some("Running"), Some("1"), Some("0/1"))
    );

    let pending = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending"}});
    assert_eq!(
        cells("v1", "Pod", pending),
        json!([
            "p",
            "0/1",
            "Pending",
            "0",
            "<unknown>",
            "<none>",
            "<none>",
            "<none>",
            "<none>"
        ])
        .as_array()
        .unwrap()
        .clone()
    );
}

#[test]
fn node_and_namespace_rows() {
    let node = json!({"metadata": {"name": "node-1", "creationTimestamp": ago(86400 * 3),
            "labels": {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": "", "kubernetes.io/role": "edge"}},
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}, {"type": "Hostname", "address": "node-1"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
                "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.7.0"}}});
    assert_eq!(
        cells("v1", "Node", node),
        json!([
            "node-1",
            "Ready,SchedulingDisabled",
            "control-plane,edge,worker",
            "3d",
            "v1.33.0",
            "192.168.1.10",
            "<none>",
            "Debian GNU/Linux 12 (bookworm)",
            "6.1.0",
            "containerd://1.7.0"
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    let bare = json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
    let c = cells("v1", "Node", bare);
    assert_eq!(
        (c[1].as_str(), c[2].as_str(), c[7].as_str()),
        (Some("NotReady"), Some("<none>"), Some("<unknown>"))
    );
    assert_eq!(
        cells("v1", "Node", json!({"metadata": {"name": "n"}}))[1],
        "Unknown"
    );
    assert_eq!(
        cells(
            "v1",
            "Namespace",
            json!({"metadata": {"name": "dev", "creationTimestamp": ago(65 * 60)}, "status": {"phase": "Active"}})
        ),
        json!(["dev", "Active", "65m"]).as_array().unwrap().clone()
    );
}

#[test]
fn workload_rows() {
    let d = json!({"metadata": {"name": "web", "creationTimestamp": ago(120)},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]},
            "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}, {"name": "log", "image": "busybox"}]}}},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
    assert_eq!(
        cells("apps/v1", "Deployment", d.clone()),
        json!([
            "web",
            "2/3",
            3,
            2,
            "2m",
            "nginx,log",
            "nginx:1.25,busybox",
            "app=web,tier in (a,b)"
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    let mut rs = d.clone();
    rs["status"] = json!({"replicas": 3, "readyReplicas": 1});
    assert_eq!(
        cells("apps/v1", "ReplicaSet", rs),
        json!([
            "web",
            3,
            3,
            1,
            "2m",
            "nginx,log",
            "nginx:1.25,busybox",
            "app=web,tier in (a,b)"
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    let mut ds = d;
    ds["spec"]["selector"] = json!({});
    ds["spec"]["template"]["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
    ds["status"] = json!({"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 1, "updatedNumberScheduled": 2, "numberAvailable": 1});
    assert_eq!(
        cells("apps/v1", "DaemonSet", ds),
        json!([
            "web",
            2,
            2,
            1,
            2,
            1,
            "kubernetes.io/os=linux",
            "2m",
            "nginx,log",
            "nginx:1.25,busybox",
            "<none>"
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    let bad = json!({"metadata": {"name": "x"}, "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}});
    assert_eq!(cells("apps/v1", "Deployment", bad.clone())[7], "<invalid>");
    assert_eq!(cells("apps/v1", "ReplicaSet", bad)[7], "<error>");
}

#[test]
fn service_and_endpoint_rows() {
    let svc = json!({"metadata": {"name": "web", "creationTimestamp": ago(10)},
        "spec": {"type": "NodePort", "clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"], "selector": {"app": "web"},
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}});
    assert_eq!(
        cells("v1", "Service", svc),
        json!([
            "web",
            "NodePort",
            "10.96.0.20",
            "<none>",
            "80:30080/TCP,53/UDP",
            "10s",
            "app=web"
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.21", "ports": [{"port": 443, "protocol": "TCP", "nodePort": 31443}]}});
    assert_eq!(cells("v1", "Service", lb.clone())[3], "<pending>");
    let mut lb2 = lb;
    lb2["status"] = json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}]}});
    assert_eq!(cells("v1", "Service", lb2)[3], "203.0.113.9,lb.example.com");
    let headless =
        json!({"metadata": {"name": "h"}, "spec": {"type": "ClusterIP", "clusterIP": "None"}});
    assert_eq!(
        cells("v1", "Service", headless),
        json!([
            "h",
            "ClusterIP",
            "None",
            "<none>",
            "<none>",
            "<unknown>",
            "<none>"
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    let ext = json!({"metadata": {"name": "e"}, "spec": {"type": "ExternalName", "externalName": "db.example.com"}});
    assert_eq!(cells("v1", "Service", ext)[3], "db.example.com");

    let ep = json!({"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}],
        "ports": [{"port": 80}]}]});
    assert_eq!(
        cells("v1", "Endpoints", ep)[1],
        "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more..."
    );
    assert_eq!(
        cells("v1", "Endpoints", json!({"metadata": {"name": "x"}}))[1],
        "<none>"
    );

    let slice = json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
        "ports": [{"name": "http", "port": 80}, {"name": "metrics"}, {}, {"port": 9}],
        "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}]});
    assert_eq!(
        cells("discovery.k8s.io/v1", "EndpointSlice", slice),
        json!([
            "web-abc",
            "IPv4",
            "80,metrics,* + 1 more...",
            "10.0.0.1,10.0.0.2",
            "<unknown>"
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    let empty = json!({"metadata": {"name": "s"}, "addressType": "IPv4", "endpoints": []});
    assert_eq!(
        cells("discovery.k8s.io/v1", "EndpointSlice", empty)[2..4],
        [json!("<unset>"), json!("<unset>")]
    );
}

#[test]
fn event_and_small_rows() {
    let ev = json!({"metadata": {"name": "web-1.17a", "creationTimestamp": ago(600)},
        "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{web}"},
        "reason": "Pulled", "message": "Successfully pulled image \"nginx\"\n", "type": "Normal",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": ago(600), "lastTimestamp": ago(30), "count": 4, "eventTime": null});
    assert_eq!(
        cells("v1", "Event", ev),
        json!([
            "30s",
            "Normal",
            "Pulled",
            "pod/web-1",
            "spec.containers{web}",
            "kubelet, node-1",
            "Successfully pulled image \"nginx\"",
            "10m",
            4,
            "web-1.17a"
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    let new_style = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Node"}, "reason": "Started",
        "eventTime": "2024-01-10T11:59:00.000000Z", "reportingComponent": "cairn-agent", "firstTimestamp": null});
    let c = cells("v1", "Event", new_style);
    assert_eq!(
        (
            c[0].as_str(),
            c[3].as_str(),
            c[5].as_str(),
            c[7].as_str(),
            c[8].as_i64()
        ),
        (
            Some("60s"),
            Some("node"),
            Some("cairn-agent"),
            Some("60s"),
            Some(1)
        )
    );

    assert_eq!(
        cells(
            "v1",
            "ConfigMap",
            json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}})
        )[1],
        3
    );
    assert_eq!(
        cells(
            "v1",
            "Secret",
            json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"a": "YQ=="}})
        ),
        json!(["s", "Opaque", 1, "<unknown>"])
            .as_array()
            .unwrap()
            .clone()
    );
    assert_eq!(
        cells(
            "v1",
            "ServiceAccount",
            json!({"metadata": {"name": "default"}})
        )[1],
        0
    );
    assert_eq!(
        cells(
            "coordination.k8s.io/v1",
            "Lease",
            json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "node-1"}})
        )[1],
        "node-1"
    );
}

#[test]
fn any_shape_is_handled() {
    let shapes = [
        json!(null),
        json!(1),
        json!("x"),
        json!([]),
        json!({"metadata": 1, "spec": [], "status": "x"}),
        json!({"metadata": {"name": 5, "labels": [1]}, "spec": {"containers": 1, "selector": {"matchLabels": [1]}, "ports": [1, {"port": "x"}]},
            "status": {"containerStatuses": [1, {"state": 3}], "conditions": {"a": 1}}, "subsets": [{"ports": 1, "addresses": [1]}],
            "endpoints": [{"addresses": [1, null]}], "series": 3}),
    ];
    for r in crate::registry::RESOURCES {
        let t = table(r, &shapes, now());
        assert_eq!(t["rows"].as_array().unwrap().len(), shapes.len());
        let cols = t["columnDefinitions"].as_array().unwrap().len();
        for row in t["rows"].as_array().unwrap() {
            assert_eq!(row["cells"].as_array().unwrap().len(), cols, "{}", r.kind);
        }
    }
}
