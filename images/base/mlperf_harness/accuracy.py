"""accuracy.txt in the reference classification format, from LoadGen's accuracy log.

`accuracy=<pct>%, good=<n>, total=<n>` as the ImageNet reference script prints it, then the
`hash=<sha256 of the full log>` line the checker requires. Each sample counts once, however
often LoadGen sent it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np


def score(log_path: Path, label_of: Callable[[int], int]) -> tuple[int, int]:
    """(good, total) over the distinct samples of an accuracy log, answers read as float32."""
    entries = json.loads(Path(log_path).read_text())
    seen: dict[int, bool] = {}
    for entry in entries:
        index = int(entry["qsl_idx"])
        if index in seen:
            continue
        found = int(np.frombuffer(bytes.fromhex(entry["data"]), np.float32)[0])
        seen[index] = found == label_of(index)
    return sum(seen.values()), len(seen)


def write_accuracy_txt(log_path: Path, out_path: Path, label_of: Callable[[int], int]) -> str:
    """Score the log and write accuracy.txt; return its text."""
    good, total = score(log_path, label_of)
    digest = hashlib.sha256(Path(log_path).read_bytes()).hexdigest()
    pct = 100.0 * good / total if total else 0.0
    text = f"accuracy={pct:.3f}%, good={good}, total={total}\nhash={digest}\n"
    Path(out_path).write_text(text)
    return text
