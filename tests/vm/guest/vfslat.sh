#!/bin/sh
# vfslat's kernel-matrix checks: on an ext4 filesystem, a helper (examples/file_workload) makes
# an exact set of file operations; vfslat, filtered to its PID, must count exactly those, label
# them ext4 with --per-fs, and time nothing of an asynchronous read. Where the kernel can hook no
# function (the CI host), it must refuse in one line. Runs under busybox sh (see lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
trap 'tool_cleanup; umount "$IOSTACK_WORK/mnt" 2>/dev/null' EXIT

workload="${IOSTACK_HELPERS:-/iostack/helpers}/file_workload"
mnt="$IOSTACK_WORK/mnt"
fast=${IOSTACK_FAST_DISK:?}

fn_explain_or_refusal count-exact per-fs aio slower cgroup per-cgroup privileges --
hooked=$?
for op in read write fsync open getattr; do fn_path "$op"; done
[ "$hooked" -eq 0 ] || exit 0
path starts "$(awk '$1 == "start" && $2 == "store" { print $3 "-" $4; exit }' "$(out_of explain)")"

if ! mounted "$fast" "$mnt" ext4; then
  fail count-exact "could not mount the fast disk's ext4"
  exit 0
fi

# --- exact counts, and the filesystem label ---------------------------------------------------
traced_by "$workload" counts "$mnt" 7 5 3 2 -- &&
  expect_counts count-exact counts "fsync=3 open=2 read=7 write=5"
traced_by "$workload" perfs "$mnt" 4 3 2 1 -- --per-fs &&
  {
    labels=$(json_hists "$(out_of perfs)" | awk -F'\t' '{ print $8 }' | sort -u | tr '\n' ' ')
    fs=$(grep -o '"fs":"[^"]*"' "$(out_of perfs)" | sort -u | tr '\n' ' ')
    if [ "$fs" = '"fs":"ext4" ' ]; then
      pass per-fs "$labels labelled $fs"
    else
      fail per-fs "want every histogram labelled ext4, got $fs ($labels)"
    fi
  }

# --- an asynchronous read never reaches vfs_read ------------------------------------------------
traced_by "$workload" aio "$mnt" 4 0 0 0 aio -- &&
  {
    got=$(op_counts "$(out_of aio)")
    if [ -z "$got" ]; then
      pass aio "4 io_submit reads: no VFS read timed (they bypass vfs_read)"
    else
      fail aio "4 io_submit reads, want nothing timed, got '$got'"
    fi
  }
# --- --min 0: every operation as an event, with its file and size ------------------------------
if ! traced_by "$workload" slower "$mnt" 7 5 3 2 -- --min 0; then
  fail slower "vfslat --min 0 did not start: $(brief slower)"
else
  {
    ev="$(out_of slower)"
    got=$(grep -o '"op":"[a-z]*"' "$ev" | cut -d'"' -f4 | sort | uniq -c | awk '{ printf "%s=%s ", $2, $1 }')
    rw=$(grep -E '"op":"(read|write)"' "$ev" | grep -c '"ret":4096,.*"fs":"ext4","file":"file_workload\.[0-9]*"')
    summary=$(grep '"summary"' "$ev")
    if [ "$got" = "fsync=3 open=2 read=7 write=5 " ] && [ "$rw" = 12 ] && echo "$summary" | grep -q '"lost":0'; then
      pass slower "$got events, 12 reads and writes of 4096 bytes on ext4 file_workload.*; $summary"
    else
      fail slower "want fsync=3 open=2 read=7 write=5 events, 12 of 4096 bytes, nothing lost; got $got ($rw well-formed); $summary"
    fi
  }
fi

# --- --cgroup and --per-cgroup: the operations of the tasks of one cgroup -----------------------
# Two workloads, one in each of two cgroups; one vfslat limited to a, one split by cgroup, one
# printing every operation with its cgroup.
cga=$(cgroup2_dir iostack-vfslat-a)
cgb=$(cgroup2_dir iostack-vfslat-b)
if [ -z "$cga" ] || [ -z "$cgb" ]; then
  na cgroup "no cgroup2 mount here"
else
  in_two_cgroups vcg "$cga" "$cgb" "$workload" "$mnt" 7 5 3 2 -- "$mnt" 4 3 2 1
  if tool_start vcg_a --cgroup "$cga" -j && tool_start vcg_split --per-cgroup -j &&
    tool_start vcg_events --min 0 --per-cgroup -j; then
    kill -USR1 "$wa" "$wb"
    wait "$wa" "$wb"
    tool_stop vcg_a
    tool_stop vcg_split
    tool_stop vcg_events
    want_a="fsync=3 open=2 read=7 write=5"
    want_b="fsync=2 open=1 read=4 write=3"
    got_a=$(op_counts "$(out_of vcg_a)")
    if [ "$got_a" = "$want_a" ]; then
      pass cgroup "a: $got_a"
    else
      fail cgroup "a: '$got_a' (want $want_a): $(brief vcg_a)"
    fi
    split_a=$(cgroup_op_counts "$(out_of vcg_split)" /iostack-vfslat-a)
    split_b=$(cgroup_op_counts "$(out_of vcg_split)" /iostack-vfslat-b)
    ev="$(out_of vcg_events)"
    ev_a=$(grep -c '"cgroup":"/iostack-vfslat-a"' "$ev")
    ev_b=$(grep -c '"cgroup":"/iostack-vfslat-b"' "$ev")
    if [ "$split_a" = "$want_a" ] && [ "$split_b" = "$want_b" ] && [ "$ev_a" = 17 ] && [ "$ev_b" = 10 ]; then
      pass per-cgroup "a: $split_a; b: $split_b; events a $ev_a, b $ev_b"
    else
      fail per-cgroup "a: '$split_a' (want $want_a), b: '$split_b' (want $want_b), events a $ev_a (want 17), b $ev_b (want 10): $(json_hists "$(out_of vcg_split)" | cut -f3,8,9 | tr '\n' ';' | cut -c1-300)"
    fi
  else
    kill -KILL "$wa" "$wb" 2>/dev/null
    fail cgroup "$(brief vcg_a) $(brief vcg_split) $(brief vcg_events)"
  fi
  rmdir "$cga" "$cgb" 2>/dev/null
fi

rm -f "$mnt"/file_workload.*
umount "$mnt"

check_privileges
