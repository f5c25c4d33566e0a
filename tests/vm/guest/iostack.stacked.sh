#!/bin/sh
# iostack tells the truth of calls whose I/O goes through more than the disk's queue, on every
# kernel of the matrix: xfs appends whose unwritten extents a worker converts, btrfs reads whose
# checksums a worker checks, and stacked devices (dm-linear, dm-delay: the kernels' own modules)
# traced by -d of the device and of the disk under it. Held as iostack.truth.sh's patterns are
# (lib.truth.sh), in a VM of its own. Runs under busybox sh (see lib.sh).
set -u
checks="xfs-append btrfs-read dm-linear dm-linear-below dm-delay dm-delay-below"
. "$(dirname "$0")/lib.truth.sh"

# --- xfs: its appends' unwritten extents ended in a worker ------------------------------------

if [ -z "$xfs" ]; then
  na xfs-append "no xfs disk here"
elif mounted "$xfs" "$mnt" xfs; then
  limit "$xfs" "wiops=10"
  if pattern xappend "$xfs" append-fsync "$mnt/app" 5; then own_check xfs-append xappend sync "" off-cpu journal; else fail xfs-append "$(brief xappend)"; fi
  limit "$xfs" max
  umount "$mnt"
else
  fail xfs-append "could not mount $xfs"
fi

# --- btrfs: reads whose checksums a worker checks -----------------------------------------------

if [ -z "$btrfs" ] || ! grep -q btrfs /proc/filesystems; then
  na btrfs-read "no btrfs disk or module here"
elif mounted "$btrfs" "$mnt" btrfs; then
  # Five reads a second: each held read waits ~200 ms, not ~100 ms, and the calls take 400-700
  # ms, not 110-220 ms. Under QEMU's TCG, guest time runs on while the host keeps a vCPU off its
  # CPU, so two probes of one switch can read clocks a host timeslice apart: in 48 runs of these
  # reads at riops=10 beside the kernel's own switch trace (6.1 and 6.12, 2026-11-28), one
  # sched_switch was stamped 4.5 ms apart by two ftrace instances, and the I/O wait or the
  # helper's off-CPU time was up to 5.75 ms off iostack's (which was within 0.2 ms of one of the
  # three in 46); 5 points of 110 ms is 5.5 ms. At riops=5, 30 runs beside two CPU hogs
  # (16 on 6.1, 14 on 6.12): 0.34 points at most. (CI32's 6.1 run, 28 ms apart in 218 ms, is
  # more than this explains; it was not traced.)
  limit "$btrfs" "riops=5"
  journeys=1
  if pattern bread "$btrfs" seqread "$mnt/big" 12; then
    journeys=0
    own_check btrfs-read bread read
    if grep -q 'btrfs-read FAIL' "$IOSTACK_WORK/checks" 2>/dev/null; then
      # The calls' journeys, and the plan, for the bug report.
      grep '"io"' "$(out_of bread_j)" | head -8 | cut -c1-1500 | sed 's/^/iostack: btrfs journey: /'
      explain_rows bread_x -d "$btrfs"
    fi
  else
    journeys=0
    fail btrfs-read "$(brief bread)"
  fi
  limit "$btrfs" max
  umount "$mnt"
else
  fail btrfs-read "could not mount $btrfs"
fi

# The fast disk's scratch area, past the filesystems the checks make on it.
at=$(scratch_block)

# --- stacked devices: dm-linear and dm-delay over the fast disk's scratch area ------------------

if ! command -v dmsetup >/dev/null || ! grep -qw device-mapper /proc/misc 2>/dev/null; then
  na_each "no dmsetup or no device-mapper (dm_mod) here" dm-linear dm-linear-below dm-delay dm-delay-below
  exit 0
