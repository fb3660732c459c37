#!/usr/bin/env python3
"""A small busybox image built from Debian's busybox-static, for nodes without internet.

  busybox-image.py archive OUT.tar [--name docker.io/library/busybox:latest] [--variant V]
      writes an OCI-layout tarball (for `cairn-agent import-image OUT.tar`)
  busybox-image.py push URL REPOSITORY[:TAG] [--variant V]
      pushes the same image to a plain-HTTP registry, e.g.
      push http://127.0.0.1:5000 library/busybox:latest

Variants: `busybox` (default command `sh`) and `httpd`, which stands in for Docker Hub's
httpd: its default command serves /usr/local/apache2/htdocs on port 80 (busybox httpd)
and the page is the real image's "It works!".

The image is deterministic (fixed timestamps and owners), so every node builds the same
digests. Only the standard library is used.
"""
import argparse
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request

BUSYBOX = "/bin/busybox"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"


def _entry(name, kind=tarfile.REGTYPE, mode=0o644, size=0, link=""):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname = kind, mode, size, link
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
    return info


HTTPD_ROOT = "usr/local/apache2/htdocs"
HTTPD_PAGE = b"<html><body><h1>It works!</h1></body></html>\n"


def layer_tar(variant):
    """The root filesystem: busybox, a symlink per applet, /etc basics, empty mount points
    (and the web root for httpd)."""
    applets = subprocess.run([BUSYBOX, "--list"], check=True, capture_output=True, text=True).stdout.split()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        dirs = ["bin", "dev", "etc", "home", "proc", "root", "sys", "tmp", "var", "var/www"]
        if variant == "httpd":
            dirs += ["usr", "usr/local", "usr/local/apache2", HTTPD_ROOT]
        for d in dirs:
            t.addfile(_entry(d, tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755))
        with open(BUSYBOX, "rb") as f:
            data = f.read()
        t.addfile(_entry("bin/busybox", mode=0o755, size=len(data)), io.BytesIO(data))
        for a in sorted(set(applets) - {"busybox"}):
            t.addfile(_entry("bin/" + a, tarfile.SYMTYPE, 0o777, link="busybox"))
        files = {
            "etc/passwd": b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n",
            "etc/group": b"root:x:0:\nnogroup:x:65534:\n",
            "var/www/index.html": b"hello from the cairn busybox image\n",
        }
        if variant == "httpd":
            files[HTTPD_ROOT + "/index.html"] = HTTPD_PAGE
        for name, content in files.items():
            t.addfile(_entry(name, size=len(content)), io.BytesIO(content))
    return out.getvalue()


def blob(content):
    return {"digest": "sha256:" + hashlib.sha256(content).hexdigest(), "size": len(content), "data": content}


def image(variant="busybox"):
    """(config blob, layer blob, manifest blob)."""
    layer = blob(layer_tar(variant))
    env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    runtime = {"Cmd": ["sh"], "Env": env}
    if variant == "httpd":
        runtime = {
            # busybox httpd as PID 1 would ignore SIGTERM (no default handlers for
            # init) and every delete would wait out the grace period; Apache exits.
            "Cmd": ["sh", "-c", "trap 'exit 0' TERM INT; httpd -f -v -p 80 -h /" + HTTPD_ROOT + " & wait"],
            "Env": env,
            "ExposedPorts": {"80/tcp": {}},
            "WorkingDir": "/usr/local/apache2",
        }
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": runtime,
        "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]},
    }
    config = blob(json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": config["digest"], "size": config["size"]},
        "layers": [{"mediaType": LAYER_TYPE, "digest": layer["digest"], "size": layer["size"]}],
    }
    return config, layer, blob(json.dumps(manifest, sort_keys=True).encode())


def write_archive(out, name, variant):
    config, layer, manifest = image(variant)
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": MANIFEST_TYPE, "digest": manifest["digest"], "size": manifest["size"],
            "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": tag},
        }],
    }
    with tarfile.open(out, "w") as t:
        def add(path, content):
            t.addfile(_entry(path, size=len(content)), io.BytesIO(content))
        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add("index.json", json.dumps(index).encode())
        for b in (config, layer, manifest):
            add("blobs/sha256/" + b["digest"].split(":")[1], b["data"])
    print(f"{out}: {name} {manifest['digest']}")


def push(url, reference, variant):
    repo, _, tag = reference.partition(":")
    tag = tag or "latest"
    base = url.rstrip("/") + "/v2/" + repo
    config, layer, manifest = image(variant)
    for b in (layer, config):
        try:
            urllib.request.urlopen(urllib.request.Request(f"{base}/blobs/{b['digest']}", method="HEAD"))
            continue  # already there
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
        start = urllib.request.urlopen(urllib.request.Request(f"{base}/blobs/uploads/", data=b"", method="POST"))
        location = urllib.parse.urljoin(base, start.headers["Location"])
        sep = "&" if "?" in location else "?"
        req = urllib.request.Request(f"{location}{sep}digest={b['digest']}", data=b["data"], method="PUT")
        req.add_header("Content-Type", "application/octet-stream")
        urllib.request.urlopen(req)
    req = urllib.request.Request(f"{base}/manifests/{tag}", data=manifest["data"], method="PUT")
    req.add_header("Content-Type", MANIFEST_TYPE)
    urllib.request.urlopen(req)
    print(f"pushed {url}/{repo}:{tag} {manifest['digest']}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("archive", help="write an OCI-layout tarball")
    a.add_argument("out")
    a.add_argument("--name", default="docker.io/library/busybox:latest")
    a.add_argument("--variant", choices=["busybox", "httpd"], default="busybox")
    s = sub.add_parser("push", help="push to a plain-HTTP registry")
    s.add_argument("url")
    s.add_argument("reference")
    s.add_argument("--variant", choices=["busybox", "httpd"], default="busybox")
    args = p.parse_args()
    try:
        if args.cmd == "archive":
            write_archive(args.out, args.name, args.variant)
        else:
            push(args.url, args.reference, args.variant)
    except (OSError, urllib.error.URLError, subprocess.CalledProcessError) as e:
        print(f"busybox-image: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
