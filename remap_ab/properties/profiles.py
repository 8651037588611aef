"""Named test profiles: how many examples the property suite draws and how large a
case may grow, as one choice.

A profile is a Hypothesis settings profile of the same name plus a size budget for
the configuration strategies (``strategies/``). The budget matters because a CPU run
executes every Triton program in the interpreter (a few milliseconds each) while a GPU
launches thousands in microseconds, so "full ranges" mean different things there.

    ci       derandomized, no example database, small cases: the same examples on every
             run, sized so ``pytest -n auto`` on 2 cores stays well inside 10 minutes.
    dev      random, with the local example database (failures replay first), small.
    nightly  random, many examples; full ranges on a GPU, moderate ones on a CPU.
    gpu      random, full ranges (up to 1024 rows, 128 tiles per row); needs CUDA.
    mutants  ci's examples, without shrinking: for kill-rate runs against seeded bugs,
             where a failure is a kill and its minimal form is not needed.

Choose one with ``--remap-profile NAME`` or ``REMAP_AB_PROFILE=NAME``; the default is
``ci``, so a bare ``pytest -n auto`` is deterministic and bounded. ``REMAP_AB_EXAMPLES=N``
scales a profile to N examples per standard property (e.g. to fit a time limit).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Optional

from remap_ab import runtime
from remap_ab.errors import ProfileError

PROFILE_NAMES = ("ci", "dev", "nightly", "gpu", "mutants")
DEFAULT_PROFILE = "ci"
ENV_VAR = "REMAP_AB_PROFILE"
EXAMPLES_ENV_VAR = "REMAP_AB_EXAMPLES"  # overrides the profile's examples per standard property


@dataclass(frozen=True)
class SizeBudget:
    """Upper bounds for a drawn case (each subject's strategies read those they need).

    max_rows      the rows of a case's launch (program_id 0).
    max_programs  rows x tiles per row: the programs a tiled launch runs, which is what
                  a case costs in the interpreter (a single-tile launch runs one per row).
    max_tiles     the tiles (programs) of one row.
    """

    max_rows: int
    max_programs: int
    max_tiles: int

    def max_rows_for(self, tiles_per_row: int) -> int:
        return max(1, min(self.max_rows, self.max_programs // tiles_per_row))


# On the interpreter: 64 programs cost ~0.3 s per implementation.
_CPU_SMALL = SizeBudget(max_rows=16, max_programs=64, max_tiles=32)
_CPU_LARGE = SizeBudget(max_rows=64, max_programs=512, max_tiles=128)
# On a GPU the launch is cheap; SPEC-sized batches up to 1024 rows.
_GPU_FULL = SizeBudget(max_rows=1024, max_programs=1024 * 128, max_tiles=128)


@dataclass(frozen=True)
class Profile:
    """One named profile: Hypothesis settings plus the size budget."""

    name: str
    examples: int  # max_examples of a standard property (tests scale it by cost)
    derandomize: bool
    use_database: bool
    cpu_budget: SizeBudget
    cuda_budget: SizeBudget
    needs_cuda: bool = False
    shrink: bool = True

    @property
    def budget(self) -> SizeBudget:
        return self.cuda_budget if _device() == "cuda" else self.cpu_budget

    def examples_for(self, scale: float) -> int:
        """max_examples for a property ``scale`` times as cheap as a standard one
        (0.5: twice as expensive, so half the examples)."""
        return max(1, round(self.examples * scale))

    def describe(self) -> str:
        b = self.budget
        order = ("derandomized" if self.derandomize else "random") + ("" if self.shrink else ", no shrinking")
        return (
            f"profile {self.name}: {order}, {self.examples} examples per standard property, "
            f"cases up to {b.max_rows} rows / {b.max_programs} programs / {b.max_tiles} tiles per row "
            f"(on {_device()})"
        )


PROFILES = {
    "ci": Profile("ci", examples=40, derandomize=True, use_database=False, cpu_budget=_CPU_SMALL, cuda_budget=_CPU_SMALL),
    "dev": Profile("dev", examples=15, derandomize=False, use_database=True, cpu_budget=_CPU_SMALL, cuda_budget=_CPU_SMALL),
    "nightly": Profile("nightly", examples=400, derandomize=False, use_database=True, cpu_budget=_CPU_LARGE, cuda_budget=_GPU_FULL),
    "gpu": Profile("gpu", examples=60, derandomize=False, use_database=False, cpu_budget=_GPU_FULL, cuda_budget=_GPU_FULL, needs_cuda=True),
    "mutants": Profile("mutants", examples=40, derandomize=True, use_database=False, cpu_budget=_CPU_SMALL,
                       cuda_budget=_CPU_SMALL, shrink=False),
}

_active: Optional[Profile] = None


def _device() -> str:
    return runtime.current()


def _register(profile: Profile) -> None:
    from hypothesis import HealthCheck, Phase, settings

    kwargs: dict = dict(
        max_examples=profile.examples,
        deadline=None,  # interpreter and JIT-compile times vary far more than any deadline
        derandomize=profile.derandomize,
        print_blob=True,
        # No explain phase: it traces every line the failing example runs, which
        # under the Triton interpreter costs more than the shrinking itself, and its
        # findings are our own plumbing. The replay command says more.
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + ([Phase.shrink] if profile.shrink else []),
        # A case's cost is the kernels', not the strategy's; and our draws are large
        # by design (a case's tensors are generated from its seed, not drawn element by element).
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    if not profile.use_database:
        kwargs["database"] = None
    settings.register_profile(profile.name, **kwargs)


def load(name: Optional[str] = None, apply_settings: bool = True) -> Profile:
    """Make ``name`` (else $REMAP_AB_PROFILE, else ``ci``) the active profile, and
    (unless ``apply_settings`` is False) load its Hypothesis settings as the default
    for tests decorated from now on."""
    global _active
    from hypothesis import settings

    name = name or os.environ.get(ENV_VAR) or DEFAULT_PROFILE
    if name not in PROFILES:
        raise ProfileError(f"unknown profile {name!r}; choose one of {', '.join(PROFILE_NAMES)}")
    profile = PROFILES[name]
    if os.environ.get(EXAMPLES_ENV_VAR):
        try:
            examples = int(os.environ[EXAMPLES_ENV_VAR])
        except ValueError:
            examples = 0
        if examples < 1:
            raise ProfileError(f"{EXAMPLES_ENV_VAR}={os.environ[EXAMPLES_ENV_VAR]!r} is not a positive whole number")
        profile = dataclasses.replace(profile, examples=examples)
    if profile.needs_cuda and _device() != "cuda":
        raise ProfileError(
            f"profile {name} runs full-size cases (up to {profile.cuda_budget.max_rows} rows) and needs a CUDA "
            f"device; on a CPU use nightly for a long run or dev for a quick one"
        )
    for p in PROFILES.values():
        _register(p)
    _register(profile)  # the chosen one, with its example count as overridden
    if apply_settings:
        settings.load_profile(name)
    _active = profile
    return profile


def active() -> Profile:
    """The active profile, loading the default one on first use."""
    return _active if _active is not None else load()


def settings_for(scale: float = 1.0):
    """Hypothesis settings for one property: the active profile with its example
    count scaled by ``scale`` (see ``Profile.examples_for``)."""
    from hypothesis import settings

    profile = active()
    return settings(max_examples=profile.examples_for(scale))
