#!/bin/sh
# biolat's kernel-matrix checks. Each asserts a fact we caused: the number of I/Os we issued
# (cross-checked with /proc/diskstats), their direction, their disk, and the latency the
# hypervisor injected; plus that the -Q start point fits what this kernel offers.
# Runs under busybox sh (see lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
trap tool_cleanup EXIT

N=50      # O_DIRECT 4 KiB writes, then as many reads, on the fast disk
M=4       # writes on the other disk (-D must keep them apart)
SLOW_N=8  # writes on the throttled disk
fast=${IOSTACK_FAST_DISK:?}
other=${IOSTACK_OTHER_DISK:-}
at=$(scratch_block)

# --- explain: the attach plan, recorded, and -Q's start point checked against the kernel -----

tool_run explain --explain
rc_plain=$?
tool_run explain_q -Q --explain
rc_q=$?
if [ "$rc_plain" -eq 0 ] && [ "$rc_q" -eq 0 ] &&
  grep -q '^loaded and attached: ok' "$(out_of explain)" &&
  grep -q '^loaded and attached: ok' "$(out_of explain_q)"; then
  pass explain "--explain and -Q --explain load and attach"
else
  fail explain "exit $rc_plain/$rc_q: $(brief explain_q)"
  log_verbose explain_v -Q --explain
fi
plan() { awk -v role="$2" '$1 == role { print $2; exit }' "$(out_of "$1")"; }
q_start=$(awk '$1 == "-Q" && $2 == "start" { print $3; exit }' "$(out_of explain_q)")
q_planned=$(awk '$1 == "-Q" && $2 == "start" { print $3; exit }' "$(out_of explain)")
path issue "$(plan explain_q issue)"
path complete "$(plan explain_q complete)"
path q_start "${q_start:-none}"
path rq_args "$(awk '$1 == "rq" && $2 == "args" { print ($4 == "pass" ? $5 : "unknown"); exit }' "$(out_of explain)")"
path disk "$(plan explain disk)"
path counted "$(awk '$1 == "counted" { print (index($0, "#defines") ? "rq_flags-#defines" : "rq_flags-from-BTF"); exit }' "$(out_of explain)")"
path fentry "$(awk '$1 == "fentry/fexit:" { print $2; exit }' "$(out_of explain)")"
path kprobes "$(awk '$1 == "kprobes:" { print $2; exit }' "$(out_of explain)")"

# Where -Q must start on this kernel, from what it offers (never from its version): the
# block_io_start tracepoint (6.5+); else a probe on (__)blk_account_io_start where that
# function exists and can be probed; else rq->start_time_ns (block_rq_insert's program).
expected=""
if has_tracepoint block_io_start; then
  expected="tp_btf/block_io_start raw_tp/block_io_start"
else
  for f in __blk_account_io_start blk_account_io_start; do
    if ksym_text "$f" && { kprobes_possible || ftrace_function "$f"; }; then
      expected="fentry/$f kprobe/$f"
      break
    fi
  done
  : "${expected:=tp_btf/block_rq_insert raw_tp/block_rq_insert}"
fi
case " $expected " in
  *" $q_start "*)
    if [ "$q_planned" = "$q_start" ]; then
      pass q-path "-Q starts at $q_start, one of: $expected"
    else
      fail q-path "--explain says -Q would use $q_planned, -Q --explain uses $q_start"
    fi
    ;;
  *)
    if [ -z "$q_start" ]; then
      fail q-path "biolat -Q --explain named no -Q start (exit $rc_q: $(brief explain_q)); expected one of: $expected"
    else
      fail q-path "-Q starts at $q_start, expected one of: $expected"
    fi
    ;;
esac

# --- one workload on the fast disk, watched by five biolats at once --------------------------
# plain and -Q (exact count, -Q >= plain), -F (reads vs writes), -D (per disk), text output.
# All started before the diskstats snapshot and stopped after the second one, and nothing else
# touches the fast disk, so every count must equal the I/Os we issued.

started=""
# Started together (loading is slow under TCG), then each awaited.
tool_spawn plain -d "$fast" -j
tool_spawn queued -Q -d "$fast" -j
tool_spawn flags -F -d "$fast" -j
tool_spawn disks -D -j
tool_spawn text -d "$fast"
for t in plain queued flags disks text; do
  if tool_wait_ready "$t"; then started="$started $t"; fi
done

before=$(disk_ios "$fast")
dd_write "$fast" "$N" "$at"
dd_read "$fast" "$N" "$at"
after=$(disk_ios "$fast")
if [ -n "$other" ]; then dd_write "$other" "$M" 0; fi

for t in plain queued flags disks text; do
  case " $started " in
    *" $t "*)
      tool_stop "$t"
      echo $? >"$IOSTACK_WORK/$t.rc"
      ;;
    *) echo "notstarted" >"$IOSTACK_WORK/$t.rc" ;;
  esac
