"""Minimal OpenSim documents written by the tests themselves (4.x and 3.0 spellings), for the
import checks of things no stored model uses: prescribed coordinates, reversed 3.0 joints.

Each writer returns the document's text; the bodies have off-axis centres of mass and full
inertia tensors and the joints offsets and orientations in both frames, so that a wrong frame,
order or sign shows in the poses and accelerations.
"""

from __future__ import annotations

import numpy as np


def _v(x) -> str:
    return " ".join(repr(float(v)) for v in x)


def _inertia(rng) -> np.ndarray:
    """A random positive-definite inertia about the centre of mass (kg·m²)."""
    A = rng.normal(size=(3, 3)) * 0.05
    return A @ A.T + np.eye(3) * 0.02


def coordinate4(name, rng_=(-2.0, 2.0), default=0.0, prescribed=None, locked=False) -> str:
    """A 4.x ``<Coordinate>``; ``prescribed``: the text of an OpenSim function element."""
    pf = (
        f"<prescribed_function>{prescribed}</prescribed_function>"
        if prescribed
        else ("<prescribed_function />")
    )
    return (
        f'<Coordinate name="{name}"><default_value>{default}</default_value>'
        f"<range>{_v(rng_)}</range><clamped>false</clamped>"
        f"<locked>{'true' if locked else 'false'}</locked>{pf}"
        f"<prescribed>{'true' if prescribed else 'false'}</prescribed></Coordinate>"
    )


def model4(joints: list[dict], seed: int = 0, name: str = "written") -> str:
    """A 4.x document: ``joints`` in order, each ``dict(type, name, parent, child, coords
    (list of <Coordinate> texts), extra (text inside the joint, e.g. a SpatialTransform))``;
    every child is a new body with random mass properties; joint frames are offset frames with
    random translations and orientations."""
    rng = np.random.default_rng(seed)
    bodies, jtexts = [], []
    for j in joints:
        inertia = _inertia(rng)
        bodies.append(
            f'<Body name="{j["child"]}"><mass>{float(rng.uniform(0.5, 3.0))!r}</mass>'
            f"<mass_center>{_v(rng.uniform(-0.2, 0.2, 3))}</mass_center>"
            f"<inertia>{_v([*np.diag(inertia), inertia[0, 1], inertia[0, 2], inertia[1, 2]])}"
            "</inertia></Body>"
        )
        parent = "/ground" if j["parent"] == "ground" else f"/bodyset/{j['parent']}"
        frames = (
            f'<PhysicalOffsetFrame name="{j["name"]}_p"><socket_parent>{parent}</socket_parent>'
            f"<translation>{_v(rng.uniform(-0.3, 0.3, 3))}</translation>"
            f"<orientation>{_v(rng.uniform(-1, 1, 3))}</orientation></PhysicalOffsetFrame>"
            f'<PhysicalOffsetFrame name="{j["name"]}_c">'
            f"<socket_parent>/bodyset/{j['child']}</socket_parent>"
            f"<translation>{_v(rng.uniform(-0.3, 0.3, 3))}</translation>"
            f"<orientation>{_v(rng.uniform(-1, 1, 3))}</orientation></PhysicalOffsetFrame>"
        )
        jtexts.append(
            f'<{j["type"]} name="{j["name"]}">'
            f"<socket_parent_frame>{j['name']}_p</socket_parent_frame>"
            f"<socket_child_frame>{j['name']}_c</socket_child_frame>"
            f"<coordinates>{''.join(j['coords'])}</coordinates>{j.get('extra', '')}"
            f"<frames>{frames}</frames></{j['type']}>"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8" ?>\n<OpenSimDocument Version="40600">'
        f'<Model name="{name}"><gravity>0 -9.80665 0</gravity>'
        f"<BodySet><objects>{''.join(bodies)}</objects></BodySet>"
        f"<JointSet><objects>{''.join(jtexts)}</objects></JointSet>"
        "</Model></OpenSimDocument>\n"
    )


def coordinate3(name, motion="rotational", rng_=(-2.0, 2.0), default=0.0) -> str:
    """A 3.0 ``<Coordinate>``."""
    return (
        f'<Coordinate name="{name}"><motion_type>{motion}</motion_type>'
        f"<default_value>{default}</default_value><range>{_v(rng_)}</range>"
        "<clamped>false</clamped><locked>false</locked><prescribed_function />"
        "<prescribed>false</prescribed></Coordinate>"
    )


