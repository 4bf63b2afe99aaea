"""What tuning tries next, and when it stops: pure decisions over the probes recorded so far.

The next step is a function of the recorded probes alone (and of the start value and the
search's settings), never of anything held in memory: a search killed at any point and started
again takes exactly the step it would have taken, from the probes its record holds.

- Offline: one probe measures the throughput the host sustains; a probe whose target was so far
  below it that LoadGen ran out of samples before its minimum duration (INVALID) is measured
  again at the rate it found, or between that and its target when the target was itself a
  measurement (within SIZED of it). Its start is the rate a sizing probe measured (bench.tuning).
- SingleStream / MultiStream: one probe measures the latency percentile the scenario reports
  (90th, 99th); again, a probe that ran out of queries is measured once more at what it found.
  The expected latency chosen is min(percentile, STREAM_MEAN_CAP x mean) less the margin.
- Server / Interactive: the highest target_qps LoadGen judges VALID (latency bound and early
  stopping). The bracket is the lowest INVALID target and the highest VALID target below it (a
  VALID above an INVALID is noise, and the INVALID wins); it is grown or shrunk geometrically
  until it has both ends (shrinking at once below what an overloaded probe completed: each
  probe above the host's capacity costs the time its queue takes to drain), then bisected
  (geometric midpoint) until (hi - lo) / lo <= resolution.
  A target is judged by the majority of its probes, a probe counting for it when it passes as a
  confirmation must: VALID with its latency percentile within HEADROOM of the bound. A probe
  that does not pass by a margin (its percentile within MARGINAL x the bound: INVALID in a slower
  minute of a drifting machine, or VALID only just, the queue already growing) is probed
  again, and a tie once more; one INVALID probe of an overloaded host (latency far over the
  bound) is trusted. Without this, one unlucky probe below the host's capacity becomes the
  bracket's INVALID end and the search never looks above it again; and a 5-s probe VALID at
  11.5 ms against a 15-ms bound (the 2-core lab: 48,000 queries/s) makes a search "find" a
  load that 60-s runs hold only at 27,000 to 36,000.
  The official run backs off by the margin, and a confirming probe at that value, as long as
  the official run (`SearchConfig.confirm_s`), must pass: VALID, with the latency percentile
  within HEADROOM of the bound. Short probes are optimistic on a machine whose speed drifts
  from one minute to the next; a confirmation as long as the run sees what the run will see.
  A failed confirmation takes the margin off once more and confirms that value, up to
  `max_confirms` times; then the lowest value is taken, logged as unconfirmed. Confirmations
  never move the bracket and do not count against the probe budget.

The margin always errs on the side that keeps the official run VALID: a Server target goes
down, an Offline expected rate goes up (LoadGen issues 1.1 x target_qps x min_duration samples:
a host faster than that ends too soon), an expected stream latency goes down (LoadGen then
generates more queries than the run needs, never too few).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bench.run import Scenario
from bench.tuning_record import Probe

SERVER_LIKE = (Scenario.SERVER, Scenario.INTERACTIVE)
# a confirmation passes with its latency percentile within this share of the bound: a run
# that just meets the bound in one minute misses it in the next on a drifting machine
HEADROOM = 2 / 3
# an INVALID probe with its latency percentile within this multiple of the bound may be the
# machine's noise and is probed again; further above, the host was overloaded
MARGINAL = 2.0
STREAMS = (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM)
# LoadGen sizes a stream run's query count from the expected latency: a run whose queries answer
# faster than expected runs out of them before its minimum duration (INVALID). The mean is what
# the run's queries take on the whole; a percentile above it is the tail, so the expected latency
# never exceeds the mean
STREAM_MEAN_CAP = 1.0
# a probe that ran out of work with its tried value within this factor of what it measured was
# aimed by an earlier measurement: the host's speed moved between the two (on the 2-core lab with
# a third of a core busy elsewhere, Offline runs of one image measured 346k to 510k samples/s)
SIZED = 1.5


@dataclass(frozen=True)
class SearchConfig:
    """How a search runs: the campaign's resolution and margin, and its bounds."""

    resolution: float = 0.02  # stop when (hi - lo) / lo is at most this
    margin: float = 0.05  # the official run's distance from what was found, on the safe side
    grow: float = 2.0  # the factor of each bracketing step
    max_probes: int = 16  # a search that has not converged by then takes its best VALID
    min_qps: float = 0.5  # below this no Server target is tried
    confirm: bool = True  # a Server search ends with a passing probe at the chosen value
    confirm_s: float | None = None  # the confirmation's minimum duration (None: a probe's)
    max_confirms: int = 3  # failed confirmations before the lowest value is taken unconfirmed


