#!/bin/sh
# bioslower's kernel-matrix checks. Each asserts a fact we caused: every O_DIRECT write of a dd
# shows once, attributed to that dd; on the delayed disk (null_blk's timer) every write is at
# least as slow as its delay and `bioslower 10` reports each one; on the fast disk it stays
# silent; and with --stage submit -K, a queue frozen by an elevator switch shows up as slow
# submissions whose stack names the queue-enter wait. Runs under busybox sh (see lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
trap tool_cleanup EXIT

N=50     # O_DIRECT 4 KiB writes on the fast disk
SLOW_N=6 # writes on the delayed disk
fast=${IOSTACK_FAST_DISK:?}
slow=${IOSTACK_SLOW_DISK:-}
at=$(scratch_block)

# events FILE: the per-I/O JSON objects of a -j run (the summary and loss records have no comm).
events() { grep '"comm":' "$1"; }

# field FILE KEY: KEY's value on each event line (numbers and strings, quotes removed).
field() {
  events "$1" | awk -v k="$2" '{
      if (match($0, "\"" k "\":(\"[^\"]*\"|[^,}]*)")) {
        v = substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3); gsub(/"/, "", v); print v
      }
    }'
}

# summary FILE: the final {"summary":...} record, on one line, for FAIL details.
summary() { grep '"summary"' "$1" | tail -n 1 | cut -c1-200; }

# --- explain -------------------------------------------------------------------------------

tool_run explain --explain -Q
if [ $? -eq 0 ] && grep -q '^loaded and attached: ok' "$(out_of explain)"; then
  pass explain "--explain -Q loads and attaches"
else
  fail explain "$(brief explain)"
  log_verbose explain_v --explain -Q
fi
path submitter "$(awk '$1 == "submitter" { print $2; exit }' "$(out_of explain)")"

# --- one dd on the fast disk, watched at threshold 0 and at 100 ms -----------------------------
# 100 ms, far above the fast disk's writes: two tools measure an I/O with two reads of the clock,
# and an I/O near the threshold can fall on either side for each. At 10 ms, with the VM sharing
# the host with a CI run's builds, one write took 10.49 ms to the witness and another just under
# 10 to it, just over to `bioslower 10` (6.1, 2026-11-26).

if ! tool_start all -j 0 -d "$fast" || ! tool_start ten -j 100 -d "$fast"; then
  fail exact "bioslower did not start: $(brief all) $(brief ten)"
else
  dd if=/dev/zero of="/dev/$fast" bs=4096 count="$N" seek="$at" oflag=direct conv=notrunc 2>"$IOSTACK_WORK/dd.err" &
  dd_pid=$!
  wait "$dd_pid" || log "dd exited with $?: $(cat "$IOSTACK_WORK/dd.err")"
  tool_stop all
  rc_all=$?
  tool_stop ten
  rc_ten=$?
  out=$(out_of all)
  n=$(events "$out" | wc -l)
  mine=$(events "$out" | grep -c "\"comm\":\"dd\",\"pid\":$dd_pid,")
  writes=$(field "$out" rwbs | grep -c '^W')
  lost=$(json_unseen "$out")
  detail="$n events + $lost unseen, $mine from dd pid $dd_pid, $writes writes; $(summary "$out")"
  if [ "$rc_all" -eq 0 ] && [ $((n + lost)) = "$N" ] && [ "$mine" = "$n" ] && [ "$writes" = "$n" ]; then
    pass exact "$detail"
  else
    fail exact "$detail; want $N shown or unseen, each from dd, each a write (exit $rc_all: $(brief all))"
  fi
  quiet=$(events "$(out_of ten)" | wc -l)
  # The 0-ms run above is the witness: it saw the same I/Os and how long each took, so
  # `bioslower 100` must print exactly those that took 100 ms or more (under TCG a fast disk's
  # write could, on a busy host), and each one it prints must be one of them.
  slowest=$(field "$out" lat_ms | sort -n | tail -n 1)
  want=$(field "$out" lat_ns | awk '$1 >= 100000000 { n++ } END { print n + 0 }')
  under=$(field "$(out_of ten)" lat_ns | awk '$1 < 100000000 { n++ } END { print n + 0 }')
  if [ "$rc_ten" -eq 0 ] && [ "$quiet" = "$want" ] && [ "$under" = 0 ] && grep -q '"summary"' "$(out_of ten)"; then
    pass fast-silent "bioslower 100 printed $quiet events for $N writes, the $want of them the witness saw take >= 100 ms (slowest ${slowest:-?} ms)"
  else
    fail fast-silent "bioslower 100 printed $quiet events ($under under 100 ms), the witness saw $want of $N take >= 100 ms (slowest ${slowest:-?} ms, exit $rc_ten: $(brief ten))"
  fi
fi

# --- accounted: 2000 reads, each shown or reported lost, against /proc/diskstats ------------

READS=2000
if ! tool_start acct -j 0 -d "$fast"; then
  fail accounted "bioslower did not start: $(brief acct)"
