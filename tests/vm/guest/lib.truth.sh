#!/bin/sh
# What iostack's truth checks in the kernel matrix share (iostack.truth.sh: the patterns
# production software is made of; iostack.stacked.sh: stacked devices and the filesystems whose
# workers end a call's I/O): a disk whose I/O blk-throttle (cgroup2 io.max) holds, so that
# waiting for its own I/O is most of every call, and the check of a call's parts against the
# helper's own clocks and the kernel's delay accounting of its thread (taskstats). Sourced by
# them, after they name their checks in $checks. Runs under busybox sh (see lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
IOSTACK_TOOL=iostack
mnt="$IOSTACK_WORK/truth"
cg=""
dms=""
cleanup() {
  tool_cleanup
  for d in $dms; do dmsetup remove "$d" 2>/dev/null; done
  umount "$mnt" 2>/dev/null
  [ -n "$cg" ] && rmdir "$cg" 2>/dev/null
}
trap cleanup EXIT

helpers=${IOSTACK_HELPERS:-/iostack/helpers}
iop="$helpers/io_patterns"
fast=${IOSTACK_FAST_DISK:?}
xfs=${IOSTACK_XFS_DISK:-}
btrfs=${IOSTACK_BTRFS_DISK:-}
# Delay accounting is off by default from 5.14 (on in 5.10, where the knob does not exist).
echo 1 >/proc/sys/kernel/task_delayacct 2>/dev/null
# The scheduler's delayed dequeue (6.12+: sched_entity.sched_delayed), under which delay
# accounting counts I/O waits from stale starts (own_check). The name whole, one string of BTF's
# table: a search for the text found 6.1's perf_sched_delayed, and 6.1's I/O wait was never used.
delayed_dequeue=0
tr '\000' '\n' </sys/kernel/btf/vmlinux 2>/dev/null | grep -qx sched_delayed && delayed_dequeue=1

# na_each WHY CHECK...: each NA for WHY: the sourcing script names every check it reports in
# $checks, so that a machine that can run none says so of each.
na_each() {
  _why=$1
  shift
  for _c in "$@"; do na "$_c" "$_why"; done
}

if [ ! -x "$iop" ]; then
  # shellcheck disable=SC2086 # one word a check
  na_each "no io_patterns helper in this image" $checks
  exit 0
fi
cg=$(cgroup2_dir iostack-truth) || cg=""
if [ -z "$cg" ] || [ ! -e "$cg/io.max" ]; then
  # The CI host binds blk-throttle to cgroup v1's blkio: tests/truth.rs holds it there.
  # shellcheck disable=SC2086 # one word a check
  na_each "no cgroup2 io controller here (io.max): blk-throttle cannot hold the disk (tests/truth.rs holds it with blkio)" $checks
  exit 0
fi

# limit DISK SPEC: io.max of the truth cgroup for DISK ("wiops=10", "riops=10 wiops=10", "max").
limit() {
  if [ "$2" = max ]; then
    echo "$(cat "/sys/block/$1/dev") riops=max wiops=max" >"$cg/io.max"
  else
    echo "$(cat "/sys/block/$1/dev") $2" >"$cg/io.max"
  fi
}

# within A B D: A and B (integers) at most D apart.
within() {
  [ $(($1 - $2)) -le "$3" ] && [ $(($2 - $1)) -le "$3" ]
}

