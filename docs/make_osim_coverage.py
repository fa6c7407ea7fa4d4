"""Measure jaxmb's OpenSim import against OpenSim 4.6 on every model of the collection.

For each ``.osim`` under ``tests/data/osim/`` (the small models, MoBL-ARMS) and
``tests/data/osim/zoo/`` (opensim-models commit 20a888b), at random poses of the independent,
unlocked coordinates (uniform within their ranges, rotations clipped to ±π) and random speeds:

- ``pose``: largest error of every body's pose in ground (m for the translation, and the rotation
  matrix entries, which bound the angle error), jaxmb ``body_transforms(...)[i] @ T`` against
  OpenSim's ``getTransformInGround``;
- ``L``: largest muscle-length error (m) over the muscles jaxmb imports (``-`` where none);
- ``M``, ``G``: mass matrix and gravity force of the constrained system, relative to their largest
  entry, both sides on the model's coordinates q: OpenSim's ``calcM`` and ``Jᵀ m g`` (over all
  mobilities u) projected by ``B = ∂u/∂q̇`` (couplers, locks and the Euler-angle kinematics of
  ball/free joints, ``q̇ = N u``);
- ``FD``: forward-dynamics accelerations with the muscles not applying force (gravity, springs,
  limits, bushings, contact where engaged; actuators at zero control), jaxmb's
  ``forward_dynamics(model, q, q̇)`` against OpenSim's ``getQDotDot`` after ``realizeAcceleration``,
  relative to the largest.

A model jaxmb refuses is listed with the first error it raises. Each model runs in its own
process (memory stays bounded on a shared machine). Run from the repository root::

    PYTHONPATH=$PWD python docs/make_osim_coverage.py [--poses 2] [--markdown] [model ...]

Besides the stored models, two documents the tests write (``tests/reference/osim_documents.py``):
a 4.x chain with coordinates prescribed as functions of time (compared at t = 0, where OpenSim's
``realizeAcceleration`` gives them their functions' accelerations), and a 3.0 chain of reversed
joints. ``--json FILE`` saves the rows; ``--render FILE ...`` prints the table of saved rows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from reference.opensim_zoo import (  # noqa: E402
    DATA,
    MODELS,
    jaxmb_errors,
    loop_independent,
    model_speed,
    opensim_reference,
)
from reference.osim_documents import prescribed_chain, reversed_chain  # noqa: E402

# documents no stored model covers, written by the tests' own writers (tests/reference)
WRITTEN = {
    "prescribed_chain (written, 4.x)": prescribed_chain,
    "reversed_joints (written, 3.0)": reversed_chain,
}

# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------


def one(key: str, n_poses: int, seed: int, lengths: bool = True) -> dict:
    if key in WRITTEN:
        path = Path(tempfile.mkdtemp()) / "written.osim"
        path.write_text(WRITTEN[key]())
        phantoms = ()
    else:
        fname, phantoms = MODELS[key]
        path = DATA / fname
    t0 = time.time()
    ref = opensim_reference(
        path, phantoms, n_poses, seed, speed=model_speed(key),
        independent=loop_independent(path, phantoms),
    )
    row = dict(
        model=key,
        nq=len(ref["coordinates"]),
        independent=len(ref["independent"]),
        locked=len(ref["locked"]),
        coupled=len(ref["coupled"]),
        muscles=ref["n_muscles"],
        forces=ref["n_forces"],
        constraints=ref["n_constraints"],
    )
    try:
        row.update(jaxmb_errors(path, phantoms, ref, lengths=lengths))
    except Exception as e:  # noqa: BLE001  (the table reports why a model does not import)
        row["failure"] = f"{type(e).__name__}: {str(e).replace(str(DATA) + '/', '')}"[:300]
    row["seconds"] = round(time.time() - t0, 1)
    return row


def fmt(x) -> str:
    return "-" if x is None else f"{x:.1e}"


def table(rows, markdown: bool) -> str:
    head = ["model", "coords (indep/locked/coupled)", "muscles (imported)", "forces",
            "constraints", "pose", "L (m)", "M rel", "G rel", "FD rel", "status"]
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        e = r.get("errors", {})
        ok = "failure" not in r
        status = r.get("failure", "imports")
        if ok and r.get("refused"):
            status = "raises by default; measured with unsupported='warn': " + r["refused"]
        elif ok and r.get("warnings"):
            status = "imports; " + " / ".join(r["warnings"])
        cells = [
            r["model"],
            f"{r['nq']} ({r['independent']}/{r['locked']}/{r['coupled']})",
            f"{r['muscles']} ({r.get('muscles_imported', '-')})",
            str(r["forces"]),
            str(r["constraints"]),
            fmt(e.get("pose")),
            fmt(e.get("L")),
            fmt(e.get("M")),
            fmt(e.get("G")),
            fmt(e.get("FD")),
            status.replace("|", "/"),
        ]
        lines.append(("| " + " | ".join(cells) + " |") if markdown else "  ".join(cells))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(MODELS) + list(WRITTEN))
    ap.add_argument("--poses", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    ap.add_argument("--skip-lengths", action="store_true", help="no muscle lengths (fast)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--render", type=Path, nargs="+", default=None,
        help="print the table of rows saved by --json (several runs, in order) and stop",
    )  # fmt: skip
    a = ap.parse_args(argv)
    if a.render:
        rows = [r for f in a.render for r in json.loads(f.read_text())]
        print(table(rows, a.markdown))
        return
    if a.one:
        print(json.dumps(one(a.models[0], a.poses, a.seed, not a.skip_lengths)))
        return
    rows = []
    for key in a.models:
        p = subprocess.run(
            [sys.executable, __file__, "--one", key, "--poses", str(a.poses), "--seed", str(a.seed)]
            + (["--skip-lengths"] if a.skip_lengths else []),
            capture_output=True,
            text=True,
        )
        try:
            row = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            row = dict(model=key, nq=0, independent=0, locked=0, coupled=0, muscles=0, forces=0,
                       constraints=0, failure="crashed: " + p.stderr.strip()[-300:])
        rows.append(row)
        print(table([row], a.markdown), flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