else
  before=$(disk_requests "$fast")
  dd_read "$fast" "$READS" "$at"
  after=$(disk_requests "$fast")
  tool_stop acct
  rc=$?
  out=$(out_of acct)
  n=$(events "$out" | wc -l)
  lost=$(grep '"summary"' "$out" | tail -n 1 | sed -n 's/.*"lost":\([0-9]*\).*/\1/p')
  unseen_n=$(json_unseen "$out")
  delta=$((after - before))
  detail="diskstats $delta, $n events + ${lost:-?} lost ($unseen_n unseen)"
  if [ "$rc" -eq 0 ] && [ "$delta" = "$READS" ] && [ $((n + ${lost:-0})) = "$delta" ] &&
    { [ -z "${IOSTACK_SLOW_DISK:-}" ] || [ "${lost:-0}" = 0 ]; }; then
    pass accounted "$detail"
  else
    fail accounted "$detail; want shown + lost = $READS (none lost in a VM) (exit $rc: $(brief acct))"
  fi
fi

# --- the delayed disk: every write slower than its delay, and all caught ---------------------
# null_blk completes each request from a timer its delay after it is queued (mkinitramfs), so
# no write can be faster, however the writes are paced.

if ! delayed_disk delayed; then
  :
elif ! tool_start slow -j 10 -d "$delayed"; then
  fail delayed "bioslower 10 -d $delayed did not start: $(brief slow)"
else
  dd_write "$delayed" "$SLOW_N"
  tool_stop slow
  rc=$?
  out=$(out_of slow)
  w=$(field "$out" rwbs | grep -c '^W')
  short=$(events "$out" | grep '"rwbs":"W' | awk -v f="$delay_ns" '{
      match($0, /"lat_ns":[0-9]+/); if (substr($0, RSTART + 9, RLENGTH - 9) + 0 < f) n++
    } END { print n + 0 }')
  lowest=$(events "$out" | grep '"rwbs":"W' | awk '{ match($0, /"lat_ms":[0-9.]+/); print substr($0, RSTART + 9, RLENGTH - 9) }' | sort -n | head -n 1)
  detail="$w writes caught, lowest ${lowest:-?} ms, $short below the disk's delay of $delay_ns ns"
  if [ "$rc" -eq 0 ] && [ "$w" = "$SLOW_N" ] && [ "$short" = 0 ]; then
    pass delayed "$detail"
  else
    fail delayed "$detail; want $SLOW_N, none below (exit $rc: $(brief slow))"
  fi
fi

# --- --stage submit -K: a frozen queue makes submissions wait in queue-enter -----------------
# Switching a disk's I/O scheduler freezes its queue: it waits for the I/Os in flight (200 ms each
# on the throttled disk) while new submissions sleep in blk_queue_enter/__bio_queue_enter.

tool_run submit_explain --stage submit -K --explain
rc=$?
path submit "$(awk '$1 == "submit" { print $2; exit }' "$(out_of submit_explain)")"
if [ "$rc" -ne 0 ]; then
  # Only a kernel without fentry and kprobes may refuse, and then with the reason.
  if ! kprobes_possible && grep -q 'needs fentry/fexit or kprobe/kretprobe' "$(err_of submit_explain)"; then
    na submit-freeze "no fentry, no kprobes here, and bioslower says so: $(brief submit_explain)"
  else
    fail submit-freeze "--stage submit -K --explain failed: $(brief submit_explain)"
    log_verbose submit_v --stage submit -K --explain
  fi
elif [ -z "$slow" ]; then
  na submit-freeze "no throttled disk here"
else
  sched="/sys/block/$slow/queue/scheduler"
  # Two schedulers to switch between: the current one and any other this kernel has.
  cur=$(sed 's/.*\[\(.*\)\].*/\1/' "$sched")
  other=$(tr -d '[]' <"$sched" | tr ' ' '\n' | grep -v "^$cur\$" | grep -v '^$' | head -n 1)
  if [ -z "$other" ]; then
    na submit-freeze "$slow offers one scheduler only ($(cat "$sched"))"
  elif ! tool_start submit -j --stage submit -K 20 -d "$slow"; then
    fail submit-freeze "did not start: $(brief submit)"
  else
    dd_read "$slow" 1 0
    dd if=/dev/zero of="/dev/$slow" bs=4096 count=8 seek=512 oflag=direct conv=notrunc 2>/dev/null &
    w1=$!
    dd if=/dev/zero of="/dev/$slow" bs=4096 count=8 seek=1024 oflag=direct conv=notrunc 2>/dev/null &
    w2=$!
    switches=0
    while pid_alive "$w1" || pid_alive "$w2"; do
      echo "$other" >"$sched" 2>/dev/null && switches=$((switches + 1))
      sleep 0.3
      echo "$cur" >"$sched" 2>/dev/null && switches=$((switches + 1))
      sleep 0.3
    done
    wait "$w1" "$w2"
    echo "$cur" >"$sched" 2>/dev/null
    tool_stop submit
    rc=$?
    out=$(out_of submit)
    n=$(events "$out" | wc -l)
    frozen=$(events "$out" | grep -c '"stack":\[[^]]*queue_enter')
    top=$(events "$out" | grep '"stack":\[[^]]*queue_enter' | head -n 1 | sed 's/.*"stack":\[//; s/\].*//' | cut -d, -f1-6)
    detail="$switches scheduler switches ($cur/$other): $n slow submissions, $frozen with a *queue_enter frame${top:+, e.g. $top}"
    if [ "$rc" -eq 0 ] && [ "$frozen" -ge 1 ]; then
      pass submit-freeze "$detail"
    else
      fail submit-freeze "$detail; want >= 1 (exit $rc: $(brief submit))"
    fi
  fi
fi

check_privileges