@dataclass(frozen=True)
class Try:
    """Run a probe at this value (target_qps, or target_latency in ms for the streams)."""

    value: float
    why: str
    seconds: float | None = None  # the probe's minimum duration (None: the search's probe length)
    confirm: bool = False  # a confirmation of the chosen value, not a step of the search


@dataclass(frozen=True)
class Stop:
    """The search is over: what it found (before the margin) and the value chosen (after)."""

    found: float | None
    chosen: float | None
    why: str


Step = Try | Stop


def tuned_name(scenario: Scenario) -> str:
    """The user.conf key a search sets for the scenario (without its model.scenario prefix)."""
    return "target_latency" if scenario in STREAMS else "target_qps"


def tuned_key(scenario: Scenario) -> str:
    """The full user.conf key, as the runs' settings spell it."""
    return f"*.{scenario.loadgen}.{tuned_name(scenario)}"


def probed(probe: Probe, scenario: Scenario) -> float | None:
    """The value a probe tried."""
    value = probe.settings.get(tuned_key(scenario))
    return float(value) if isinstance(value, int | float) else None


def next_step(scenario: Scenario, probes: Sequence[Probe], start: float,
              config: SearchConfig | None = None) -> Step:
    """The next probe to run, or the end of the search, from the probes recorded so far."""
    config = config or SearchConfig()
    if scenario in SERVER_LIKE:
        return _server(scenario, probes, start, config)
    return _once(scenario, probes, start, config)


def _once(scenario: Scenario, probes: Sequence[Probe], start: float,
          config: SearchConfig) -> Step:
    """Offline and the streams: one measurement, once more if the first ran out of work."""
    if not probes:
        return Try(_round(start), "a first measurement")
    last = probes[-1]
    measured = _measured(scenario, last)
    if measured is None:
        return Stop(None, None, "the probe measured nothing (see its run's log)")
    tried = probed(last, scenario)
    value = _again_at(tried, measured) if scenario is Scenario.OFFLINE else _round(measured)
    again = not last.valid and len(probes) < 2 and not _same(tried, value)
    if again:
        return Try(value, f"the first probe ran out of work at {tried:g}: measure again at "
                          f"{value:g} ({measured:g} found)")
    if scenario is Scenario.OFFLINE:
        return Stop(measured, _round(measured * (1 + config.margin)),
                    f"{measured:.1f} samples/s sustained")
    cap = (last.mean_latency_ns or math.inf) / 1e6 * STREAM_MEAN_CAP
    return Stop(measured, _round(min(measured, cap) * (1 - config.margin)),
                f"{measured:.4g} ms at the scenario's percentile")


def _again_at(tried: float | None, measured: float) -> float:
    """Where an Offline probe that ran out of samples is measured again. A target near what the
    probe found was itself a measurement (the sizing probe's rate): two readings of one host
    whose speed drifts from run to run, so the next probe aims between them (their geometric
    mean) and lasts about its length whichever of them the host keeps (not so a stream's probe:
    an expected latency between its two readings runs out of queries again).
    Further off (beyond SIZED), the target was a guess, and the measurement alone counts."""
    if tried is None or not 1 / SIZED <= measured / tried <= SIZED:
        return _round(measured)
    return _round(math.sqrt(tried * measured))


def _measured(scenario: Scenario, probe: Probe) -> float | None:
    if scenario is Scenario.OFFLINE:
        return probe.samples_per_s or None
    return probe.latency_ns / 1e6 if probe.latency_ns else None


def marginal(probe: Probe) -> bool:
    """Not passing, with the latency percentile within MARGINAL x the bound: INVALID in what may
    be a slow minute, or VALID only just (beyond HEADROOM): either way, one probe tells nothing."""
    return (not passes(probe) and probe.latency_ns is not None
            and probe.latency_bound_ns is not None
            and probe.latency_ns <= MARGINAL * probe.latency_bound_ns)


def verdicts(scenario: Scenario, probes: Sequence[Probe]) -> dict[float, bool | None]:
    """Each searched target's verdict: the majority of its probes, a probe counting for it when
    it passes (VALID within HEADROOM of the bound, as a confirmation must); None while
    undecided (one marginal probe, or as many passing as not)."""
    at: dict[float, list[Probe]] = {}
    for probe in probes:
        if not probe.confirm and (value := probed(probe, scenario)) is not None:
            at.setdefault(value, []).append(probe)
    judged: dict[float, bool | None] = {}
    for value, tried in at.items():
        good = sum(passes(p) for p in tried)
        bad = len(tried) - good
        alone = len(tried) == 1 and marginal(tried[0])
        judged[value] = None if alone or good == bad else good > bad
    return judged


