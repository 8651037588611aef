#!/usr/bin/env bash
# The slot-mapping subject on a GPU (issue 58, part 6): the default sweep in a fresh
# process, timed, with its verdict and findings; then the host version (NumPy + the copy
# to the device) against the device kernel at decode and prefill sizes.
#   bash scripts/slotmap_gpu.sh [OUT_DIR]        (default: reports/slotmap-gpu)
set -u
out="${1:-reports/slotmap-gpu}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
start=$(date +%s%N)
python -m remap_ab sweep --subject slotmap --device cuda --root "$out" --run default > "$out/sweep.txt" 2>&1
echo "sweep exit $? (1: the host version's findings, expected)" | tee -a "$out/sweep.txt"
end=$(date +%s%N)
echo "default slotmap sweep, fresh process: $(( (end - start) / 1000000 )) ms wall" | tee "$out/sweep_wall.txt"
grep -E "cases:|verdicts:|finding|time:|result:" "$out/sweep.txt"
python -m remap_ab sweep --subject slotmap --device cuda --root "$out" --run ignored --filter pad_tail=ignored 2>&1 | grep -E "verdicts:|result:"
python -m remap_ab sweep --subject slotmap --device cuda --root "$out" --run judged --filter pad_tail=judged 2>&1 | grep -E "verdicts:|result:"
python -m remap_ab bench --subject slotmap --root "$out/bench" 2>&1 | tee "$out/bench.txt"
# The soak's rate on the GPU (one worker), and the mutants' kill loop on the GPU.
python -m remap_ab soak --subject slotmap --device cuda --minutes 1 --workers 1 --seed 1 2>&1 \
  | grep -E "cases/s|soak host" | tee "$out/soak.txt"
python -m remap_ab mutants --subject slotmap --device cuda 2>&1 | tee "$out/mutants.txt"
