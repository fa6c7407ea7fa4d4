"""The package's layout keeps the promises of docs/architecture.md.

- every module under 700 lines;
- a module imports only its own layer and layers to its left in the data flow (LAYERS);
- imports at module top, except heavy optional dependencies imported lazily on purpose (LAZY);
- no private name crosses a module boundary, in the package or in the tests.

Run as a script to print the figures (``python tests/test_layout.py [PACKAGE_DIR]``), e.g. against
an older checkout's ``jaxmb/`` to compare.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "jaxmb"
TESTS = Path(__file__).resolve().parent

MAX_LINES = 700

# The data flow, left to right: a module may import its own layer and any layer to its left.
LAYERS = (
    "math",
    "joint_maps",
    "model",
    "kinematics",
    "forces",
    "dynamics",
    "muscles",
    "simulation",
    "analyses",
    "io",
    "models",
    "plots",
    "cli",
)

# Imported inside functions on purpose: optional, heavy, or only needed by one command.
# interpax (premodel fits) and jax.scipy (closed-loop Newton, large Cholesky solves: its import
# pulls jax.scipy.special) cost 35 and 70 ms of every command's start, which most never use.
LAZY = (
    "matplotlib", "PIL", "opensim", "ezc3d", "pinocchio", "mujoco", "mujoco_mjx", "tqdm",
    "interpax", "jax.scipy",
)  # fmt: skip


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name → file, for every module of the package under ``root``."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in LAYERS:
        return None
    return LAYERS.index(parts[1])


class _Imports(ast.NodeVisitor):
    """Imports of one module: (absolute target, names, inside a function?)."""

    def __init__(self, module: str, is_package: bool, known: set[str]):
        self.module, self.is_package, self.known = module, is_package, known
        self.depth = 0
        self.found: list[tuple[str, list[str], bool, int]] = []
        self.module_aliases: dict[str, str] = {}
        self.private_attributes: list[tuple[str, int]] = []

    def _scoped(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scoped

    def visit_Import(self, node):
        for a in node.names:
            self.found.append((a.name, [], self.depth > 0, node.lineno))
            if a.name.startswith("jaxmb"):
                self.module_aliases[a.asname or a.name.split(".")[0]] = a.name

    def visit_ImportFrom(self, node):
        if node.level:
            target = _resolve(self.module, self.is_package, node.level, node.module)
        else:
            target = node.module or ""
        names = [a.name for a in node.names]
        self.found.append((target, names, self.depth > 0, node.lineno))
        for a in node.names:
            if f"{target}.{a.name}" in self.known:
                self.module_aliases[a.asname or a.name] = f"{target}.{a.name}"

    def visit_Attribute(self, node):
        # mod._name, and mb.sub._name through attributes of the package
        chain, root = [node.attr], node.value
        while isinstance(root, ast.Attribute):
            chain.append(root.attr)
            root = root.value
        if (
            isinstance(root, ast.Name)
            and root.id in self.module_aliases
            and _is_private(node.attr)
        ):
            dotted = ".".join([root.id, *reversed(chain)])
            self.private_attributes.append((dotted, node.lineno))
        self.generic_visit(node)


def _scan(path: Path, module: str, known: set[str]) -> _Imports:
    v = _Imports(module, path.name == "__init__.py", known)
    v.visit(ast.parse(path.read_text(), str(path)))
    return v


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def survey(root: Path = PACKAGE, tests: Path | None = TESTS) -> dict:
    """Every figure the layout is judged by, with the offending places."""
    mods = modules(root)
    known = set(mods)
    lines = {m: len(p.read_text().splitlines()) for m, p in mods.items()}
    function_imports, private_imports, upward = [], [], []
    for m, p in mods.items():
        v = _scan(p, m, known)
        for target, names, inside, lineno in v.found:
            where = f"{p.relative_to(root.parent)}:{lineno}"
            if inside and not target.startswith(LAZY):
                function_imports.append(f"{where} {target}")
            if target.startswith("jaxmb") and target != m:
                private_imports += [f"{where} {target}.{n}" for n in names if _is_private(n)]
                lm, lt = _layer(m), _layer(target)
                if lm is not None and lt is not None and lt > lm:
                    upward.append(f"{where} {m} -> {target}")
        private_imports += [
            f"{p.relative_to(root.parent)}:{n} {a}" for a, n in v.private_attributes
        ]
    test_private = []
    if tests is not None:
        for p in sorted(tests.rglob("*.py")):
            v = _scan(p, "tests." + p.stem, known)
            for target, names, _, lineno in v.found:
                if target.startswith("jaxmb"):
                    test_private += [
                        f"{p.relative_to(tests.parent)}:{lineno} {target}.{n}"
                        for n in names
                        if _is_private(n)
                    ]
            test_private += [
                f"{p.relative_to(tests.parent)}:{n} {a}" for a, n in v.private_attributes
            ]
    largest = max(lines, key=lines.get)
    return {
        "modules": len(mods),
        "largest": (largest, lines[largest]),
        "over_limit": sorted(f"{m} ({n})" for m, n in lines.items() if n >= MAX_LINES),
        "function_imports": function_imports,
        "private_imports": private_imports,
        "upward_imports": upward,
        "test_private": test_private,
    }


SURVEY = survey() if __name__ != "__main__" else None


def test_every_module_under_the_line_limit():
    assert not SURVEY["over_limit"], SURVEY["over_limit"]


def test_layers_import_only_to_their_left():
    assert not SURVEY["upward_imports"], "\n".join(SURVEY["upward_imports"])


def test_imports_at_module_top():
    assert not SURVEY["function_imports"], "\n".join(SURVEY["function_imports"])


def test_import_leaves_the_garbage_collector_as_it_found_it():
    """``import jaxmb`` pauses Python's cyclic garbage collector while it runs (see its
    ``__init__``) and leaves it enabled or disabled as it was; it freezes nothing, and objects
    frozen before it stay frozen (less those freed meanwhile)."""
    for before in ("gc.enable()", "gc.disable()", "gc.freeze()"):
        code = (f"import gc; {before}; print(int(gc.isenabled()), gc.get_freeze_count()); "
                "import jaxmb; print(int(gc.isenabled()), gc.get_freeze_count())")  # fmt: skip
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=PACKAGE.parent, timeout=120, check=True)  # fmt: skip
        (on0, frozen0), (on1, frozen1) = (map(int, ln.split()) for ln in run.stdout.splitlines())
        assert on0 == on1 == (before != "gc.disable()")
        assert frozen0 - 100 <= frozen1 <= frozen0 and (frozen1 > 0) == (before == "gc.freeze()")


def test_no_private_name_crosses_a_module():
    assert not SURVEY["private_imports"], "\n".join(SURVEY["private_imports"])


def test_tests_use_the_public_api():
    assert not SURVEY["test_private"], "\n".join(SURVEY["test_private"])


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else PACKAGE
    tests = root.parent / "tests"
    s = survey(root, tests if tests.is_dir() else None)
    print(f"modules: {s['modules']}")
    print(f"largest module: {s['largest'][0]} ({s['largest'][1]} lines)")
    print(f"modules of {MAX_LINES} lines or more: {len(s['over_limit'])} {s['over_limit']}")
    for key in ("function_imports", "private_imports", "upward_imports", "test_private"):
        print(f"{key}: {len(s[key])}")
        for x in s[key]:
            print("   ", x)
