"""HTTP(S) clients for the Ingress e2e test, run on the lab's switch (outside the nodes).
Standard library only. Each mode prints one JSON line.

  get TARGET HOST PATH [--ca FILE] [--header NAME:VALUE]...
      one request (HTTPS when --ca is given, SNI = HOST):
      {"status", "body", "issuer", "location"}
  loop TARGET HOST PATH STOPFILE [--ca FILE] [--keepalive]
      requests back to back until STOPFILE exists:
      {"ok", "failed", "errors": [first 5], "issuers": {issuer CN: count}, "bodies": {body: count}}
  slowloris TARGET HOST PATH SLOW N
      opens SLOW connections that send half a request and stall, then makes N normal
      requests meanwhile: {"ok", "failed", "errors", "slow_closed"} (slow_closed: how many
      stalled connections the server closed, waited for up to 60 s)

TARGET is ADDRESS:PORT (a node's address); HOST is the Host header and TLS server name.
"""

import json
import os
import socket
import ssl
import sys
import time


def connect(target, host, ca):
    address, port = target.rsplit(":", 1)
    sock = socket.create_connection((address, int(port)), timeout=10)
    if ca is None:
        return sock, None
    context = ssl.create_default_context(cafile=ca)
    tls = context.wrap_socket(sock, server_hostname=host)
    cert = tls.getpeercert()
    issuer = dict(x[0] for x in cert["issuer"]).get("commonName", "?")
    return tls, issuer


def read_response(stream):
    """(status, body, headers) of one HTTP/1.1 response with a Content-Length or chunked
    body."""
    line = stream.readline()
    if not line:
        raise ConnectionError("closed before a response")
    status = int(line.split()[1])
    headers = {}
    while True:
        h = stream.readline().decode("latin-1").strip()
        if not h:
            break
        k, v = h.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(stream.readline().strip(), 16)
            if size == 0:
                stream.readline()
                break
            body += stream.read(size)
            stream.readline()
    else:
        body = stream.read(int(headers.get("content-length", "0")))
    return status, body.decode("utf-8", "replace"), headers


def request(sock, host, path, keepalive, extra=()):
    connection = "keep-alive" if keepalive else "close"
    lines = "".join(f"{h}\r\n" for h in extra)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: {connection}\r\n{lines}\r\n".encode())


def get(target, host, path, ca, extra=()):
    sock, issuer = connect(target, host, ca)
    request(sock, host, path, False, extra)
    status, body, headers = read_response(sock.makefile("rb"))
    sock.close()
    return {"status": status, "body": body, "issuer": issuer, "location": headers.get("location")}


def loop(target, host, path, stop, ca, keepalive):
    ok, failed, errors, issuers, bodies = 0, 0, [], {}, {}
    sock = stream = None
    while not os.path.exists(stop):
        try:
            if sock is None:
                sock, issuer = connect(target, host, ca)
                stream = sock.makefile("rb")
                issuers[issuer] = issuers.get(issuer, 0) + 1
            request(sock, host, path, keepalive)
            status, body, _ = read_response(stream)
            if status != 200:
                raise ValueError(f"{status}: {body.strip()}")
            ok += 1
            key = body.split('"pod"')[0][:60]
            bodies[key] = bodies.get(key, 0) + 1
        except Exception as e:  # every failure counts; the first few are shown
            failed += 1
            if len(errors) < 5:
                errors.append(f"{type(e).__name__}: {e}")
            if sock is not None:
                sock.close()
            sock = None
            continue
        if not keepalive:
            sock.close()
            sock = None
    return {"ok": ok, "failed": failed, "errors": errors, "issuers": issuers, "bodies": bodies}


def slowloris(target, host, path, slow, n):
    address, port = target.rsplit(":", 1)
    stalled = []
    for _ in range(slow):
        s = socket.create_connection((address, int(port)), timeout=10)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode())
        stalled.append(s)
    ok, failed, errors = 0, 0, []
    for _ in range(n):
        try:
            r = get(target, host, path, None)
            if r["status"] != 200:
                raise ValueError(r["status"])
            ok += 1
        except Exception as e:
            failed += 1
            errors.append(f"{type(e).__name__}: {e}")
    closed = 0
    deadline = time.time() + 60
    for s in stalled:
        s.settimeout(max(0.1, deadline - time.time()))
        try:
            while s.recv(4096):
                pass
            closed += 1
        except ConnectionResetError:
            closed += 1
        except socket.timeout:
            pass
        s.close()
    return {"ok": ok, "failed": failed, "errors": errors[:5], "slow_closed": closed}


def main(argv):
    ca = None
    if "--ca" in argv:
        i = argv.index("--ca")
        ca = argv[i + 1]
        del argv[i : i + 2]
    extra = []
    while "--header" in argv:
        i = argv.index("--header")
        extra.append(argv[i + 1])
        del argv[i : i + 2]
    keepalive = "--keepalive" in argv
    argv = [a for a in argv if a != "--keepalive"]
    mode, target, host, path = argv[1:5]
    if mode == "get":
        out = get(target, host, path, ca, extra)
    elif mode == "loop":
        out = loop(target, host, path, argv[5], ca, keepalive)
    elif mode == "slowloris":
        out = slowloris(target, host, path, int(argv[5]), int(argv[6]))
    else:
        sys.exit(f"unknown mode {mode}")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv)
