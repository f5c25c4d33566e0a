#!/bin/sh
# rastat's kernel-matrix checks, exact against the page cache itself: on the fast disk's ext4, a
# helper (examples/ra_reader) reads a 64 MiB file whose pages were just evicted; rastat, filtered
# to the helper (-p) and the disk (-d), must count as brought in the pages read in (no fewer than
# util-linux's fincore finds resident after, no more than /proc/diskstats counts read from the
# disk: each errs one way, see the sequential read), as used what the helper read, and as waste
# what was brought in and never read. Runs under busybox sh (see lib.sh).
set -u
. "$(dirname "$0")/lib.sh"
trap 'tool_cleanup; umount "$IOSTACK_WORK/mnt" 2>/dev/null' EXIT

reader="${IOSTACK_HELPERS:-/iostack/helpers}/ra_reader"
mnt="$IOSTACK_WORK/mnt"
fast=${IOSTACK_FAST_DISK:?}
if [ ! -x "$reader" ]; then
  fail helper "$reader is missing (built by cargo test / cargo build --examples)"
  exit 0
fi
if ! fincore=$(util_linux fincore); then
  fail helper "util-linux's fincore is missing"
  exit 0
fi

# --- explain ------------------------------------------------------------------------------

tool_run explain --explain
if [ $? -eq 0 ] && grep -q '^loaded and attached: ok' "$(out_of explain)"; then
  pass explain "--explain loads and attaches"
else
  fail explain "$(brief explain)"
  log_verbose explain_v --explain
  exit 0
fi
for role in window added read fault; do
  path "$role" "$(awk -v r="$role" '$1 == r { print $2; exit }' "$(out_of explain)")"
done

if ! mounted "$fast" "$mnt" ext4; then
  fail sequential "could not mount the fast disk's ext4"
  exit 0
fi

# ra_count FILE OBJECT KEY: a count of the top-level OBJECT (pages, windows) of the last report.
ra_count() {
  tail -n 1 "$1" | grep -o "\"$2\":{[^}]*}" | head -n 1 | grep -o "\"$3\":[0-9]*" | cut -d: -f2
}
# resident FILE: its pages in the page cache, per fincore.
resident() { "$fincore" -n -o PAGES "$1" | awk '{ print $1 }'; }
# evict FILE: its clean pages out of the page cache (POSIX_FADV_DONTNEED).
evict() { "$reader" "$1" drop; }
# read_pages NAME: the distinct pages the helper of traced_by NAME read.
read_pages() { awk '$1 == "pages" { print $2 }' "$IOSTACK_WORK/$1.wl"; }
# counts NAME: the report's totals, for a detail.
counts() { tail -n 1 "$(out_of "$1")" | grep -o '"windows":{[^}]*},"pages":{[^}]*}'; }

file="$mnt/rastat.data"
other="$mnt/rastat.other"
dd if=/dev/urandom of="$file" bs=1M count=64 2>/dev/null
dd if=/dev/urandom of="$other" bs=1M count=16 2>/dev/null
sync

# --- a sequential read: every page brought in is used; only the helper's are counted ---------
# Two truths bound what the kernel brought in, each wrong in one direction only: fincore,
# afterwards, misses pages a busy host reclaimed meanwhile (CI's host, beside two VMs and
# builds: 496 of 497 in the stop's CI of 8849c2f; beside a reader churning the page cache, 176
# of 497), and the disk's count of pages read (/proc/diskstats) also holds ext4's metadata read
# meanwhile (CI44's host: 16385 for the file's 16384, rastat's brought in 16384 = used, so no
# page of the file twice: an extent block reclaimed and read again). By construction the file's
# 16384 pages are each read once.
evict "$file"
evict "$other"
if TRACED_BEFORE='other0=$(disk_read_pages "$fast"); dd if="$other" of=/dev/null bs=1M 2>/dev/null; disk0=$(disk_read_pages "$fast")' \
  traced_by "$reader" seq "$file" seq -- -d "$fast"; then
  disk=$(($(disk_read_pages "$fast") - disk0))
  other_pages=$((disk0 - other0))
  brought=$(ra_count "$(out_of seq)" pages brought_in)
  used=$(ra_count "$(out_of seq)" pages used)
  wasted=$(ra_count "$(out_of seq)" pages wasted)
  unused=$(ra_count "$(out_of seq)" pages resident_unused)
  windows=$(ra_count "$(out_of seq)" windows total)
  res=$(resident "$file")
  # The file's 16384 pages, each read once after its eviction, all of them used; dd's 4096
  # pages of the other file, read just before, are not the helper's and are not counted.
  if [ "$brought" = 16384 ] && [ "${res:-0}" -le "$brought" ] && [ "$brought" -le "$disk" ] &&
    [ "$used" = "$brought" ] && [ "$wasted" = 0 ] && [ "$unused" = 0 ] && [ "${windows:-0}" -gt 0 ] &&
    [ "$other_pages" -ge 4096 ]; then
    pass sequential "64 MiB read: brought in $brought (fincore $res, the disk $disk), used $used, waste 0, $windows windows; dd's $other_pages pages of another file not counted"
  else
    fail sequential "want brought in = 16384 = used, fincore $res <= it <= $disk pages read from the disk, waste 0, unused 0, dd's $other_pages >= 4096 pages of another file not counted; got $(counts seq)"
  fi
