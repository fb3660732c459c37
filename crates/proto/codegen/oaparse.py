"""Parse k8s-openapi (v1_35) sources: definition name -> JSON field names and required fields.

The JSON names come from the Kubernetes OpenAPI spec (i.e. the json tags of k8s.io/api types.go).
"""
import os
import re


def find_k8s_openapi(ver="v1_35"):
    # Cargo's registry, where CARGO_HOME says (CI may move it), else ~/.cargo.
    base = os.path.join(os.environ.get("CARGO_HOME") or os.path.expanduser("~/.cargo"), "registry", "src")
    if not os.path.isdir(base):
        raise SystemExit(f"cargo's registry sources are not at {base} (run a cargo build first)")
    for d in sorted(os.listdir(base)):
        p = os.path.join(base, d, "k8s-openapi-0.29.0", "src", ver)
        if os.path.isdir(p):
            return p
    raise SystemExit("k8s-openapi-0.29.0 sources not found in " + base)


def load(ver="v1_35"):
    root = find_k8s_openapi(ver)
    defs = {}
    for dirpath, _, files in os.walk(root):
        for fn in files:
            if not fn.endswith(".rs"):
                continue
            text = open(os.path.join(dirpath, fn)).read()
            m = re.match(r'// Generated from definition (\S+)', text)
            if not m:
                continue
            name = m.group(1)
            fields = {}
            for fm in re.finditer(r'"([^"]+)" => Field::Key_(\w+),', text):
                fields[fm.group(1)] = fm.group(2)
            # required (non-Option) fields in the struct
            sm = re.search(r'pub struct \w+ \{(.*?)\n\}', text, re.S)
            req = set()
            if sm:
                for l in sm.group(1).split("\n"):
                    lm = re.match(r'\s*pub (r#)?(\w+): (.*),$', l)
                    if lm and not lm.group(3).startswith("Option<"):
                        req.add(lm.group(2))
            rust_to_json = {r: j for j, r in fields.items()}
            defs[name] = {"fields": fields, "required": {rust_to_json[r] for r in req if r in rust_to_json}}
    return defs
