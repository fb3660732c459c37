"""The official Python client (python3-kubernetes) lists, creates, patches and watches pods."""
import sys
import threading

from kubernetes import client, config, watch

config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()

names = [n.metadata.name for n in v1.list_namespace().items]
assert "kube-system" in names, names

events = []
ready = threading.Event()


def watcher(rv):
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=10):
        events.append((ev["type"], ev["object"].metadata.name, ev["object"].metadata.labels))
        if ev["type"] == "DELETED":
            w.stop()


rv = v1.list_namespaced_pod("default").metadata.resource_version
t = threading.Thread(target=watcher, args=(rv,))
t.start()

pod = client.V1Pod(
    metadata=client.V1ObjectMeta(name="py", labels={"app": "py"}),
    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
)
created = v1.create_namespaced_pod("default", pod)
assert created.metadata.uid, created
assert created.spec.restart_policy == "Always"

patched = v1.patch_namespaced_pod("py", "default", {"metadata": {"labels": {"stage": "patched"}}})
assert patched.metadata.labels["stage"] == "patched"

listed = v1.list_namespaced_pod("default", label_selector="app=py")
assert [p.metadata.name for p in listed.items] == ["py"]

v1.delete_namespaced_pod("py", "default")
t.join(timeout=15)
assert not t.is_alive(), "watch did not see the deletion"
kinds = [e[0] for e in events if e[1] == "py"]
assert kinds == ["ADDED", "MODIFIED", "DELETED"], events
assert events[1][2]["stage"] == "patched", events
print("python client: ok", kinds)
