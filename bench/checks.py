"""The individual rules a run is judged by; `bench.verdict` runs those that apply to its kind.

Each check takes the run's `Context` and returns findings: a `Check` (name, ok, plain detail),
the fix when one is known, and whether a passing finding still makes the run not submittable
(short mode below official durations or counts). A value the round's rules do not know gives a
passing "not judged" finding instead of a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.accuracy import MetricResult, score_accuracy
from bench.loadgen_log import DetailLog
from bench.rerun import positive, rerun_settings
from bench.rules import ModelRules, RoundRules, round_of_seeds
from bench.run import Check, Mode, RunKind, RunSpec, Scenario, Setting
from bench.submitted import ACCURACY_CHECK, ACCURACY_MISS

MULTIPLE_CONF = "Multiple conf files"
PERFORMANCE_KINDS = (RunKind.PERFORMANCE, RunKind.POWER, RunKind.TEST01, RunKind.TEST04,
                     RunKind.TEST05)
EARLY_STOPPING = (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM, Scenario.SERVER,
                  Scenario.INTERACTIVE)


@dataclass(frozen=True)
class Context:
    spec: RunSpec
    log: DetailLog
    rules: RoundRules
    model: ModelRules
    accuracy_text: str | None = None

    @property
    def short(self) -> bool:
        return self.spec.mode is Mode.SHORT


@dataclass(frozen=True)
class CheckResult:
    """One check of a run and what follows from it: the fix to suggest, whether it makes the
    run not submittable, and the settings of a re-run that may pass."""

    check: Check
    fix: str = ""
    not_submittable: bool = False
    rerun_settings: dict[str, Setting] | None = None


def _ok(name: str, detail: str, *, not_submittable: bool = False) -> CheckResult:
    return CheckResult(Check(name=name, ok=True, detail=detail), not_submittable=not_submittable)


def _fail(name: str, detail: str, fix: str = "",
          rerun_settings: dict[str, Setting] | None = None) -> CheckResult:
    return CheckResult(Check(name=name, ok=False, detail=detail), fix=fix,
                   rerun_settings=rerun_settings)


def _not_judged(name: str, ctx: Context, what: str) -> CheckResult:
    return _ok(name, f"not judged: bench/rounds/{ctx.rules.round}.yaml has no {what} "
                     f"for {ctx.spec.model}")


def _at_least(name: str, ctx: Context, found: object, need: int, what: str,
              fix: str) -> CheckResult:
    """found >= need; in short mode a shortfall passes but is not submittable."""
    if isinstance(found, int | float) and found >= need:
        return _ok(name, f"{what} {found} >= {need}")
    detail = f"{what} {found} < {need}"
    if ctx.short:
        return _ok(name, f"short mode: {detail}", not_submittable=True)
    return _fail(name, detail, fix)


def scenario(ctx: Context) -> list[CheckResult]:
    """The log is of the scenario and test mode the run asked for."""
    want = (ctx.spec.scenario.loadgen, ctx.spec.kind.loadgen_mode)
    found = (ctx.log.scenario, ctx.log.test_mode)
    if found == want:
        return [_ok("scenario", f"{want[0]} {want[1]}")]
    return [_fail("scenario", f"the log is of {found[0]} {found[1]}, the run asked for "
                              f"{want[0]} {want[1]}",
                  "Check how the harness passes scenario and mode to LoadGen.")]


def validity(ctx: Context) -> list[CheckResult]:
    """LoadGen judged the run VALID (the checker does not enforce this; the rules do)."""
    log = ctx.log
    state = log.get("result_validity")
    if state is None:
        return [_fail("valid", "the log has no result: the run did not finish",
                      "Look at the run's output tail for why LoadGen stopped, then re-run.")]
    if state == "VALID":
        return [_ok("valid", "VALID")]
    unmet = [name for key, name in (
        ("result_min_duration_met", "min duration"), ("result_min_queries_met", "min queries"),
        ("early_stopping_met", "early stopping"),
        ("result_perf_constraints_met", "latency constraint")) if log.get(key) is False]
    detail = f"LoadGen judged the run {state}" + (f" ({', '.join(unmet)} not met)" if unmet
                                                  else "")
    adjusted, fix = rerun_settings(ctx.spec, ctx.log)
    return [_fail("valid", detail, fix, rerun_settings=adjusted)]


def seeds(ctx: Context) -> list[CheckResult]:
    """The LoadGen seeds are the round's (they come from the LoadGen build)."""
    log, rules = ctx.log, ctx.rules
    found = log.requested_seeds if ctx.spec.kind is RunKind.TEST05 and log.test05_applied \
        else log.seeds
    if found is None:
        return [_fail("seeds", "the log has no seeds", "Collect the full detail log.")]
    if found == rules.seeds:
        return [_ok("seeds", f"seeds of {rules.round}")]
    other = round_of_seeds(found)
    release = f" (mlcommons-loadgen {rules.loadgen_release})" if rules.loadgen_release else ""
    return [_fail("seeds", f"the seeds are those of {other or 'no known round'} "
                           f"(qsl_rng_seed {found.qsl_rng_seed}), not of {rules.round}",
                  f"Build the image with the LoadGen release of {rules.round}{release}: the "
                  "seeds are compiled into LoadGen.")]


