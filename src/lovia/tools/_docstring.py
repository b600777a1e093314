"""Split a docstring into a description and per-parameter descriptions.

Understands the three common styles: Google (``Args:``), NumPy (``Parameters`` with a
dashed underline) and Sphinx (``:param name: text``).
"""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

# patterns, not compiled regexes: `re` compiles (and caches) them when the first tool is
# defined, not at `import lovia`
_GOOGLE_SECTIONS = (
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns?|Yields?|Raises|Examples?|"
    r"Notes?|Attributes|See Also|Warnings?)\s*:\s*$"
)
_GOOGLE_PARAM_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Keyword Args"}
_NUMPY_HEADER = r"(?m)^(\w[\w ]*)\n-{3,}\s*$"
_SPHINX_PARAM = r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$"
_GOOGLE_PARAM = r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$"
_NUMPY_PARAM = r"^\*{0,2}(\w+)\s*(?::.*)?$"


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return ``(description, {param: description})`` for a docstring."""
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    if ":param" in text:
        return _sphinx(text)
    if re.search(_NUMPY_HEADER, text):
        return _numpy(text)
    return _google(text)


def _join(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines if line.strip())


def _description(lines: list[str]) -> str:
    return "\n".join(lines).strip()


def _google(text: str) -> tuple[str, dict[str, str]]:
    desc: list[str] = []
    params: dict[str, list[str]] = {}
    section: str | None = None
    current: str | None = None
    for line in text.splitlines():
        header = re.match(_GOOGLE_SECTIONS, line.strip()) if not line.startswith(" ") else None
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            desc.append(line)
        elif section in _GOOGLE_PARAM_SECTIONS:
            stripped = line.strip()
            indent = len(line) - len(line.lstrip())
            match = re.match(_GOOGLE_PARAM, stripped)
            if match and (current is None or indent <= _indent_of(text, current)):
                name = match.group(1)
                params[name] = [match.group(2)]
                current = name
            elif current is not None and stripped:
                params[current].append(stripped)
    return _description(desc), {k: _join(v) for k, v in params.items()}


def _indent_of(text: str, name: str) -> int:
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith((name, "*" + name)):
            return len(line) - len(stripped)
    return 0


def _numpy(text: str) -> tuple[str, dict[str, str]]:
    lines = text.splitlines()
    desc: list[str] = []
    params: dict[str, list[str]] = {}
    section: str | None = None
    current: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and re.match(r"^-{3,}\s*$", lines[i + 1]) and line.strip():
            section, current = line.strip(), None
            i += 2
            continue
        if section is None:
            desc.append(line)
        elif section in ("Parameters", "Other Parameters"):
            if line and not line.startswith(" "):
                match = re.match(_NUMPY_PARAM, line.strip())
                current = match.group(1) if match else None
                if current:
                    params[current] = []
            elif current is not None:
                params[current].append(line)
        i += 1
    return _description(desc), {k: _join(v) for k, v in params.items()}


def _sphinx(text: str) -> tuple[str, dict[str, str]]:
    desc: list[str] = []
    params: dict[str, list[str]] = {}
    current: str | None = None
    in_fields = False
    for line in text.splitlines():
        stripped = line.strip()
        match = re.match(_SPHINX_PARAM, stripped)
        if match:
            name = match.group(1)
            params[name] = [match.group(2)]
            in_fields, current = True, name
        elif stripped.startswith(":"):
            in_fields, current = True, None
        elif in_fields:
            if current is not None and stripped:
                params[current].append(stripped)
        else:
            desc.append(line)
    return _description(desc), {k: _join(v) for k, v in params.items()}
