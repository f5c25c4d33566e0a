# shellcheck shell=sh
# Helpers for the kernel-matrix check scripts, sourced by run-all.sh and by each <tool>.sh.
#
# These scripts run under busybox sh: in the VM it is the only shell, and on the host run-matrix
# runs them with the same busybox (applets first in PATH), so both columns use the same dd, awk
# and grep. Hence POSIX sh, not bash. No `set -e`: a failed step must be reported as a FAIL
# marker and the next check must still run.
#
# A tool's checks live in tests/vm/guest/<tool>.sh and only call these helpers; run-all.sh finds
# them, so adding a tool never touches the harness.
#
# Environment (set by the VM's init from the kernel command line, or by run-matrix on the host):
#   IOSTACK_BIN          directory holding the tool binaries
#   IOSTACK_HELPERS      directory holding test helpers (examples/*.rs, e.g. syscall_workload)
#   IOSTACK_WORK         scratch directory for tool output
#   IOSTACK_TOOL         the tool whose checks are running (set by run-all.sh)
#   IOSTACK_FAST_DISK    an unthrottled disk nothing else uses (vda; a loop device on the host)
#   IOSTACK_SCRATCH_MIB  offset of the fast disk's raw scratch area, past its ext4 filesystem
#   IOSTACK_OTHER_DISK   a second disk, for per-disk checks (optional)
#   IOSTACK_SLOW_DISK    a disk the hypervisor throttles (optional: unset on the host)
#   IOSTACK_THROTTLE_MS  the least latency each I/O on the slow disk gets (with IOSTACK_SLOW_DISK)
#   IOSTACK_DELAYED_DISK a null_blk disk that completes each request a fixed time after it is
#                        queued, whatever came before (/sys/module/null_blk/parameters/
#                        completion_nsec; mkinitramfs): unset on the host
#
# Serial/stdout markers, one line each (run-matrix parses nothing else):
#   IOSTACK-CHECK <tool> <check> PASS|FAIL|NA <detail>
#   IOSTACK-PATH <tool> <key> <value>
#   IOSTACK-TIME <tool> <check> <milliseconds>   (after each check; <check> "*" is the whole script)
#   IOSTACK-DONE

: "${IOSTACK_BIN:=/iostack/bin}"
: "${IOSTACK_WORK:=/tmp/iostack}"
: "${IOSTACK_TOOL:=harness}"
: "${IOSTACK_SCRATCH_MIB:=0}"
mkdir -p "$IOSTACK_WORK"

# --- markers ------------------------------------------------------------------------------

# check CHECK STATUS DETAIL...: one marker line; the detail is flattened to one line. Then the
# check's time: what passed since the tool's previous marker (or its script's start), which is
# what the check itself ran, as a tool's checks run one after another.
check() {
  _name=$1 _status=$2
  shift 2
  echo "IOSTACK-CHECK $IOSTACK_TOOL $_name $_status $(printf '%s' "$*" | tr '\n\r' '  ')"
  echo "$_name $_status" >>"$IOSTACK_WORK/checks"
  _now=$(now_ms)
  echo "IOSTACK-TIME $IOSTACK_TOOL $_name $((_now - _mark_ms))"
  _mark_ms=$_now
}
pass() { _n=$1; shift; check "$_n" PASS "$@"; }
fail() { _n=$1; shift; check "$_n" FAIL "$@"; }
na() { _n=$1; shift; check "$_n" NA "$@"; }

# check_eq CHECK GOT WANT DETAIL: PASS when the two integers are equal.
check_eq() {
  if [ "$2" = "$3" ]; then pass "$1" "$4 ($2)"; else fail "$1" "$4: got $2, want $3"; fi
}

# path KEY VALUE: which hook the tool chose, for the attach-path table ("none" if the tool
# did not say: the check that ran it reports why).
path() { echo "IOSTACK-PATH $IOSTACK_TOOL $1 ${2:-none}"; }

# log TEXT: context for a human reading the serial log (not parsed).
log() { echo "iostack: $IOSTACK_TOOL: $*"; }

# --- time and disks -------------------------------------------------------------------------

# now_ms: milliseconds since boot (busybox date has no %N; /proc/uptime has centiseconds).
now_ms() {
  awk '{ split($1, t, "."); print t[1] * 1000 + substr(t[2] "00", 1, 2) * 10 }' /proc/uptime
}

# The start of the sourcing script: its first check's time counts from here.
_mark_ms=$(now_ms)

# disk_ios DISK: reads + writes completed on a whole disk (fields 4 and 8 of /proc/diskstats).
disk_ios() {
  awk -v d="$1" '$3 == d { print $4 + $8; found = 1 } END { if (!found) print "none" }' /proc/diskstats
}

# disk_requests DISK: every request the disk completed: reads, writes, discards and flushes
# (fields 4, 8, 15 and 19 of /proc/diskstats; the last two are 0 where the kernel lacks them).
disk_requests() {
  awk -v d="$1" '$3 == d { print $4 + $8 + $15 + $19; found = 1 } END { if (!found) print "none" }' /proc/diskstats
}

# disk_read_ms DISK: the milliseconds its reads took, as /proc/diskstats sums them (each read
# from its request's start, after any blk-throttle hold, to its completion).
disk_read_ms() {
  awk -v d="$1" '$3 == d { print $7; found = 1 } END { if (!found) print "none" }' /proc/diskstats
}

