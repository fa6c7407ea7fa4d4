"""The README tried as a new user would (issue #9 item 7).

Commands are extracted from README.md itself, so the test follows the README when it changes:
the two quick-start blocks (marked ``<!-- main-command -->`` and ``<!-- test-command -->``), every
other ``jaxmb …`` / ``python …`` command in a code block or an inline code span, every repository
path and module named in code, and the Python snippet of "Using it". The package is installed in CI
(``pip install ".[test]"`` is the test command itself), so ``jaxmb`` runs in-process through
:func:`jaxmb.cli.main`, the function the console script (:func:`jaxmb.cli.console`) runs.
"""

from __future__ import annotations

import ast
import importlib
import re
import shlex
import tomllib

import pytest
from helpers import ROOT

import jaxmb
from jaxmb.cli import main

README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


def marked_block(marker: str) -> str:
    """The fenced bash block that follows ``<!-- marker -->``."""
    tail = README.split(f"<!-- {marker} -->", 1)
    assert len(tail) == 2, f"README.md has no <!-- {marker} --> marker"
    m = FENCE.search(tail[1])
    assert m and m.group(1) == "bash", f"no ```bash block after <!-- {marker} -->"
    return m.group(2).strip()


def code_spans() -> list[str]:
    """Inline code spans outside fenced blocks, plus every line of every fenced block."""
    spans = re.findall(r"`([^`\n]+)`", FENCE.sub("", README))
    for _, body in FENCE.findall(README):
        spans += [ln.strip() for ln in body.splitlines() if ln.strip()]
    return spans


def commands() -> list[str]:
    """Every shell command shown: ``a && b`` split into its parts."""
    out = []
    for span in code_spans():
        for part in span.split("&&"):
            part = part.strip()
            if part.startswith(("jaxmb ", "python ", "pip ")):
                out.append(part)
    return out


def test_readme_shows_both_quick_start_commands():
    main_cmd, test_cmd = marked_block("main-command"), marked_block("test-command")
    assert "jaxmb simulate" in main_cmd and "pytest" in test_cmd
    shown = commands()
    for part in (main_cmd + " && " + test_cmd).split("&&"):
        assert part.strip() in shown


def test_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    m = re.search(r"^cmd='(.*)'$", ci, re.M)
    assert m, ".ci/run defines no cmd='…'"
    assert marked_block("test-command") == m.group(1)
    assert m.group(1) in ci.split(m.group(0), 1)[1]  # and runs it verbatim


def test_install_commands_name_existing_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project.get("optional-dependencies", {}))
    assert project["scripts"]["jaxmb"] == "jaxmb.cli:console"
    for cmd in commands():
        if cmd.startswith("pip install"):
            target = shlex.split(cmd)[2]
            assert target.split("[")[0] == ".", cmd
            for extra in re.findall(r"\[([^\]]*)\]", target):
                assert set(extra.split(",")) <= extras, f"{cmd}: extras {extras}"


def test_main_command_writes_summary_png_and_csv(tmp_path, capsys, monkeypatch):
    """The `jaxmb simulate …` part of the main command, run as written from a fresh folder."""
    jaxmb_part = [p.strip() for p in marked_block("main-command").split("&&")][-1]
    argv = shlex.split(jaxmb_part)
    assert argv[0] == "jaxmb"
    monkeypatch.chdir(tmp_path)  # its relative --out lands in tmp_path, as in a user's clone
    assert main(argv[1:]) == 0
    summary = capsys.readouterr().out
    assert "max angle error" in summary and "steps" in summary
    out = tmp_path / (argv[argv.index("--out") + 1] if "--out" in argv else "jaxmb_out")
    pngs, csvs = list(out.glob("*.png")), list(out.glob("*.csv"))
    assert len(pngs) == 1 and pngs[0].stat().st_size > 10_000
    assert len(csvs) == 1 and len(csvs[0].read_text().splitlines()) > 2
    assert "jaxmb_out/" in README  # the folder the README tells the user to look in


