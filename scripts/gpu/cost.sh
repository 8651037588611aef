# Sourced by scripts in scripts/gpu/ after setup.sh: the steps they share. The sweep's cost
# is measured against cfacc42, whose tree travels in .old/ (git archive cfacc42
# --prefix=.old/ | tar x; carried).

# The whole suite, its log in $OUT/suite.log; the failures and the closing line printed.
whole_suite() {
  /usr/bin/time -f "suite wall %e s" python3 -m pytest -n auto -q --timeout 240 -p no:cacheprovider >"$OUT/suite.log" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed|suite wall" "$OUT/suite.log" | tail -30
}

# A 45 s soak with the defaults from a cold Triton cache (as on a fresh machine); its
# summary into $OUT/soak.log.
cold_soak() {
  TRITON_CACHE_DIR=$(mktemp -d) python3 -m remap_ab soak --minutes 0.75 --seed 1 --root /tmp/soak 2>/dev/null \
    | grep -E "^soak .* seed|soak summary|cases judged|throughput|time:|soak: |FAIL" | head -20 | tee "$OUT/soak.log"
}

# One sweep of each tree, side by side, 6 workers each (the compiles spread over the
# host's cores), so that every later one loads its variants from Triton's cache.
warm_caches() {
  ( python3 -m remap_ab sweep -j 6 --no-progress --root /tmp/warm --call-checks off > "$OUT/warm-now.log" 2>&1 & \
    cd .old && python3 -m remap_ab sweep -j 6 --no-progress --root /tmp/warm-old > "$OUT/warm-old.log" 2>&1; wait )
  grep -h "verdicts:" "$OUT"/warm-*.log
}

# cost_turns N: N rounds of cfacc42, then this tree with the call checks off and sampled;
# each a fresh process, -j 0; appended to $OUT/cost.log.
cost_turns() {
  for i in $(seq "$1"); do
    ( cd .old && /usr/bin/time -f "cfacc42: end to end %e s" python3 -m remap_ab sweep -j 0 --no-progress \
      --root "/tmp/o$i" 2>&1 | grep -E "verdicts:|time:|end to end" ) | tee -a "$OUT/cost.log"
    for checks in off sample; do
      /usr/bin/time -f "now, call checks $checks: end to end %e s" python3 -m remap_ab sweep -j 0 --no-progress \
        --root "/tmp/n$checks$i" --call-checks $checks 2>&1 | grep -E "verdicts:|time:|end to end" | tee -a "$OUT/cost.log"
    done
  done
}

# soaks COLD WARM: a soak of COLD minutes from a cold Triton cache, then one of WARM
# minutes on the cache it filled (seed 1, defaults); their summaries into $OUT/soak.log.
soaks() {
  local cache; cache=$(mktemp -d)
  for what in "cold $1" "warm $2"; do
    set -- $what
    TRITON_CACHE_DIR=$cache python3 -m remap_ab soak --minutes "$2" --seed 1 --root "/tmp/soak-$1" 2>/dev/null \
      | grep -E "^soak .* seed|soak summary|cases judged|throughput|time:|soak: |FAIL" | head -12 | sed "s/^/[$1] /" \
      | tee -a "$OUT/soak.log"
  done
}

# loads_without_and_with N: after one sweep warmed this tree's cache, N pairs of fresh
# processes' first sweeps, without remap_ab.variant_loads (--no-share), then with it; the
# head of each profile appended to $OUT/first.log.
loads_without_and_with() {
  python3 -m remap_ab sweep -j 6 --no-progress --root /tmp/warm --call-checks off 2>&1 | grep -E "verdicts:"
  for i in $(seq "$1"); do
    for mode in --no-share ""; do
      echo "[${mode:-shared}]" | tee -a "$OUT/first.log"
      python3 scripts/gpu/first_sweep_profile.py /tmp/p-$i$mode $mode 2>&1 | head -4 | tee -a "$OUT/first.log"
    done
  done
}