# disk_write_ms DISK: the milliseconds its writes took by the disk's own account (field 8 of
# /proc/diskstats' counters, from each request's start to its end).
disk_write_ms() {
  awk -v d="$1" '$3 == d { print $11; found = 1 } END { if (!found) print "none" }' /proc/diskstats
}

# disk_read_pages DISK: the 4 KiB pages read from it so far (field 6 of /proc/diskstats, 512-byte
# sectors, / 8): what the page cache brought in from that disk, counted when it was read, so a
# page reclaimed since still counts (fincore, afterwards, would miss it).
disk_read_pages() {
  awk -v d="$1" '$3 == d { print int($6 / 8); found = 1 } END { if (!found) print "none" }' /proc/diskstats
}

# disk_present DISK: it is a whole disk the block layer knows.
disk_present() { [ -n "$1" ] && [ -e "/sys/block/$1/dev" ] && [ -b "/dev/$1" ]; }

# dd_write DISK COUNT [SEEK]: COUNT O_DIRECT 4 KiB writes at 4 KiB block SEEK of the disk.
dd_write() {
  dd if=/dev/zero of="/dev/$1" bs=4096 count="$2" seek="${3:-0}" oflag=direct conv=notrunc 2>"$IOSTACK_WORK/dd.err" ||
    { log "dd write on $1 failed: $(cat "$IOSTACK_WORK/dd.err")"; return 1; }
}

# delayed_disk CHECK: sets $delayed (IOSTACK_DELAYED_DISK) and $delay_ns, the time it takes for
# every request by null_blk's own parameters; else reports CHECK NA (no delayed disk here) or
# FAIL (no disk, or null_blk not completing requests from its timer, irqmode 2) and returns 1.
delayed_disk() {
  delayed=${IOSTACK_DELAYED_DISK:-}
  _irqmode=$(cat /sys/module/null_blk/parameters/irqmode 2>/dev/null)
  delay_ns=$([ "$_irqmode" = 2 ] && cat /sys/module/null_blk/parameters/completion_nsec)
  if [ -z "$delayed" ]; then
    na "$1" "no delayed disk here"
    return 1
  elif ! disk_present "$delayed" || [ -z "$delay_ns" ]; then
    fail "$1" "no $delayed from null_blk's timer (irqmode ${_irqmode:-none})"
    return 1
  fi
}

# dd_read DISK COUNT [SKIP]: COUNT O_DIRECT 4 KiB reads.
dd_read() {
  dd if="/dev/$1" of=/dev/null bs=4096 count="$2" skip="${3:-0}" iflag=direct 2>"$IOSTACK_WORK/dd.err" ||
    { log "dd read on $1 failed: $(cat "$IOSTACK_WORK/dd.err")"; return 1; }
}

# --- cgroups ---------------------------------------------------------------------------------

# cgroup2_dir NAME: a new cgroup v2 NAME under the cgroup2 mount (echoed; empty without one).
cgroup2_dir() {
  _root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
  [ -n "$_root" ] || return 1
  rmdir "$_root/$1" 2>/dev/null
  mkdir "$_root/$1" && echo "$_root/$1"
}

# cgroup2_relative DIR: DIR's path relative to the cgroup2 mount (what --cgroup also takes).
cgroup2_relative() {
  _root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
  echo "${1#"$_root"/}"
}

# in_cgroup DIR COMMAND...: runs COMMAND (a program, not a function) inside cgroup DIR.
in_cgroup() {
  _cg=$1
  shift
  sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$_cg" "$@"
}

# scratch_block: first 4 KiB block of the fast disk's raw scratch area (outside the filesystem,
# so raw writes there never corrupt it, even while it is mounted).
scratch_block() { echo $((IOSTACK_SCRATCH_MIB * 256)); }

# --- running a tool -------------------------------------------------------------------------

# tool_spawn NAME ARGS...: starts the tool in the background, its stdout and stderr in
# $IOSTACK_WORK/NAME.out and NAME.err. Several can be spawned, then each awaited with
# tool_wait_ready: loading BPF is slow under TCG, and they load in parallel.
tool_spawn() {
  _name=$1
  shift
  : >"$IOSTACK_WORK/$_name.out"
  : >"$IOSTACK_WORK/$_name.err"
  "$IOSTACK_BIN/$IOSTACK_TOOL" "$@" >"$IOSTACK_WORK/$_name.out" 2>"$IOSTACK_WORK/$_name.err" &
  echo $! >"$IOSTACK_WORK/$_name.pid"
  echo "$IOSTACK_WORK/$_name.pid" >>"$IOSTACK_WORK/running"
}

# tool_start NAME ARGS...: tool_spawn, then tool_wait_ready.
tool_start() {
  tool_spawn "$@"
  tool_wait_ready "$1"
}

# tool_wait_ready NAME: waits until the tool says it is tracing ("Hit Ctrl-C to end": on stdout,
# or on stderr with -j); non-zero if it exits or takes 120 s first.
tool_wait_ready() {
  _pid=$(cat "$IOSTACK_WORK/$1.pid")
  _deadline=$(($(now_ms) + 120000))
  while ! grep -q 'Hit Ctrl-C to end' "$IOSTACK_WORK/$1.out" "$IOSTACK_WORK/$1.err"; do
    if ! pid_alive "$_pid"; then
      log "$1 exited before tracing: $(tail -n 5 "$IOSTACK_WORK/$1.err")"
      return 1
    fi
    if [ "$(now_ms)" -gt "$_deadline" ]; then
      log "$1 did not start tracing within 120 s"
      return 1
    fi
    sleep 0.1
  done
}

