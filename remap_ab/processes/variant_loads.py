"""What a GPU process pays for each kernel variant it loads from Triton's cache, cut.

A fresh process's first sweep loads every variant it launches (hundreds) from the
cache, and on a cache hit Triton still rebuilds, per variant, two things that depend
only on what is shared by many variants:

- the metadata's ``namedtuple`` class, made anew from the same sorted field names
  (``CompiledKernel.__init__``, about 0.35 ms of the 2.3 ms a load costs on an H200);
- Triton 3.6's launcher module, generated C source looked up in the cache and imported
  again although variants with the same argument types share it (0.15 ms).

``share()`` makes each of them once per distinct input. Each part is applied only where
the installed Triton is as described and is otherwise left alone: a load then costs
what it did. Nothing but the time changes: the same class, the same compiled module.
The first part replaces ``collections.namedtuple`` for the whole process with a function
that passes every call not naming Triton's class straight through.
"""

from __future__ import annotations

import collections
import functools
import threading

_METADATA_TYPENAME = "KernelMetadata"  # the one namedtuple class Triton makes per kernel

_lock = threading.Lock()
_shared = False
_classes: dict = {}
_modules: dict = {}
_make_namedtuple = collections.namedtuple


def _frozen(value):
    return tuple(value) if isinstance(value, list) else value


def _namedtuple(typename, field_names, **options):
    if typename != _METADATA_TYPENAME:
        return _make_namedtuple(typename, field_names, **options)
    fields = field_names if isinstance(field_names, str) else list(field_names)
    key = (_frozen(fields), tuple(sorted((k, _frozen(v)) for k, v in options.items())))
    try:
        cls = _classes.get(key)
    except TypeError:  # an option that cannot be a key: made as before
        return _make_namedtuple(typename, fields, **options)
    if cls is None:
        cls = _classes[key] = _make_namedtuple(typename, fields, **options)
    return cls


def _module_once(build):
    @functools.wraps(build)
    def shared(*args, **kwargs):
        key = (tuple(_frozen(a) for a in args), tuple(sorted((k, _frozen(v)) for k, v in kwargs.items())))
        with _lock:  # two threads loading one signature must not both build and import it
            module = _modules.get(key)
            if module is None:
                module = _modules[key] = build(*args, **kwargs)
        return module

    return shared


def share() -> list[str]:
    """Apply what the installed Triton allows, once per process; the parts applied."""
    global _shared
    applied = []
    with _lock:
        if _shared:
            return ["already"]
        _shared = True
    if _metadata_made_per_call():
        collections.namedtuple = _namedtuple
        applied.append("metadata class")
    try:
        from triton.backends.nvidia import driver as nvidia_driver
    except ImportError:
        nvidia_driver = None
    build = getattr(nvidia_driver, "compile_module_from_src", None)
    launcher = getattr(nvidia_driver, "CudaLauncher", None)
    if build is not None and launcher is not None and _launcher_builds_a_module(launcher):
        nvidia_driver.compile_module_from_src = _module_once(build)
        applied.append("launcher module")
    return applied


def _metadata_made_per_call() -> bool:
    """Does this Triton's ``CompiledKernel.__init__`` look ``collections.namedtuple`` up
    when it runs (so that sharing the class reaches it)?"""
    try:
        import inspect

        from triton.compiler.compiler import CompiledKernel

        source = inspect.getsource(CompiledKernel.__init__)
    except (ImportError, OSError, TypeError):
        return False
    return "from collections import namedtuple" in source and f"namedtuple('{_METADATA_TYPENAME}'" in source


def _launcher_builds_a_module(launcher) -> bool:
    try:
        import inspect

        return "compile_module_from_src(" in inspect.getsource(launcher.__init__)
    except (OSError, TypeError):
        return False
