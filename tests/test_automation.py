"""A Prefect automation on `subrun.nightly.regression` calls a webhook: a regression injected
into the nightly history reaches a real HTTP receiver on loopback as one notification naming the
benchmark and the drop (real Prefect API with its triggers and actions services)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

from flows.events import emit_regressions
from tests.test_alert import Receiver, nightly_history, receiver  # noqa: F401 (fixture)

# the template the README's automation uses
PAYLOAD = ('{"text": "{{ event.payload.description }}", '
           '"benchmark": "{{ event.payload.benchmark }}", '
           '"change_pct": {{ event.payload.change_pct }}}')


def test_regression_event_triggers_one_webhook_notification(
        prefect_api: None, receiver: Receiver, tmp_path: Path) -> None:  # noqa: F811
    from prefect.automations import Automation
    from prefect.blocks.webhook import Webhook
    from prefect.events.actions import CallWebhook
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.events.worker import EventsWorker

    url = f"http://127.0.0.1:{receiver.server_address[1]}/nightly"
    block_id = Webhook(url=url, allow_private_urls=True).save("subrun-nightly-test",
                                                              overwrite=True)
    Automation(
        name="subrun nightly regression (test)",
        trigger=EventTrigger(expect={"subrun.nightly.regression"},
                             match={"prefect.resource.id": "subrun.series.*"},
                             posture=Posture.Reactive, threshold=1, within=timedelta(0)),
        actions=[CallWebhook(block_document_id=block_id, payload=PAYLOAD)],
    ).create()
    # the server loads a new automation into its trigger service as it stores it

    db = tmp_path / "history.sqlite"
    nightly_history(db, 900.0)
    assert len(emit_regressions("nightly", db)) == 1
    EventsWorker.drain_all()

    deadline = time.monotonic() + 120  # the actions service polls; generous on a busy machine
    while not receiver.bodies and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)  # a second notification would arrive here
    assert len(receiver.bodies) == 1, receiver.bodies
    notice = receiver.bodies[0]
    assert notice["benchmark"] == "digits" and notice["change_pct"] == -10.22
    assert "-10.2%" in notice["text"]