# pid_alive PID: running, not a zombie waiting to be reaped.
pid_alive() {
  [ -r "/proc/$1/stat" ] || return 1
  _state=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null)
  [ -n "$_state" ] && [ "$_state" != Z ]
}

# tool_stop NAME: SIGINT (Ctrl-C: the tool prints its final report and exits), then its exit
# status; SIGKILL and status 137 if it has not exited within 60 s.
tool_stop() {
  _pid=$(cat "$IOSTACK_WORK/$1.pid")
  kill -INT "$_pid" 2>/dev/null
  _deadline=$(($(now_ms) + 60000))
  while pid_alive "$_pid"; do
    if [ "$(now_ms)" -gt "$_deadline" ]; then
      log "$1 ignored SIGINT for 60 s: killed"
      kill -KILL "$_pid" 2>/dev/null
      wait "$_pid" 2>/dev/null
      return 137
    fi
    sleep 0.1
  done
  wait "$_pid"
}

# tool_run NAME ARGS...: runs the tool to completion (e.g. --explain, or with an interval and
# count), output in NAME.out/NAME.err; returns its exit status.
tool_run() {
  _name=$1
  shift
  "$IOSTACK_BIN/$IOSTACK_TOOL" "$@" >"$IOSTACK_WORK/$_name.out" 2>"$IOSTACK_WORK/$_name.err"
}

# tool_cleanup: kills whatever tool_start left running (a check script that failed half-way);
# tool scripts call it from an EXIT trap.
tool_cleanup() {
  [ -r "$IOSTACK_WORK/running" ] || return 0
  while read -r _f; do
    _pid=$(cat "$_f" 2>/dev/null) || continue
    if pid_alive "$_pid"; then kill -KILL "$_pid" 2>/dev/null; fi
  done <"$IOSTACK_WORK/running"
  rm -f "$IOSTACK_WORK/running"
}

# kernel_before MAJOR MINOR: whether the running kernel is older than MAJOR.MINOR.
kernel_before() {
  uname -r | awk -F. -v M="$1" -v m="$2" '{ exit !($1 < M || ($1 == M && $2 < m)) }'
}

# util_linux NAME: the path of util-linux's NAME (setpriv, unshare), not busybox's applet of
# that name, which a bare name runs under busybox sh (its applets come first) and which lacks
# the options used here. In the VMs it is in /sbin (tests/vm/mkinitramfs).
util_linux() {
  for _d in /sbin /usr/bin /bin /usr/sbin; do
    if [ -f "$_d/$1" ] && [ ! -L "$_d/$1" ]; then
      echo "$_d/$1"
      return 0
    fi
  done
  return 1
}

# as_nobody NAME CAPS ARGS...: runs the tool as user nobody with only CAPS (setpriv's list,
# e.g. +bpf,+perfmon) inherited and ambient: how the README's systemd unit runs it.
as_nobody() {
  _name=$1
  _caps=$2
  shift 2
  "$(util_linux setpriv)" --reuid=65534 --regid=65534 --clear-groups --inh-caps="-all,$_caps" \
    --ambient-caps="-all,$_caps" "$IOSTACK_BIN/$IOSTACK_TOOL" "$@" \
    >"$IOSTACK_WORK/$_name.out" 2>"$IOSTACK_WORK/$_name.err"
}

# check_privileges [--also CAP] [ARGS...]: the tool loads and attaches (--explain ARGS) as
# nobody with only the capabilities the README documents (bpf and perfmon; before 5.11, whose
# BPF memory is charged to the locked-memory limit, sys_resource too; --also: one a tool needs
# here besides, e.g. sys_admin for a module's BTF, which then covers bpf and perfmon); with one
# of them fewer it refuses in one line that names it. setpriv is util-linux's
# (tests/vm/mkinitramfs copies it in).
check_privileges() {
  _need="bpf perfmon"
  _droppable="bpf perfmon"
  if [ "${1:-}" = --also ]; then
    _need="$_need $2"
    _droppable="$2"
    shift 2
  fi
  if kernel_before 5 11; then
    _need="$_need sys_resource"
    _droppable="$_droppable sys_resource"
  fi
  if ! util_linux setpriv >/dev/null; then
    na privileges "no util-linux setpriv here"
    return
  fi
  # caps_but CAP: setpriv's list of every needed capability but CAP.
  caps_but() { for _c in $_need; do [ "$_c" = "$1" ] || printf '+%s,' "$_c"; done | sed 's/,$//'; }
  _all=$(caps_but none)
  if ! as_nobody priv_all "$_all" --explain "$@" || ! grep -q '^loaded and attached: ok' "$(out_of priv_all)"; then
    fail privileges "as nobody with $_all: $(head -c 300 "$(err_of priv_all)" | tr '\n' ' ')"
    return
  fi
  for _c in $_droppable; do
    _cap=CAP_$(echo "$_c" | tr 'a-z' 'A-Z')
    as_nobody priv_less "$(caps_but "$_c")" --explain "$@"
    _rc=$?
    _lines=$(wc -l <"$(err_of priv_less)")
    if [ "$_rc" -eq 0 ] || [ "$_lines" -ne 1 ] || ! grep -q "$_cap" "$(err_of priv_less)"; then
      fail privileges "without $_c: exit $_rc, $_lines lines, want one naming $_cap: $(head -c 300 "$(err_of priv_less)" | tr '\n' ' ')"
      return
    fi
  done
  pass privileges "as nobody with $_all: loaded and attached; without any one of $_droppable: refused in one line naming it ($(cut -c1-160 "$(err_of priv_less)"))"
}