else
  fail sequential "$(brief seq)"
fi

# --- 4 KiB random reads: the pages never read are what readahead brought in unused, then waste -
# The pages brought in and never read, between the two truths of the sequential read: fincore's
# resident less the pages read (a page reclaimed is missing), and the disk's pages read less the
# pages read (a metadata block read meanwhile is added). Where the two agree (every run but
# those two failures), exactly that.
evict "$file"
"$reader" "$file" random 500 7 >"$IOSTACK_WORK/rnd.wl" &
w=$!
wait_for_line 10 '^ready' "$IOSTACK_WORK/rnd.wl"
if tool_start rnd -j -p "$w" -d "$fast" --per-file; then
  disk0=$(disk_read_pages "$fast")
  kill -USR1 "$w"
  wait "$w"
  disk=$(($(disk_read_pages "$fast") - disk0))
  res=$(resident "$file")
  got=$(read_pages rnd)
  evict "$file"
  tool_stop rnd
  brought=$(ra_count "$(out_of rnd)" pages brought_in)
  used=$(ra_count "$(out_of rnd)" pages used)
  wasted=$(ra_count "$(out_of rnd)" pages wasted)
  unused=$(ra_count "$(out_of rnd)" pages resident_unused)
  never_lo=$((res - got))
  never_hi=$((disk - got))
  if [ "$((brought - used))" = "$wasted" ] && [ "$wasted" -ge "$never_lo" ] && [ "$wasted" -le "$never_hi" ] &&
    [ "$wasted" -gt 0 ] && [ "$unused" = 0 ]; then
    pass random "500 random 4 KiB reads of $got pages, fincore $res, the disk $disk: brought in $brought - used $used = waste after eviction $wasted, never read $never_lo to $never_hi"
  else
    fail random "want brought in - used = waste, between fincore $res - $got pages read = $never_lo and the disk's $disk - $got = $never_hi, > 0; got $(counts rnd)"
  fi
  named=$(tail -n 1 "$(out_of rnd)" | grep -o '"files":\[{"path":"[^"]*"' | cut -d'"' -f6)
  check_eq per-file "$named" "$file" "--per-file names the file of most waste"
else
  kill -KILL "$w" 2>/dev/null
  fail random "$(brief rnd)"
fi

# --- hints that turn readahead off: no window -------------------------------------------------
for mode in fadv-random madv-random; do
  evict "$file"
  if traced_by "$reader" "$mode" "$file" "$mode" 300 3 -- -d "$fast"; then
    windows=$(ra_count "$(out_of "$mode")" windows total)
    brought=$(ra_count "$(out_of "$mode")" pages brought_in)
    res=$(resident "$file")
    if [ "$windows" = 0 ] && [ "$brought" = 0 ] && [ "$res" -gt 0 ]; then
      pass "$mode" "$(read_pages "$mode") pages read ($res resident): no window, nothing brought in by readahead"
    else
      fail "$mode" "want no window and nothing brought in; got $(counts "$mode"), fincore $res"
    fi
  else
    fail "$mode" "$(brief "$mode")"
  fi
done

# --- mmap: the fault's read-around brings pages in, each page touched is used ----------------
# Brought in lies between the two truths of the sequential read, fincore's resident and the
# disk's pages read.
evict "$file"
if TRACED_BEFORE='disk0=$(disk_read_pages "$fast")' traced_by "$reader" mmap "$file" mmap-random 300 5 -- -d "$fast"; then
  disk=$(($(disk_read_pages "$fast") - disk0))
  around=$(ra_count "$(out_of mmap)" windows around)
  brought=$(ra_count "$(out_of mmap)" pages brought_in)
  used=$(ra_count "$(out_of mmap)" pages used)
  res=$(resident "$file")
  got=$(read_pages mmap)
  if [ "${around:-0}" -gt 0 ] && [ "${res:-0}" -le "$brought" ] && [ "$brought" -le "$disk" ] &&
    [ "$used" -ge "$got" ] && [ "$used" -le "$brought" ]; then
    pass mmap "$got pages touched: $around read-around windows brought in $brought (fincore $res, the disk $disk), used $used"
  else
    fail mmap "want read-around windows, fincore $res <= brought in <= $disk pages read from the disk, used >= $got touched; got $(counts mmap)"
  fi
