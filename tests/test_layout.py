"""The house rules of docs/design.md, checked on the source: floors, no import circles,
no underscore name across files, private Keras/TF access in one module, `# lazy:` on
every in-function import, and no dates or timings in comments.

Static (ast and tokenize only): nothing is imported, so this runs in about a second.
"""

import ast
import collections
import io
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "keras_bert_zoo"
TOP_LEVEL = (PACKAGE, "tools", "benchmarks", "references")

# The floors, lowest first; a module imports only from its own floor or below.
FLOORS = [
    {"utils", "tasks"},
    {"weights"},
    {"presets"},
    {"layers", "text", "training"},
    {"data", "metrics"},
    {"models"},
    {"pretraining", "finetuning", "serving"},
    {"__init__", "conftest"},
]
OUTSIDE_FLOORS = {"references": -1, "tools": len(FLOORS), "benchmarks": len(FLOORS)}
PRIVATE_ACCESS_HOME = f"{PACKAGE}/utils/keras_internals.py"
# Public API of namedtuples despite the underscore.
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def _sources():
    files = []
    for top in TOP_LEVEL:
        files += sorted((ROOT / top).rglob("*.py"))
    return files


SOURCES = _sources()


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in SOURCES}


def _resolve(name):
    """The module (ours) that `name` (a module or a name in it) lives in, or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _trees():
    return {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in MODULES.items()}


TREES = _trees()


def _imports(tree):
    """Yields `(node, in_function, [targets])`: each import and the modules of ours it names."""
    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                yield child, in_function, [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                # `from pkg import sub` names the submodule when there is one.
                yield child, in_function, [f"{child.module}.{a.name}" if f"{child.module}.{a.name}" in MODULES
                                           else child.module for a in child.names]
            yield from visit(child, inside)

    yield from visit(tree, False)


def _edges(include_functions=True):
    edges = collections.defaultdict(set)
    for name, tree in TREES.items():
        for _, in_function, targets in _imports(tree):
            if in_function and not include_functions:
                continue
            for target in targets:
                module = _resolve(target)
                if module and module != name and not name.startswith(module + "."):
                    edges[name].add(module)
    return edges


def _room(module):
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return parts[0]
    return parts[1] if len(parts) > 1 else "__init__"


def _floor(module):
    room = _room(module)
    if room in OUTSIDE_FLOORS:
        return OUTSIDE_FLOORS[room]
    for level, rooms in enumerate(FLOORS):
        if room in rooms:
            return level
    raise AssertionError(f"{module}: room {room!r} is on no floor; add it to FLOORS and docs/design.md.")


def _cycles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def connect(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(MODULES):
        if node not in index:
            connect(node)
    return found


def test_every_room_is_on_a_floor():
    for module in MODULES:
        _floor(module)


def test_no_import_circles():
    # Package `__init__` files re-export their folder; an import of `pkg.sub` runs `pkg/__init__`
    # first, so edges into a package's own `__init__` from inside it are not circles.
    cycles = _cycles(_edges())
    assert not cycles, "Import circles (function-level imports included):\n" + "\n".join(map(str, cycles))


def test_imports_respect_the_floors():
    upward = []
    for source, targets in _edges().items():
        for target in targets:
            if _room(target) == "__init__" and _room(source) in OUTSIDE_FLOORS:
                continue  # tools and benchmarks use the public API
            if _floor(target) > _floor(source):
                upward.append(f"{source} -> {target}")
    assert not upward, "Imports from a higher floor (docs/design.md):\n" + "\n".join(sorted(upward))


def test_tools_and_benchmarks_do_not_import_tests():
    bad = [f"{name}: {ast.unparse(node)}" for name, tree in TREES.items() for node, _, targets in _imports(tree)
           if any(t == "tests" or t.startswith("tests.") for t in targets)]
    assert not bad, "\n".join(bad)


def _imported_modules(tree):
    """Local names bound to modules of ours in this file."""
    names = {}
    for node, _, _ in _imports(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in MODULES:
                    names[alias.asname or alias.name] = full
        else:
            for alias in node.names:
                if alias.name in MODULES and alias.asname:
                    names[alias.asname] = alias.name
    return names


def test_no_underscore_name_crosses_a_file():
    bad = []
    for name, tree in TREES.items():
        for node, _, _ in _imports(tree):
            if isinstance(node, ast.ImportFrom) and _resolve(node.module):
                bad += [f"{name}: from {node.module} import {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
        modules = _imported_modules(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                bad.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, "Private names used across files:\n" + "\n".join(bad)


def _is_private_access(node):
    if not isinstance(node, ast.Attribute):
        return False
    if node.attr == "__internal__":
        return True
    if not node.attr.startswith("_") or node.attr.startswith("__") or node.attr in NAMEDTUPLE_API:
        return False
    value = node.value
    if isinstance(value, ast.Name) and value.id in ("self", "cls"):
        return False
    return not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super")


def test_private_keras_and_tf_access_only_in_keras_internals():
    bad = []
    for name, tree in TREES.items():
        if not name.startswith(PACKAGE) or str(MODULES[name].relative_to(ROOT)) == PRIVATE_ACCESS_HOME:
            continue
        for node in ast.walk(tree):
            if _is_private_access(node):
                bad.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                named = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                bad += [f"{name}:{node.lineno}: import {n}" for n in named if n.startswith("keras.src")]
    assert not bad, f"Private attribute access outside {PRIVATE_ACCESS_HOME}:\n" + "\n".join(bad)


def _comments(path):
    with open(path, "rb") as f:
        for token in tokenize.tokenize(f.readline):
            if token.type == tokenize.COMMENT:
                yield token.start[0], token.string


def test_in_function_imports_say_why():
    bad = []
    for name, tree in TREES.items():
        if not name.startswith(PACKAGE):
            continue
        comments = dict(_comments(MODULES[name]))
        for node, in_function, _ in _imports(tree):
            lines = range(node.lineno - 1, node.end_lineno + 1)
            if in_function and not any("lazy:" in comments.get(line, "") for line in lines):
                bad.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, ("In-function imports without a `# lazy: <reason>` comment (only to save start-up "
                     "time; otherwise import at the top):\n" + "\n".join(bad))


# A date, a host kind or a measured time in a comment: numbers belong in docs/.
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
DATED = re.compile(
    rf"\b20\d\d-\d\d-\d\d\b|\b({MONTHS}) \d|\b\d{{1,2}} ({MONTHS})\b|\bZen ?\d\b|\bAVX2-only\b"
    r"|\d(\.\d+)? (s|ms|min)\b(?!-)|\d(ms|min)\b|\bGFLOP/s\b")


def _docstrings(tree):
    """Yields `(line, text)` of each docstring line of a module, its classes and functions."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                for offset, text in enumerate(first.value.value.split("\n")):
                    yield first.lineno + offset, text