# lock_waits_start NAME: an ftrace instance of its own records io_patterns' threads' switches off
# their CPUs, each with its stack (a trigger), and their wakeups. lock_waits NAME then prints seven
# figures from the kernel's trace, and removes the instance: the writers' sleeps on the inode's
# lock in write() (the rwsem's slow path under ext4_file_write_iter), in ns; of that, the time
# during which some writer slept in its direct write's I/O wait (iomap_dio_rw); the rest; the
# writers' I/O waits summed; how many sleeps of each kind; the events the trace lost. A sleep runs from the switch to
# the wakeup (as iostack's do); a switch's stack is its CPU's next stack event (another CPU's
# events may come between).
lock_waits_start() {
  ftrace_instance "$1" || return 1
  echo 4096 >"$instance/buffer_size_kb" &&
    echo 'prev_comm == "io_patterns"' >"$instance/events/sched/sched_switch/filter" &&
    echo 'stacktrace if prev_comm == "io_patterns"' >"$instance/events/sched/sched_switch/trigger" &&
    echo 'comm == "io_patterns"' >"$instance/events/sched/sched_waking/filter" &&
    echo 1 >"$instance/events/sched/sched_switch/enable" &&
    echo 1 >"$instance/events/sched/sched_waking/enable" &&
    echo 1 >"$instance/tracing_on"
}
lock_waits() {
  _lw="/sys/kernel/tracing/instances/iostack-$1"
  [ -d "$_lw" ] || return 1
  echo 0 >"$_lw/tracing_on"
  # What the ring buffers lost (a full buffer overwrites): the figures are then not the truth.
  _lost=$(awk '/^overrun:/ { n += $2 } END { print n + 0 }' "$_lw"/per_cpu/cpu*/stats)
  echo "$(awk "$lock_waits_sweep" "$_lw/trace") $_lost"
  echo '!stacktrace if prev_comm == "io_patterns"' >"$_lw/events/sched/sched_switch/trigger"
  ftrace_instance_remove "$1" sched/sched_switch sched/sched_waking
}
lock_waits_sweep=$(
  cat <<'AWK'
function tstamp(   k) { for (k = 1; k <= NF; k++) if ($k ~ /^[0-9]+\.[0-9]+:$/) return substr($k, 1, length($k) - 1) + 0; return -1 }
function cpu(   k) { for (k = 1; k <= NF; k++) if ($k ~ /^\[[0-9]+\]$/) return $k; return "" }
function val(key,   k) { for (k = 1; k <= NF; k++) if (index($k, key "=") == 1) return substr($k, length(key) + 2); return "" }
function advance(t) { if (last && t > last) { dt = t - last; if (nrw) { rw += dt * nrw; if (nio) rwio += dt * nrw; else rwoth += dt * nrw } if (nio) io += dt * nio } ; if (t > last) last = t }
/sched_switch:/ { t = tstamp(); advance(t); pid = val("prev_pid"); st = val("prev_state"); c = cpu(); pend[c] = (st != "R" && st != "R+") ? pid : ""; sleeps += (pend[c] != ""); next }
/<stack trace>/ { c = cpu(); cur = pend[c]; pend[c] = ""; frames = ""; next }
/^ *=> / {
  if (cur == "") next
  frames = frames " " $2
  if ($2 == "ext4_file_write_iter" && !(cur in kind)) {
    if (frames ~ / rwsem_down_(write|read)_slowpath/) { kind[cur] = "rw"; nrw++; nrws++ }
    else if (frames ~ / _*iomap_dio_rw/) { kind[cur] = "io"; nio++; nios++ }
  }
  next
}
/sched_waking:/ { t = tstamp(); advance(t); pid = val("pid"); if (pid in kind) { if (kind[pid] == "rw") nrw--; else nio--; delete kind[pid] } ; next }
END { printf "%.0f %.0f %.0f %.0f %d %d\n", rw * 1e9, rwio * 1e9, rwoth * 1e9, io * 1e9, nrws, nios }
AWK
)

