"""The issue's Job case with the official Python client: a Job's pod deleted with grace
period 0 a moment after its container started, its Job deleted (the client's default
propagation orphans the pod, which keeps the job-tracking finalizer), and Jobs deleted
with Background and Foreground propagation right after their pods started. Every pod must be gone well
within its grace period. Usage: jobs.py KUBECONFIG NAMESPACE."""

import sys
import time

from kubernetes import client, config
from kubernetes.client.rest import ApiException

KUBECONFIG, NS = sys.argv[1], sys.argv[2]
config.load_kube_config(config_file=KUBECONFIG)
core, batch = client.CoreV1Api(), client.BatchV1Api()


def fail(what, pod=None):
    print(f"FAIL {what}", flush=True)
    if pod is not None:
        print(pod, flush=True)
    sys.exit(1)


def job(name, grace):
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "work", "image": "busybox", "command": ["sleep", "300"]}],
        }}},
    }


def started_pod(name, within=90):
    deadline = time.time() + within
    while time.time() < deadline:
        for p in core.list_namespaced_pod(NS, label_selector=f"job-name={name}").items:
            for c in p.status.container_statuses or []:
                if c.state and c.state.running:
                    return p
        time.sleep(0.1)
    fail(f"the pod of Job {name} never started")


def gone(pod_name, within):
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            pod = core.read_namespaced_pod(pod_name, NS)
        except ApiException as e:
            if e.status == 404:
                return
            raise
        time.sleep(0.2)
    fail(f"pod {pod_name} still there {within}s after its deletion", pod)


# The case: grace 0 a moment after the start, the Job deleted by default.
batch.create_namespaced_job(NS, job("quick-delete", 30))
pod = started_pod("quick-delete")
batch.delete_namespaced_job("quick-delete", NS)
core.delete_namespaced_pod(pod.metadata.name, NS, grace_period_seconds=0)
gone(pod.metadata.name, 20)
print("ok a grace-0 pod of an orphaning Job delete is gone", flush=True)

# Background propagation right after the start: the GC deletes the pod gracefully.
batch.create_namespaced_job(NS, job("bg-delete", 3))
pod = started_pod("bg-delete")
batch.delete_namespaced_job("bg-delete", NS, propagation_policy="Background")
gone(pod.metadata.name, 3 + 20)
print("ok a Background Job delete leaves no pod behind", flush=True)
# Foreground propagation: the Job's foregroundDeletion finalizer goes once its pod is
# gone, and the pod's job-tracking finalizer once the deleting Job lets it go.
batch.create_namespaced_job(NS, job("fg-delete", 3))
pod = started_pod("fg-delete")
batch.delete_namespaced_job("fg-delete", NS, propagation_policy="Foreground")
gone(pod.metadata.name, 3 + 20)
deadline = time.time() + 20
while time.time() < deadline:
    try:
        left = batch.read_namespaced_job("fg-delete", NS)
    except ApiException as e:
        if e.status == 404:
            break
        raise
    time.sleep(0.2)
else:
    fail("Job fg-delete still there 20 s after its pod was gone", left)
print("ok a Foreground Job delete removes the pod, then the Job", flush=True)
print("all ok", flush=True)
