#!/bin/sh
# iostack-exporter's kernel-matrix checks, where function hooks work (the CI host traces only
# its block and syscall layers): every layer traced; scraped over HTTP (busybox wget), the block
# layer counts raw I/Os we made on a disk without a filesystem exactly, in both families, the
# fs layer exactly a helper's ext4 operations, the VFS and syscall layers at least those; as
# nobody with the unit's capabilities; SIGTERM ends it with 0. Runs under busybox sh (see lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
trap 'tool_cleanup; umount "$IOSTACK_WORK/mnt" 2>/dev/null' EXIT

workload="${IOSTACK_HELPERS:-/iostack/helpers}/file_workload"
mnt="$IOSTACK_WORK/mnt"
fast=${IOSTACK_FAST_DISK:?}
other=${IOSTACK_OTHER_DISK:-}
layers="block,fs,vfs,syscall"
port=9709
W=30 # O_DIRECT writes on the other disk
R=20 # and reads

tool_run explain --explain --layers "$layers" --fs ext4
rc=$?
up=$(awk '/^(block|fs|vfs|syscall): traced$/ { sub(/:$/, "", $1); print $1 }' "$(out_of explain)" | tr '\n' ' ')
if [ "$rc" -eq 0 ] && [ "$up" = "block fs vfs syscall " ] &&
  grep -q '^loaded and attached: ok$' "$(out_of explain)"; then
  pass explain "every layer traced: $up"
else
  fail explain "exit $rc, traced: '$up': $(brief explain)"
fi
for layer in block fs vfs syscall; do
  path "$layer" "$(awk -v l="$layer:" '$1 == l { print $2; exit }' "$(out_of explain)")"
done

# metric FILE NAME LABEL_FILTER: "op=count ..." (sorted) of a histogram family's _count series
# whose labels contain LABEL_FILTER (e.g. disk="vdb").
metric() {
  awk -v m="$2_count{" -v f="$3" 'index($1, m) == 1 && index($1, f) {
      op = $1; sub(/^.*op="/, "", op); sub(/".*$/, "", op); n[op] += $2
    } END { for (o in n) print o "=" n[o] }' "$1" | sort | tr '\n' ' ' | sed 's/ $//'
}
# total FILE NAME LABEL_FILTER: the sum of those counts.
total() { metric "$@" | tr ' ' '\n' | awk -F= '{ n += $2 } END { print n + 0 }'; }

# The guest's loopback is down until someone brings it up (busybox ifconfig).
ifconfig lo 127.0.0.1 up 2>"$IOSTACK_WORK/lo.err" || log "ifconfig lo: $(cat "$IOSTACK_WORK/lo.err")"
if ! mounted "$fast" "$mnt" ext4; then
  fail counts "could not mount the fast disk's ext4"
  exit 0
fi
"$workload" "$mnt" 7 5 3 2 >"$IOSTACK_WORK/wl.out" &
wpid=$!
i=0
while ! grep -qs '^ready' "$IOSTACK_WORK/wl.out" && [ $i -lt 200 ]; do
  sleep 0.05
  i=$((i + 1))
done
if ! tool_start exp --listen "127.0.0.1:$port" --layers "$layers" --fs ext4; then
  fail counts "did not start: $(brief exp)"
  kill -KILL "$wpid"
  exit 0
fi
[ -n "$other" ] && before=$(disk_requests "$other")
kill -USR1 "$wpid"
wait "$wpid"
[ -n "$other" ] && dd_write "$other" "$W" && dd_read "$other" "$R"
[ -n "$other" ] && after=$(disk_requests "$other")
# Two drains (one a second), then a scrape.
sleep 3
m="$IOSTACK_WORK/metrics"
if ! wget -q -O "$m" "http://127.0.0.1:$port/metrics"; then
  fail counts "wget http://127.0.0.1:$port/metrics failed"
  exit 0
fi

if [ -z "$other" ]; then
  na block-exact "no second disk here"
else
  caused=$((after - before))
  plain=$(metric "$m" iostack_block_latency_seconds "disk=\"$other\"")
  queued=$(metric "$m" iostack_block_queue_latency_seconds "disk=\"$other\"")
  if [ "$caused" -eq $((W + R)) ] && [ "$plain" = "read=$R write=$W" ] && [ "$queued" = "$plain" ]; then
    pass block-exact "$other: $plain in both families; diskstats $caused"
  else
    fail block-exact "$other: want read=$R write=$W (diskstats $caused), got '$plain', queued '$queued'"
  fi
fi
got=$(metric "$m" iostack_fs_latency_seconds 'fs="ext4"')
if [ "$got" = "fsync=3 open=2 read=7 write=5" ]; then
  pass fs-exact "ext4: $got, the helper's operations"
else
  fail fs-exact "ext4: want fsync=3 open=2 read=7 write=5, got '$got'"
fi
vfs_reads=$(total "$m" iostack_vfs_latency_seconds 'op="read"')
sys_reads=$(total "$m" iostack_syscall_latency_seconds 'op="read"')
if [ "$vfs_reads" -ge 7 ] && [ "$sys_reads" -ge 7 ]; then
  pass vfs-syscall "reads: vfs $vfs_reads, syscall $sys_reads (the helper's 7 among the machine's)"
else
  fail vfs-syscall "want at least the helper's 7 reads, got vfs $vfs_reads, syscall $sys_reads"
fi
# The fsyncs' flushes on the ext4 disk: the flush machinery's own flush requests have no setup
# stamp, and must be in the queued family too (from their issue), not lost starts.
plain=$(metric "$m" iostack_block_latency_seconds "disk=\"$fast\"")
queued=$(metric "$m" iostack_block_queue_latency_seconds "disk=\"$fast\"")
case "$plain" in
*flush=*)
  if [ "$queued" = "$plain" ]; then
    pass flushes "$fast (ext4, 3 fsyncs): $plain in both families"
  else
    fail flushes "$fast (ext4, 3 fsyncs): $plain, queued $queued"
  fi
  ;;
*) na flushes "no flush requests on $fast here ($plain)" ;;
esac
down=$(awk '$1 ~ /^iostack_layer_up\{/ && $2 != 1 { print $1 }' "$m" | tr '\n' ' ')
lost=$(awk '$1 ~ /^iostack_lost_events_total\{layer="(block|fs)"/ && $2 != 0 { print $1 "=" $2 }' "$m" | tr '\n' ' ')
if [ -z "$down" ] && [ -z "$lost" ]; then
  pass up-no-loss "every layer up; block and fs lost nothing"
else
  fail up-no-loss "down: '$down'; lost: '$lost'"
fi

pid=$(cat "$IOSTACK_WORK/exp.pid")
kill -TERM "$pid"
wait "$pid"
check_eq sigterm "$?" 0 "SIGTERM: exit status"
rm -f "$mnt"/file_workload.*
umount "$mnt"

check_privileges --layers "$layers" --fs ext4
