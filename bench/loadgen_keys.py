"""The user.conf keys LoadGen reads, each with the values it can take.

LoadGen reads every key with `strtoull` or `strtod` and never says when a value makes no sense:
`min_duration = -1` becomes 2^64-1 ms, a key it does not know (a typo, a trailing newline) is
silently ignored, and a flag is any integer. So every key a campaign sets is checked here against
what LoadGen does with it, before anything is written: whole numbers stay within the integer type
LoadGen stores them in (durations in ms are later held in ns, hence their smaller ceiling),
decimals are finite and in range, flags are 0 or 1, percentiles are percent.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any

from pydantic import Field, StrictInt, TypeAdapter, ValidationError

INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1
MAX_QPS = 1e9  # Offline schedules 1.1 x target_qps x min_duration samples up front

_Whole = Annotated[StrictInt, Field(ge=0, le=INT64_MAX)]
_Seed = Annotated[StrictInt, Field(ge=0, le=UINT64_MAX)]
_Ms = Annotated[StrictInt, Field(ge=0, le=INT64_MAX // 10**6)]  # held as ns in an int64
_Count = Annotated[StrictInt, Field(ge=1, le=INT64_MAX)]
_Flag = Annotated[StrictInt, Field(ge=0, le=1)]
_Percent = Annotated[float, Field(strict=True, gt=0, le=100, allow_inf_nan=False)]
_Qps = Annotated[float, Field(strict=True, gt=0, le=MAX_QPS, allow_inf_nan=False)]
_LatencyMs = Annotated[float, Field(strict=True, gt=0, le=INT64_MAX // 10**6,
                                    allow_inf_nan=False)]
_Scale = Annotated[float, Field(strict=True, gt=0, le=1e6, allow_inf_nan=False)]

_KINDS: dict[str, tuple[Any, str]] = {
    "whole": (_Whole, "a whole number, 0 or more"),
    "seed": (_Seed, "a whole number from 0 to 2^64-1"),
    "ms": (_Ms, f"a whole number of milliseconds from 0 to {INT64_MAX // 10**6}"),
    "count": (_Count, "a whole number, 1 or more"),
    "flag": (_Flag, "0 or 1"),
    "percent": (_Percent, "a percentage above 0 and at most 100 (e.g. 90 or 99.9)"),
    "qps": (_Qps, f"a number of queries per second above 0 and at most {MAX_QPS:g}"),
    "latency": (_LatencyMs, "a number of milliseconds above 0"),
    "scale": (_Scale, "a number above 0"),
    "mode": (Annotated[StrictInt, Field(ge=0, le=3)], "0, 1, 2 or 3"),
}
_ADAPTERS = {kind: TypeAdapter(t) for kind, (t, _) in _KINDS.items()}

KEYS: dict[str, str] = {
    "mode": "mode",
    "min_duration": "ms", "max_duration": "ms",
    "min_query_count": "whole", "max_query_count": "whole",
    "qsl_rng_seed": "seed", "sample_index_rng_seed": "seed", "schedule_rng_seed": "seed",
    "accuracy_log_rng_seed": "seed", "accuracy_log_probability": "percent",
    "accuracy_log_sampling_target": "whole",
    "test05": "flag", "test05_qsl_rng_seed": "seed", "test05_sample_index_rng_seed": "seed",
    "test05_schedule_rng_seed": "seed",
    "print_timestamps": "flag", "performance_issue_unique": "flag",
    "performance_issue_same": "flag", "performance_issue_same_index": "whole",
    "performance_sample_count_override": "whole", "accuracy_sample_count_override": "whole",
    "sample_concatenate_permutation": "flag",
    "target_latency_percentile": "percent", "target_latency": "latency",
    "target_latency_ms": "latency",  # subrun's spelling of target_latency
    "target_qps": "qps", "samples_per_query": "count", "max_async_queries": "count",
    "coalesce_queries": "flag", "server_num_issue_query_threads": "whole",
    "use_token_latencies": "flag", "infer_token_latencies": "flag",
    "token_latency_scaling_factor": "scale", "ttft_latency": "latency",
    "tpot_latency": "latency",
}


def key_problem(name: str, value: object) -> str | None:
    """Why LoadGen cannot take value for the user.conf key name; None when it can."""
    kind = KEYS.get(name)
    if kind is None:
        guess = difflib.get_close_matches(name, list(KEYS), n=1)
        hint = f"did you mean '{guess[0]}'?" if guess else "see LoadGen's mlperf.conf for the keys"
        return f"{name!r} is not a LoadGen setting ({hint})"
    try:
        _ADAPTERS[kind].validate_python(value)
    except ValidationError:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        return f"'{name}' must be {_KINDS[kind][1]} (got {shown})"
    return None
