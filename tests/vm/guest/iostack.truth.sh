#!/bin/sh
# iostack tells the truth on every kernel of the matrix (tests/truth.rs on the host): the patterns
# production software is made of, each made by io_patterns alone on a disk whose I/O blk-throttle
# (cgroup2 io.max) holds, so that waiting for its own I/O is most of every call. Held against
# the helper's own clocks and the kernel's delay accounting of its thread (taskstats): the calls
# counted exactly, their own I/O within 5 points of the kernel's I/O wait, others' I/O under 5%.
# Then what only the VMs have: blk-throttle seen taking a bio (function hooks), stacked devices
# (dm-linear, dm-delay: the kernels' own modules), btrfs. Runs under busybox sh (see lib.sh).
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

if [ ! -x "$iop" ]; then
  na truth "no io_patterns helper in this image"
  exit 0
fi
cg=$(cgroup2_dir iostack-truth) || cg=""
if [ -z "$cg" ] || [ ! -e "$cg/io.max" ]; then
  # The CI host binds blk-throttle to cgroup v1's blkio: tests/truth.rs holds it there.
  na truth "no cgroup2 io controller here (io.max): blk-throttle cannot hold the disk"
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

# pattern NAME DISK PATTERN FILE N [IOSTACK ARGS]: io_patterns' PATTERN in the truth cgroup,
# traced by iostack -d DISK (its thread, or its process when it has several); the helper's
# output in NAME.wl, iostack's report in NAME.out.
pattern() {
  _n=$1 _d=$2 _p=$3 _f=$4 _c=$5
  shift 5
  "$iop" "$_p" "$_f" "$_c" --cgroup "$cg" >"$IOSTACK_WORK/$_n.wl" 2>&1 &
  _w=$!
  wait_for_line 60 '^ready' "$IOSTACK_WORK/$_n.wl"
  _who="--tid $(awk '/^ready/ { print $3 }' "$IOSTACK_WORK/$_n.wl")"
  [ "$(awk '/^ready/ { print NF }' "$IOSTACK_WORK/$_n.wl")" -gt 3 ] && _who="-p $_w"
  # shellcheck disable=SC2086 # the words on purpose
  if ! tool_start "$_n" $_who -d "$_d" -j "$@"; then
    kill -KILL "$_w" 2>/dev/null
    return 1
  fi
  kill -USR1 "$_w"
  wait "$_w" || log "io_patterns $_p exited with $?"
  tool_stop "$_n"
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

# own_check CHECK NAME OP [IOS]: the helper's calls of OP counted exactly (and IOS requests
# waited for, if given); their own I/O within 5 points of the kernel's I/O wait; others' I/O
# under 5%; the parts adding up.
own_check() {
  _c=$1 _n=$2 _o=$3 _ios=${4:-}
  calls=$(op_field "$_n" "$_o" calls)
  total=$(op_field "$_n" "$_o" breakdown.total_ns)
  own=$(($(op_field "$_n" "$_o" breakdown.io_queue_ns) + $(op_field "$_n" "$_o" breakdown.io_device_ns)))
  others=$(op_field "$_n" "$_o" breakdown.others_io_ns)
  ios=$(op_field "$_n" "$_o" ios)
  want=$(thread_sum "$_n" "$_o")
  theirs=$(thread_sum "$_n" "${_o}_ns")
  blkio=$(thread_sum "$_n" blkio_ns)
  shares=$(awk -v o="$own" -v t="${total:-0}" -v b="$blkio" -v c="$theirs" -v x="${others:-0}" 'BEGIN {
      if (t == 0 || c == 0) { print "? ? ?"; exit }
      printf "%.1f %.1f %.1f\n", 100 * o / t, 100 * b / c, 100 * x / t }')
  own_pct=${shares%% *}
  rest=${shares#* }
  truth_pct=${rest%% *}
  others_pct=${rest#* }
  detail="$calls $_o calls (the helper's $want), $ios I/Os: own I/O $own_pct% of $total ns, the kernel's I/O wait $truth_pct% of $theirs ns (delay accounting), others' I/O $others_pct%"
  ok=$(awk -v o="$own_pct" -v t="$truth_pct" -v x="$others_pct" 'BEGIN {
      d = o - t; if (d < 0) d = -d; print (o != "?" && d <= 5 && x <= 5) ? 1 : 0 }')
  if [ "$calls" = "$want" ] && [ "$ok" = 1 ] && { [ -z "$_ios" ] || [ "$ios" = "$_ios" ]; } &&
    [ -z "$(parts_add_up "$_n")" ] && [ "$blkio" -le "$theirs" ]; then
    pass "$_c" "$detail"
  else
    fail "$_c" "$detail${_ios:+ (want $_ios I/Os)} $(parts_add_up "$_n")$(brief "$_n")"
  fi
}

# --- ext4 on the fast disk, its writes held to 10 a second ------------------------------------

if mounted "$fast" "$mnt" ext4 noatime; then
  limit "$fast" "wiops=10"
  # A write and the flush the kernel sends for it (virtio-blk: a volatile cache, no FUA).
  if pattern dsync "$fast" dsync "$mnt/log" 6; then own_check dsync dsync write 12; else fail dsync "$(brief dsync)"; fi
  if pattern ddsync "$fast" direct-dsync "$mnt/dlog" 6; then own_check direct-dsync ddsync write 12; else fail direct-dsync "$(brief ddsync)"; fi
  # PostgreSQL's WAL: fdatasync after an overwrite.
  if pattern fdatasync "$fast" overwrite-fdatasync "$mnt/wal" 6; then own_check fdatasync fdatasync sync 12; else fail fdatasync "$(brief fdatasync)"; fi
  # Appends whose unwritten extents a kernel worker converts (dioread_nolock), and the journal.
  if pattern append "$fast" append-fsync "$mnt/app" 5; then own_check append-fsync append sync; else fail append-fsync "$(brief append)"; fi
  # An unaligned direct write behind a write in flight: the filesystem waits for it, on
  # kernels where that wait is not an I/O wait as well.
  if pattern unaligned "$fast" aio-unaligned "$mnt/aio" 5; then own_check unaligned unaligned write; else fail unaligned "$(brief unaligned)"; fi
  # Eight writers on one O_APPEND|O_DIRECT file: each waits for the lock, held across the
  # writes of those before it (their I/O, from waker to waker), then for its own.
  if pattern appenders "$fast" appenders "$mnt/convoy" 3; then
    total=$(op_field appenders write breakdown.total_ns)
    sleep_ns=$(op_field appenders write breakdown.other_sleep_ns)
    via=$(op_field appenders write breakdown.others_io_via_waker_ns)
    calls=$(op_field appenders write calls)
    detail="$calls writes of 8 writers: other sleep $sleep_ns of $total ns, others' I/O through wakers $via ns"
    if [ "$calls" = 24 ] && [ $((sleep_ns * 20)) -le "$total" ] && [ "$via" -gt 0 ] &&
      [ -z "$(parts_add_up appenders)" ]; then
      pass convoy "$detail"
    else
      fail convoy "$detail $(parts_add_up appenders)"
    fi
  else
    fail convoy "$(brief appenders)"
  fi
  # A sequential read of an evicted file, free: its next reads wait for its own readahead.
  limit "$fast" max
  if pattern seqread "$fast" seqread "$mnt/big" 200; then own_check readahead seqread read; else fail readahead "$(brief seqread)"; fi
  umount "$mnt"
else
  fail dsync "could not mount the fast disk's ext4"
fi

# --- xfs: its appends' unwritten extents ended in a worker ------------------------------------

if [ -z "$xfs" ]; then
  na xfs-append "no xfs disk here"
elif mounted "$xfs" "$mnt" xfs; then
  limit "$xfs" "wiops=10"
  if pattern xappend "$xfs" append-fsync "$mnt/app" 5; then own_check xfs-append xappend sync; else fail xfs-append "$(brief xappend)"; fi
  limit "$xfs" max
  umount "$mnt"
else
  fail xfs-append "could not mount $xfs"
fi

# --- btrfs: reads whose checksums a worker checks -----------------------------------------------

if [ -z "$btrfs" ] || ! grep -q btrfs /proc/filesystems; then
  na btrfs-read "no btrfs disk or module here"
elif mounted "$btrfs" "$mnt" btrfs; then
  limit "$btrfs" "riops=10"
  if pattern bread "$btrfs" seqread "$mnt/big" 12; then
    own_check btrfs-read bread read
    if grep -q 'btrfs-read FAIL' "$IOSTACK_WORK/checks" 2>/dev/null; then
      # The journeys of a second run on a fresh filesystem, for the bug report.
      umount "$mnt"
      mounted "$btrfs" "$mnt" btrfs
      pattern bread_j "$btrfs" seqread "$mnt/big2" 12 --slow 1
      "$helpers/json_flat" "$(out_of bread_j)" | grep -v '\.layers\.' | grep -v '\.\(fd\|file\|op\|pid\|ret\|syscall\|tid\|time\|comm\|sector\|disk\)' | head -120 | sed 's/^/iostack: btrfs journey: /'
    fi
  else
    fail btrfs-read "$(brief bread)"
  fi
  limit "$btrfs" max
  umount "$mnt"
else
  fail btrfs-read "could not mount $btrfs"
fi

# --- blk-throttle seen taking a bio: a held read is its own, with the time it was held -------

at=$(scratch_block)
limit "$fast" "riops=10"
dd_read "$fast" 1 "$at"
"$helpers/breakdown_workload" direct "/dev/$fast" 3 --cgroup "$cg" >"$IOSTACK_WORK/held.wl" &
hw=$!
wait_for_line 60 '^ready' "$IOSTACK_WORK/held.wl"
if tool_start held --tid "$(awk '/^ready/ { print $3 }' "$IOSTACK_WORK/held.wl")" --slow 20 -j; then
  kill -USR1 "$hw"
  wait "$hw"
  tool_stop held
  "${helpers}/json_flat" "$(out_of held)" >"$IOSTACK_WORK/held.flat"
  n=$(grep -c '\.lat_ns ' "$IOSTACK_WORK/held.flat")
  own=$(grep -c '\.io\.0\.how "own"' "$IOSTACK_WORK/held.flat")
  held=$(awk '/\.io\.0\.held_ns / && $2 >= 50000000 { n++ } END { print n + 0 }' "$IOSTACK_WORK/held.flat")
  detail="$n reads slower than 20 ms: $own with their own read, $held held by blk-throttle 50 ms or more ($(grep -m1 '^  throttle' "$(out_of held)" 2>/dev/null | cut -c1-80))"
  if [ "$n" -ge 1 ] && [ "$own" = "$n" ] && [ "$held" = "$n" ]; then
    pass held "$detail"
  elif ! ftrace_function __blk_throtl_bio && ! ftrace_function blk_throtl_bio; then
    na held "no function hook on blk-throttle here: $detail"
  else
    fail held "$detail: $(head -c 400 "$(out_of held)")"
  fi
else
  kill -KILL "$hw" 2>/dev/null
  fail held "$(brief held)"
fi
limit "$fast" max

# --- a pid namespace: -p of that namespace's pid, through the scheduler ------------------------

if mounted "$fast" "$mnt" ext4 noatime && command -v unshare >/dev/null; then
  limit "$fast" "wiops=10"
  unshare -p -f --mount-proc sh -c "
    $iop dsync $mnt/nslog 4 --cgroup $cg >$IOSTACK_WORK/pidns.wl 2>&1 & w=\$!
    i=0; until grep -qs '^ready' $IOSTACK_WORK/pidns.wl || [ \$i -gt 600 ]; do sleep 0.1; i=\$((i + 1)); done
    $IOSTACK_BIN/iostack -p \$w -d $fast -j >$IOSTACK_WORK/pidns.out 2>$IOSTACK_WORK/pidns.err & t=\$!
    i=0; until grep -qs 'Hit Ctrl-C' $IOSTACK_WORK/pidns.out $IOSTACK_WORK/pidns.err || [ \$i -gt 600 ]; do sleep 0.1; i=\$((i + 1)); done
    kill -USR1 \$w; wait \$w; kill -INT \$t; wait \$t; echo \"nspid \$w\" >>$IOSTACK_WORK/pidns.wl"
  own_check pidns pidns write 8
  limit "$fast" max
  umount "$mnt"
else
  na pidns "no util-linux unshare or no ext4 here"
fi

# --- stacked devices: dm-linear and dm-delay over the fast disk's scratch area ------------------

if ! command -v dmsetup >/dev/null || ! grep -qw device-mapper /proc/misc 2>/dev/null; then
  na dm-linear "no dmsetup or no device-mapper (dm_mod) here"
  na dm-delay "no dmsetup or no device-mapper (dm_mod) here"
  exit 0
fi
size=$((16 * 2048))
start=$((at * 8 + 2048))
dm_check() {
  _c=$1 _name=$2 _table=$3
  if ! dmsetup create "$_name" --table "$_table" 2>"$IOSTACK_WORK/$_c.dm"; then
    fail "$_c" "dmsetup create $_name: $(cat "$IOSTACK_WORK/$_c.dm")"
    return
  fi
  dms="$dms $_name"
  # No udev here: /dev/mapper/NAME is a node of its own, dm-N the kernel's name.
  _dm=dm-$(dmsetup info -c --noheadings -o minor "$_name" | tr -d ' ')
  limit "$_dm" "riops=10"
  dd_read "$_dm" 1 0
  "$helpers/breakdown_workload" direct "/dev/$_dm" 4 --cgroup "$cg" >"$IOSTACK_WORK/$_c.wl" &
  _w=$!
  wait_for_line 60 '^ready' "$IOSTACK_WORK/$_c.wl"
  before=$(disk_requests "$fast")
  if tool_start "$_c" --tid "$(awk '/^ready/ { print $3 }' "$IOSTACK_WORK/$_c.wl")" -d "$_dm" -j &&
    tool_start "${_c}_j" --tid "$(awk '/^ready/ { print $3 }' "$IOSTACK_WORK/$_c.wl")" -d "$_dm" --slow 1 -j; then
    kill -USR1 "$_w"
    wait "$_w"
    tool_stop "$_c"
    tool_stop "${_c}_j"
    after=$(disk_requests "$fast")
    reads=$(op_field "$_c" read calls)
    ios=$(op_field "$_c" read ios)
    total=$(op_field "$_c" read breakdown.total_ns)
    own=$(($(op_field "$_c" read breakdown.io_queue_ns) + $(op_field "$_c" read breakdown.io_device_ns)))
    unlinked=$("${helpers}/json_flat" "$(out_of "$_c")" | awk '$1 == "0.drops.unlinked" { print $2 }')
    below=$(grep -c "\"stacked_on\":\"$_dm\"" "$(out_of "${_c}_j")")
    detail="-d $_dm (${_table#* * }): $reads reads, $ios I/Os waited for ($((after - before)) requests on $fast), own I/O $own of $total ns, $below journeys with I/O $_dm → $fast, $unlinked unlinked"
    if [ "$reads" = 4 ] && [ "$ios" = 4 ] && [ $((own * 100)) -ge $((total * 95)) ] &&
      [ "$unlinked" = 0 ] && [ "$below" -ge 1 ] && [ -z "$(parts_add_up "$_c")" ]; then
      pass "$_c" "$detail"
    else
      fail "$_c" "$detail $(parts_add_up "$_c")$(brief "$_c")"
    fi
  else
    kill -KILL "$_w" 2>/dev/null
    fail "$_c" "$(brief "$_c")"
    log_verbose "${_c}_v" -d "$_dm" --explain
  fi
  limit "$_dm" max
}
dm_check dm-linear iostack-lin "0 $size linear /dev/$fast $start"
if grep -qw delay /proc/modules 2>/dev/null || modprobe dm_delay 2>/dev/null || [ -e /sys/module/dm_delay ]; then
  # Each read held 50 ms by dm-delay, which queues its clone from a worker.
  dm_check dm-delay iostack-delay "0 $size delay /dev/$fast $start 50"
else
  na dm-delay "no dm_delay module here"
fi
exit 0
