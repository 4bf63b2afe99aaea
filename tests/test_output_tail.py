"""The bounded capture of command output (pure logic; the transports are tested in
test_host_contract.py and test_output_memory.py)."""

from __future__ import annotations

from lab.host import CommandResult
from lab.output import LINE_CAP_BYTES, OutputTail


def test_keeps_only_the_end_and_counts_the_rest() -> None:
    tail = OutputTail(10)
    for chunk in (b"0123456789", b"abcdef", b"", b"XYZ"):
        tail.feed(chunk)
    assert tail.finish() == "6789abcdefXYZ"[-10:]
    assert tail.dropped_bytes == 19 - 10
    assert tail.finish() == "9abcdefXYZ" and tail.dropped_bytes == 9  # idempotent


def test_lines_reach_the_sink_whole_and_bounded() -> None:
    seen: list[str] = []
    tail = OutputTail(1024, seen.append)
    tail.feed(b"one\ntw")
    tail.feed(b"o\n" + b"x" * (LINE_CAP_BYTES * 2 + 5))
    tail.feed(b"\nlast")
    tail.finish()
    assert seen[:2] == ["one", "two"]
    assert [len(s) for s in seen[2:5]] == [LINE_CAP_BYTES, LINE_CAP_BYTES, 5]
    assert seen[5:] == ["last"]


def test_a_truncated_result_says_so_in_its_tail() -> None:
    result = CommandResult("h", ("x",), 1, "end\n", "", 0.1, stdout_dropped_bytes=99)
    assert result.truncated
    assert result.tail(1) == "(output truncated: its first 99 bytes were not kept)\nend"
    assert not CommandResult("h", ("x",), 0, "a", "", 0.1).truncated
