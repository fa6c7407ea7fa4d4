"""Reversed joints of OpenSim 3.x documents (``<reverse>true</reverse>``) against OpenSim 4.6.

OpenSim 4.6 upgrades such a joint by swapping its parent and child frames, so Simbody builds the
mobilizer from the child to the parent: ``X_GB = X_GP · X_PF · X_FM(q)⁻¹ · X_BM⁻¹``. The model is
written by the test (``reference/osim_documents.py``): a pin, then a reversed CustomJoint of two
coordinates (a spline, polynomial and linear functions, a constant translation), a reversed slider,
pin and weld, with offsets and orientations in every frame. Body poses, M, G and forward dynamics
at random states are compared with OpenSim's (``reference/opensim_zoo.py``, issue 20's targets:
poses 1e-9, M and G 1e-8, accelerations 1e-7 relative; measured ~1e-15), for the 3.x file and
for the 4.x file OpenSim writes from it (flipped frames: a joint reached from its child's side).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from reference.opensim_zoo import jaxmb_errors, opensim_reference
from reference.osim_documents import coordinate3, coordinate4, model3, model4, reversed_chain

import jaxmb as mb
from jaxmb.io.osim import OsimImportError, read_osim

TARGET = dict(pose=1e-9, M=1e-8, G=1e-8, FD=1e-7)


@pytest.mark.slow  # 13 s, compiling four functions
@pytest.mark.parametrize("version", ["3.0", "4.x written by OpenSim"])
def test_reversed_joints_match_opensim(tmp_path, version):
    osim = pytest.importorskip("opensim")
    path = tmp_path / "reversed3.osim"
    path.write_text(reversed_chain())
    if version != "3.0":
        osim.Logger.setLevelString("error")
        model = osim.Model(str(path))
        model.initSystem()
        path = tmp_path / "reversed4.osim"
        model.printToXML(str(path))
    ref = opensim_reference(path, (), n_poses=3, seed=2)
    out = jaxmb_errors(path, (), ref, lengths=False)
    for what, tol in TARGET.items():
        assert out["errors"][what] <= tol, f"{version}: {what} error {out['errors'][what]:.1e}"


def _poses(path, q):
    imp = read_osim(path)
    A = np.asarray(eqx.filter_jit(mb.body_transforms)(imp.model, jnp.asarray(q)))
    return {b: X if i < 0 else A[i] @ X for b, (i, X) in imp.body_frames.items()}


def test_reversed_poses_match_opensim(tmp_path):
    """Poses alone (the default suite's check; the slow test above adds M, G and q̈), and read
    as forward joints the bodies would be elsewhere, so the check can tell."""
    pytest.importorskip("opensim")
    path = tmp_path / "reversed3.osim"
    path.write_text(reversed_chain())
    ref = opensim_reference(path, (), n_poses=2, seed=3)
    forward = tmp_path / "forward3.osim"
    forward.write_text(reversed_chain(False))
    for pose in ref["poses"]:
        got, wrong = _poses(path, pose["q"]), _poses(forward, pose["q"])
        for b, T in pose["T"].items():
            assert np.abs(got[b] - np.asarray(T)).max() <= 1e-9, b
        assert max(np.abs(wrong[b] - np.asarray(T)).max() for b, T in pose["T"].items()) > 1e-2


def test_reversed_ball_joint_and_4x_reverse_raise_naming_them(tmp_path):
    p = tmp_path / "ball.osim"
    p.write_text(
        model3(
            [
                dict(type="BallJoint", name="shoulder", parent="ground", child="b1",
                     coords=[coordinate3(n) for n in ("x", "y", "z")], reverse=True),
            ]
        )
    )  # fmt: skip
    with pytest.raises(OsimImportError, match=r"BallJoint 'shoulder' is reversed") as e:
        read_osim(p)
    assert str(p) in str(e.value)
    p = tmp_path / "reverse4.osim"
    p.write_text(
        model4(
            [
                dict(type="PinJoint", name="pin", parent="ground", child="b1",
                     coords=[coordinate4("a")], extra="<reverse>true</reverse>"),
            ]
        )
    )  # fmt: skip
    with pytest.raises(OsimImportError, match=r"PinJoint 'pin': <reverse> in a 4.x document"):
        read_osim(p)
