#!/bin/sh
# Runs the harness's own checks, then every tool's checks (each tests/vm/guest/<tool>.sh beside
# this file), then prints IOSTACK-DONE. Run by the VM's init, and by run-matrix on the host.
# See lib.sh for the environment and the markers.
set -u
guest_dir=$(cd "$(dirname "$0")" && pwd)
. "$guest_dir/lib.sh"

IOSTACK_TOOL=harness
path kernel "$(uname -r)"

# The fast disk must exist and count I/O in /proc/diskstats, or no tool check means anything.
if disk_present "${IOSTACK_FAST_DISK:-}" && [ "$(disk_ios "$IOSTACK_FAST_DISK")" != none ]; then
  pass fast-disk "$IOSTACK_FAST_DISK, other disk ${IOSTACK_OTHER_DISK:-none}"
else
  fail fast-disk "fast disk '${IOSTACK_FAST_DISK:-}' missing; disks: $(cd /sys/block && echo *)"
fi

# The throttled disk must really delay every I/O by at least IOSTACK_THROTTLE_MS, else checks on
# injected latency would pass or fail for the wrong reason. The hypervisor's leaky bucket lets
# the first I/O after an idle spell through at once; one read first spends that allowance, so
# each of the writes waits (see run-matrix).
if [ -z "${IOSTACK_SLOW_DISK:-}" ]; then
  na throttle "no throttled disk here"
elif ! disk_present "$IOSTACK_SLOW_DISK"; then
  fail throttle "slow disk $IOSTACK_SLOW_DISK missing"
else
  n=5
  dd_read "$IOSTACK_SLOW_DISK" 1 0
  t0=$(now_ms)
  dd_write "$IOSTACK_SLOW_DISK" "$n" 64
  took=$(($(now_ms) - t0))
  want=$((n * IOSTACK_THROTTLE_MS))
  if [ "$took" -ge "$want" ]; then
    pass throttle "$n O_DIRECT writes to $IOSTACK_SLOW_DISK took $took ms (>= $want ms)"
  else
    fail throttle "$n O_DIRECT writes to $IOSTACK_SLOW_DISK took $took ms, want >= $want ms: not throttled"
  fi
fi

for script in "$guest_dir"/*.sh; do
  # <tool>.sh, or <tool>.<part>.sh: a tool's checks in more than one script (run-matrix puts
  # each in a shard of its own); the part's name selects it, the tool runs it.
  part=$(basename "$script" .sh)
  tool=${part%%.*}
  case "$tool" in lib | run-all) continue ;; esac
  # IOSTACK_TOOLS=a,b: only those scripts' checks (run-matrix's shards and IOSTACK_MATRIX_TOOLS).
  case ",${IOSTACK_TOOLS:-$part}," in *",$part,"*) ;; *) continue ;; esac
  IOSTACK_TOOL=$tool
  if [ ! -x "$IOSTACK_BIN/$tool" ]; then
    na binary "$IOSTACK_BIN/$tool is not built"
    continue
  fi
  log "running $script"
  # A hung tool must not eat the VM's whole time budget: the other tools still get checked.
  t0=$(now_ms)
  IOSTACK_TOOL=$tool timeout "${IOSTACK_TOOL_TIMEOUT:-300}" sh "$script"
  rc=$?
  echo "IOSTACK-TIME $part * $(($(now_ms) - t0))"
  # Said either way: a row only the failing column reported would read as missing elsewhere.
  if [ "$rc" -eq 0 ]; then
    pass script "$part.sh exited 0"
  else
    fail script "$script exited with status $rc (timed out if 124/143)"
  fi
done

# A built tool without a check script shows up in the matrix instead of passing unnoticed (once
# per kernel: where a kernel's checks are split among VMs, its first says it).
# Aliases (links such as xfslat -> fslat) are their tool's: its script checks them.
for bin in "$IOSTACK_BIN"/*; do
  tool=$(basename "$bin")
  if [ -x "$bin" ] && [ -f "$bin" ] && [ ! -L "$bin" ] && [ ! -e "$guest_dir/$tool.sh" ] &&
    { [ -z "${IOSTACK_TOOLS:-}" ] || [ "${IOSTACK_LIST_UNCHECKED:-0}" = 1 ]; }; then
    IOSTACK_TOOL=$tool
    na checks "no tests/vm/guest/$tool.sh yet"
  fi
done

echo "IOSTACK-DONE"
