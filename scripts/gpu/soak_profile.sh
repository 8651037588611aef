#!/usr/bin/env bash
# On one H200 (~2.5 min): a 24 s soak fills Triton's cache; then a warm 24 s soak under
# cProfile (its stats file and the top functions under $OUT), and a warm one with 8
# compile workers instead of 15 (does the device process lose time to the workers' CPU?).
. "$(dirname "$0")/setup.sh"
export TRITON_CACHE_DIR=/tmp/soak-cache
s() { python3 "$@" 2>/dev/null | grep -E "cases judged|throughput|time:|FAIL" | head -8; }
echo "[fill]"; s -m remap_ab soak --minutes 0.4 --seed 1 --root /tmp/s1
echo "[warm, cProfiled]"; s -m cProfile -o "$OUT/soak.prof" -m remap_ab soak --minutes 0.4 --seed 2 --root /tmp/s2
echo "[warm, 8 compile workers]"; s -m remap_ab soak --minutes 0.4 --seed 2 --root /tmp/s3 --compile-workers 8
echo "[warm, 15 compile workers]"; s -m remap_ab soak --minutes 0.4 --seed 2 --root /tmp/s4
python3 - "$OUT/soak.prof" <<'PY' > "$OUT/soak-top.log"
import pstats, sys
s = pstats.Stats(sys.argv[1]); s.sort_stats("tottime").print_stats(45); s.sort_stats("cumulative").print_stats(70)
PY
