"""What a report's JSON files must hold, field by field: a report folder is read back
(replay, resume, tools) long after it was written, possibly edited or damaged, so every
field is checked for its type before anything uses it, and the first wrong one is named
with its file in one line (``ReportError``, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from remap_ab.errors import ReportError
from remap_ab.status import Status

_OPTIONAL_STR = (str, type(None))
_INT = (int,)  # bool is an int to Python: excluded by expect


def expect(file: str, folder: Path, data: Any, key: str, kinds: tuple, where: str = "") -> Any:
    """``data[key]``, checked to be one of ``kinds``; ReportError naming the file and
    the field otherwise."""
    name = f"{where}{key}"
    if not isinstance(data, dict) or key not in data:
        raise ReportError(f"report {folder}: {file} lacks the field {name!r}; the report is corrupt (write it again)")
    value = data[key]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        wanted = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise ReportError(
            f"report {folder}: {file} field {name!r} is {type(value).__name__} {json.dumps(value)[:40]}, expected {wanted}; "
            "the report is corrupt (write it again)"
        )
    return value


def read_json(folder: Path, name: str) -> dict:
    try:
        data = json.loads((folder / name).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"report {folder}: {name} is not valid JSON ({type(exc).__name__}); the report is corrupt") from None
    except OSError as exc:
        raise ReportError(f"report {folder}: {name} cannot be read ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise ReportError(f"report {folder}: {name} holds a {type(data).__name__}, not an object; the report is corrupt")
    return data


def check_verdict_json(folder: Path, meta: dict) -> None:
    """Every field replay and the readers use, with its type; the first wrong one named."""
    f = "verdict.json"
    for key in ("case_id", "status"):
        expect(f, folder, meta, key, (str,))
    try:
        Status(meta["status"])
    except ValueError:
        raise ReportError(f"report {folder}: {f} field 'status' is {meta['status']!r}, not one of "
                          f"{', '.join(s.value for s in Status)}; the report is corrupt") from None
    for role in ("a", "b"):
        impl = expect(f, folder, meta, role, (dict,))
        expect(f, folder, impl, "name", (str,), f"{role}.")
        for key in ("module", "path_entry"):
            if key in impl:
                expect(f, folder, impl, key, _OPTIONAL_STR, f"{role}.")
        if impl.get("source") is not None:
            src = expect(f, folder, impl, "source", (dict,), f"{role}.")
            for key in ("kind", "path", "sha256"):
                expect(f, folder, src, key, (str,), f"{role}.source.")
            for key in ("repo", "rev", "commit"):
                expect(f, folder, src, key, _OPTIONAL_STR, f"{role}.source.")
            extra = set(src) - {"kind", "path", "sha256", "repo", "rev", "commit"}
            if extra:
                raise ReportError(f"report {folder}: {f} field '{role}.source' has unknown keys {sorted(extra)}")
    expect(f, folder, meta, "device", (str,))
    sha = expect(f, folder, meta, "inputs_sha256", (dict,))
    for key in sha:
        expect(f, folder, sha, key, (str,), "inputs_sha256.")
    if meta.get("schedule") is not None:
        s = expect(f, folder, meta, "schedule", (list,))
        if len(s) != 2 or not isinstance(s[0], str) or not isinstance(s[1], int) or isinstance(s[1], bool):
            raise ReportError(f"report {folder}: {f} field 'schedule' is {json.dumps(s)[:40]}, expected [policy, seed]")
    v = expect(f, folder, meta, "verdict", (dict,))
    expect(f, folder, v, "case_id", (str,), "verdict.")
    expect(f, folder, v, "status", (str,), "verdict.")
    for key in ("order_differs",):
        if key in v:
            expect(f, folder, v, key, (bool,), "verdict.")
    if "order_differs_rows" in v:
        expect(f, folder, v, "order_differs_rows", _INT, "verdict.")
    for i, text in enumerate(expect(f, folder, v, "info", (list,), "verdict.") if "info" in v else []):
        if not isinstance(text, str):
            raise ReportError(f"report {folder}: {f} field 'verdict.info[{i}]' is {type(text).__name__}, expected str")
    failures = expect(f, folder, v, "failures", (list,), "verdict.")
    for i, m in enumerate(failures):
        at = f"verdict.failures[{i}]."
        if not isinstance(m, dict):
            raise ReportError(f"report {folder}: {f} field {at[:-1]!r} is {type(m).__name__}, expected an object")
        for key in ("check", "impl", "message"):
            expect(f, folder, m, key, (str,), at)
        for key in ("row", "col", "lanes", "rows"):
            expect(f, folder, m, key, _INT, at)
        expect(f, folder, m, "values", (dict,), at)
        extra = set(m) - {"check", "impl", "message", "row", "col", "lanes", "rows", "values"}
        if extra:
            raise ReportError(f"report {folder}: {f} field {at[:-1]!r} has unknown keys {sorted(extra)}")


def check_config_fields(folder: Path, fields: dict) -> None:
    """config.json holds what ``CaseConfig.to_dict`` wrote: each field of its field's
    type (a float field may hold an int). The command line's string coercion has no
    place in a file remap-ab wrote itself: a string there is corruption."""
    import dataclasses

    from remap_ab.config import CaseConfig

    for f in dataclasses.fields(CaseConfig):
        if f.name not in fields or f.default is dataclasses.MISSING:
            continue
        kind = type(f.default)
        kinds = (int, float) if kind is float else (kind,)
        expect("config.json", folder, fields, f.name, kinds, "config.")
