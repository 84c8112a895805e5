#!/usr/bin/env python3
"""Shows the circles of imports between the files of pipekeep's library crate.

A file needs another when it names it: a `use` line (braces, globs and renames included), a
path in code (`crate::a::b`, `super::x`, `self::y`, or a child module's name), with a name a
module re-exports followed to the file that defines it. A circle is a set of two or more files
each of which, through the others, needs itself. What a file takes from a module file above it
(its parent's `mod.rs`, its grandparent's) is not counted: a module file is the floor its
children share, and what the children take from each other through it is followed to the file
that defines it. Test code (`#[cfg(test)]` modules, `tests.rs`, `*_tests.rs`) is left out: it
may take from anywhere. The command (`src/bin`) is another crate.

Usage: scripts/import-circles.py [src src/layer ...]   (the whole crate where none is named)
       scripts/import-circles.py --self-test   (shows it finds the circles it must, in a made tree)
Prints each circle with the edges that close it; exits 1 where there is any.
"""
import os
import re
import sys

SRC = "src"
SELF_TEST = {
    # A circle through a parent's re-export, a glob and a braced use; a child taking from its
    # parent; a circle across two trees, through the crate root's re-export.
    "lib.rs": "mod m;\nmod n;\nmod x;\nmod y;\npub use n::N;\n",
    "n.rs": "pub const N: u32 = 1;\npub fn n() { crate::m::low::low(); }\n",
    "m/mod.rs": "mod a;\nmod b;\nmod c;\nmod low;\npub use a::A;\npub struct Top;\n",
    "m/a.rs": "use super::b::{self, Other};\npub struct A;\nfn f() { b::g(); }\n",
    "m/b.rs": "use super::c::*;\npub struct Other;\npub fn g() { from_c(); }\n",
    "m/c.rs": "use crate::m::A;\nuse super::Top;\npub fn from_c() {}\n",
    "m/low.rs": "use super::Top;\npub fn low() -> u32 { crate::N }\n",
    "m/tests.rs": "use super::low::*;\nuse super::a::A;\n",
    # A module file's field typed by a sibling's path, the sibling taking a name the module file
    # re-exports from its child: the module file is needed for the name it gives.
    "x/mod.rs": "mod dev;\nmod shr;\n",
    "x/dev/mod.rs": "mod cmds;\npub use cmds::Fns;\npub struct Data { pub s: super::shr::Shared }\n",
    "x/dev/cmds.rs": "pub struct Fns;\n",
    "x/shr.rs": "use super::dev::Fns;\npub struct Shared(Fns);\n",
    # A `use` inside a function, and a path written in a type to a name re-exported the same way.
    "y/mod.rs": "mod obj;\nmod rec;\n",
    "y/rec/mod.rs": "mod conf;\npub use conf::Launch;\npub fn tag() -> u32 {\n    use crate::y::obj::TAG;\n    TAG\n}\n",
    "y/rec/conf.rs": "pub struct Launch;\n",
    "y/obj.rs": "pub const TAG: u32 = 7;\npub struct Holds {\n    pub launch: super::rec::Launch,\n}\n",
}
SELF_TEST_CIRCLES = ["m::a", "m::b", "m::c", "m::low", "n", "x::dev", "x::shr", "y::obj", "y::rec"]
ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+|const\s+|async\s+|extern\s+\"[^\"]*\"\s+)*"
    r"(?:fn|struct|enum|union|trait|type|const|static|macro_rules!)\s+(\w+)",
    re.M,
)