# pattern NAME DISK PATTERN FILE N [IOSTACK ARGS]: io_patterns' PATTERN in the truth cgroup,
# traced by iostack -d DISK (its thread, or its process when it has several); the helper's
# output in NAME.wl, iostack's report in NAME.out. With $pin set (e.g. "taskset -c 0"), the
# helper runs under it.
pattern() {
  _n=$1 _d=$2 _p=$3 _f=$4 _c=$5
  shift 5
  # shellcheck disable=SC2086 # $pin: the words on purpose
  start_logged "$IOSTACK_WORK/$_n.wl" ${pin:-} "$iop" "$_p" "$_f" "$_c" --cgroup "$cg"
  _w=$started
  if ! wait_for_line 60 '^ready' "$IOSTACK_WORK/$_n.wl"; then
    kill -KILL "$_w" 2>/dev/null
    log "io_patterns $_p never got ready: $(head -c 300 "$IOSTACK_WORK/$_n.wl")"
    echo "io_patterns $_p never got ready: $(head -c 300 "$IOSTACK_WORK/$_n.wl")" >"$IOSTACK_WORK/$_n.err"
    return 1
  fi
  _who="--tid $(awk '/^ready/ { print $3 }' "$IOSTACK_WORK/$_n.wl")"
  [ "$(awk '/^ready/ { print NF }' "$IOSTACK_WORK/$_n.wl")" -gt 3 ] && _who="-p $_w"
  # shellcheck disable=SC2086 # the words on purpose
  if ! tool_start "$_n" $_who -d "$_d" -j "$@"; then
    kill -KILL "$_w" 2>/dev/null
    return 1
  fi
  # With journeys=1, the calls' journeys beside (NAME_j.out), for a failure's report.
  # shellcheck disable=SC2086
  [ "${journeys:-0}" = 1 ] && tool_start "${_n}_j" $_who -d "$_d" -j --slow 1 "$@"
  kill -USR1 "$_w"
  wait "$_w" || log "io_patterns $_p exited with $?"
  tool_stop "$_n"
  [ "${journeys:-0}" = 1 ] && tool_stop "${_n}_j"
  return 0
}

# explain_rows NAME [ARGS]: the plan's rows on who an I/O is for, to the console (a failure's
# bug report).
explain_rows() {
  _n=$1
  shift
  tool_run "$_n" --explain "$@"
  grep -iE 'throttl|held|flush|clone|stack|below|deferr|work' "$IOSTACK_WORK/$_n.out" "$IOSTACK_WORK/$_n.err" | cut -c1-300 | sed "s/^/iostack: explain: /"
}

# thread_sum NAME KEY: KEY's figure over the helper's threads (`read`, `write`, `sync`: calls;
# `read_ns`...: their time by its clock; blkio_ns: the kernel's I/O wait).
thread_sum() {
  awk -v k="$2" '/^thread / {
      for (i = 3; i < NF; i++) {
        if ($i == k) { s += $(i + 1) }
        else if (k == $i "_ns") { s += $(i + 2) }
      }
    } END { printf "%.0f\n", s }' "$IOSTACK_WORK/$1.wl"
}

