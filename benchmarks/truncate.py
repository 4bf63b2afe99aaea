"""Truncate a generated 1 GB mlperf_log_accuracy.json; print MB/s and the peak RSS.

    .venv/bin/python benchmarks/truncate.py [--size-mb 1024] [--dir /var/tmp]

The log is written in LoadGen's format, evicted from the page cache (posix_fadvise DONTNEED, so
the cold pass reads from disk), then truncated twice in a fresh child process each time (cold,
then warm). The child's peak RSS must stay under 100 MB whatever the log size.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RSS_BUDGET_MB = 100


def generate(path: Path, size_bytes: int) -> int:
    """Write a LoadGen-style accuracy log of about size_bytes, in constant memory."""
    written, seq = 0, 0
    with open(path, "wb") as f:
        f.write(b"[\n")
        while written < size_bytes:
            block = [f'{{ "seq_id" : {seq + i}, "qsl_idx" : {(seq + i) * 7919 % 50000}, '
                     f'"data" : "{(seq + i) * 2654435761 % 2**32:08X}{seq % 997:08X}" }},\n'
                     for i in range(20000)]
            data = "".join(block).encode()
            f.write(data)
            written += len(data)
            seq += 20000
        f.write(b'{ "seq_id" : -1, "qsl_idx" : 0, "data" : "00" }\n]\n')
        f.flush()
        os.fsync(f.fileno())
    return path.stat().st_size


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_only(path: Path) -> float:
    """Seconds to read path once with no work on the bytes: the disk's speed."""
    start = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 20):
            pass
    return time.perf_counter() - start


CHILD = """
import sys, time
from pathlib import Path
from submission.truncate import truncate_accuracy_log
start = time.perf_counter()
r = truncate_accuracy_log(Path(sys.argv[1]), Path(sys.argv[2]))
took = time.perf_counter() - start
# VmHWM belongs to this process image only (ru_maxrss would carry the parent's over exec)
hwm_kb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
peak_mb = hwm_kb / 1024
print(took, peak_mb, r.full_bytes, r.written_bytes, r.sha256)
"""


def truncate_in_child(src: Path, dst: Path) -> tuple[float, float, int, int, str]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(src), str(dst)], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), int(out[3]), out[4]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--dir", default="/var/tmp")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="subrun-truncate-") as tmp:
        src, dst = Path(tmp) / "mlperf_log_accuracy.json", Path(tmp) / "truncated.json"
        start = time.perf_counter()
        size = generate(src, args.size_mb * 1024 * 1024)
        print(f"generated {size / 1e6:.0f} MB in {time.perf_counter() - start:.1f} s")
        evict(src)
        worst_rss = 0.0
        for label in ("cold (from disk)", "warm (page cache)"):
            took, peak_mb, full, written, sha = truncate_in_child(src, dst)
            worst_rss = max(worst_rss, peak_mb)
            print(f"{label}: {full / 1e6 / took:.0f} MB/s, {took:.2f} s, "
                  f"peak RSS {peak_mb:.1f} MB, {full} -> {written} bytes, sha256 {sha[:16]}...")
            if label.startswith("cold"):
                evict(src)
                time.sleep(0.5)  # let the kernel drain its LRU batches so the pages can go
                evict(src)
                print(f"plain read of the evicted file (disk speed): "
                      f"{size / 1e6 / read_only(src):.0f} MB/s")
        ok = worst_rss < RSS_BUDGET_MB and dst.stat().st_size <= 10 * 1024
        print(f"peak RSS {worst_rss:.1f} MB (budget {RSS_BUDGET_MB} MB): {'OK' if ok else 'OVER'}")
        self_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"(generator process peak RSS {self_mb:.1f} MB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
