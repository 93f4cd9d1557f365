#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of files a user may get from someone else (safetensors
# parameters, model JSON, the disk cache's manifests, ONNX models, NumPy .npy inputs), with clang's libFuzzer under
# AddressSanitizer + UndefinedBehaviorSanitizer:
#   1. builds build/fuzz (clang++, -DINGOT_FUZZ=ON -DINGOT_SANITIZE=ON; apt's clang provides
#      libFuzzer);
#   2. runs each target for the budget, starting from its seed corpus (fuzz/corpus/<parser>) plus
#      what earlier runs found (build/fuzz/corpus/<parser>, kept between runs);
#   3. a crash, hang (over 10 s), leak or allocation over 2 GiB stops a target and leaves its input
#      in fuzz/findings/<parser>/: fix it so the input is a clear ingot::Error, then move the input
#      to fuzz/regressions/<parser>/, which ctest replays on every build (fuzz_<parser>_corpus).
#
#   ./scripts/fuzz.sh [seconds per target, default 60] [target ...]   (targets: safetensors,
#   model_json, cache_manifest, onnx, npy; default all)
#   ./scripts/fuzz.sh cpu <seconds> [target ...]
#     the targets side by side at the lowest priority (nice 19, so they take only the cores other
#     work leaves), each stopped once its process has used <seconds> of CPU time (read from
#     /proc): a budget of CPU time that holds on a shared machine, where wall time does not.
#
# The compiler's differential fuzzer (fuzz/programs.h: random programs from the op registry on
# the CPU backend under every variation, against the reference interpreter):
#   ./scripts/fuzz.sh programs [graphs, default 100] [first seed, default 1] [seconds, default 0 = no limit]
#                              [rotate: 1 = one variation per graph, in turn; default 0 = all]
#                              [keep going: 1 = save a finding and go on with the next graph; default 0]
#   ./scripts/fuzz.sh replay <reproducer directory>
# builds build/release's ingot_fuzz_programs and runs it; a finding prints its seed, variation,
# output and graph, is shrunk (fuzz/shrink.h) and saved as a reproducer under fuzz-findings/
# (rerun with that seed and 1 graph, or replay the reproducer). Once the bug is fixed, move the
# reproducer into fuzz/regressions/programs/: ctest replays every one there.
# Exit status: 0 when nothing was found.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = programs ]; then
  scripts/build.sh release >/dev/null || exit 1
  exec build/release/ingot_fuzz_programs --graphs "${2:-100}" --seed "${3:-1}" --seconds "${4:-0}" --rotate "${5:-0}" \
    --keep-going "${6:-0}"
fi
if [ "${1:-}" = replay ]; then
  [ -n "${2:-}" ] || { echo "usage: scripts/fuzz.sh replay <reproducer directory>" >&2; exit 2; }
  scripts/build.sh release >/dev/null || exit 1
  exec build/release/ingot_fuzz_programs --replay "$2"
fi
cpu_mode=0
if [ "${1:-}" = cpu ]; then
  cpu_mode=1
  shift
  [ -n "${1:-}" ] || { echo "usage: scripts/fuzz.sh cpu <seconds> [target ...]" >&2; exit 2; }
fi
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors model_json cache_manifest onnx npy)
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is not installed (apt-get install clang)" >&2; exit 2; }
CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINGOT_FUZZ=ON \
  -DINGOT_SANITIZE=ON -DINGOT_BUILD_TESTS=OFF >/dev/null || exit 1
cmake --build build/fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}" || exit 1
# One target under a CPU-time budget (cpu mode): libFuzzer in the background, interrupted (it then
# prints its final stats) once /proc says its process has used the budget.
run_for_cpu() {
  local t=$1 pid ticks tck
  tck=$(getconf CLK_TCK)
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 nice -n 19 "build/fuzz/fuzz_$t" \
    -max_total_time=$((seconds * 20)) -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="fuzz/findings/$t/" "build/fuzz/corpus/$t" "fuzz/corpus/$t" 2>"build/fuzz/$t.log" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 10
    ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null) || break
    [ -n "$ticks" ] && echo "$((ticks / tck))" >"build/fuzz/$t.cpu_seconds"
    if [ -n "$ticks" ] && [ "$ticks" -ge $((seconds * tck)) ]; then kill -INT "$pid"; break; fi
  done
  wait "$pid"
}
status=0
if [ $cpu_mode = 1 ]; then
  for t in "${targets[@]}"; do mkdir -p "build/fuzz/corpus/$t" "fuzz/findings/$t"; done
  pids=()
  for t in "${targets[@]}"; do run_for_cpu "$t" & pids+=($!); done
  for i in "${!targets[@]}"; do
    t=${targets[$i]}
    wait "${pids[$i]}"
    rc=$?  # 72: libFuzzer's exit when interrupted (the budget's end)
    if { [ $rc != 0 ] && [ $rc != 72 ]; } || grep -q "ERROR: libFuzzer\|ERROR: AddressSanitizer\|runtime error" "build/fuzz/$t.log"; then
      echo "== fuzz_$t: FOUND something: see build/fuzz/$t.log and fuzz/findings/$t/"
      status=1
    else
      echo "== fuzz_$t: $(cat "build/fuzz/$t.cpu_seconds") s of CPU, no crash"
      grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build/fuzz/$t.log" | sed 's/^/   /'
    fi
  done
  exit $status
fi
for t in "${targets[@]}"; do
  mkdir -p "build/fuzz/corpus/$t" "fuzz/findings/$t"
  echo "== fuzz_$t for ${seconds}s"
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "build/fuzz/fuzz_$t" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="fuzz/findings/$t/" "build/fuzz/corpus/$t" "fuzz/corpus/$t" 2>"build/fuzz/$t.log"; then
    echo "   FOUND something: see build/fuzz/$t.log and fuzz/findings/$t/"
    tail -30 "build/fuzz/$t.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build/fuzz/$t.log" | sed 's/^/   /'
  fi
done
exit $status