else
  fail mmap "$(brief mmap)"
fi

# --- beside libbpf-tools' readahead: in-kernel cost per page --------------------------------
# A benchmark, not a timed test: under TCG absolute times mean little, so the ratio is reported.
# Both tools trace the same reads at once: a sequential read of the evicted file (every page
# brought in and read: the cost per page brought in), then a second reader of the cached file
# (only read: the cost per page read). readahead loads only on 5.10 of the matrix (on 6.1, 6.12
# and the CI host: "failed to set attach target for do_page_cache_ra").
peer="${IOSTACK_HELPERS:-/iostack/helpers}/readahead"
floor="${IOSTACK_HELPERS:-/iostack/helpers}/hook_floor"
if [ ! -x "$peer" ] || [ ! -x "$prog_stats" ] || [ ! -x "$floor" ]; then
  na vs-readahead "no readahead (libbpf-tools), bpf_prog_stats or hook_floor helper in this image"
elif ! kprobes_possible; then
  na vs-readahead "libbpf-tools' readahead hooks functions (fentry), which this kernel refuses"
else
  evict "$file"
  echo 1 >/proc/sys/kernel/bpf_stats_enabled
  "$reader" "$file" seq >"$IOSTACK_WORK/vs.wl" &
  w=$!
  "$reader" "$file" seq >"$IOSTACK_WORK/vs2.wl" &
  w2=$!
  wait_for_line 60 '^ready' "$IOSTACK_WORK/vs.wl"
  wait_for_line 60 '^ready' "$IOSTACK_WORK/vs2.wl"
  prog_ids "$IOSTACK_WORK/vs.ids0"
  "$peer" >"$IOSTACK_WORK/vs.peer" 2>&1 &
  ppid=$!
  # Its programs loaded and settled, or its exit (where it refuses), whichever comes first.
  : >"$IOSTACK_WORK/vs.ids1.prev"
  i=0
  while [ $i -lt 120 ] && pid_alive "$ppid"; do
    sleep 0.5
    prog_ids "$IOSTACK_WORK/vs.ids1"
    if ! cmp -s "$IOSTACK_WORK/vs.ids0" "$IOSTACK_WORK/vs.ids1" &&
      cmp -s "$IOSTACK_WORK/vs.ids1.prev" "$IOSTACK_WORK/vs.ids1"; then
      break
    fi
    cp "$IOSTACK_WORK/vs.ids1" "$IOSTACK_WORK/vs.ids1.prev"
    i=$((i + 1))
  done
  refused=0
  if ! pid_alive "$ppid"; then
    # Its own refusal (6.1 and 6.12: "failed to set attach target for do_page_cache_ra").
    refused=1
    kill -KILL "$w" "$w2" 2>/dev/null
    echo 0 >/proc/sys/kernel/bpf_stats_enabled
    na vs-readahead "libbpf-tools' readahead does not run on this kernel: $(head -n 1 "$IOSTACK_WORK/vs.peer")"
  else
    # Empty programs on the two hooks per page that any such tool needs (the floor).
    "$floor" rastat 2>"$IOSTACK_WORK/vs.floor" &
    fl=$!
    wait_new_progs "$IOSTACK_WORK/vs.ids1" "$IOSTACK_WORK/vs.ids1b" "$fl"
  fi
  if [ "$refused" = 1 ]; then
    :
  elif ! pid_alive "$ppid" || ! pid_alive "$fl" || ! tool_start vs -j -p "$w" -d "$fast"; then
    kill -KILL "$w" "$w2" "$ppid" "$fl" 2>/dev/null
    echo 0 >/proc/sys/kernel/bpf_stats_enabled
    fail vs-readahead "the peer, the floor or rastat did not start: $(head -c 300 "$IOSTACK_WORK/vs.peer") $(head -c 300 "$IOSTACK_WORK/vs.floor") $(brief vs)"
  else
    prog_ids "$IOSTACK_WORK/vs.ids2"
    "$prog_stats" >"$IOSTACK_WORK/vs.t0"
    kill -USR1 "$w"
    wait "$w"
    "$prog_stats" >"$IOSTACK_WORK/vs.t1"
    kill -USR1 "$w2"
    wait "$w2"
    "$prog_stats" >"$IOSTACK_WORK/vs.t2"
    tool_stop vs
    kill -INT "$ppid" "$fl"
    wait "$ppid" "$fl"
    echo 0 >/proc/sys/kernel/bpf_stats_enabled
    new_ids "$IOSTACK_WORK/vs.ids0" "$IOSTACK_WORK/vs.ids1" >"$IOSTACK_WORK/vs.peer.ids"
    new_ids "$IOSTACK_WORK/vs.ids1" "$IOSTACK_WORK/vs.ids1b" >"$IOSTACK_WORK/vs.floor.ids"
    new_ids "$IOSTACK_WORK/vs.ids1b" "$IOSTACK_WORK/vs.ids2" >"$IOSTACK_WORK/vs.ours.ids"
    pages=$(resident "$file")
    [ "${pages:-0}" -gt 0 ] || pages=1
    ours_in=$(run_time "$IOSTACK_WORK/vs.ours.ids" "$IOSTACK_WORK/vs.t0" "$IOSTACK_WORK/vs.t1")
    peer_in=$(run_time "$IOSTACK_WORK/vs.peer.ids" "$IOSTACK_WORK/vs.t0" "$IOSTACK_WORK/vs.t1")
    ours_rd=$(run_time "$IOSTACK_WORK/vs.ours.ids" "$IOSTACK_WORK/vs.t1" "$IOSTACK_WORK/vs.t2")
    peer_rd=$(run_time "$IOSTACK_WORK/vs.peer.ids" "$IOSTACK_WORK/vs.t1" "$IOSTACK_WORK/vs.t2")
    floor_in=$(run_time "$IOSTACK_WORK/vs.floor.ids" "$IOSTACK_WORK/vs.t0" "$IOSTACK_WORK/vs.t1")
    floor_rd=$(run_time "$IOSTACK_WORK/vs.floor.ids" "$IOSTACK_WORK/vs.t1" "$IOSTACK_WORK/vs.t2")
    floor_ratio=$(awk -v a="$floor_in" -v b="$peer_in" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
    ratio_in=$(awk -v a="$ours_in" -v b="$peer_in" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
    ratio_rd=$(awk -v a="$ours_rd" -v b="$peer_rd" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')
    peer_counts=$(grep -i 'pages' "$IOSTACK_WORK/vs.peer" | head -n 1 | tr -s ' ')
    brought=$(ra_count "$(out_of vs)" pages brought_in)
    used=$(ra_count "$(out_of vs)" pages used)
    progs="$(wc -l <"$IOSTACK_WORK/vs.ours.ids") and $(wc -l <"$IOSTACK_WORK/vs.peer.ids") programs"
    # Ours, program by program (ns per page, brought in and read): where the cost is.
    each=$(awk -v n="$pages" 'FILENAME == ARGV[1] { want[$1] = 1; next }
      FILENAME == ARGV[2] { if ($1 in want) t0[$1] = $2; next }
      ($1 in want) && $2 - t0[$1] > 0 { printf "%s %d, ", $5, ($2 - t0[$1]) / n }' \
      "$IOSTACK_WORK/vs.ours.ids" "$IOSTACK_WORK/vs.t0" "$IOSTACK_WORK/vs.t1")
    detail="64 MiB, $pages pages: brought in and read: rastat $((ours_in / pages)) ns/page, readahead $((peer_in / pages)) ns/page, ratio $ratio_in, empty programs on an add and an access $((floor_in / pages)) ns/page (floor/readahead $floor_ratio); read again: rastat $((ours_rd / pages)) ns/page, readahead $((peer_rd / pages)) ns/page, ratio $ratio_rd, floor $((floor_rd / pages)) ns/page ($progs; TCG; rastat's: ${each%, }); rastat: brought in $brought, used $used; readahead: $peer_counts"
    if [ "$brought" != 16384 ] || [ "$used" != 16384 ] || [ "$pages" != 16384 ]; then
      fail vs-readahead "rastat must count exactly: $detail"
    elif [ "$ratio_in" = "?" ] || [ "$ratio_rd" = "?" ] || [ "$ours_in" -le 0 ]; then
      fail vs-readahead "the run time of both tools' programs must be measured: $detail"
    else
      pass vs-readahead "$detail"
    fi
  fi
fi

rm -f "$file" "$other"
umount "$mnt"

# --- bad input ----------------------------------------------------------------------------
tool_run baddisk -d nosuchdisk
rc=$?
if [ "$rc" -ne 0 ] && [ "$(wc -l <"$(err_of baddisk)")" -eq 1 ] && grep -q "unknown disk 'nosuchdisk'" "$(err_of baddisk)"; then
  pass bad-disk "$(cat "$(err_of baddisk)")"
else
  fail bad-disk "exit $rc: $(brief baddisk)"
fi

check_privileges
