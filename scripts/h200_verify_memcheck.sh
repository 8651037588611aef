#!/bin/sh
# The memcheck branch's checks that need a GPU. Run from the repository root on the
# H200; each step says what it should show. About 3-5 minutes (sanitized children
# import torch and compile under the tool).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
step() { printf '\n=== %s\n' "$*"; }

step "compute-sanitizer present (else GPU --memcheck exits 2 with SanitizerError)"
command -v compute-sanitizer || ls -l /usr/local/cuda/bin/compute-sanitizer

step "parser + stand-in tool + the GPU end-to-end test (expect all passed, 0 skipped)"
python3 -m pytest -p no:xdist -q -rs tests/test_sanitizer.py

step "the OOB copy of kernels_old: outputs equal (expect exit 0) ..."
python3 tests/memcheck_support.py /tmp/oobpkg row_end
CASE="--mode convert --tokens 2 --topk 256 --num-reqs 1 --blocks-per-req 8 --block-size 16"
PYTHONPATH="$PYTHONPATH:/tmp/oobpkg" python3 -m remap_ab run --device cuda --a old --b oob_remap_row_end $CASE
echo "exit $?"
step "... and --memcheck fails it (expect exit 1, [memcheck] oob_remap_row_end: load ... block_table)"
PYTHONPATH="$PYTHONPATH:/tmp/oobpkg" python3 -m remap_ab run --device cuda --a old --b oob_remap_row_end $CASE --memcheck
echo "exit $?"

step "the real kernels under the sanitizer (expect PASS, 'clean (ERROR SUMMARY: 0 errors)' for old and new)"
python3 -m remap_ab run --device cuda --memcheck
python3 -m remap_ab run --device cuda --memcheck --mode convert --counts --prefill-fraction 0.5 --tokens 8
python3 -m remap_ab run --device cuda --memcheck --topk 384 --dcp-size 4 --interleave 4 --tokens 8

step "host µs per wrapper call, T=1 K=512 counts (issue 14: was new 41.2, old 37.6; modelled 27.0 / 31.2)"
python3 scripts/host_overhead.py
if git rev-parse --verify -q 114bd46 >/dev/null 2>&1; then
  mkdir -p /tmp/base
  for p in kernels_old kernels_new; do
    mkdir -p "/tmp/base/${p}_main"
    git show "114bd46:$p/_remap.py" > "/tmp/base/${p}_main/_remap.py"
    git show "114bd46:$p/__init__.py" | sed "s/$p/${p}_main/" > "/tmp/base/${p}_main/__init__.py"
  done
  PYTHONPATH="$PYTHONPATH:/tmp/base" python3 scripts/host_overhead.py --impl kernels_old_main --impl kernels_new_main
fi

step "compiled variants: order of memory ops and reductions, registers, spills, shared memory"
python3 scripts/kernel_ir.py --path all