def loadgen_errors(ctx: Context) -> list[CheckResult]:
    """No LoadGen error entries, and a complete log."""
    errors = [e for e in ctx.log.errors
              if not (ctx.spec.kind.is_compliance and MULTIPLE_CONF in str(e.value))]
    if ctx.log.unparsed_lines:
        return [_fail("loadgen_errors", f"{ctx.log.unparsed_lines} line(s) of the detail log "
                                        "could not be read", "Collect the log again; if it "
                      "was cut short, the run did not finish: re-run.")]
    if not errors:
        return [_ok("loadgen_errors", "no LoadGen errors")]
    texts = "; ".join(f"{e.key}: {e.value}" for e in errors[:3])
    fix = ("The harness loads more than one conf file: load user.conf once and no mlperf.conf "
           "(LoadGen loads its own)." if any(MULTIPLE_CONF in str(e.value) for e in errors)
           else "Fix the cause LoadGen names, then re-run.")
    return [_fail("loadgen_errors", f"LoadGen logged {len(errors)} error(s): {texts}", fix)]


def durations(ctx: Context) -> list[CheckResult]:
    """Effective min_duration at least the official one (the checker reads the setting)."""
    if ctx.model.min_duration_exempt:
        return [_ok("min_duration", f"{ctx.spec.model} is exempt from the duration rule")]
    return [_at_least("min_duration", ctx, ctx.log.effective.get("min_duration_ms"),
                      ctx.rules.min_duration_ms, "min_duration_ms",
                      "Remove min_duration from user.conf: the official value comes from "
                      "LoadGen's mlperf.conf.")]


def query_counts(ctx: Context) -> list[CheckResult]:
    """min_query_count and, for Offline, samples per query at least the official ones."""
    found: list[CheckResult] = []
    eff = ctx.log.effective
    need = ctx.rules.min_query_count.get(ctx.spec.scenario)
    if need is not None:
        found.append(_at_least("min_query_count", ctx, eff.get("min_query_count"), need,
                               "min_query_count", "Remove min_query_count from user.conf."))
    if ctx.spec.scenario is Scenario.OFFLINE:
        spq = ctx.model.offline_min_samples_per_query
        found.append(_not_judged("samples_per_query", ctx, "Offline samples per query")
                     if spq is None else _at_least(
            "samples_per_query", ctx, eff.get("samples_per_query"), spq, "samples_per_query",
            "Raise target_qps (samples per query = target_qps x min_duration) and remove "
            "min_query_count from user.conf."))
    return found


def early_stopping(ctx: Context) -> list[CheckResult]:
    """Early stopping met, for the scenarios that use it."""
    if ctx.spec.scenario not in EARLY_STOPPING:
        return []
    if ctx.log.get("early_stopping_met") is True:
        return [_ok("early_stopping", "early stopping met")]
    result = " ".join(str(ctx.log.get("early_stopping_result", "")).split())
    fix = ("Too many queries missed the latency bound: lower target_qps."
           if ctx.spec.scenario in (Scenario.SERVER, Scenario.INTERACTIVE)
           and ctx.log.get("result_perf_constraints_met") is False else
           "Run longer so LoadGen sees enough queries (in short mode raise min_duration or "
           "min_query_count).")
    return [_fail("early_stopping", f"early stopping not met: {result}".strip(": "), fix)]


def latency(ctx: Context) -> list[CheckResult]:
    """Server target latency within the model's constraint; LLM token latencies in bounds."""
    found: list[CheckResult] = []
    log, model, sc = ctx.log, ctx.model, ctx.spec.scenario
    bound = model.latency_constraint_ns.get(sc)
    target = log.effective.get("target_latency_ns")
    if bound is not None:
        ok = isinstance(target, int) and 0 < target <= bound
        found.append(_ok("latency", f"target latency {target} ns <= {bound} ns") if ok else
                     _fail("latency", f"target latency {target} ns exceeds {bound} ns",
                           "Remove target_latency from user.conf."))
    if model.token_latency_ms:
        if log.requested.get("use_token_latencies") is not True:
            found.append(_fail("token_latency", "use_token_latencies is not set",
                               "Report tokens to LoadGen (use_token_latencies = 1)."))
        elif limits := model.token_latency_ms.get(sc):
            ttft = log.get("result_first_token_99.00_percentile_latency_ns")
            tpot = log.get("result_time_per_output_token_99.00_percentile_ns")
            ok = (isinstance(ttft, int | float) and ttft < limits.ttft_ms * 1e6 and
                  isinstance(tpot, int | float) and tpot < limits.tpot_ms * 1e6)
            detail = f"p99 TTFT {ttft} ns, TPOT {tpot} ns (limits {limits.ttft_ms} / " \
                     f"{limits.tpot_ms} ms)"
            found.append(_ok("token_latency", detail) if ok else
                         _fail("token_latency", detail, "Lower target_qps."))
    return found


