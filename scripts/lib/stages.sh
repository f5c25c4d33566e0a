# shellcheck shell=bash
# Stages and lanes for scripts/test (and the scripts it runs).
#
# A stage is a named step whose wall time is recorded: `stage NAME` ends the running stage of
# this lane (or process) and starts NAME. A lane is a function run in the background beside the
# others, its output prefixed with its name: `lane NAME FUNCTION [ARGS]`, then `lanes_wait`.
# Lanes hand results to each other as named steps: `step_done NAME` when one is ready,
# `await NAME...` to wait for them (it fails if the lane that owed a step ended without it).
#
# `stage_report TITLE [BUDGET_MIN]` (from an EXIT trap, passed or failed) prints every stage's
# wall time, slowest first, and the total; past BUDGET_MIN minutes its last lines say CI BUDGET
# EXCEEDED, so that growth is seen the day it happens, not the day a submission is refused at the
# hard limit (90 minutes).

_stage_name=""
_stage_start=0
# Where the records of every lane go (one file, appended to by each lane's subshell). A script
# run by another that times its stages (tests/package/check under scripts/test) records into
# the caller's table, under the caller's lane, and prints none of its own.
if [[ -z "${STAGE_DIR:-}" ]]; then
  STAGE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/iostack-stages.XXXXXX")
  _stage_t0=$(date +%s)
  _stage_owner=1
  export STAGE_DIR _stage_t0
fi
: "${STAGE_LANE:=main}"

_stage_close() {
  [[ -n "$_stage_name" ]] || return 0
  printf '%s\t%s\t%s\t%s\n' "$STAGE_LANE" "$_stage_start" "$(date +%s)" "$_stage_name" >>"$STAGE_DIR/stages.tsv"
  _stage_name=""
}

# stage NAME: the stage NAME starts now (the one before it in this lane ends).
stage() {
  _stage_close
  _stage_name=$1
  _stage_start=$(date +%s)
  echo "== $1"
}

# stage_end: the running stage ends (a lane that waits next).
stage_end() { _stage_close; }

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# step_done NAME: the step NAME is ready for the lanes that await it.
step_done() { : >"$STAGE_DIR/step.$1"; }

# await NAME...: waits until every step NAME is done; fails if the lane that owed one ended
# without it (its failure is in its own output).
await() {
  local s
  _stage_close
  for s in "$@"; do
    until [[ -e "$STAGE_DIR/step.$s" ]]; do
      if [[ -e "$STAGE_DIR/owes.$s" && -e "$STAGE_DIR/lane.$(cat "$STAGE_DIR/owes.$s").rc" ]]; then
        echo "not run: the step '$s' it needs failed (lane $(cat "$STAGE_DIR/owes.$s"))"
        return 1
      fi
      sleep 1
    done
  done
}

declare -A _lane_pid=()
_lane_names=()

# lane NAME [--owes STEP...] -- FUNCTION [ARGS]: runs FUNCTION in the background, in a shell
# with set -euo pipefail, every output line prefixed "NAME| "; its exit status is kept for
# lanes_wait. --owes names the steps it promises (await fails at once if it ends without them).
lane() {
  local name=$1 s
  shift
  while [[ $1 == --owes ]]; do
    echo "$name" >"$STAGE_DIR/owes.$2"
    shift 2
  done
  [[ $1 == -- ]] && shift
  (
    STAGE_LANE=$name
    export STAGE_LANE
    set +e
    # A subshell of its own, so that set -e holds in the function (it does not in one called
    # as `f || ...`).
    (
      set -euo pipefail
      _stage_name=""
      trap _stage_close EXIT
      "$@"
    )
    rc=$?
    # The CPU its processes used (user, system), for the table: on 2 CPUs the run is
    # compile- and TCG-bound, and where the time goes is a lane's CPU, not its length.
    # (times in a pipeline would run in a fork of its own, whose children used nothing.)
    times >"$STAGE_DIR/lane.$name.times"
    tail -n 1 "$STAGE_DIR/lane.$name.times" >"$STAGE_DIR/lane.$name.cpu"
    echo "$rc" >"$STAGE_DIR/lane.$name.rc"
    exit "$rc"
  ) > >(tee "$STAGE_DIR/lane.$name.log" | sed -u "s/^/$name| /") 2>&1 &
  _lane_pid[$name]=$!
  _lane_names+=("$name")
}

