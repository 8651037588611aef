"""The remap's judge: implementations by name and the optional parameters each takes
(registry.py, features.py, out_layout.py), the one call primitive (call.py), the oracle,
one case and many (runner.py, batch.py), SPEC §6's violating calls (rejections.py),
nondeterminism (nondet.py), a compile-ahead worker's calls (compile_ahead.py), and the
only place a verdict is built (compare.py). Imports the case only."""
