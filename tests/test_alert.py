"""Regression alerts: a regression injected into the nightly history reaches a webhook (a real
HTTP receiver on loopback) as one notice naming the benchmark and the drop; events carry the
run key, host, benchmark, scenario and metric."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bench.run import RunState, Scenario
from flows.cli import app
from flows.events import campaign_event, regression_event, run_event
from flows.outcome import CampaignOutcome, RunOutcome
from submission.alert import AlertError, post_json
from submission.history import record, regressions
from tests.test_history import judged


class Receiver(HTTPServer):
    """Keeps every JSON body posted to it."""

    bodies: list[dict[str, Any]]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        assert isinstance(self.server, Receiver)
        self.server.bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # keep the test output quiet
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver(("127.0.0.1", 0), Handler)
    server.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=30)


def nightly_history(db: Path, last_qps: float) -> None:
    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    for night, qps in enumerate([1000.0, 1010.0, 990.0, 1005.0, last_qps]):
        record(db, "nightly", [judged(qps)], when=start + timedelta(days=night))


def test_injected_regression_reaches_the_webhook_once(receiver: Receiver,
                                                      tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    nightly_history(db, 900.0)
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    result = CliRunner().invoke(app, ["alert", "--webhook", url, "--history", str(db)])
    assert result.exit_code == 1, result.output
    assert len(receiver.bodies) == 1
    notice = receiver.bodies[0]
    assert notice["benchmark"] == "digits" and notice["change_pct"] == -10.22
    assert "digits" in notice["text"] and "-10.2%" in notice["text"]


def test_no_regression_no_notice(receiver: Receiver, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    nightly_history(db, 1001.0)
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    result = CliRunner().invoke(app, ["alert", "--webhook", url, "--history", str(db)])
    assert result.exit_code == 0, result.output
    assert receiver.bodies == []


def test_unreachable_webhook_is_one_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    nightly_history(db, 900.0)
    result = CliRunner().invoke(app, ["alert", "--webhook", f"http://127.0.0.1:{free_port()}/",
                                      "--history", str(db)])
    assert result.exit_code != 0 and "Cannot reach the webhook" in result.output
    assert "Traceback" not in result.output
    with pytest.raises(AlertError, match="not an http"):
        post_json("file:///etc/passwd", {})


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_events_name_run_key_host_benchmark_scenario_metric(tmp_path: Path) -> None:
    run = judged(900.0)
    outcome = RunOutcome(run.spec.label, run.key, 1, RunState.FINISHED, False, "INVALID",
                         {"samples_per_second": 900.0})
    event = run_event("nightly", run.spec, outcome)
    assert event["event"] == "subrun.run.failed"
    payload = event["payload"]
    assert (payload["run_key"], payload["host"], payload["benchmark"], payload["scenario"],
            payload["metric"], payload["value"]) == (run.key, "h2", "digits",
                                                     Scenario.OFFLINE.value,
                                                     "samples_per_second", 900.0)
    db = tmp_path / "history.sqlite"
    nightly_history(db, 900.0)
    regression = regression_event("nightly", regressions(db)[0])
    assert regression["event"] == "subrun.nightly.regression"
    assert regression["payload"]["benchmark"] == "digits"
    assert regression["payload"]["change_pct"] == -10.22
    outcome = CampaignOutcome("c", runs=2, passed=1, failed=("x: y",), report="r.html")
    finished = campaign_event(outcome, completed=False)
    assert finished["event"] == "subrun.campaign.finished"
    assert finished["payload"]["failed"] == ["x: y"] and finished["payload"]["report"] == "r.html"
    assert type(payload["state"]) is str and payload["state"] == "finished"  # plain JSON