def test_comments_give_reasons_not_dates_or_timings():
    bad = []
    for name, path in MODULES.items():
        lines = list(_comments(path))
        if name.startswith(PACKAGE):
            lines += list(_docstrings(TREES[name]))
        for line, text in lines:
            if DATED.search(text):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {text.strip()}")
    assert not bad, ("Dates, hosts or timings in comments or package docstrings (they belong in docs/):\n"
                     + "\n".join(bad))


# Test folders that mirror no package folder: the tools' tests, the benchmarks', the reliability scenarios.
TESTS_BESIDE_THE_PACKAGE = {"tools", "benchmarks", "reliability"}


def test_test_folders_mirror_the_package():
    """tests/<folder>/ for each package folder of keras_bert_zoo/, and no other test folder but the few above."""
    package = {p.name for p in (ROOT / PACKAGE).iterdir() if (p / "__init__.py").is_file()}
    tests = {p.name for p in (ROOT / "tests").iterdir()
             if p.is_dir() and not p.name.startswith((".", "__"))}
    stray = sorted(tests - package - TESTS_BESIDE_THE_PACKAGE)
    missing = sorted(package - tests)
    assert not stray, f"Test folders with no package folder of that name (move their files where they belong): {stray}"
    assert not missing, f"Package folders without a tests/<folder>/: {missing}"


MAX_LINES = 350  # docs/design.md, principle 1: split a file by what it holds before this


def test_package_files_stay_small():
    big = [f"{path.relative_to(ROOT)} ({n} lines)" for name, path in MODULES.items() if name.startswith(PACKAGE)
           for n in [len(path.read_text(encoding="utf-8").splitlines())] if n > MAX_LINES]
    assert not big, "Package files over ~350 lines (split them by what they hold):\n" + "\n".join(big)


@pytest.mark.parametrize("package", ["text", "layers", "models"])
def test_subpackage_init_exports_its_public_classes(package):
    """Every public class defined in the folder is exported by the folder's `__init__`."""
    init = TREES[f"{PACKAGE}.{package}"]
    exported = set()
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            exported = {ast.literal_eval(e) for e in node.value.elts}
    missing = []
    for name, tree in TREES.items():
        if name.startswith(f"{PACKAGE}.{package}."):
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and node.name not in exported:
                    if any(isinstance(d, ast.Call) and "register_keras_serializable" in ast.unparse(d)
                           for d in node.decorator_list):
                        missing.append(f"{name}.{node.name}")
    assert not missing, f"Registered classes not exported by {package}/__init__.py: {missing}"