# lanes_wait: waits for every lane; fails if one did (each failure named).
lanes_wait() {
  local name rc failed=()
  for name in "${_lane_names[@]}"; do
    wait "${_lane_pid[$name]}" || true
    rc=$(cat "$STAGE_DIR/lane.$name.rc" 2>/dev/null || echo "?")
    [[ "$rc" == 0 ]] || failed+=("$name (exit $rc)")
  done
  # let the prefixing seds flush
  sleep 0.2
  if ((${#failed[@]})); then
    echo "FAILED lanes: ${failed[*]} (their lines are prefixed with their names)"
    return 1
  fi
}

# failed_tests LOG: each Rust test that failed in LOG (cargo test's output), one a line, as
# `tests/FILE.rs: NAME` (the test binary cargo said it was running, `Running tests/x.rs (...)`).
failed_tests() {
  awk '/^ *Running (unittests )?[^ ]+ \(/ { bin = $2; if ($2 == "unittests") bin = $3 }
       /^test .* \.\.\. FAILED$/ { sub(/^test /, ""); sub(/ \.\.\. FAILED$/, ""); print bin ": " $0 }' "$1" 2>/dev/null || true
}

stage_report() {
  local rc=$? total budget=$((${2:-0} * 60)) lane start end name first last
  _stage_close
  [[ -n "${_stage_owner:-}" ]] || return "$rc"
  total=$(($(date +%s) - _stage_t0))
  echo
  echo "== $1: stages, slowest first (wall time; lanes run side by side, so stages overlap)"
  printf '%7s  %8s  %-10s %s\n' seconds "" lane "stage (started at)"
  if [[ -s "$STAGE_DIR/stages.tsv" ]]; then
    while IFS=$'\t' read -r lane start end name; do
      printf '%7d  %8s  %-10s %s (+%s)\n' $((end - start)) "$(fmt_secs $((end - start)))" "$lane" "$name" "$(fmt_secs $((start - _stage_t0)))"
    done <"$STAGE_DIR/stages.tsv" | sort -rn
    echo "-- lanes, from their first stage's start to their last's end (the CPU its processes used, user and system):"
    for lane in $(cut -f1 "$STAGE_DIR/stages.tsv" | sort -u); do
      first=$(awk -F'\t' -v l="$lane" '$1 == l { print $2 }' "$STAGE_DIR/stages.tsv" | sort -n | head -1)
      last=$(awk -F'\t' -v l="$lane" '$1 == l { print $3 }' "$STAGE_DIR/stages.tsv" | sort -n | tail -1)
      printf '%7d  %8s  %-10s +%s to +%s  (CPU %s)\n' $((last - first)) "$(fmt_secs $((last - first)))" "$lane" "$(fmt_secs $((first - _stage_t0)))" "$(fmt_secs $((last - _stage_t0)))" "$(cat "$STAGE_DIR/lane.$lane.cpu" 2>/dev/null || echo ?)"
    done
  fi
  printf '%7d  %8s  %s\n' "$total" "$(fmt_secs "$total")" "total ($( ((rc == 0)) && echo passed || echo "failed, exit $rc"))"
  if ((budget > 0 && total > budget)); then
    echo "################################################################################"
    echo "CI BUDGET EXCEEDED: $(fmt_secs "$total") > $(fmt_secs "$budget") (the hard limit is 90m):"
    echo "find the stage that grew in the table above"
    echo "################################################################################"
  fi
  # The failed lanes' failures again, last: a reader of the output's tail (CI's record keeps
  # its head and tail) sees what failed without the middle (a matrix FAIL hid there, 2026-11-27).
  # Every failed Rust test first, by its test binary (cargo test --no-fail-fast runs them all),
  # then the lines that say FAIL, panicked or error.
  for name in "${_lane_names[@]}"; do
    [[ "$(cat "$STAGE_DIR/lane.$name.rc" 2>/dev/null || echo 0)" == 0 ]] && continue
    failed_tests "$STAGE_DIR/lane.$name.log" | sed "s/^/$name| failed test: /"
    echo "-- failed lane $name: its lines that say FAIL, panicked or error: (the first 25):"
    grep -E 'FAIL|panicked|error: ' "$STAGE_DIR/lane.$name.log" 2>/dev/null | head -25 | sed "s/^/$name| /" || true
  done
  return "$rc"
}