# in_two_cgroups NAME CGROUP_A CGROUP_B COMMAND ARGS_A -- ARGS_B: starts COMMAND twice (a
# helper that prints `ready` and then waits for SIGUSR1), moves the first into CGROUP_A and the
# second into CGROUP_B once both are ready; their pids in $wa and $wb, their output in
# NAME_wa.wl and NAME_wb.wl.
in_two_cgroups() {
  _n=$1
  _ca=$2
  _cb=$3
  _cmd=$4
  shift 4
  _args_a=""
  while [ "$1" != "--" ]; do
    _args_a="$_args_a $1"
    shift
  done
  shift
  # shellcheck disable=SC2086 # the arguments are words on purpose
  "$_cmd" $_args_a >"$IOSTACK_WORK/${_n}_wa.wl" &
  wa=$!
  "$_cmd" "$@" >"$IOSTACK_WORK/${_n}_wb.wl" &
  wb=$!
  wait_for_line 20 '^ready' "$IOSTACK_WORK/${_n}_wa.wl"
  wait_for_line 20 '^ready' "$IOSTACK_WORK/${_n}_wb.wl"
  echo "$wa" >"$_ca/cgroup.procs"
  echo "$wb" >"$_cb/cgroup.procs"
}

# --- in-kernel cost beside a peer (kernel.bpf_stats_enabled, examples/bpf_prog_stats) --------
# Benchmarks, not timed tests: under TCG absolute times mean little, so checks report ratios.

prog_stats="${IOSTACK_HELPERS:-/iostack/helpers}/bpf_prog_stats"

# prog_ids FILE: the ids of every loaded BPF program, sorted, into FILE.
prog_ids() { "$prog_stats" | awk '{ print $1 }' | sort >"$1"; }

# wait_new_progs BEFORE NOW [PID]: waits (up to 60 s) until programs beyond those in BEFORE are
# loaded and the same on two looks half a second apart (a peer's banner may sit in its stdout
# buffer until it exits); their ids, with the others', into NOW. With PID, the process that is
# to load them: once it has exited, nothing more will come (5.10 refuses libbpf-tools'
# biolatency, which then waited the whole minute).
wait_new_progs() {
  _i=0
  : >"$2.prev"
  while [ $_i -lt 120 ]; do
    sleep 0.5
    prog_ids "$2"
    if ! cmp -s "$1" "$2" && cmp -s "$2.prev" "$2"; then
      return 0
    fi
    if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
      return 1
    fi
    cp "$2" "$2.prev"
    _i=$((_i + 1))
  done
  return 1
}

# new_ids OLD NEW: the ids in NEW that are not in OLD (FILENAME, not NR == FNR: OLD may be empty).
new_ids() { awk 'FILENAME == ARGV[1] { old[$1] = 1; next } !($1 in old)' "$1" "$2"; }

# run_time IDS BEFORE AFTER: ns of BPF run time between two bpf_prog_stats snapshots, by the
# programs whose ids IDS lists.
run_time() {
  awk 'FILENAME == ARGV[1] { want[$1] = 1; next }
    FILENAME == ARGV[2] { if ($1 in want) t0 += $2; next }
    { if ($1 in want) t1 += $2 } END { print t1 - t0 }' "$1" "$2" "$3"
}

# out_of NAME / err_of NAME: a started tool's output files.
out_of() { echo "$IOSTACK_WORK/$1.out"; }
err_of() { echo "$IOSTACK_WORK/$1.err"; }

# brief NAME: why a tool run went wrong, on one line for a FAIL detail: the end of its stderr
# (or of its stdout when stderr is empty).
brief() {
  _f="$IOSTACK_WORK/$1.err"
  [ -s "$_f" ] || _f="$IOSTACK_WORK/$1.out"
  tail -n 2 "$_f" 2>/dev/null | tr '\n' ' ' | cut -c1-300
}

# log_verbose NAME ARGS...: when a tool cannot load, runs it again with -v and copies the end
# of libbpf's log (the verifier's verdict) to the console, for the bug report.
log_verbose() {
  _name=$1
  shift
  tool_run "$_name" -v "$@"
  tail -n "${IOSTACK_VERBOSE_LINES:-25}" "$IOSTACK_WORK/$_name.err" | sed "s/^/iostack: $IOSTACK_TOOL -v: /"
}

# --- the tools' JSON reports (-j: one object per line) --------------------------------------