def bracket(scenario: Scenario, probes: Sequence[Probe]) -> tuple[float | None, float | None]:
    """(lo, hi): the highest VALID target below the lowest INVALID one, and that INVALID one;
    an undecided target counts as INVALID."""
    return _ends(verdicts(scenario, probes))


def _ends(judged: dict[float, bool | None]) -> tuple[float | None, float | None]:
    invalid = [v for v, ok in judged.items() if not ok]
    hi = min(invalid) if invalid else None
    below = [v for v, ok in judged.items() if ok and (hi is None or v < hi)]
    return (max(below) if below else None), hi


def _server(scenario: Scenario, probes: Sequence[Probe], start: float,
            config: SearchConfig) -> Step:
    judged = verdicts(scenario, probes)
    lo, hi = _ends(judged)
    if not probes:
        return Try(_round(start), "start")
    searched = [p for p in probes if not p.confirm]
    if len(searched) >= config.max_probes:
        return _confirmed(scenario, lo, probes, config,
                          f"{len(searched)} probes, the search's budget: took the highest VALID "
                          "target below every INVALID one")
    if hi is not None and judged[hi] is None:
        return Try(hi, f"{hi:g} {_tally([p for p in searched if probed(p, scenario) == hi])}: "
                       "probe again")
    if hi is None:
        assert lo is not None  # every probe VALID
        return Try(_round(lo * config.grow), f"{lo:g} VALID: grow")
    if lo is None:
        if hi / config.grow < config.min_qps:
            return Stop(None, None, f"INVALID down to {hi:g} queries/s")
        # an overloaded probe completes about what the host can do, and every probe above
        # that costs its queue's drain time: go straight below it when it is that far off
        served = min((p.samples_per_s or hi) for p in probes if probed(p, scenario) == hi)
        step = min(hi / config.grow, served)
        return Try(_round(max(step, config.min_qps)), f"{hi:g} INVALID: shrink")
    if hi / lo - 1 > config.resolution:
        return Try(_between(lo, hi), f"bisect {lo:g} (VALID) .. {hi:g} (INVALID)")
    return _confirmed(scenario, lo, probes, config,
                      f"{lo:g} VALID, {hi:g} INVALID (within {config.resolution:.0%})")


def passes(probe: Probe) -> bool:
    """A probe (a confirmation, or one of the search's) passes VALID with its latency percentile
    within HEADROOM of the bound."""
    if not probe.valid:
        return False
    if probe.latency_ns is None or probe.latency_bound_ns is None:
        return True
    return probe.latency_ns <= HEADROOM * probe.latency_bound_ns


def _confirmed(scenario: Scenario, found: float | None, probes: Sequence[Probe],
               config: SearchConfig, why: str) -> Step:
    """The found value less the margin, confirmed by a probe as long as the official run; each
    failed confirmation takes the margin (at least the resolution) off once more."""
    if found is None:
        return Stop(None, None, why)
    chosen = _round(found * (1 - config.margin))
    if not config.confirm:
        return Stop(found, chosen, why)
    step, failed = max(config.margin, config.resolution), 0
    for confirmation in (p for p in probes if p.confirm):
        if passes(confirmation):
            return Stop(found, probed(confirmation, scenario), f"{why}; confirmed")
        chosen = _round(min(chosen, probed(confirmation, scenario) or chosen) * (1 - step))
        failed += 1
    if failed >= config.max_confirms:
        return Stop(found, chosen, f"{why}; {failed} confirmations failed: {chosen:g} taken "
                                   "unconfirmed")
    again = f", after {failed} failed" if failed else ""
    return Try(chosen, f"confirm {chosen:g} ({found:g} less the margin{again})",
               seconds=config.confirm_s, confirm=True)


def _between(lo: float, hi: float) -> float:
    """The geometric midpoint, rounded but strictly inside the bracket."""
    mid = math.sqrt(lo * hi)
    for digits in (4, 6, 9):
        value = float(f"{mid:.{digits}g}")
        if lo < value < hi:
            return value
    return mid


def _tally(tried: Sequence[Probe]) -> str:
    """Why a target is undecided, as the search's log says it."""
    if len(tried) == 1:
        ms = (tried[0].latency_ns or 0) / 1e6
        bound = (tried[0].latency_bound_ns or 0) / 1e6
        how = "VALID only just" if tried[0].valid else "INVALID by a margin"
        return f"{how} ({ms:.3g} ms against {bound:.3g} ms)"
    good = sum(passes(p) for p in tried)
    return f"{good} passing, {len(tried) - good} not"


def _round(value: float) -> float:
    """A value as a person writes it in user.conf: four significant digits."""
    return float(f"{value:.4g}")


def _same(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9)
