"""The remap's checks beyond the machinery's contract checks (``remap_ab.status.Check``):
each is a word of a verdict's failure, results.csv and a report folder, like Check's."""

from __future__ import annotations

from enum import StrEnum
from typing import Union, cast

from remap_ab.status import Check, check_named


class RemapCheck(StrEnum):
    BACKEND_VIEW = "backend_view"  # an attention backend would read different KV rows from A's and B's outputs


AnyCheck = Union[Check, RemapCheck]  # what a remap failure's check is


def check_of(word: object) -> AnyCheck:
    """``word`` as a remap failure's check (``Check``'s or ``RemapCheck``'s); ValueError
    listing every known word otherwise."""
    return cast(AnyCheck, check_named(word, RemapCheck))