# json_hists FILE: one tab-separated line per histogram of every report in FILE:
#   disk  flags  count  sum_ns  p50_ns  max_ns  log2  op  cgroup
# labels absent are "-"; log2 lists the non-empty slots as "low:high:count,...".
# busybox has no JSON parser: this relies on the stable key order the tools emit
# (labels, count, sum_ns, avg_ns, p50_ns, ..., max_ns, log2).
json_hists() {
  awk '
    function field(s, key,    r) {
      if (match(s, "\"" key "\":\"[^\"]*\"")) {
        r = substr(s, RSTART, RLENGTH); sub("^\"" key "\":\"", "", r); sub("\"$", "", r); return r
      }
      if (match(s, "\"" key "\":-?[0-9.eE+-]+")) {
        r = substr(s, RSTART, RLENGTH); sub("^\"" key "\":", "", r); return r
      }
      return "-"
    }
    /"histograms":/ {
      line = $0
      sub(/^.*"histograms":\[/, "", line)
      sub(/\],"drops".*$/, "", line)
      n = split(line, parts, /\{"labels":/)
      for (i = 2; i <= n; i++) {
        h = parts[i]
        labels = h; sub(/\}.*$/, "", labels)
        rest = h; sub(/^[^}]*\}/, "", rest)
        head = rest; sub(/"log2":.*$/, "", head)
        slots = rest; sub(/^.*"log2":\[/, "", slots)
        log2 = ""
        while (match(slots, /"low":[0-9]+,"high":[0-9]+,"count":[0-9]+/)) {
          s = substr(slots, RSTART, RLENGTH)
          slots = substr(slots, RSTART + RLENGTH)
          gsub(/"low":|"high":|"count":/, "", s)
          split(s, v, ",")
          if (v[3] > 0) log2 = log2 (log2 == "" ? "" : ",") v[1] ":" v[2] ":" v[3]
        }
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", field(labels, "disk"), field(labels, "flags"), \
          field(head, "count"), field(head, "sum_ns"), field(head, "p50_ns"), field(head, "max_ns"), \
          (log2 == "" ? "-" : log2), field(labels, "op"), field(labels, "cgroup")
      }
    }
  ' "$1"
}

# json_reports FILE: how many JSON reports the tool printed.
json_reports() { grep -c '^{"tool":' "$1"; }

# json_total FILE: events counted over all histograms and reports.
json_total() { json_hists "$1" | awk -F'\t' '{ n += $3 } END { print n + 0 }'; }

# json_sum_ns FILE: total latency over all histograms and reports, in ns.
json_sum_ns() { json_hists "$1" | awk -F'\t' '{ s += $4 } END { printf "%.0f\n", s }'; }

# json_count_where FILE COLUMN REGEX: events in histograms whose label (1 disk, 2 flags, 8 op)
# matches.
json_count_where() {
  json_hists "$1" | awk -F'\t' -v c="$2" -v re="$3" '$c ~ re { n += $3 } END { print n + 0 }'
}

# json_below FILE COLUMN REGEX LIMIT: events of the matching histograms in log2 slots that lie
# wholly below LIMIT (in the report's unit): latencies certainly smaller than LIMIT.
json_below() {
  json_hists "$1" | awk -F'\t' -v c="$2" -v re="$3" -v lim="$4" '
    $c ~ re && $7 != "-" {
      k = split($7, slot, ",")
      for (i = 1; i <= k; i++) { split(slot[i], v, ":"); if (v[2] + 1 <= lim) n += v[3] }
    }
    END { print n + 0 }'
}

# json_drops FILE: the drops objects of all reports, e.g. "no_start=0 hist_full=0 ...".
json_drops() {
  awk '/"drops":/ {
      d = $0; sub(/^.*"drops":\{/, "", d); sub(/\}.*$/, "", d)
      gsub(/"/, "", d); gsub(/:/, "=", d); gsub(/,/, " ", d)
      all = all (all == "" ? "" : "; ") d
    }
    END { print all }' "$1"
}

# json_unseen FILE [DISK]: I/Os the tool reported unseen (completed per /proc/diskstats, never
# shown to its BPF programs; see the README): biolat's accounted.DISK.unseen (every disk when
# DISK is not given) or bioslower's {"disk":DISK,"lost":N,"reason":"unseen"} records. Exact
# counts are `shown + unseen = caused`.
json_unseen() {
  awk -v want="${2:-}" '
    /"accounted":\{/ {
      a = $0; sub(/^.*"accounted":\{/, "", a)
      while (match(a, /"[^"]*":\{"seen":[0-9]+,"unseen":[0-9]+\}/)) {
        e = substr(a, RSTART, RLENGTH); a = substr(a, RSTART + RLENGTH)
        d = e; sub(/^"/, "", d); sub(/".*$/, "", d)
        u = e; sub(/^.*"unseen":/, "", u); sub(/\}$/, "", u)
        if (want == "" || d == want) n += u
      }
    }
    /"reason":"unseen"/ {
      d = $0; sub(/^.*"disk":"/, "", d); sub(/".*$/, "", d)
      l = $0; sub(/^.*"lost":/, "", l); sub(/[,}].*$/, "", l)
      if (want == "" || d == want) n += l
    }
    END { print n + 0 }' "$1"
}

