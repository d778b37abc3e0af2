#!/usr/bin/env python3
"""Import circles between the files of each Rust crate in a checkout, read from `use crate::...`,
`use super::...` and `crate::a::b` paths (a rough reader: text, not the compiler). A child module
using its own ancestors does not count. Prints one line
per circle (a strongly connected group of two or more files) and the count last; exits with
status 1 when there is any, so that `scripts/test` fails on a circle (docs/architecture.md: the
modules of a crate depend one way). Crates are the folders of the checkout
(the argument, `.` by default) that hold a Cargo.toml and a src/ folder.

Kept from the review tool the project was measured with, so that CI and the review count alike."""
import os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
circles = []
for crate in sorted(os.listdir(root)):
    src = os.path.join(root, crate, "src")
    if not os.path.isfile(os.path.join(root, crate, "Cargo.toml")) or not os.path.isdir(src):
        continue
    files = {}
    for d, _, fs in os.walk(src):
        for f in fs:
            if f.endswith(".rs"):
                rel = os.path.relpath(os.path.join(d, f), src)[:-3].split(os.sep)
                if rel[-1] in ("mod", "lib", "main"):
                    rel = rel[:-1]
                files[tuple(rel)] = os.path.join(d, f)
    def resolve(parts):
        for n in range(len(parts), -1, -1):
            if tuple(parts[:n]) in files:
                return tuple(parts[:n])
        return None
    edges = {m: set() for m in files}
    for mod, path in files.items():
        text = open(path, errors="ignore").read()
        text = re.sub(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{.*", "", text, flags=re.S)  # inline tests
        text = re.sub(r"(?m)^\s*//.*$", "", text)  # comments and doc links import nothing
        targets = []
        # expand use-trees: `use super::{a, b::{c, d}};` -> super::a, super::b::c, super::b::d
        def expand(tree):
            tree = tree.strip()
            i = tree.find("{")
            if i < 0:
                return [tree]
            head, body = tree[:i], tree[i + 1:tree.rfind("}")]
            parts, depth, cur = [], 0, ""
            for ch in body:
                if ch == "," and depth == 0:
                    parts.append(cur); cur = ""
                    continue
                depth += (ch == "{") - (ch == "}")
                cur += ch
            parts.append(cur)
            return [x for p in parts if p.strip() for x in expand(head + p.strip())]
        flat = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            flat += [re.sub(r"\s+as\s+\w+$", "", x) for x in expand(m.group(1))]
        text = text + "\n" + "\n".join(flat)
        for m in re.finditer(r"\b(crate|super|self)((?:::\w+)+)", text):
            parts = m.group(2).strip(":").split("::")
            base = [] if m.group(1) == "crate" else list(mod) if m.group(1) == "self" else list(mod)[:-1]
            while parts and parts[0] == "super":
                parts.pop(0); base = base[:-1]
            targets.append(base + parts)
        # `use child::Item;` names a child module of this one without a prefix
        for m in re.finditer(r"\buse\s+(\w+)((?:::\w+)*)", text):
            head = m.group(1)
            if head not in ("crate", "super", "self") and tuple(list(mod) + [head]) in files:
                targets.append(list(mod) + [head] + m.group(2).strip(":").split("::"))
        for parts in targets:
            t = resolve([p for p in parts if p])
            # a child using its own parent module (`use super::Error`) is the ordinary Rust shape
            if t is not None and t != mod and t != () and mod[:len(t)] != t:
                edges[mod].add(t)
    # Tarjan's strongly connected components
    idx, low, on, st, out, i = {}, {}, set(), [], [], [0]
    def sc(v):
        idx[v] = low[v] = i[0]; i[0] += 1; st.append(v); on.add(v)
        for w in edges[v]:
            if w not in idx:
                sc(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1:
                out.append(comp)
    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in idx:
            sc(v)
    for comp in out:
        circles.append(f"{crate}: " + ", ".join("/".join(c) for c in sorted(comp)))
for c in circles:
    print(c)
print(len(circles))
sys.exit(1 if circles else 0)
