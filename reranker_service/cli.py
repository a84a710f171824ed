"""``harvest serve``: run the reranker API with uvicorn (flags generated from :class:`Settings`)."""

from __future__ import annotations

import sys

import click

from reranker_service.settings import Settings
from trajectory_lake.cli import dataclass_options

__all__ = ["serve_command"]

STARTUP_FAILURE = 3  # uvicorn.main.STARTUP_FAILURE


@click.command("serve")
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@dataclass_options(Settings)
def serve_command(log_level: str, **options: object) -> None:
    """Serve a registered value model: POST /v1/rerank, /v2/rerank and /rerank (Cohere), /v1/feedback,
    /admin/reload, GET /v1/models, /health, /ready, /metrics, /docs. Every flag can also be set as
    HARVEST_<FLAG>."""
    from reranker_service.api import create_app, create_server
    from reranker_service.backends import ValueModelBackend
    from value_model import ModelNotFoundError

    try:
        settings = Settings.from_env(**options)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    try:
        backend = ValueModelBackend.load(
            settings.model,
            tracking_uri=settings.tracking_uri,
            device=settings.device,
            cpu_linear=settings.cpu_linear,
        )
    except ModelNotFoundError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        app = create_app(settings, backend=backend)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    server = create_server(app, host=settings.host, port=settings.port, log_level=log_level)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:  # the app's lifespan failed (uvicorn logged why): exit as uvicorn.run does
        sys.exit(STARTUP_FAILURE)