fi
size=$((16 * 2048))
start=$((at * 8 + 2048))
# dm_check CHECK NAME TABLE [LATE]: 4 direct reads of a device-mapper device with TABLE, traced
# by -d of it and -d of the disk under it. LATE=1: its target submits its clones later from a
# worker, which a kernel whose plan says "late clones" cannot link (NA there, with the figures).
dm_check() {
  _c=$1 _name=$2 _table=$3 _late=${4:-0}
  if ! dmsetup create "$_name" --table "$_table" 2>"$IOSTACK_WORK/$_c.dm"; then
    fail "$_c" "dmsetup create $_name: $(cat "$IOSTACK_WORK/$_c.dm")"
    fail "${_c}-below" "no $_name to read through"
    return
  fi
  dms="$dms $_name"
  # No udev here: /dev/mapper/NAME is a node of its own, dm-N the kernel's name.
  _dm=dm-$(dmsetup info -c --noheadings -o minor "$_name" | tr -d ' ')
  limit "$_dm" "riops=10"
  dd_read "$_dm" 1 0
  tool_run "${_c}_x" --explain -d "$_dm"
  start_logged "$IOSTACK_WORK/$_c.wl" "$helpers/breakdown_workload" direct "/dev/$_dm" 4 --cgroup "$cg" --whole
  _w=$started
  wait_for_line 60 '^ready' "$IOSTACK_WORK/$_c.wl"
  before=$(disk_requests "$fast")
  # Beside it, -d of the disk under the device: the calls on the device over it are the
  # disk's too, with the same own I/O.
  if tool_start "$_c" --tid "$(awk '/^ready/ { print $3 }' "$IOSTACK_WORK/$_c.wl")" -d "$_dm" -j &&
    tool_start "${_c}_j" --tid "$(awk '/^ready/ { print $3 }' "$IOSTACK_WORK/$_c.wl")" -d "$_dm" --slow 1 -j &&
    tool_start "${_c}_below" --tid "$(awk '/^ready/ { print $3 }' "$IOSTACK_WORK/$_c.wl")" -d "$fast" -j; then
    kill -USR1 "$_w"
    wait "$_w"
    tool_stop "$_c"
    tool_stop "${_c}_j"
    tool_stop "${_c}_below"
    b_reads=$(op_field "${_c}_below" read calls)
    b_ios=$(op_field "${_c}_below" read ios)
    b_total=$(op_field "${_c}_below" read breakdown.total_ns)
    b_own=$(($(op_field "${_c}_below" read breakdown.io_queue_ns) + $(op_field "${_c}_below" read breakdown.io_device_ns)))
    b_detail="-d $fast under $_dm: $b_reads reads, $b_ios I/Os, own I/O $b_own of $b_total ns"
    after=$(disk_requests "$fast")
    reads=$(op_field "$_c" read calls)
    ios=$(op_field "$_c" read ios)
    total=$(op_field "$_c" read breakdown.total_ns)
    own=$(($(op_field "$_c" read breakdown.io_queue_ns) + $(op_field "$_c" read breakdown.io_device_ns)))
    unlinked=$("${helpers}/json_flat" "$(out_of "$_c")" | awk '$1 == "0.drops.unlinked" { print $2 }')
    below=$(grep -c "\"stacked_on\":\"$_dm\"" "$(out_of "${_c}_j")")
    detail="-d $_dm (${_table#* * }): $reads reads, $ios I/Os waited for ($((after - before)) requests on $fast), own I/O $own of $total ns, $below journeys with I/O $_dm → $fast, $unlinked unlinked"
    late=$(grep -c 'late clones' "$IOSTACK_WORK/${_c}_x.out" 2>/dev/null)
    # The reads wait for nothing but their own I/O: of the time the kernel took them off a CPU
    # (the calls' time less its on a CPU and waiting for one), 95% is own I/O; and no more of
    # the calls is on a CPU or waiting for one than the kernel counts over the reads
    # (schedstat, from before the first read to after the last: the calls and the loop between
    # them; read inside the first read, as for agrees, they missed its way to its first wait:
    # 76 ms by iostack against 61 ms for 4 reads through dm-delay on 6.1, CI, 2026-11-28). Not a share of the calls' time: on a busy CI host a TCG guest's CPU is taken from
    # it while the reader runs, which its kernel counts as the reader's time on a CPU (110 ms of
    # 434 in one run on 6.12, 2026-11-26).
    busy=$(($(kernel_figure "$_c" exec_ns) + $(kernel_figure "$_c" run_delay_ns)))
    detail="$detail; the kernel: on a CPU or waiting for one $busy ns over the reads ($(kernel_figure "$_c" elapsed_ns) ns from its first figures to its last); $(parts_of "$_c" read)"
    b_detail="$b_detail; $(parts_of "${_c}_below" read)"
    if [ "$reads" = 4 ] && [ "$ios" = 4 ] && own_off_cpu "$own" "$total" "$busy" &&
      [ "$unlinked" = 0 ] && [ "$below" -ge 1 ] && [ -z "$(parts_add_up "$_c")" ]; then
      pass "$_c" "$detail"
    elif [ "$_late" = 1 ] && [ "${late:-0}" -ge 1 ] && [ "$reads" = 4 ]; then
      na "$_c" "this kernel's dm core traces no remap of a clone its target submits later (--explain says so): $detail"
    else
      fail "$_c" "$detail $(parts_add_up "$_c")$(brief "$_c")"
    fi
    if [ "$b_reads" = 4 ] && [ "$b_ios" = 4 ] && own_off_cpu "$b_own" "$b_total" "$busy" &&
      [ -z "$(parts_add_up "${_c}_below")" ]; then
      pass "${_c}-below" "$b_detail"
    elif [ "$_late" = 1 ] && [ "${late:-0}" -ge 1 ] && [ "$b_reads" = 4 ]; then
      na "${_c}-below" "as $_c: $b_detail"
    else
      fail "${_c}-below" "$b_detail $(parts_add_up "${_c}_below")$(brief "${_c}_below")"
    fi
  else
    kill -KILL "$_w" 2>/dev/null
    fail "$_c" "$(brief "$_c")"
    fail "${_c}-below" "$(brief "${_c}_below")"
    log_verbose "${_c}_v" -d "$_dm" --explain
  fi
  limit "$_dm" max
}
dm_check dm-linear iostack-lin "0 $size linear /dev/$fast $start"
if grep -qw delay /proc/modules 2>/dev/null || modprobe dm_delay 2>/dev/null || [ -e /sys/module/dm_delay ]; then
  # Each read held 50 ms by dm-delay, which queues its clone from a worker.
  dm_check dm-delay iostack-delay "0 $size delay /dev/$fast $start 50" 1
else
  na_each "no dm_delay module here" dm-delay dm-delay-below
fi
exit 0