# own_check CHECK NAME OP [IOS [TRUTH [journal]]]: the helper's calls of OP counted exactly (and
# IOS requests waited for, if given); their own I/O within 5 points of the truth; others' I/O,
# through a waker or not, at most 5%; the parts adding up. With `journal` (an fsync that waits
# for the journal's commit, which jbd2 or xfs's log worker writes: no kernel calls that an I/O
# wait of the fsync, and README says it is others' I/O through a waker), held against the time
# off a CPU, the I/O through wakers is counted with the own, and others' I/O not through one
# is at most 5%. Every figure held against is the
# kernel's or the helper's, never iostack's. The truth is the kernel's I/O wait (delay
# accounting) where it is usable, else the calls' time off a CPU: per call, the helper's clock
# less the thread's CPU clock and schedstat's wait for a CPU, read around each call (io_patterns
# prints it as OP_off_ns). Usable: not on a kernel with delayed dequeue (6.12+:
# sched_entity.sched_delayed), whose delay accounting counts I/O waits from stale starts (16 s
# for 0.3 s of calls; from boot for a thread's first; 96.6% I/O wait where the calls' own I/O
# was 90.8% and jbd2's commit 4.6%, 2026-11-26), and not more than the calls' time. With TRUTH
# `off-cpu`, always the time off a CPU: a pattern whose thread sleeps only for its own I/O, in a
# wait the kernel does not call an I/O wait on every kernel (inode_dio_wait, xfs's log force:
# 56% and 43% I/O wait on 5.10 and 6.1, 99.7% and 95.8% on 6.12, 2026-11-26); the I/O wait must
# then be no more than it, where usable.
own_check() {
  _c=$1 _n=$2 _o=$3 _ios=${4:-} _truth=${5:-iowait} _journal=${6:-}
  calls=$(op_field "$_n" "$_o" calls)
  total=$(op_field "$_n" "$_o" breakdown.total_ns)
  own=$(($(op_field "$_n" "$_o" breakdown.io_queue_ns) + $(op_field "$_n" "$_o" breakdown.io_device_ns)))
  others=$(op_field "$_n" "$_o" breakdown.others_io_ns)
  _via=$(op_field "$_n" "$_o" breakdown.others_io_via_waker_ns)
  # The requests the helper caused are the calls' own: another thread's that a call had to wait
  # for are counted apart, and bounded as others' I/O below (6 dsync writes on ext4 waited for
  # 13 requests on 6.12 once, 2026-11-26, the 13th's completion waking a writer in an I/O wait
  # for a request it had not submitted: a journal buffer being written, most likely).
  all_ios=$(op_field "$_n" "$_o" ios)
  others_ios=$(op_field "$_n" "$_o" others_ios)
  ios=$((${all_ios:-0} - ${others_ios:-0}))
  want=$(thread_sum "$_n" "$_o")
  theirs=$(thread_sum "$_n" "${_o}_ns")
  off=$(thread_sum "$_n" "${_o}_off_ns")
  blkio=$(thread_sum "$_n" blkio_ns)
  usable=1
  [ "$delayed_dequeue" = 1 ] && usable=0
  [ "$blkio" -gt "$theirs" ] && usable=0
  mine=$own
  [ "$_journal" = journal ] && others=$((others - ${_via:-0}))
  if [ "$_truth" = iowait ] && [ "$usable" = 1 ]; then
    truth=$blkio
    # Both of the kernel's accounts, for a failure's report: where they part, the host's
    # stalls of the guest fell between their clock reads (iostack.truth.sh).
    what="the kernel's I/O wait ($(thread_sum "$_n" blkio_count) waits; off a CPU $off ns)"
  else
    truth=$off
    [ "$_journal" = journal ] && mine=$((own + ${_via:-0}))
    what="off a CPU (the helper's clock less its CPU clock and run_delay, per call; I/O wait $(awk -v b="$blkio" -v c="$theirs" 'BEGIN { printf "%.1f", c ? 100 * b / c : 0 }')%$([ "$usable" = 1 ] || echo ", not usable here"))"
  fi
  shares=$(awk -v o="$mine" -v b="$truth" -v c="$theirs" -v x="${others:-0}" 'BEGIN {
      if (c == 0) { print "? ? ?"; exit }
      printf "%.1f %.1f %.1f\n", 100 * o / c, 100 * b / c, 100 * x / c }')
  own_pct=${shares%% *}
  rest=${shares#* }
  truth_pct=${rest%% *}
  others_pct=${rest#* }
  detail="$calls $_o calls (the helper's $want), $ios I/Os of their own (and $others_ios someone else's): own I/O $own ns of our $total (held against the truth: $mine, $own_pct% of the helper's $theirs), $what $truth_pct%, others' I/O $others_pct% (through wakers ${_via:-0} ns)"
  ok=$(awk -v o="$own_pct" -v t="$truth_pct" -v x="$others_pct" 'BEGIN {
      d = o - t; if (d < 0) d = -d; print (o != "?" && d <= 5 && x <= 5) ? 1 : 0 }')
  # Against the time off a CPU, the usable I/O wait must not be more: else the pattern's waits
  # are I/O waits after all.
  below_truth=1
  if [ "$_truth" = off-cpu ] && [ "$usable" = 1 ] && [ "$blkio" -gt $((off + theirs / 20)) ]; then
    below_truth=0
    detail="$detail; the kernel's I/O wait $blkio ns is more than the time off a CPU"
  fi
  if [ "$calls" = "$want" ] && [ "$ok" = 1 ] && { [ -z "$_ios" ] || [ "$ios" = "$_ios" ]; } &&
    [ -z "$(parts_add_up "$_n")" ] && [ "$below_truth" = 1 ]; then
    pass "$_c" "$detail"
  else
    fail "$_c" "$detail${_ios:+ (want $_ios I/Os)}; $(parts_of "$_n" "$_o") $(parts_add_up "$_n")$(brief "$_n")"
  fi
}