done
delta=$((after - before))
caused=$((2 * N))

# ok NAME: the tool started, exited 0 after SIGINT, and printed one report.
ok() {
  _rc=$(cat "$IOSTACK_WORK/$1.rc")
  [ "$_rc" = 0 ] || { echo "biolat $1 exit status $_rc: $(brief "$1")"; return 1; }
  case "$1" in text) return 0 ;; esac
  _r=$(json_reports "$(out_of "$1")")
  [ "$_r" = 1 ] || { echo "biolat $1 printed $_r JSON reports, want 1: $(brief "$1")"; return 1; }
}

if why=$(ok plain); then
  got=$(json_total "$(out_of plain)")
  lost=$(json_unseen "$(out_of plain)")
  if [ $((got + lost)) = "$delta" ] && [ "$delta" = "$caused" ]; then
    pass count-exact "biolat -d $fast counted $got + $lost unseen = diskstats delta $delta = $N writes + $N reads; drops: $(json_drops "$(out_of plain)")"
  else
    fail count-exact "biolat -d $fast counted $got, diskstats delta $delta, we caused $caused; drops: $(json_drops "$(out_of plain)")"
  fi
else
  fail count-exact "$why"
fi

if why=$(ok queued) && why=$(ok plain); then
  nq=$(json_total "$(out_of queued)")
  np=$(json_total "$(out_of plain)")
  sq=$(json_sum_ns "$(out_of queued)")
  sp=$(json_sum_ns "$(out_of plain)")
  avgs="-Q avg $((sq / (nq > 0 ? nq : 1))) ns, plain avg $((sp / (np > 0 ? np : 1))) ns"
  uq=$(json_unseen "$(out_of queued)")
  up=$(json_unseen "$(out_of plain)")
  if [ $((nq + uq)) != "$caused" ] || [ $((np + up)) != "$caused" ]; then
    fail queued-avg "counts -Q $nq + $uq unseen, plain $np + $up unseen, want $caused each"
  elif awk -v q="$sq" -v p="$sp" 'BEGIN { exit !(q >= p) }'; then
    pass queued-avg "$avgs over $nq I/Os each"
  else
    fail queued-avg "$avgs: -Q must include the issue-to-completion time plain measures"
  fi
else
  fail queued-avg "$why"
fi

if why=$(ok flags); then
  w=$(json_count_where "$(out_of flags)" 2 '(^|-)Write$')
  r=$(json_count_where "$(out_of flags)" 2 '(^|-)Read$')
  labels=$(json_hists "$(out_of flags)" | awk -F'\t' '{ printf "%s%s=%s", (NR > 1 ? "," : ""), $2, $3 }')
  u=$(json_unseen "$(out_of flags)")
  if [ "$w" -le "$N" ] && [ "$r" -le "$N" ] && [ $((w + r + u)) = "$caused" ]; then
    pass flags "writes $w, reads $r, unseen $u ($labels)"
  else
    fail flags "writes $w, reads $r, unseen $u, want $N/$N ($labels)"
  fi
else
  fail flags "$why"
fi

if why=$(ok disks); then
  nf=$(json_count_where "$(out_of disks)" 1 "^$fast\$")
  seen=$(json_hists "$(out_of disks)" | awk -F'\t' '{ c[$1] += $3 } END { for (d in c) { printf "%s%s=%s", sep, d, c[d]; sep = " " } }')
  nf=$((nf + $(json_unseen "$(out_of disks)" "$fast")))
  if [ -n "$other" ]; then
    no=$(($(json_count_where "$(out_of disks)" 1 "^$other\$") + $(json_unseen "$(out_of disks)" "$other")))
  else
    no=$M
  fi
  if [ "$nf" = "$caused" ] && [ "$no" = "$M" ]; then
    pass per-disk "$fast=$nf${other:+ $other=$no} (all disks: $seen)"
  else
    fail per-disk "$fast=$nf (want $caused)${other:+ $other=$no (want $M)}; all disks: $seen"
  fi
else
  fail per-disk "$why"
fi

if why=$(ok text); then
  txt=$(out_of text)
  shown=$(awk '$1 == "count" { sub(/,/, "", $2); print $2; exit }' "$txt")
  if [ "$(head -n 1 "$txt")" = "Tracing block device I/O... Hit Ctrl-C to end." ] &&
    grep -q '^     usecs               : count    distribution$' "$txt" &&
    [ $((${shown:-0} + $(text_unseen "$txt"))) = "$caused" ]; then
    pass text "bcc table and '$(grep '^     count ' "$txt" | sed 's/^ *//' | cut -c1-60)...'"
  else
    fail text "unexpected text report: $(head -c 300 "$txt")"
  fi
