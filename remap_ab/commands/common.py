"""Helpers the measuring commands (nondet, bench) share: option parsing, the
environment record written beside every artifact, and chart drawing that never costs
the measurements."""

from __future__ import annotations

import platform

from remap_ab.errors import ConfigError


def int_list(text: str, option: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{option} {text!r} must be comma-separated integers, e.g. 1,2,8") from None
    if not values:
        raise ConfigError(f"{option} is empty; give at least one value")
    return values


def environment(device: str) -> dict:
    import torch
    import triton

    env = {"device": device, "python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name()
    return env


def draw_chart(draw, *args) -> str:
    """A chart that fails to draw must not cost the measurements: say so and go on."""
    try:
        return str(draw(*args))
    except Exception as exc:
        return f"no chart ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