def sample_count(ctx: Context) -> list[CheckResult]:
    """effective_performance_sample_count at least the model's."""
    need = ctx.model.performance_sample_count
    if need is None:
        return [_not_judged("performance_sample_count", ctx, "performance_sample_count")]
    return [_at_least("performance_sample_count", ctx,
                      ctx.log.effective.get("performance_sample_count"), need,
                      "performance_sample_count", "Do not override "
                      "performance_sample_count; let the QSL report the dataset's.")]


def accuracy(ctx: Context) -> list[CheckResult]:
    """accuracy.txt meets every target; the run covered the whole dataset."""
    if ctx.accuracy_text is None:
        return [_fail("accuracy", "no accuracy.txt", "Score mlperf_log_accuracy.json with "
                      "the benchmark's accuracy script into accuracy.txt.")]
    targets = ctx.rules.accuracy_targets(ctx.spec.model, ctx.spec.scenario)
    found = [_not_judged("accuracy", ctx, "accuracy target") if targets is None else
             _accuracy_finding(score_accuracy(ctx.accuracy_text, targets, ctx.rules))]
    need = ctx.rules.accuracy_sample_count(ctx.spec.model, ctx.spec.scenario)
    count = ctx.log.effective.get("accuracy_sample_count", ctx.log.get("qsl_reported_total_count"))
    if need is not None and count != need:
        detail = f"the accuracy run covered {count} samples, the dataset has {need}"
        found.append(_ok("dataset", f"short mode: {detail}", not_submittable=True) if ctx.short
                     else _fail("dataset", detail, "Run accuracy over the whole dataset (no "
                                "accuracy_sample_count_override)."))
    return found


def _accuracy_finding(results: list[MetricResult]) -> CheckResult:
    text = "; ".join(r.describe() for r in results)
    if all(r.ok for r in results):
        return _ok(ACCURACY_CHECK, text or "no target metrics")
    return _fail(ACCURACY_CHECK, f"{ACCURACY_MISS}: {text}", "Compare the model, its "
                 "quantization and pre/post-processing with the reference implementation.")


def audit_applied(ctx: Context) -> list[CheckResult]:
    """A compliance run: LoadGen found audit.config and its settings took effect."""
    log, kind = ctx.log, ctx.spec.kind
    if not log.audit_config_found:
        return [_fail("audit_config", "not a compliance run: LoadGen did not find audit.config "
                      "in its working directory, so the run used plain settings",
                      "Put audit.config in the harness's working directory (RUN_MOUNT) before "
                      "LoadGen starts, and re-run.")]
    eff = log.effective
    effects = {RunKind.TEST04: eff.get("performance_issue_same") is True,
               RunKind.TEST05: log.test05_applied}
    if effects.get(kind, (eff.get("accuracy_log_sampling_target") or 0) > 0):
        return [_ok("audit_config", "audit.config found and applied")]
    if kind is RunKind.TEST05 and kind not in (ctx.model.compliance or ()):
        return [_ok("audit_config", f"audit.config found; this LoadGen ignores test05 in it "
                                    f"(TEST05 is not required in {ctx.rules.round})")]
    return [_fail("audit_config", f"audit.config was found but its {kind} settings did not "
                  "take effect", f"Use the round's {kind} audit.config unchanged.")]


def for_kind(kind: RunKind) -> list[Callable[[Context], list[CheckResult]]]:
    """The checks that apply to a run of this kind, in order."""
    base: list[Callable[[Context], list[CheckResult]]] = [scenario, seeds, loadgen_errors]
    if kind is RunKind.ACCURACY:
        return [*base, accuracy]
    if kind in PERFORMANCE_KINDS:
        base += [validity, durations, query_counts, early_stopping, latency, sample_count]
    return [*base, audit_applied] if kind.is_compliance else base


def metrics(ctx: Context) -> dict[str, float]:
    """The performance figures of a run, by name."""
    latency_key = {Scenario.SINGLE_STREAM: "early_stopping_latency_ss",
                   Scenario.MULTI_STREAM: "early_stopping_latency_ms"}.get(ctx.spec.scenario)
    names = {"result_samples_per_second": "samples_per_second",
             "result_completed_samples_per_sec": "completed_samples_per_second",
             "result_tokens_per_second": "tokens_per_second",
             "result_completed_tokens_per_second": "completed_tokens_per_second",
             "result_99.00_percentile_latency_ns": "p99_latency_ns",
             "result_mean_latency_ns": "mean_latency_ns"}
    if latency_key:
        names[latency_key] = "early_stopping_latency_ns"
    found = {name: positive(ctx.log.get(key)) for key, name in names.items()}
    return {name: value for name, value in found.items() if value is not None}


def accuracy_metrics(ctx: Context) -> dict[str, float]:
    """The accuracy figures of a run, by metric name."""
    targets = ctx.rules.accuracy_targets(ctx.spec.model, ctx.spec.scenario) or ()
    results = score_accuracy(ctx.accuracy_text or "", targets, ctx.rules)
    return {r.metric: r.value for r in results if r.value is not None}