def test_every_jaxmb_subcommand_has_help(capsys):
    """Those the README shows exist, and every one `jaxmb --help` lists teaches with --help."""
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    usage = capsys.readouterr().out
    listed = set(re.findall(r"^ {4}([a-z][\w-]*)(?: |$)", usage, re.M))
    assert {"models", "simulate"} <= listed, usage
    shown = {shlex.split(c)[1] for c in commands() if c.startswith("jaxmb ")}
    assert "simulate" in shown and shown <= listed, f"README shows {shown}, jaxmb has {listed}"
    for sub in sorted(listed):
        with pytest.raises(SystemExit) as e:
            main([sub, "--help"])
        assert e.value.code == 0, sub
        assert "usage: jaxmb " + sub in capsys.readouterr().out


def test_python_commands_name_existing_scripts_and_markers():
    pytest_ini = (ROOT / "pyproject.toml").read_text()
    for cmd in commands():
        argv = shlex.split(cmd)
        if argv[0] != "python":
            continue
        if argv[1:3] == ["-m", "pytest"]:
            for i, a in enumerate(argv):
                if a == "-m" and argv[i + 1] != "pytest":
                    assert f'"{argv[i + 1]}:' in pytest_ini or f"{argv[i + 1]}:" in pytest_ini
            continue
        assert (ROOT / argv[1]).is_file(), f"README command {cmd!r}: no {argv[1]}"


def test_every_path_and_module_in_the_readme_exists():
    made_by_commands = {"jaxmb_out/"}
    checked = 0
    for span in code_spans():
        if " " in span or "<" in span or span in made_by_commands:
            continue
        if re.fullmatch(r"jaxmb(\.\w+)+", span):
            importlib.import_module(span)
            checked += 1
        elif re.fullmatch(r"test_\w+\.py", span):
            assert any((ROOT / "tests").rglob(span)), span  # tests/ mirrors the package
            checked += 1
        elif re.fullmatch(r"[\w.-]+(/[\w.-]*)+", span):
            assert (ROOT / span).exists(), f"README names {span}, not in the repository"
            checked += 1
    assert checked >= 20
    for target in re.findall(r"\]\(([^)\s]+)\)", README):  # links and images, e.g. the gallery
        if not re.match(r"[a-z]+:|#", target):
            assert (ROOT / target.split("#")[0]).exists(), f"README links {target}, not found"


def test_using_it_snippet_names_the_public_api():
    """Every ``mb.…`` attribute of the "Using it" snippet exists (the snippet runs in the slow
    test below)."""
    snippet = next(body for lang, body in FENCE.findall(README) if lang == "python")
    tree = ast.parse(snippet)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "mb":
                used.add(node.attr)
    assert {"models", "mass_matrix", "simulate"} <= used
    for name in used:
        assert hasattr(jaxmb, name), f"README uses mb.{name}, not in jaxmb"
    for model in re.findall(r"\b(\w+)\(\)", snippet.split("# also", 1)[1].splitlines()[0]):
        assert callable(getattr(jaxmb.models, model)), model


@pytest.mark.slow
def test_using_it_snippet_runs():
    snippet = next(body for lang, body in FENCE.findall(README) if lang == "python")
    env: dict = {}
    exec(compile(snippet, "README.md", "exec"), env)  # noqa: S102 — the README's own code
    assert env["M"].shape == (env["model"].nq, env["model"].nq)
    assert env["traj"] is not None


def test_gallery_images_are_small():
    """docs/make_gallery.py keeps every gallery PNG ≤ 150 KB (the README loads them all)."""
    pngs = list((ROOT / "docs" / "gallery").glob("*.png"))
    assert len(pngs) >= 5
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", p.name
        assert p.stat().st_size <= 150_000, f"{p.name}: {p.stat().st_size} bytes"
