"""XML of OpenSim setup files with line numbers, so every error names file, line and element."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
import xml.parsers.expat
from pathlib import Path

__all__ = ["SetupError", "SetupXml"]


class SetupError(ValueError):
    """A setup, ExternalLoads or actuator file that cannot be used; the message names the file,
    the line and the element."""


class SetupXml:
    """A parsed XML file: ``root`` (ElementTree), ``path`` and the source line of each element."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise SetupError(f"{self.path}: file not found")
        self._lines: dict[int, int] = {}
        stack: list[ET.Element] = []
        texts: list[list[str]] = []
        root: list[ET.Element] = []
        p = xml.parsers.expat.ParserCreate()

        def start(tag, attrs):
            el = ET.Element(tag, attrs)
            self._lines[id(el)] = p.CurrentLineNumber
            if stack:
                stack[-1].append(el)
            else:
                root.append(el)
            stack.append(el)
            texts.append([])

        def end(tag):
            el = stack.pop()
            el.text = "".join(texts.pop())

        def data(s):
            if texts:
                texts[-1].append(s)

        p.StartElementHandler, p.EndElementHandler, p.CharacterDataHandler = start, end, data
        try:
            p.Parse(self.path.read_bytes(), True)
        except xml.parsers.expat.ExpatError as e:
            raise SetupError(f"{self.path}:{e.lineno}: not well-formed XML ({e})") from None
        except (LookupError, UnicodeError) as e:  # the XML declaration names a bad encoding
            raise SetupError(f"{self.path}:1: not well-formed XML ({e})") from None
        self.root = root[0]

    def where(self, el: ET.Element) -> str:
        """``file:line: <tag name="...">`` for messages."""
        name = el.get("name")
        tag = f"<{el.tag}{f' name={name!r}' if name else ''}>"
        return f"{self.path}:{self._lines.get(id(el), '?')}: {tag}"

    def error(self, el: ET.Element, msg: str) -> SetupError:
        return SetupError(f"{self.where(el)}: {msg}")

    def tool(self, kinds: tuple[str, ...]) -> ET.Element:
        """The first child of the document element whose tag is one of ``kinds``."""
        el = self.root
        if el.tag in kinds:
            return el
        for c in el:
            if c.tag in kinds:
                return c
        raise self.error(el, f"no {' or '.join(kinds)} element in this file")

    def text(self, el: ET.Element, tag: str, default: str | None = None) -> str | None:
        c = el.find(tag)
        if c is None or c.text is None or not c.text.strip():
            return default
        return c.text.strip()

    def number(self, el: ET.Element, tag: str, default: float | None = None) -> float | None:
        s = self.text(el, tag)
        if s is None:
            return default
        return self._float(el.find(tag), s)

    def _float(self, el, s: str) -> float:
        t = s.strip().lower()
        if t in ("inf", "+inf", "infinity", "+infinity"):
            return math.inf
        if t in ("-inf", "-infinity"):
            return -math.inf
        try:
            return float(t)
        except ValueError:
            raise self.error(el, f"expected a number, got {s!r}") from None

    def numbers(self, el: ET.Element, tag: str, n: int | None = None, default=None):
        s = self.text(el, tag)
        if s is None:
            return default
        vals = [self._float(el.find(tag), v) for v in s.split()]
        if n is not None and len(vals) != n:
            raise self.error(el.find(tag), f"expected {n} numbers, got {len(vals)}")
        return tuple(vals)

    def flag(self, el: ET.Element, tag: str, default: bool = False) -> bool:
        s = self.text(el, tag)
        if s is None:
            return default
        if s.lower() in ("true", "1"):
            return True
        if s.lower() in ("false", "0"):
            return False
        raise self.error(el.find(tag), f"expected true or false, got {s!r}")

    def words(self, el: ET.Element, tag: str) -> tuple[str, ...]:
        s = self.text(el, tag)
        return () if s is None else tuple(s.split())

    def file(self, el: ET.Element, tag: str) -> Path | None:
        """A file or directory named by ``tag``, resolved as OpenSim does: relative to the
        directory of this file (the tools change into it); None when empty or ``Unassigned``."""
        s = self.text(el, tag)
        if s is None or s == "Unassigned":
            return None
        p = Path(s)
        return p if p.is_absolute() else (self.path.parent / p)
