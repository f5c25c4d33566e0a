# shellcheck shell=bash
# Stage timing for scripts/test and the scripts it runs: `stage NAME` closes the running stage
# and opens NAME; `stage_report TITLE [BUDGET_MIN]` (from an EXIT trap: passed or failed) prints
# every stage's wall time, slowest first, and the total; past BUDGET_MIN minutes its last lines say
# CI BUDGET EXCEEDED, so that growth is seen the day it happens, not the day a submission is
# refused at the hard limit (90).

_stage_t0=$(date +%s)
_stage_name=""
_stage_start=0
_stage_names=()
_stage_secs=()

_stage_close() {
  [[ -n "$_stage_name" ]] || return 0
  _stage_names+=("$_stage_name")
  _stage_secs+=($(($(date +%s) - _stage_start)))
  _stage_name=""
}

# stage NAME: the stage NAME starts now (the one before it ends).
stage() {
  _stage_close
  _stage_name=$1
  _stage_start=$(date +%s)
  echo "== $1"
}

# stage_record NAME SECONDS: a stage timed elsewhere (a lane that ran beside others).
stage_record() {
  _stage_names+=("$1")
  _stage_secs+=("$2")
}

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

stage_report() {
  local rc=$? i total budget=$((${2:-0} * 60))
  _stage_close
  total=$(($(date +%s) - _stage_t0))
  echo
  echo "== $1: stages, slowest first (wall time; stages in lanes overlap)"
  for i in "${!_stage_names[@]}"; do
    printf '%6d s  %8s  %s\n' "${_stage_secs[i]}" "$(fmt_secs "${_stage_secs[i]}")" "${_stage_names[i]}"
  done | sort -rn
  printf '%6d s  %8s  %s\n' "$total" "$(fmt_secs "$total")" "total ($( ((rc == 0)) && echo passed || echo "failed, exit $rc"))"
  if ((budget > 0 && total > budget)); then
    echo "################################################################################"
    echo "CI BUDGET EXCEEDED: $(fmt_secs "$total") > $(fmt_secs "$budget") (the hard limit is 90m):"
    echo "find the stage that grew in the table above"
    echo "################################################################################"
  fi
  return "$rc"
}
