"""Parse the prost-generated k8s-pb sources into a simple model.

model: {"<module path>::<Struct>": [ {name, kind, label, tag, rtype, map_kv, msg} ]}
module path like "api::core::v1" or "apimachinery::pkg::apis::meta::v1".
"""
import os
import re

FIELD_ATTR = re.compile(r'#\[prost\((.*)\)\]')


def find_k8s_pb():
    # Cargo's registry, where CARGO_HOME says (CI may move it), else ~/.cargo.
    base = os.path.join(os.environ.get("CARGO_HOME") or os.path.expanduser("~/.cargo"), "registry", "src")
    if not os.path.isdir(base):
        raise SystemExit(f"cargo's registry sources are not at {base} (run a cargo build first)")
    for d in sorted(os.listdir(base)):
        p = os.path.join(base, d, "k8s-pb-0.9.0", "src")
        if os.path.isdir(p):
            return p
    raise SystemExit("k8s-pb-0.9.0 sources not found in " + base)


def resolve(modpath, ty):
    """Resolve a Rust type path (possibly super::...) relative to modpath."""
    ty = ty.replace("::core::option::Option<", "").replace("::prost::alloc::vec::Vec<", "")
    ty = ty.replace("::prost::alloc::boxed::Box<", "").replace(" ", "").rstrip(">,").strip()
    parts = ty.split("::")
    mod = modpath.split("::")
    while parts and parts[0] == "super":
        mod = mod[:-1]
        parts = parts[1:]
    return "::".join(mod + parts)


def parse_file(path, modpath, model):
    text = open(path).read()
    # strip doc comments
    lines = [l for l in text.split("\n") if not l.strip().startswith("///")]
    text = "\n".join(lines)
    for m in re.finditer(r'pub struct (\w+) \{(.*?)\n\}', text, re.S):
        name, body = m.group(1), m.group(2)
        fields = []
        # split on attributes
        chunks = re.split(r'(?=#\[prost\()', body)
        for ch in chunks:
            am = FIELD_ATTR.search(ch)
            if not am:
                continue
            attr = am.group(1)
            rest = ch[am.end():]
            fm = re.search(r'pub (r#)?(\w+):\s*(.*?),\s*$', rest, re.S)
            if not fm:
                raise SystemExit(f"cannot parse field in {modpath}::{name}: {ch!r}")
            fname = fm.group(2)
            rtype = " ".join(fm.group(3).split())
            tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
            f = {"name": fname, "raw": bool(fm.group(1)), "tag": tag, "attr": attr, "rtype": rtype}
            mm = re.match(r'btree_map = "(\w+), (\w+)"', attr)
            if mm:
                f["kind"] = "map"
                f["map_k"], f["map_v"] = mm.group(1), mm.group(2)
                if f["map_v"] == "message":
                    vt = re.search(r'BTreeMap<\s*::prost::alloc::string::String,\s*(.*)>$', rtype).group(1)
                    f["msg"] = resolve(modpath, vt)
            else:
                kind = attr.split(",")[0].strip()
                if kind.startswith("bytes"):
                    kind = "bytes"
                f["kind"] = kind
                f["label"] = "repeated" if "repeated" in attr else "optional"
                if kind == "message":
                    f["msg"] = resolve(modpath, rtype)
                    f["boxed"] = "boxed" in attr
            fields.append(f)
        model[modpath + "::" + name] = fields


def load():
    root = find_k8s_pb()
    model = {}
    for dirpath, _, files in os.walk(root):
        for fn in files:
            if fn != "mod.rs":
                continue
            rel = os.path.relpath(dirpath, root)
            if rel == ".":
                continue
            parse_file(os.path.join(dirpath, fn), rel.replace(os.sep, "::"), model)
    return model


def reachable(model, roots):
    seen = []
    todo = list(roots)
    while todo:
        r = todo.pop(0)
        if r in seen:
            continue
        if r not in model:
            raise SystemExit(f"unknown message {r}")
        seen.append(r)
        for f in model[r]:
            if "msg" in f:
                todo.append(f["msg"])
    return seen
