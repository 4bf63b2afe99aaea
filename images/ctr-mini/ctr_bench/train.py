"""One training run: logistic regression with Adagrad until the eval accuracy reaches the target.

Everything MLPerf Training's compliance checker asks of a run is logged through mllog into
`<output-dir>/result.txt`: the submission keys, cache_clear, init and run start/stop, the seed,
the batch size and optimizer, an epoch_start/epoch_stop and an eval_accuracy (with epoch_num)
per epoch, and run_stop with status success, or aborted when max-epochs pass without reaching
the target.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from mlperf_logging import mllog
from mlperf_logging.mllog import constants as c

from ctr_bench.data import EVAL_SAMPLES, TRAIN_SAMPLES, click_log

LOG_FILE = "result.txt"
LEARNING_RATE = 0.02
EPSILON = 1e-8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ctr_bench.train")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--target", type=float, required=True, help="eval accuracy to reach")
    parser.add_argument("--global-batch-size", type=int, default=512)
    parser.add_argument("--max-epochs", type=int, default=10)
    parser.add_argument("--benchmark", default="dlrm_dcnv2")
    parser.add_argument("--submitter", required=True)
    parser.add_argument("--system", required=True)
    parser.add_argument("--division", default="open")
    return parser.parse_args(argv)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    mllog.config(filename=str(args.output_dir / LOG_FILE), root_dir=os.path.dirname(__file__))
    log = mllog.get_mllogger()
    log.event(key=c.CACHE_CLEAR, value=True)
    log.start(key=c.INIT_START)
    for key, value in ((c.SUBMISSION_ORG, args.submitter), (c.SUBMISSION_PLATFORM, args.system),
                       (c.SUBMISSION_DIVISION, args.division),
                       (c.SUBMISSION_BENCHMARK, args.benchmark),
                       (c.SUBMISSION_STATUS, "research")):
        log.event(key=key, value=value)
    log.event(key=c.SEED, value=args.seed)
    for key, value in ((c.GLOBAL_BATCH_SIZE, args.global_batch_size), (c.OPT_NAME, "adagrad"),
                       (c.OPT_BASE_LR, LEARNING_RATE), (c.OPT_ADAGRAD_LR_DECAY, 0),
                       (c.OPT_WEIGHT_DECAY, 0), (c.OPT_ADAGRAD_INITIAL_ACCUMULATOR_VALUE, 0),
                       (c.OPT_ADAGRAD_EPSILON, EPSILON), (c.TRAIN_SAMPLES, TRAIN_SAMPLES),
                       (c.EVAL_SAMPLES, EVAL_SAMPLES)):
        log.event(key=key, value=value)
    train_x, train_y, eval_x, eval_y = click_log()
    rng = np.random.default_rng(args.seed)
    weights = (rng.standard_normal(train_x.shape[1]) * 0.01).astype(np.float32)
    bias = np.float32(0.0)
    accum = np.zeros_like(weights)
    accum_bias = np.float32(0.0)
    log.end(key=c.INIT_STOP)
    log.start(key=c.RUN_START)
    status, batch = c.ABORTED, args.global_batch_size
    for epoch in range(1, args.max_epochs + 1):
        log.start(key=c.EPOCH_START, metadata={c.EPOCH_NUM: epoch})
        order = rng.permutation(TRAIN_SAMPLES)
        for start in range(0, TRAIN_SAMPLES, batch):
            rows = order[start:start + batch]
            error = sigmoid(train_x[rows] @ weights + bias) - train_y[rows]
            grad = train_x[rows].T @ error / len(rows)
            grad_bias = np.float32(error.mean())
            accum += grad * grad
            accum_bias += grad_bias * grad_bias
            weights -= LEARNING_RATE * grad / (np.sqrt(accum) + EPSILON)
            bias -= LEARNING_RATE * grad_bias / (np.sqrt(accum_bias) + EPSILON)
        log.start(key=c.EVAL_START, metadata={c.EPOCH_NUM: epoch})
        accuracy = float(((sigmoid(eval_x @ weights + bias) > 0.5) == (eval_y > 0.5)).mean())
        log.event(key=c.EVAL_ACCURACY, value=accuracy, metadata={c.EPOCH_NUM: epoch})
        log.end(key=c.EVAL_STOP, metadata={c.EPOCH_NUM: epoch})
        log.end(key=c.EPOCH_STOP, metadata={c.EPOCH_NUM: epoch})
        if accuracy >= args.target:
            status = c.SUCCESS
            break
    log.end(key=c.RUN_STOP, metadata={c.STATUS: status, c.EPOCH_NUM: epoch})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