def strip_code(text):
    """The file's text without comments, strings, char literals and test modules."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"r(#*)\".*?\"\1", '""', text, flags=re.S)
    text = re.sub(r"\"(?:\\.|[^\"\\])*\"", '""', text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"'(?:\\.|[^'\\])'", "' '", text)
    text = re.sub(r"pub\(in [^)]*\)", "pub", text)
    return drop_test_modules(text)


def drop_test_modules(text):
    out, at = [], 0
    test_module = r"#\[cfg\(([^\]]*)\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*([;{])"
    for found in re.finditer(test_module, text):
        if found.start() < at or not re.search(r"\btest\b", found.group(1)) or "not(test)" in found.group(1):
            continue
        out.append(text[at : found.start()])
        at = found.end()
        if found.group(2) == "{":
            depth = 1
            while at < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[at], 0)
                at += 1
    out.append(text[at:])
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d as e, *}}` -> [(['a','b'], 'b'), (['a','c','d'], 'e'), (['a','c','*'], None)]."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        path = [p for p in tree.split("::") if p]
        if path and path[-1] == "self":
            path = path[:-1]
        if not path:
            return []
        return [(path, None if path[-1] == "*" else path[-1])]
    head = tree[:brace].rstrip(":")
    body = tree[brace + 1 : tree.rfind("}")]
    pieces, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            pieces.append(body[start:i])
            start = i + 1
    pieces.append(body[start:])
    out = []
    for piece in pieces:
        if not piece:
            continue
        for path, alias in expand_use(piece):
            full = ([p for p in head.split("::") if p] + path) if path else [p for p in head.split("::") if p]
            out.append((full, alias))
    return out


def parse_use(statement):
    """A `use` statement's body with its `as` renames turned into aliases."""
    renamed = []
    body = re.sub(r"\s+as\s+(\w+)", lambda m: "@" + m.group(1), statement)
    for path, alias in expand_use(body):
        if path and "@" in path[-1]:
            last, alias = path[-1].split("@")
            path = path[:-1] + [last]
            if alias == "_":
                alias = None
        renamed.append((path, alias))
    return renamed


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of names from the crate root
        self.file = file
        self.text = strip_code(open(file).read())
        self.is_dir = file.endswith("mod.rs") or file.endswith("lib.rs") or file.endswith("main.rs")
        self.children = set(re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", self.text, re.M))
        self.items = set(ITEM.findall(self.text))
        self.uses = []  # (absolute path, alias or None for a glob)
        self.names = {}  # alias -> absolute path

    def here(self):
        return list(self.path)


def module_files():
    found = {}
    for folder, _, files in sorted(os.walk(SRC)):
        if os.path.join(SRC, "bin") in folder:
            continue
        for name in files:
            if not name.endswith(".rs") or name == "tests.rs" or name.endswith("_tests.rs"):
                continue
            file = os.path.join(folder, name)
            rel = os.path.relpath(file, SRC)[:-3].split(os.sep)
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel == ["lib"]:
                rel = []
            found[tuple(rel)] = Module(tuple(rel), file)
    return found


def absolute(module, parts, modules):
    """The path from the crate root that `parts`, written in `module`, names; None for another crate."""
    if not parts:
        return None
    head = parts[0]
    if head == "crate":
        return parts[1:]
    if head in ("self", "super"):
        base = module.here()
        rest = parts
        if rest[0] == "self":
            rest = rest[1:]
        while rest and rest[0] == "super":
            base = base[:-1]
            rest = rest[1:]
        return base + rest
    if head in module.children:
        return module.here() + parts
    if head in module.names:
        return module.names[head] + parts[1:]
    return None


def read_uses(modules):
    for module in modules.values():
        for statement in re.findall(r"\buse\s+([^;]+);", module.text):
            for path, alias in parse_use(statement):
                full = absolute(module, path, modules)
                if full is None:
                    continue
                module.uses.append((full, alias))
                if alias:
                    module.names[alias] = full


def file_of(path, modules, depth=0):
    """The module file that defines what `path` names, following re-exports."""
    found = files_of(path, modules, depth)
    return found[-1] if found else None


def files_of(path, modules, depth=0):
    """The module files that naming `path` needs: each module file whose re-export it goes
    through (the name is that file's word: a change of it moves the name), then the file that
    defines what it names."""
    path = list(path)
    for n in range(len(path), -1, -1):
        if tuple(path[:n]) in modules:
            owner = modules[tuple(path[:n])]
            rest = path[n:]
            if rest and depth < 16 and rest[0] not in owner.items and rest[0] in owner.names:
                target = owner.names[rest[0]] + rest[1:]
                if target != path:
                    return [owner.path] + files_of(target, modules, depth + 1)
            return [owner.path]
    return []


def edges_of(module, modules):
    needs = {}

    def add(target, why):
        inside_it = target is not None and module.path[: len(target)] == target
        if target is not None and not inside_it:
            needs.setdefault(target, why)

    words = set(re.findall(r"(?<![\w.])[A-Za-z_]\w*\b", module.text))  # not `.method`
    for full, alias in module.uses:
        if full and full[-1] == "*":
            # A glob brings in every name of its module: each name used here needs its own file.
            source = full[:-1]
            owner = modules.get(tuple(source))
            if owner is None:
                add(file_of(source, modules), "use " + "::".join(full))
                continue
            for word in sorted(words & (owner.items | set(owner.names) | owner.children)):
                for target in files_of(source + [word], modules):
                    add(target, "use " + "::".join(full) + " for " + word)
        else:
            for target in files_of(full, modules):
                add(target, "use " + "::".join(full))
    for written in re.findall(r"(?<![\w:])((?:\w+::)+\w+)", module.text):
        parts = written.split("::")
        if parts[0] not in ("crate", "self", "super") and parts[0] not in module.children:
            continue
        full = absolute(module, parts, modules)
        if full is not None:
            for target in files_of(full, modules):
                add(target, written)
    return needs


def strongly_connected(nodes, edges):
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            circle = []
            while True:
                w = stack.pop()
                on.discard(w)
                circle.append(w)
                if w == v:
                    break
            if len(circle) > 1:
                circles.append(sorted(circle))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return circles


def name(path):
    return "::".join(path) or "crate"


def self_test():
    """Runs the finder over [`SELF_TEST`]: it must report exactly [`SELF_TEST_CIRCLES`]."""
    import contextlib
    import io
    import tempfile

    global SRC
    with tempfile.TemporaryDirectory() as root:
        for name, text in SELF_TEST.items():
            os.makedirs(os.path.dirname(os.path.join(root, "src", name)), exist_ok=True)
            with open(os.path.join(root, "src", name), "w") as f:
                f.write(text)
        SRC = os.path.join(root, "src")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = main([SRC])
    found = [line.split(" -> ")[0].strip() for line in out.getvalue().splitlines() if " -> " in line]
    if status != 1 or sorted(set(found)) != SELF_TEST_CIRCLES:
        print(out.getvalue() + "self-test: expected circles through " + ", ".join(SELF_TEST_CIRCLES))
        return 2
    print("self-test: the circles through " + ", ".join(SELF_TEST_CIRCLES) + " found, and nothing else")
    return 0


def main(roots):
    modules = module_files()
    read_uses(modules)
    any_circle = False
    for root in roots:
        rel = os.path.relpath(root, SRC)
        prefix = () if rel == "." else tuple(rel.split(os.sep))
        members = {p for p in modules if p[: len(prefix)] == prefix}
        reasons = {p: edges_of(modules[p], modules) for p in members}
        edges = {p: {t for t in reasons[p] if t in members} for p in members}
        circles = strongly_connected(members, edges)
        for circle in circles:
            any_circle = True
            print(f"{root}: a circle of {len(circle)} files:")
            inside = set(circle)
            for p in circle:
                for t in sorted(edges[p] & inside):
                    print(f"  {name(p)} -> {name(t)}   ({reasons[p][t]})")
        if not circles:
            print(f"{root}: no circle ({len(members)} files)")
    return 1 if any_circle else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    sys.exit(main(sys.argv[1:] or [SRC]))