# json_seen FILE DISK: completions /proc/diskstats counts that biolat's programs saw on DISK.
json_seen() {
  awk -v want="$2" '
    /"accounted":\{/ {
      a = $0; sub(/^.*"accounted":\{/, "", a)
      while (match(a, /"[^"]*":\{"seen":[0-9]+/)) {
        e = substr(a, RSTART, RLENGTH); a = substr(a, RSTART + RLENGTH)
        d = e; sub(/^"/, "", d); sub(/".*$/, "", d)
        v = e; sub(/^.*"seen":/, "", v)
        if (d == want) n += v
      }
    }
    END { print n + 0 }' "$1"
}

# text_unseen FILE: the same from a text report (`note: N I/O... never reached the BPF programs`
# or bioslower's `lost N I/O...`).
text_unseen() {
  awk '/^(note|lost):? [0-9]+ I\/Os? completed on .* never reached the BPF programs/ {
      sub(/^(note: |lost )/, ""); n += $1 }
    END { print n + 0 }' "$1"
}

# start_logged FILE CMD [ARG...]: CMD in the background, its output and errors in FILE, its pid
# in $started. FILE is emptied first: the job's own redirect empties it only once the job runs,
# and a wait_for_line on it may look first and find a last run's lines (a run again under the
# same name found the last run's ready line and traced its dead thread, "no thread with ID 2061
# is running": 3 of 40 runs of 6.1's throttled and agrees, 2026-11-28).
start_logged() {
  _sl_file=$1
  shift
  : >"$_sl_file"
  "$@" >"$_sl_file" 2>&1 &
  # shellcheck disable=SC2034 # the caller reads it
  started=$!
}

# wait_for_line SECONDS PATTERN FILE...: waits until one of the files has a line matching
# PATTERN (a helper's `ready`, a tool's banner); non-zero if none has after SECONDS. It looks
# five times a second: at twenty (a grep and a sleep forked every 50 ms), helpers waited in
# synchronize_rcu (moving into a cgroup) or stop_one_cpu (sched_setaffinity) until the 60 s
# ran out and the polling stopped, 11 times in 80 helper starts of two TCG guests run side by
# side (5.10 and 6.1); with five a second, 0 in 80, the same guests and checks (2026-11-28).
wait_for_line() {
  _wl_tries=$(($1 * 5))
  _wl_pattern=$2
  shift 2
  _wl_i=0
  until grep -qs "$_wl_pattern" "$@"; do
    [ "$_wl_i" -ge "$_wl_tries" ] && return 1
    sleep 0.2
    _wl_i=$((_wl_i + 1))
  done
}

# traced_by WORKLOAD NAME WORKLOAD_ARGS -- TOOL_ARGS: starts a workload helper (it prints
# `ready PID`, then waits for SIGUSR1), traces it with the tool (-j -p PID TOOL_ARGS; TRACED_TASK
# replaces -p, e.g. --tid for the helper's first thread alone), lets it run, waits for its exit,
# stops the tool. Output in NAME.out.
traced_by() {
  _helper=$1
  _name=$2
  shift 2
  _wargs=""
  while [ "$1" != "--" ]; do
    _wargs="$_wargs $1"
    shift
  done
  shift
  # shellcheck disable=SC2086 # the counts are words on purpose
  "$_helper" $_wargs >"$IOSTACK_WORK/$_name.wl" &
  _wpid=$!
  wait_for_line 10 '^ready' "$IOSTACK_WORK/$_name.wl"
  if ! tool_start "$_name" -j "${TRACED_TASK:--p}" "$_wpid" "$@"; then
    kill -KILL "$_wpid" 2>/dev/null
    return 1
  fi
  # A hook a check wants run just before the workload starts (e.g. spending a throttle's burst).
  if [ -n "${TRACED_BEFORE:-}" ]; then eval "$TRACED_BEFORE"; fi
  kill -USR1 "$_wpid"
  wait "$_wpid" || log "workload exited with $?"
  tool_stop "$_name"
}

# op_counts FILE: "op=count ..." sorted, from the JSON reports (the op label of each histogram).
op_counts() {
  json_hists "$1" | awk -F'\t' '{ n[$8] += $3 } END { for (o in n) print o "=" n[o] }' | sort | tr '\n' ' ' | sed 's/ $//'
}

# cgroup_op_counts FILE CGROUP: op_counts of the histograms labelled with that cgroup.
cgroup_op_counts() {
  json_hists "$1" | awk -F'\t' -v cg="$2" '$9 == cg { n[$8] += $3 } END { for (o in n) print o "=" n[o] }' | sort | tr '\n' ' ' | sed 's/ $//'
}

# expect_counts CHECK NAME EXPECTED: compares op_counts with EXPECTED ("open=3 read=5", sorted).
expect_counts() {
  got=$(op_counts "$(out_of "$2")")
  if [ "$got" = "$3" ]; then
    pass "$1" "$got; drops: $(json_drops "$(out_of "$2")")"
  else
    fail "$1" "expected '$3', got '$got': $(brief "$2")"
  fi
}

# --- the kernel's own trace of a thread's system calls (ftrace), the truth syslat is held to ---

# tracefs_ensure: tracefs mounted at /sys/kernel/tracing (the VMs' init mounts it; a fresh host
# may not), as tests/support/ftrace.rs does; tracefs_release unmounts it again if this mounted it.
tracefs_ensure() {
  [ -d /sys/kernel/tracing/instances ] && return 0
  mount -t tracefs tracefs /sys/kernel/tracing && _tfs_mounted=1
}
tracefs_release() {
  if [ -n "${_tfs_mounted:-}" ]; then umount /sys/kernel/tracing && _tfs_mounted=""; fi
}

# ftrace_instance NAME: a new ftrace instance of its own (any left by an earlier run removed),
# its lines in the default shape (a new instance copies the top level's options), stamped on
# CLOCK_MONOTONIC (as in tests/support/ftrace.rs); its directory in $instance. Events are enabled
# by the caller, then tracing turned on.
ftrace_instance() {
  tracefs_ensure || return 1
  instance="/sys/kernel/tracing/instances/iostack-$1"
  rmdir "$instance" 2>/dev/null
  mkdir "$instance" || return 1
  for _o in context-info=1 latency-format=0 raw=0 hex=0 bin=0; do
    echo "${_o#*=}" >"$instance/options/${_o%=*}"
  done
  echo mono >"$instance/trace_clock"
}

# ftrace_instance_remove NAME EVENT...: tracing off, the events (group/name) disabled, the
# instance removed.
ftrace_instance_remove() {
  _fi="/sys/kernel/tracing/instances/iostack-$1"
  shift
  [ -d "$_fi" ] || return 0
  echo 0 >"$_fi/tracing_on"
  for _e in "$@"; do echo 0 >"$_fi/events/$_e/enable"; done
  rmdir "$_fi"
}

# block_trace_start NAME DISK: an ftrace instance of its own records every request DISK's queue
# issues and completes (block_rq_issue, block_rq_complete: the thread current at each, the
# request's kind, sector and size), for a check to show when its count of a disk's requests is
# not what it caused. block_trace_lines NAME prints them and removes the instance.
block_trace_start() {
  ftrace_instance "$1" || return 1
  _mm=$(cat "/sys/block/$2/dev")
  # The kernel's dev_t: the major above 20 bits of minor.
  _dev=$(((${_mm%:*} << 20) | ${_mm#*:}))
  for _e in block_rq_issue block_rq_complete; do
    echo "dev == $_dev" >"$instance/events/block/$_e/filter" && echo 1 >"$instance/events/block/$_e/enable" || return 1
  done
  echo 1 >"$instance/tracing_on"
}
block_trace_lines() {
  _bt="/sys/kernel/tracing/instances/iostack-$1"
  [ -d "$_bt" ] || return 0
  echo 0 >"$_bt/tracing_on"
  grep -v '^#' "$_bt/trace"
  ftrace_instance_remove "$1" block/block_rq_issue block/block_rq_complete
}

# --- what this kernel offers (for checks that verify a tool's choices) -----------------------

# ksym_text NAME: the kernel has a function of this name (not wholly inlined).
ksym_text() { awk -v f="$1" '$3 == f && ($2 == "t" || $2 == "T") { found = 1; exit } END { exit !found }' /proc/kallsyms; }

# has_tracepoint NAME: the block tracepoint exists: its __traceiter_ function (5.10+) or
# __tracepoint_ data symbol in kallsyms, so no tracefs is needed (the host may not mount it).
has_tracepoint() {
  awk -v a="__traceiter_$1" -v b="__tracepoint_$1" '$3 == a || $3 == b { found = 1; exit } END { exit !found }' /proc/kallsyms ||
    [ -d "/sys/kernel/tracing/events/block/$1" ] || [ -d "/sys/kernel/debug/tracing/events/block/$1" ]
}

# kprobes_possible: the kernel can create kprobes (the kprobe PMU or kprobe_events exists).
kprobes_possible() {
  [ -e /sys/bus/event_source/devices/kprobe/type ] || [ -e /sys/kernel/tracing/kprobe_events ] ||
    [ -e /sys/kernel/debug/tracing/kprobe_events ]
}

# ftrace_function NAME: ftrace can hook the function (fentry needs this).
ftrace_function() {
  for _f in /sys/kernel/tracing/available_filter_functions /sys/kernel/debug/tracing/available_filter_functions; do
    [ -r "$_f" ] && grep -q "^$1\( \|\$\)" "$_f" && return 0
  done
  return 1
}

# --- function-latency tools (vfslat, ext4lat, fslat) ----------------------------------------

# fn_explain_or_refusal CHECKS -- ARGS: runs the tool's --explain ARGS; PASS `explain` where it
# loads, and where the kernel can hook no function (no fentry, no kprobes: the CI host) PASS
# `refusal` if the tool said so in one line naming what still works, and NA for CHECKS (the
# script's other checks). Returns 0 when the tool can run here.
fn_explain_or_refusal() {
  _others=""
  while [ "$1" != "--" ]; do
    _others="$_others $1"
    shift
  done
  shift
  tool_run explain --explain "$@"
  _rc=$?
  if [ "$_rc" -eq 0 ] && grep -q '^loaded and attached: ok' "$(out_of explain)"; then
    pass explain "--explain $* loads and attaches"
    na refusal "this kernel can hook functions"
    return 0
  fi
  if ! kprobes_possible && [ "$(wc -l <"$(err_of explain)")" -eq 1 ] &&
    grep -q 'syslat and biolat work here' "$(err_of explain)"; then
    na explain "no fentry, no kprobes here"
    pass refusal "$(brief explain)"
    for _c in $_others; do na "$_c" "no fentry, no kprobes here: the tool refuses"; done
  else
    fail explain "exit $_rc: $(brief explain)"
    log_verbose explain_v --explain "$@"
  fi
  return 1
}

# fn_path OP: the hook --explain chose for OP's first function (e.g. fentry/vfs_read); "none"
# if it planned none for OP, "refused" if the tool refused this kernel.
fn_path() {
  _hook=$(awk -v op="$1" '$1 == op && $2 ~ /\// { print $2; exit }' "$(out_of explain)")
  if ! grep -q '^loaded and attached: ok' "$(out_of explain)"; then
    _hook=refused
  fi
  path "$1" "${_hook:-none}"
}

# mounted DISK DIR FSTYPE [OPTIONS]: mounts DISK on DIR (created); non-zero with a log line if it cannot.
mounted() {
  mkdir -p "$2"
  mount -t "$3" -o "${4:-defaults}" "/dev/$1" "$2" 2>"$IOSTACK_WORK/mount.err" ||
    { log "mount $1 ($3) on $2 failed: $(cat "$IOSTACK_WORK/mount.err")"; return 1; }
}

# json_async FILE OP: calls of OP that returned -EIOCBQUEUED, over all reports.
json_async() {
  awk -v op="$2" '/"async":\{/ {
      a = $0; sub(/^.*"async":\{/, "", a); sub(/\}.*$/, "", a)
      n2 = split(a, kv, ","); for (i = 1; i <= n2; i++) { split(kv[i], p, ":"); gsub(/"/, "", p[1]); if (p[1] == op) n += p[2] }
    }
    END { print n + 0 }' "$1"
}

# --- reading iostack's JSON (json_flat prints `LINE.PATH VALUE`) ----------------------------

# op_field NAME OP PATH: PATH (e.g. breakdown.io_queue_ns) of operation OP in NAME's first report;
# empty if OP is not there.
op_field() {
  "${IOSTACK_HELPERS:-/iostack/helpers}/json_flat" "$(out_of "$1")" >"$IOSTACK_WORK/$1.flat" 2>/dev/null
  awk -v op="\"$2\"" -v path="$3" '
    $1 ~ /^0\.ops\.[0-9]+\.op$/ && $2 == op { split($1, p, "."); k = p[3] }
    { v[$1] = $2 }
    END { if (k != "") print v["0.ops." k "." path] }' "$IOSTACK_WORK/$1.flat"
}

# req_field NAME INTERFACE OP PATH: PATH (e.g. device_ns, latency.sum_ns) of the requests of
# INTERFACE (io_uring, aio) and operation OP in NAME's first report; empty if there are none.
req_field() {
  "${IOSTACK_HELPERS:-/iostack/helpers}/json_flat" "$(out_of "$1")" | awk -v i="\"$2\"" -v op="\"$3\"" -v path="$4" '
    $1 ~ /^0\.requests\.[0-9]+\.interface$/ { split($1, p, "."); iface[p[3]] = $2 }
    $1 ~ /^0\.requests\.[0-9]+\.op$/ { split($1, p, "."); ops[p[3]] = $2 }
    { v[$1] = $2 }
    END { for (k in iface) if (iface[k] == i && ops[k] == op) print v["0.requests." k "." path] }'
}

# parts_add_up NAME: every op's six parts add up to its total, and that total is its syscall
# layer's sum; prints the ops that do not.
parts_add_up() {
  "${IOSTACK_HELPERS:-/iostack/helpers}/json_flat" "$(out_of "$1")" | awk '
    $1 ~ /^0\.ops\.[0-9]+\.breakdown\./ {
      split($1, p, "."); k = p[3]; f = p[5]
      if (f == "total_ns") t[k] = $2
      else if (f != "others_io_via_waker_ns") s[k] += $2
    }
    $1 ~ /^0\.ops\.[0-9]+\.layers\.syscall\.sum_ns$/ { split($1, p, "."); y[p[3]] = $2 }
    $1 ~ /^0\.ops\.[0-9]+\.op$/ { split($1, p, "."); name[p[3]] = $2 }
    END { for (k in t) if (s[k] != t[k] || y[k] != t[k]) printf "%s: parts %s, total %s, syscall %s; ", name[k], s[k], t[k], y[k] }'
}

# parts_of NAME OP: the op's parts as words, for a failure's report.
parts_of() {
  _p=""
  for _k in on_cpu run_queue io_queue io_device others_io others_io_via_waker other_sleep; do
    _p="$_p $_k $(op_field "$1" "$2" "breakdown.${_k}_ns")"
  done
  echo "parts:$_p"
}

# own_off_cpu OWN TOTAL KBUSY [PCT]: of the read calls' time off a CPU, at least TOTAL less
# KBUSY (the kernel's time on a CPU and waiting for one over the reads, schedstat: more than the
# calls' own, as it spans the loop between them too: 26.9 ms against the calls' 3.1 ms for 4
# reads through dm-linear on 5.10 under TCG, 2026-11-27), PCT% (95) or more is OWN I/O. For
# reads that wait for nothing but their own I/O. Nothing here is iostack's but OWN and TOTAL: a
# split that put the reads on a CPU fails. (Not a share of TOTAL: on a busy CI host a TCG
# guest's CPU is taken from it while the reader runs, which its kernel counts as the reader's
# time on a CPU: 110 ms of 434 in one run on 6.12, 2026-11-26.)
own_off_cpu() {
  _off=$(($2 - $3))
  [ "$_off" -gt 0 ] && [ $(($1 * 100)) -ge $((_off * ${4:-95})) ]
}

# kernel_figure NAME KEY: a figure of breakdown_workload's last line (NAME.wl): the kernel's own
# account of its reader over its reads.
kernel_figure() {
  awk -v k="$2" '/^reads/ { for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$IOSTACK_WORK/$1.wl"
}

# io_of NAME OP: the op's time waiting for I/O (OS queue + device + others' I/O).
io_of() {
  echo $(($(op_field "$1" "$2" breakdown.io_queue_ns) + $(op_field "$1" "$2" breakdown.io_device_ns) + $(op_field "$1" "$2" breakdown.others_io_ns)))
}
