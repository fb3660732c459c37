"""Every served kind, created minimal and read back through the official Python client's
typed models: the models refuse objects without the fields Go always writes (a
ReplicaSet's status.replicas, a DaemonSet's four counters, ...), so this checks that each
kind comes back as kube-apiserver serializes it."""
import sys

from kubernetes import client, config

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
apps = client.AppsV1Api()
batch = client.BatchV1Api()
coord = client.CoordinationV1Api()
disc = client.DiscoveryV1Api()
sched = client.SchedulingV1Api()

NS = "default"
TEMPLATE = {
    "metadata": {"labels": {"app": "rt"}},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}
JOB_TEMPLATE = {
    "metadata": {"labels": {"app": "rt"}},
    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
}
SELECTOR = {"matchLabels": {"app": "rt"}}


def meta(name):
    return {"name": name}


# (kind, create(body), read(name), list(), body)
CASES = [
    ("Namespace", lambda b: core.create_namespace(b), lambda n: core.read_namespace(n),
     lambda: core.list_namespace(), {"metadata": meta("rt-ns")}),
    ("Node", lambda b: core.create_node(b), lambda n: core.read_node(n),
     lambda: core.list_node(), {"metadata": meta("rt-node")}),
    ("Pod", lambda b: core.create_namespaced_pod(NS, b), lambda n: core.read_namespaced_pod(n, NS),
     lambda: core.list_namespaced_pod(NS), {"metadata": meta("rt-pod"), "spec": TEMPLATE["spec"]}),
    ("Service", lambda b: core.create_namespaced_service(NS, b),
     lambda n: core.read_namespaced_service(n, NS), lambda: core.list_namespaced_service(NS),
     {"metadata": meta("rt-svc"), "spec": {"ports": [{"port": 80}]}}),
    ("Endpoints", lambda b: core.create_namespaced_endpoints(NS, b),
     lambda n: core.read_namespaced_endpoints(n, NS), lambda: core.list_namespaced_endpoints(NS),
     {"metadata": meta("rt-ep")}),
    ("Event", lambda b: core.create_namespaced_event(NS, b),
     lambda n: core.read_namespaced_event(n, NS), lambda: core.list_namespaced_event(NS),
     {"metadata": meta("rt-event"), "involvedObject": {"kind": "Pod", "name": "rt-pod", "namespace": NS},
      "reason": "Tested", "message": "round trip", "type": "Normal"}),
    ("ConfigMap", lambda b: core.create_namespaced_config_map(NS, b),
     lambda n: core.read_namespaced_config_map(n, NS), lambda: core.list_namespaced_config_map(NS),
     {"metadata": meta("rt-cm")}),
    ("Secret", lambda b: core.create_namespaced_secret(NS, b),
     lambda n: core.read_namespaced_secret(n, NS), lambda: core.list_namespaced_secret(NS),
     {"metadata": meta("rt-secret")}),
    ("ServiceAccount", lambda b: core.create_namespaced_service_account(NS, b),
     lambda n: core.read_namespaced_service_account(n, NS),
     lambda: core.list_namespaced_service_account(NS), {"metadata": meta("rt-sa")}),
    ("ReplicationController", lambda b: core.create_namespaced_replication_controller(NS, b),
     lambda n: core.read_namespaced_replication_controller(n, NS),
     lambda: core.list_namespaced_replication_controller(NS),
     {"metadata": meta("rt-rc"), "spec": {"template": TEMPLATE}}),
    ("PersistentVolumeClaim", lambda b: core.create_namespaced_persistent_volume_claim(NS, b),
     lambda n: core.read_namespaced_persistent_volume_claim(n, NS),
     lambda: core.list_namespaced_persistent_volume_claim(NS),
     {"metadata": meta("rt-pvc"), "spec": {"accessModes": ["ReadWriteOnce"],
                                           "resources": {"requests": {"storage": "1Gi"}}}}),
    ("Deployment", lambda b: apps.create_namespaced_deployment(NS, b),
     lambda n: apps.read_namespaced_deployment(n, NS), lambda: apps.list_namespaced_deployment(NS),
     {"metadata": meta("rt-deploy"), "spec": {"selector": SELECTOR, "template": TEMPLATE}}),
    ("ReplicaSet", lambda b: apps.create_namespaced_replica_set(NS, b),
     lambda n: apps.read_namespaced_replica_set(n, NS), lambda: apps.list_namespaced_replica_set(NS),
     {"metadata": meta("rt-rs"), "spec": {"selector": SELECTOR, "template": TEMPLATE}}),
    ("DaemonSet", lambda b: apps.create_namespaced_daemon_set(NS, b),
     lambda n: apps.read_namespaced_daemon_set(n, NS), lambda: apps.list_namespaced_daemon_set(NS),
     {"metadata": meta("rt-ds"), "spec": {"selector": SELECTOR, "template": TEMPLATE}}),
    ("StatefulSet", lambda b: apps.create_namespaced_stateful_set(NS, b),
     lambda n: apps.read_namespaced_stateful_set(n, NS), lambda: apps.list_namespaced_stateful_set(NS),
     {"metadata": meta("rt-sts"), "spec": {"selector": SELECTOR, "template": TEMPLATE,
                                           "serviceName": "rt"}}),
    ("ControllerRevision", lambda b: apps.create_namespaced_controller_revision(NS, b),
     lambda n: apps.read_namespaced_controller_revision(n, NS),
     lambda: apps.list_namespaced_controller_revision(NS),
     {"metadata": meta("rt-cr"), "revision": 1, "data": {"spec": {}}}),
    ("Job", lambda b: batch.create_namespaced_job(NS, b), lambda n: batch.read_namespaced_job(n, NS),
     lambda: batch.list_namespaced_job(NS), {"metadata": meta("rt-job"), "spec": {"template": JOB_TEMPLATE}}),
    ("CronJob", lambda b: batch.create_namespaced_cron_job(NS, b),
     lambda n: batch.read_namespaced_cron_job(n, NS), lambda: batch.list_namespaced_cron_job(NS),
     {"metadata": meta("rt-cj"), "spec": {"schedule": "@hourly",
                                          "jobTemplate": {"spec": {"template": JOB_TEMPLATE}}}}),
    ("EndpointSlice", lambda b: disc.create_namespaced_endpoint_slice(NS, b),
     lambda n: disc.read_namespaced_endpoint_slice(n, NS),
     lambda: disc.list_namespaced_endpoint_slice(NS),
     {"metadata": meta("rt-slice"), "addressType": "IPv4",
      "endpoints": [{"addresses": ["10.244.0.9"]}]}),
    ("PriorityClass", lambda b: sched.create_priority_class(b),
     lambda n: sched.read_priority_class(n), lambda: sched.list_priority_class(),
     {"metadata": meta("rt-pc"), "value": 1000}),
    ("Lease", lambda b: coord.create_namespaced_lease(NS, b),
     lambda n: coord.read_namespaced_lease(n, NS), lambda: coord.list_namespaced_lease(NS),
     {"metadata": meta("rt-lease")}),
]

done = []
for kind, create, read, list_, body in CASES:
    name = body["metadata"]["name"]
    try:
        created = create(body)
        assert created.metadata.name == name, (kind, created.metadata.name)
        read(name)
        assert any(o.metadata.name == name for o in list_().items), kind
    except Exception as e:  # noqa: BLE001 - name the kind that failed
        raise SystemExit(f"{kind}: {type(e).__name__}: {e}")
    done.append(kind)
print("python roundtrip: ok", len(done), "kinds")
