"""The official Python client's exec, attach and port-forward against lab pods
(`kubernetes.stream`), as Ansible's and Airflow's Kubernetes integrations use
them: plain `stream()`, `_preload_content=False` with stdin, exit codes, the v5 stdin
close where the client has it, a base64 channel session through the client's own
websocket library, and `portforward()`. Prints one line per check; exits non-zero on the
first failure. Usage: streams.py KUBECONFIG POD (the pod serves HTTP on port 80)."""

import base64
import json
import sys
import time

import websocket
from kubernetes import client, config
from kubernetes.stream import portforward, stream

KUBECONFIG, POD = sys.argv[1], sys.argv[2]
NS = "default"
config.load_kube_config(config_file=KUBECONFIG)
api = client.CoreV1Api()
exec_ = api.connect_get_namespaced_pod_exec


def check(what, ok, detail=""):
    if not ok:
        print(f"FAIL {what}: {detail}", flush=True)
        sys.exit(1)
    print(f"ok {what}", flush=True)


def plain():
    dates = ["/bin/sh", "-c", "for i in $(seq 1 3); do date; done"]
    out = stream(exec_, POD, NS, command=dates, stdout=True)
    check("stream() with stdout only", out.count("\n") == 3, repr(out))
    out = stream(exec_, POD, NS, command=dates, stderr=True, stdin=False, stdout=True, tty=False)
    check("stream() with stdout and stderr", out.count("\n") == 3, repr(out))
    out = stream(exec_, POD, NS, command=["sh", "-c", "echo to-err >&2"], stderr=True, stdout=True)
    check("stream() carries stderr", "to-err" in out, repr(out))


def read_until(resp, want, seconds=20):
    got = ""
    deadline = time.time() + seconds
    while time.time() < deadline and want not in got and resp.is_open():
        resp.update(timeout=1)
        if resp.peek_stdout():
            got += resp.read_stdout()
    return got


def interactive():
    resp = stream(exec_, POD, NS, command=["cat"], stderr=True, stdin=True, stdout=True,
                  tty=False, _preload_content=False)
    resp.write_stdin("test-close\n")
    got = read_until(resp, "test-close")
    check("write_stdin(str) comes back from cat", got == "test-close\n", repr(got))
    resp.write_stdin(b"bytes-too\n")
    got = read_until(resp, "bytes-too")
    check("write_stdin(bytes) comes back from cat", got == "bytes-too\n", repr(got))
    if hasattr(resp, "close_channel") and resp.subprotocol == "v5.channel.k8s.io":
        resp.close_channel(0)
        resp.run_forever(timeout=20)
        check("v5: closing stdin ends cat", resp.returncode == 0, repr(resp.returncode))
    resp.close()
    resp = stream(exec_, POD, NS, command=["sh", "-c", "echo bye; exit 3"], stderr=True,
                  stdout=True, _preload_content=False)
    resp.run_forever(timeout=20)
    check("returncode of an exit 3", resp.returncode == 3, repr(resp.returncode))


def base64_channels():
    server = api.api_client.configuration.host.replace("http", "ws", 1)
    url = f"{server}/api/v1/namespaces/{NS}/pods/{POD}/exec?command=echo&command=b64&stdout=true"
    c = api.api_client.configuration
    # The API is HTTPS with client certificates: the raw websocket takes the same ones.
    sslopt = {"ca_certs": c.ssl_ca_cert, "certfile": c.cert_file, "keyfile": c.key_file}
    ws = websocket.create_connection(url, header=["sec-websocket-protocol: v4.base64.channel.k8s.io"],
                                     sslopt=sslopt)
    frames = []
    while True:
        op, frame = ws.recv_data_frame(True)
        if op == websocket.ABNF.OPCODE_CLOSE:
            break
        check("base64: text messages", op == websocket.ABNF.OPCODE_TEXT, repr(op))
        text = frame.data.decode()
        frames.append((text[0], base64.b64decode(text[1:])))
    out = b"".join(d for ch, d in frames if ch == "1")
    status = [json.loads(d) for ch, d in frames if ch == "3"]
    check("base64: stdout on channel '1'", out == b"b64\n", repr(frames))
    check("base64: Status on channel '3'", status and status[0]["status"] == "Success", repr(status))


def attach():
    name = "talker"
    core = api
    core.create_namespaced_pod(NS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
            "name": "talk", "image": "busybox",
            "command": ["sh", "-c", "while true; do echo tick; sleep 1; done"]}]}})
    deadline = time.time() + 90
    while time.time() < deadline:
        pod = core.read_namespaced_pod(name, NS)
        if pod.status.phase == "Running":
            break
        time.sleep(0.2)
    resp = stream(core.connect_get_namespaced_pod_attach, name, NS, stdout=True, stderr=True,
                  stdin=False, tty=False, _preload_content=False)
    got = read_until(resp, "tick")
    resp.close()
    core.delete_namespaced_pod(name, NS, grace_period_seconds=0)
    check("attach follows the container's output", "tick" in got, repr(got))


def port_forward():
    pf = portforward(api.connect_get_namespaced_pod_portforward, POD, NS, ports="80")
    sock = pf.socket(80)
    sock.setblocking(True)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n")
    reply = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        reply += chunk
    sock.close()
    check("portforward() reaches the pod's port 80", b"It works!" in reply, repr(reply[:200]))
    check("portforward() reports no error", pf.error(80) is None, repr(pf.error(80)))


plain()
interactive()
base64_channels()
attach()
port_forward()
print("all ok", flush=True)