def model3(joints: list[dict], seed: int = 0, name: str = "written3") -> str:
    """A 3.0 document: each joint ``dict(type, name, parent, child, coords, reverse, extra)``
    sits in its child body's ``<Joint>``, with random offsets and orientations in both frames
    (``location_in_parent``/``orientation_in_parent`` and ``location``/``orientation``)."""
    rng = np.random.default_rng(seed)
    bodies = [
        '<Body name="ground"><mass>0</mass><mass_center>0 0 0</mass_center>'
        "<inertia_xx>1</inertia_xx><inertia_yy>1</inertia_yy><inertia_zz>1</inertia_zz>"
        "<inertia_xy>0</inertia_xy><inertia_xz>0</inertia_xz><inertia_yz>0</inertia_yz>"
        "<Joint /></Body>"
    ]
    for j in joints:
        inertia = _inertia(rng)
        # 6 significant digits: OpenSim 4.6 rounds a 3.x file's inertia so on upgrade
        inertia = np.array([[float(f"{x:.6g}") for x in row] for row in inertia])
        els = "".join(
            f"<inertia_{k}>{float(inertia[a, b])!r}</inertia_{k}>"
            for k, (a, b) in {"xx": (0, 0), "yy": (1, 1), "zz": (2, 2), "xy": (0, 1),
                              "xz": (0, 2), "yz": (1, 2)}.items()
        )  # fmt: skip
        joint = (
            f'<{j["type"]} name="{j["name"]}"><parent_body>{j["parent"]}</parent_body>'
            f"<location_in_parent>{_v(rng.uniform(-0.3, 0.3, 3))}</location_in_parent>"
            f"<orientation_in_parent>{_v(rng.uniform(-1, 1, 3))}</orientation_in_parent>"
            f"<location>{_v(rng.uniform(-0.3, 0.3, 3))}</location>"
            f"<orientation>{_v(rng.uniform(-1, 1, 3))}</orientation>"
            f"<CoordinateSet><objects>{''.join(j['coords'])}</objects></CoordinateSet>"
            f"<reverse>{'true' if j.get('reverse') else 'false'}</reverse>"
            f"{j.get('extra', '')}</{j['type']}>"
        )
        bodies.append(
            f'<Body name="{j["child"]}"><mass>{float(rng.uniform(0.5, 3.0))!r}</mass>'
            f"<mass_center>{_v(rng.uniform(-0.2, 0.2, 3))}</mass_center>{els}"
            f"<Joint>{joint}</Joint></Body>"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8" ?>\n<OpenSimDocument Version="30000">'
        f'<Model name="{name}"><gravity>0 -9.80665 0</gravity>'
        f"<BodySet><objects>{''.join(bodies)}</objects></BodySet>"
        "</Model></OpenSimDocument>\n"
    )


def transform_axis(name: str, axis, coordinates: str = "", function: str | None = None) -> str:
    """A ``<TransformAxis>`` of a 3.0 CustomJoint; ``function``: the text of a function element
    (default: identity of its one coordinate, or the constant 0 without one)."""
    if function is None:
        function = (
            "<LinearFunction><coefficients>1 0</coefficients></LinearFunction>"
            if coordinates
            else "<Constant><value>0</value></Constant>"
        )
    return (
        f'<TransformAxis name="{name}"><coordinates>{coordinates}</coordinates>'
        f"<axis>{_v(axis)}</axis><function>{function}</function></TransformAxis>"
    )


TIME_SPLINE = "<SimmSpline><x>0 0.4 0.9 1.5 2</x><y>0.1 0.6 -0.3 0.4 0.2</y></SimmSpline>"
CUBIC = "<PolynomialFunction><coefficients>0.3 -0.2 0.5 -0.4</coefficients></PolynomialFunction>"


def prescribed_chain(a=TIME_SPLINE, c=CUBIC, **kw) -> str:
    """Pin a prescribed by ``a`` (a SimmSpline of time), slider b free, pin c prescribed by ``c``
    (a cubic), pin d free; ``kw`` go to a's coordinate (e.g. ``locked=True``)."""
    return model4(
        [
            dict(type="PinJoint", name="j1", parent="ground", child="b1",
                 coords=[coordinate4("a", prescribed=a, **kw)]),
            dict(type="SliderJoint", name="j2", parent="b1", child="b2",
                 coords=[coordinate4("b")]),
            dict(type="PinJoint", name="j3", parent="b2", child="b3",
                 coords=[coordinate4("c", prescribed=c)]),
            dict(type="PinJoint", name="j4", parent="b3", child="b4",
                 coords=[coordinate4("d")]),
        ],
        seed=1,
    )  # fmt: skip


SPLINE = "<SimmSpline><x>-2 -1 0 1 2</x><y>-0.3 0.2 0.1 -0.4 0.5</y></SimmSpline>"
CUSTOM = (
    "<SpatialTransform>"
    + transform_axis("rotation1", (0.3, 0.9, 0.1), "r", SPLINE)
    + transform_axis("rotation2", (1, 0, 0), "s")
    + transform_axis("rotation3", (0, 0, 1))
    + transform_axis(
        "translation1", (1, 0, 0), "s",
        "<LinearFunction><coefficients>0.2 0.05</coefficients></LinearFunction>",
    )
    + transform_axis(
        "translation2", (0, 1, 0), "r",
        "<PolynomialFunction><coefficients>0.1 -0.05 0.02</coefficients></PolynomialFunction>",
    )
    + transform_axis("translation3", (0, 0, 1), "", "<Constant><value>0.07</value></Constant>")
    + "</SpatialTransform>"
)  # fmt: skip


def reversed_chain(reverse=True) -> str:
    """A 3.0 chain: a pin, then (reversed when ``reverse``) a CustomJoint of two coordinates
    (spline, polynomial, linear and constant axes), a slider, a pin and a weld."""
    return model3(
        [
            dict(type="PinJoint", name="j1", parent="ground", child="b1",
                 coords=[coordinate3("a")]),
            dict(type="CustomJoint", name="j2", parent="b1", child="b2",
                 coords=[coordinate3("r"), coordinate3("s")], reverse=reverse, extra=CUSTOM),
            dict(type="SliderJoint", name="j3", parent="b2", child="b3",
                 coords=[coordinate3("t", "translational", (-0.3, 0.3))], reverse=reverse),
            dict(type="PinJoint", name="j4", parent="b3", child="b4",
                 coords=[coordinate3("d")], reverse=reverse),
            dict(type="WeldJoint", name="j5", parent="b4", child="b5", coords=[],
                 reverse=reverse),
        ],
        seed=5,
    )  # fmt: skip
