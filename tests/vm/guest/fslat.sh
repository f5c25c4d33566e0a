#!/bin/sh
# fslat's kernel-matrix checks: xfs, loaded as a module from the kernel package, timed through
# its module BTF (fentry) or kprobes (5.10 has no module BTF), counting a helper's operations
# exactly; and a filesystem whose module is not loaded refused in one line. Where the kernel can
# hook no function (the CI host), a one-line refusal. Runs under busybox sh (see lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
trap 'tool_cleanup; umount "$IOSTACK_WORK/xfsmnt" 2>/dev/null' EXIT

workload="${IOSTACK_HELPERS:-/iostack/helpers}/file_workload"
xfs=${IOSTACK_XFS_DISK:-}

fn_explain_or_refusal module-absent xfs-exact privileges -- --fs xfs
hooked=$?
for op in read write open fsync; do fn_path "$op"; done
[ "$hooked" -eq 0 ] || exit 0

# A module that is not loaded: one line naming it, a non-zero exit. f2fs: the VMs load btrfs
# (and xfs) at boot for the other checks, so a check of btrfs was NA in every VM of every run.
if [ -d /sys/module/f2fs ]; then
  na module-absent "f2fs is loaded here"
else
  tool_run absent --fs f2fs --explain
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$(wc -l <"$(err_of absent)")" -eq 1 ] && grep -q 'module f2fs, which is not loaded' "$(err_of absent)"; then
    pass module-absent "$(brief absent)"
  else
    fail module-absent "exit $rc: $(brief absent)"
  fi
fi

if [ -z "$xfs" ]; then
  na xfs-exact "no xfs disk here"
elif ! mounted "$xfs" "$IOSTACK_WORK/xfsmnt" xfs; then
  fail xfs-exact "could not mount $xfs"
else
  traced_by "$workload" xfs "$IOSTACK_WORK/xfsmnt" 7 5 3 2 -- --fs xfs &&
    expect_counts xfs-exact xfs "fsync=3 open=2 read=7 write=5"
  rm -f "$IOSTACK_WORK/xfsmnt"/file_workload.*
  umount "$IOSTACK_WORK/xfsmnt"
fi

check_privileges --also sys_admin --fs xfs