else
  fail text "$why"
fi

# --- injected latency: every I/O on the throttled disk is slower than the throttle ------------

slow=${IOSTACK_SLOW_DISK:-}
if [ -z "$slow" ]; then
  na throttled "no throttled disk here"
elif ! tool_start slow -F -d "$slow" -j; then
  fail throttled "biolat -F -d $slow did not start: $(brief slow)"
else
  # One read spends the throttle's burst allowance (see run-all.sh); -F keeps it apart.
  dd_read "$slow" 1 0
  dd_write "$slow" "$SLOW_N" 128
  tool_stop slow
  rc=$?
  out=$(out_of slow)
  floor_us=$((IOSTACK_THROTTLE_MS * 900))
  w=$(json_count_where "$out" 2 '(^|-)Write$')
  below=$(json_below "$out" 2 '(^|-)Write$' "$floor_us")
  p50=$(json_hists "$out" | awk -F'\t' '$2 ~ /(^|-)Write$/ { printf "%d", $5 / 1000; exit }')
  max=$(json_hists "$out" | awk -F'\t' '$2 ~ /(^|-)Write$/ { printf "%d", $6 / 1000; exit }')
  lowest=$(json_hists "$out" | awk -F'\t' '$2 ~ /(^|-)Write$/ { split($7, s, ","); split(s[1], v, ":"); print v[1] "-" v[2]; exit }')
  detail="writes $w, lowest log2 slot ${lowest:-?} us, p50 ${p50:-?} us, max ${max:-?} us, $below below $floor_us us (throttle ${IOSTACK_THROTTLE_MS} ms)"
  if [ "$rc" -ne 0 ]; then
    fail throttled "exit status $rc: $(brief slow)"
  elif [ "$w" = "$SLOW_N" ] && [ "$below" = 0 ] && [ "${p50:-0}" -ge "$floor_us" ]; then
    pass throttled "$detail"
  else
    fail throttled "$detail; want $SLOW_N writes, none below, p50 >= $floor_us us"
  fi
fi

# --- accounted: every request /proc/diskstats counts is seen, or reported unseen -----------
# O_DIRECT reads, then an ext4 filesystem on the same disk writing with fsync, so that the flush
# machinery runs (PREFLUSH/FUA writes, empty flushes, the internal flush requests diskstats leaves
# out). The programs' own count of the requests diskstats counts (`accounted.<disk>.seen`) plus
# what they report unseen must equal diskstats' reads + writes + discards + flushes, exactly; in
# the VMs, where the kernel runs every BPF program, nothing may be unseen, so the count alone
# must match: a wrong RQF_* bit, counting too many or too few, fails here.
READS=2000
FSYNCS=20
mnt="$IOSTACK_WORK/mnt"
if ! tool_start acct -D -j; then
  fail accounted "biolat -D -j did not start: $(brief acct)"
else
  before=$(disk_requests "$fast")
  flushes0=$(awk -v d="$fast" '$3 == d { print $19 + 0 }' /proc/diskstats)
  dd_read "$fast" "$READS" "$at"
  mkdir -p "$mnt"
  if mount -t ext4 "/dev/$fast" "$mnt" 2>"$IOSTACK_WORK/mount.err"; then
    i=0
    while [ "$i" -lt "$FSYNCS" ]; do
      dd if=/dev/zero of="$mnt/f$i" bs=4096 count=4 conv=fsync 2>/dev/null
      i=$((i + 1))
    done
    rm -f "$mnt"/f*
    umount "$mnt"
    fs="$FSYNCS fsync'ed files on ext4"
  else
    fs="no ext4 writes (mount failed: $(head -c 100 "$IOSTACK_WORK/mount.err"))"
  fi
  after=$(disk_requests "$fast")
  flushes=$(($(awk -v d="$fast" '$3 == d { print $19 + 0 }' /proc/diskstats) - flushes0))
  tool_stop acct
  rc=$?
  out=$(out_of acct)
  seen=$(json_seen "$out" "$fast")
  lost=$(json_unseen "$out" "$fast")
  delta=$((after - before))
  detail="$fast: diskstats $delta requests ($flushes flushes; $READS reads, $fs), biolat saw $seen, $lost unseen"
  if [ "$rc" -ne 0 ]; then
    fail accounted "exit status $rc: $(brief acct)"
  elif [ $((seen + lost)) != "$delta" ]; then
    fail accounted "$detail: seen + unseen must equal diskstats"
  elif [ -n "${IOSTACK_SLOW_DISK:-}" ] && [ "$lost" != 0 ]; then
    fail accounted "$detail: this kernel runs every BPF program, nothing may be unseen"
  else
    pass accounted "$detail"
  fi
fi
