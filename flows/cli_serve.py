"""Prefect server and deployment commands: `server start|stop`, `serve`, `deploy`."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from flows.cli_common import err, guarded, out
from flows.environment import configure_prefect

server_app = typer.Typer(no_args_is_help=True, help="Start or stop a local Prefect server on "
                         "127.0.0.1 (deployments and schedules need one).")
PortOpt = Annotated[int, typer.Option(help="Port on 127.0.0.1.")]
CronOpt = Annotated[str, typer.Option(help="Cron of the nightly deployment.")]
ZoneOpt = Annotated[str, typer.Option(help="Time zone of the nightly cron.")]


def register(app: typer.Typer) -> None:
    """Add the server and deployment commands to the subrun command line."""
    app.add_typer(server_app, name="server")
    app.command("serve")(serve_command)
    app.command("deploy")(deploy_command)


@server_app.command("start")
def server_start(port: PortOpt = 4200) -> None:
    """Start a Prefect server on 127.0.0.1 (recorded by pid) and wait until it answers."""
    from flows.server import start

    server = guarded(lambda: start(port))
    out.print(f"Prefect server up (pid {server.pid}). Use it with:\n"
              f"  export PREFECT_API_URL={server.api_url}")


@server_app.command("stop")
def server_stop(port: PortOpt = 4200) -> None:
    """Stop the Prefect server subrun started on that port."""
    from flows.server import stop

    out.print("stopped" if stop(port) else f"no server started by subrun on port {port}")


def _require_api() -> None:
    """Deployments need a real server; say how to get one instead of failing inside Prefect."""
    from prefect.settings import PREFECT_API_URL

    if os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value():
        return
    err.print("[bold red]error:[/] PREFECT_API_URL is not set: deployments, schedules and "
              "`prefect deployment run` need a Prefect server. Start one with `prefect server "
              "start` (or `subrun server start`) and `export "
              "PREFECT_API_URL=http://127.0.0.1:4200/api`.", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def serve_command(nightly_cron: CronOpt = "0 2 * * *", timezone: ZoneOpt = "UTC") -> None:
    """Serve submission/full, submission/nightly and submission/edge until interrupted."""
    configure_prefect()
    _require_api()
    from flows.deployments import serve_all

    out.print("Serving submission/full, submission/nightly, submission/edge; start a campaign "
              "with `prefect deployment run submission/full`.")
    serve_all(nightly_cron, timezone)


def deploy_command(pool: Annotated[str, typer.Option(help="Process work pool name.")],
                   nightly_cron: CronOpt = "0 2 * * *", timezone: ZoneOpt = "UTC") -> None:
    """Register the deployments on a work pool, for workers on other machines."""
    configure_prefect()
    _require_api()
    from flows.deployments import deploy_to_pool

    deploy_to_pool(pool, nightly_cron, timezone)
    out.print(f"Deployments registered on work pool '{pool}'; run workers with "
              f"`prefect worker start --pool {pool}`.")
