"""The daemon's command table: one PTDaemon request in, its reply lines out.

Replies follow what power-dev's server sends and checks (power reference, section 1.3). A
failure of the analyzer or a refused value becomes a one-line `Error: ...` reply; an unknown
command gets `Unknown command`, and `RL` with arguments gets `Invalid number of parameters`
like a single-channel meter, so power-dev falls back to plain `RL`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from power import protocol
from power.instrument import AnalyzerError
from power.meter import Meter
from power.protocol import Command

Handler = Callable[[Meter, tuple[str, ...]], list[str]]


def dispatch(meter: Meter, command: Command, identity: Callable[[], str]) -> list[str]:
    """The reply lines to one command (never raises for bad input or a failed analyzer)."""
    if command.name == "Hello":
        return [protocol.HELLO]
    if command.name == "Identify":
        return [identity()]
    handler = _HANDLERS.get(command.name)
    if handler is None:
        return [protocol.UNKNOWN_COMMAND]
    try:
        return handler(meter, command.args)
    except AnalyzerError as e:
        return [f"Error: {e}"]


def _ranges(meter: Meter, args: tuple[str, ...]) -> list[str]:
    return [meter.ranges().reply()]


def _set_range(meter: Meter, args: tuple[str, ...]) -> list[str]:
    if len(args) != 2 or args[0] not in ("V", "A"):
        return ["Error: SR needs V or A and a value or Auto, e.g. SR,A,Auto or SR,V,300"]
    quantity, raw = args
    if raw.lower() == "auto":
        value = None
    else:
        try:
            value = float(raw)
        except ValueError:
            return [f"Error: SR,{quantity} value {raw!r} is neither a number nor Auto"]
    meter.set_range(quantity, value)
    return [protocol.range_changed(quantity)]


def _go(meter: Meter, args: tuple[str, ...]) -> list[str]:
    if len(args) != 3 or not args[0].isdigit() or not args[1].isdigit():
        return ["Error: Go needs <interval ms>,<samples, 0 for untimed>,<mark>"]
    interval_ms, limit, mark = int(args[0]), int(args[1]), args[2]
    if not 100 <= interval_ms <= 60000:
        return [f"Error: sample interval {interval_ms} ms is outside 100..60000 ms"]
    meter.go(interval_ms, limit, mark)
    return [protocol.go_reply(interval_ms, limit)]


def _stop(meter: Meter, args: tuple[str, ...]) -> list[str]:
    return [meter.stop()[1]]


def _read_samples(meter: Meter, args: tuple[str, ...]) -> list[str]:
    if args:
        return [protocol.RL_MULTICHANNEL_REFUSAL]
    samples = meter.read_unread()
    return [f"Last {len(samples)} samples", *(s.rl_line() for s in samples)]


def _value(name: str) -> Handler:
    attribute = {"Watts": "watts", "Volts": "volts", "Amps": "amps", "PF": "pf"}[name]

    def handler(meter: Meter, args: tuple[str, ...]) -> list[str]:
        return [f"{name},{getattr(meter.last_sample(), attribute):f}"]

    return handler


def _uncertainty(meter: Meter, args: tuple[str, ...]) -> list[str]:
    relative, absolute = meter.uncertainty()
    if math.isnan(relative) or math.isnan(absolute):
        return ["Uncertainty,-1.000000,Watts,-1.000000"]
    return [f"Uncertainty,{relative:f},Watts,{absolute:f}"]


def _load(meter: Meter, args: tuple[str, ...]) -> list[str]:
    if args not in (("busy",), ("idle",)):
        return ["Error: Load needs busy or idle"]
    meter.set_load(args[0] == "busy")
    return ["Load changed"]


_HANDLERS: dict[str, Handler] = {
    "RR": _ranges,
    "SR": _set_range,
    "Go": _go,
    "Stop": _stop,
    "RL": _read_samples,
    "Watts": _value("Watts"),
    "Volts": _value("Volts"),
    "Amps": _value("Amps"),
    "PF": _value("PF"),
    "Uncertainty": _uncertainty,
    "Load": _load,
}
