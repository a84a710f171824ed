"""``harvest serve``: its options, and how flags and ``HARVEST_*`` variables become the served Settings.

Under test: ``trajectory_lake.cli.main`` through click's ``CliRunner``, with ``serve`` resolved through
the installed entry point. The server's ``run`` is replaced by a recorder where a test only needs the app
the command would serve, so no port is bound.
"""

from __future__ import annotations

import logging
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from fastapi import FastAPI

from reranker_service import DummyBackend, Settings, create_app
from reranker_service.api.server import ANSWER_S
from tests.reranker_service._helpers import WAIT_S, rerank_body, serve
from trajectory_lake.cli import main


@pytest.fixture
def served(monkeypatch) -> list[FastAPI]:
    """Replace the run of ``harvest serve``'s server with a recorder of the apps it would run."""
    import uvicorn

    from reranker_service.api import server as api_server
    from reranker_service.backends import ValueModelBackend

    apps: list[FastAPI] = []

    def run(server: uvicorn.Server, sockets: object = None) -> None:
        server.started = True
        apps.append(server.config.app)
        apps[-1].state.uvicorn_config = server.config

    monkeypatch.setattr(api_server._Server, "run", run)  # not uvicorn.Server: tests still serve with it
    # The command loads the model before serving; stand a dummy in for the registry.
    monkeypatch.setattr(
        ValueModelBackend, "load", classmethod(lambda cls, model, **kwargs: DummyBackend(model))
    )
    return apps


@pytest.fixture
def uvicorn_loggers_restored() -> Iterator[None]:
    """``uvicorn.run`` configures the ``uvicorn*`` loggers process-wide; put them back afterwards."""
    names = ("uvicorn", "uvicorn.error", "uvicorn.access")
    saved = {
        n: (list(logging.getLogger(n).handlers), logging.getLogger(n).level, logging.getLogger(n).propagate)
        for n in names
    }
    yield
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


class TestHelp:
    def test_serve_help_lists_model_and_port(self):
        result = CliRunner().invoke(main, ["serve", "--help"])

        assert result.exit_code == 0, result.output
        for option in ("--model", "--port", "--host", "--max-queue", "--api-keys", "--tracking-uri"):
            assert option in result.output
        flat = " ".join(result.output.split())  # click wraps the help text
        assert "[default: 8765]" in flat and "[default: models:/harvest-value@champion]" in flat

    def test_serve_help_names_every_route_the_app_serves(self):
        from reranker_service.cli import serve_command

        paths = set(create_app(Settings(), backend=DummyBackend()).openapi()["paths"])
        described = serve_command.help or ""

        named = [p for p in paths if re.search(rf"(?<![\w/]){re.escape(p)}(?![\w/])", described)]
        missing = sorted(paths - set(named))
        assert missing == []

    def test_harvest_help_lists_serve(self):
        result = CliRunner().invoke(main, ["--help"])
        assert result.exit_code == 0
        assert "serve" in result.output


class TestSettingsWiring:
    def test_flags_become_the_served_settings(self, served):
        result = CliRunner().invoke(
            main,
            ["serve", "--model", "models:/m@a", "--port", "9009", "--max-queue", "3"],
            env={"HARVEST_PORT": "9000"},
        )

        assert result.exit_code == 0, result.output
        settings = served[0].state.settings
        assert (settings.model, settings.port, settings.max_queue) == ("models:/m@a", 9009, 3)

    def test_environment_fills_what_flags_leave_out(self, served):
        result = CliRunner().invoke(
            main, ["serve"], env={"HARVEST_PORT": "9010", "HARVEST_API_KEYS": "k1,k2"}
        )

        assert result.exit_code == 0, result.output
        settings = served[0].state.settings
        assert (settings.port, settings.api_keys) == (9010, ("k1", "k2"))

    @pytest.mark.parametrize(
        ("args", "env", "uvicorn_timeout"),
        [
            (["--shutdown-timeout-s", "5"], {"HARVEST_SHUTDOWN_TIMEOUT_S": "9"}, 5 + ANSWER_S),
            ([], {"HARVEST_SHUTDOWN_TIMEOUT_S": "0"}, None),  # 0: uvicorn waits forever
            ([], {}, 30 + ANSWER_S),
        ],
    )
    def test_shutdown_timeout_bounds_uvicorns_graceful_shutdown(self, served, args, env, uvicorn_timeout):
        result = CliRunner().invoke(main, ["serve", *args], env=env)

        assert result.exit_code == 0, result.output
        assert served[0].state.uvicorn_config.timeout_graceful_shutdown == uvicorn_timeout

    def test_invalid_environment_value_exits_with_a_usage_error_naming_it(self, served):
        result = CliRunner().invoke(main, ["serve"], env={"HARVEST_PORT": "eighty"})

        assert result.exit_code == 2
        assert "HARVEST_PORT='eighty' is not a valid int" in result.output
        assert served == []

    def test_out_of_range_flag_exits_with_a_usage_error(self, served):
        result = CliRunner().invoke(main, ["serve", "--port", "0"])

        assert result.exit_code == 2
        assert "port must be in 1..65535" in result.output
        assert served == []

    @pytest.mark.slow  # starts a server
    def test_api_keys_flag_accepts_exactly_the_given_key(self, served):
        # --api-keys arrives as one string; iterating it would make every character a valid token.
        result = CliRunner().invoke(main, ["serve", "--api-keys", "k1"], env={"HARVEST_API_KEYS": ""})
        assert result.exit_code == 0, result.output
        settings = served[0].state.settings

        statuses = {}
        with serve(create_app(settings, backend=DummyBackend())) as server:
            for token in ("k1", "k", "1"):
                with server.client(headers={"Authorization": f"Bearer {token}"}) as http:
                    body = {"task": {"prompt": "p"}, "candidates": [{"content": "a"}]}
                    statuses[token] = http.post("/v1/rerank", json=body).status_code

        assert statuses == {"k1": 200, "k": 401, "1": 401}
        assert settings.api_keys == ("k1",)


class TestStartupFailure:
    @pytest.mark.timeout(120)  # should the command ever start serving instead of failing
    def test_missing_model_exits_with_a_click_error_not_a_traceback(self, tmp_path, uvicorn_loggers_restored):
        # serve_command catches ModelNotFoundError around uvicorn.run, but the model loads in the app's
        # lifespan, where uvicorn logs the error and exits with status 3 instead.
        missing = tmp_path / "no-such-model"
        result = CliRunner().invoke(
            main, ["serve", "--model", str(missing), "--port", "1", "--log-level", "critical"]
        )

        assert result.exit_code == 1, f"exit code {result.exit_code}: {result.output}"
        assert f"Error: no model at '{missing}'" in result.output


SERVE_CHILD = """
import sys
import threading

from reranker_service.backends import DummyBackend, ValueModelBackend
from trajectory_lake.cli import main


class Stuck(DummyBackend):
    def forward(self, items, *, embed=False):
        print("entered", flush=True)
        threading.Event().wait()  # a model call that never returns


backend = Stuck if sys.argv[2] == "stuck" else DummyBackend
ValueModelBackend.load = classmethod(lambda cls, model, **kwargs: backend(model))
main(["serve", "--port", sys.argv[1], "--log-level", "warning", *sys.argv[3:]])
"""


@contextmanager
def serving_child(model: str, *flags: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``harvest serve FLAGS`` in a child process on a free port of 127.0.0.1, once ``/ready`` says 200.

    ``model`` is ``"dummy"`` (a :class:`DummyBackend`) or ``"stuck"`` (its forward prints ``entered`` and
    never returns). Yields the child and its base URL; the child is killed afterwards if still alive.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, "-c", SERVE_CHILD, str(port), model, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120  # the child imports torch
        while True:
            assert child.poll() is None, child.communicate()[1][-4000:]
            assert time.monotonic() < deadline, "harvest serve did not start"
            try:
                if httpx.get(f"{url}/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield child, url
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()


def _cut_off_by_signal(sig: signal.Signals) -> tuple[int, int, float]:
    """Serve a stuck model with ``shutdown_timeout_s`` 0.5, send ``sig`` while it holds a request.

    Returns:
        The request's status, the child's exit code, and the seconds from the signal to the exit.
    """
    with serving_child("stuck", "--shutdown-timeout-s", "0.5") as (child, url), ThreadPoolExecutor(2) as pool:
        answer = pool.submit(httpx.post, f"{url}/v1/rerank", json=rerank_body(1), timeout=WAIT_S)
        assert pool.submit(child.stdout.readline).result(WAIT_S) == "entered\n"
        told = time.monotonic()
        child.send_signal(sig)
        status = answer.result(WAIT_S).status_code
        code = child.wait(timeout=WAIT_S)
        return status, code, time.monotonic() - told


@pytest.mark.slow  # starts a server in a child process
@pytest.mark.timeout(180)
def test_sigterm_with_a_stuck_model_answers_503_and_the_process_exits_after_shutdown_timeout_s():
    status, code, exited_s = _cut_off_by_signal(signal.SIGTERM)

    assert status == 503
    assert code == -signal.SIGTERM  # uvicorn re-raises the signal once it has shut down
    assert exited_s < 0.5 + ANSWER_S + 5, f"exit took {exited_s:.1f}s"


@pytest.mark.slow  # starts a server in a child process
@pytest.mark.timeout(180)
def test_sigint_with_a_stuck_model_exits_after_shutdown_timeout_s_without_waiting_for_the_model_thread():
    # uvicorn re-raises SIGINT as a KeyboardInterrupt, which harvest serve ends quietly; the interpreter's
    # exit then used to join the model thread, which never returns (child.wait timed out).
    status, code, exited_s = _cut_off_by_signal(signal.SIGINT)

    assert status == 503
    assert code == 0
    # more than SIGTERM's bound: the interpreter's teardown, which SIGTERM's kill skips, alone takes 2-3 s
    # on a busy 2-core machine (measured with a server that is not stuck too)
    assert exited_s < 0.5 + ANSWER_S + 8, f"exit took {exited_s:.1f}s"


def _wait_not_ready(url: str) -> httpx.Response:
    """The first ``/ready`` answer that is not 200 (within ``WAIT_S``)."""
    deadline = time.monotonic() + WAIT_S
    while (answer := httpx.get(f"{url}/ready", timeout=WAIT_S)).status_code == 200:
        assert time.monotonic() < deadline, "/ready still answers 200"
        time.sleep(0.02)
    return answer


class TestDrain:
    @pytest.mark.slow  # starts a server in a child process
    @pytest.mark.timeout(180)
    def test_after_sigterm_ready_is_503_while_requests_are_still_served_for_drain_s_then_it_exits(self):
        drain_s = 4.0
        with serving_child("dummy", "--drain-s", str(drain_s)) as (child, url):
            told = time.monotonic()
            child.send_signal(signal.SIGTERM)
            ready = _wait_not_ready(url)
            health = httpx.get(f"{url}/health", timeout=WAIT_S)
            answer = httpx.post(f"{url}/v1/rerank", json=rerank_body(2), timeout=WAIT_S)
            served_s = time.monotonic() - told
            code = child.wait(timeout=drain_s + WAIT_S)
            exited_s = time.monotonic() - told

        assert ready.status_code == 503
        assert ready.json()["status"] == "draining"
        assert health.status_code == 200
        assert answer.status_code == 200 and len(answer.json()["results"]) == 2
        assert served_s < drain_s  # all three were answered inside the delay
        assert code == -signal.SIGTERM
        assert drain_s <= exited_s < drain_s + 5, f"exit took {exited_s:.1f}s"

    @pytest.mark.slow  # starts a server in a child process
    @pytest.mark.timeout(180)
    def test_a_second_sigterm_skips_the_rest_of_the_drain(self):
        with serving_child("dummy", "--drain-s", "120") as (child, url):
            child.send_signal(signal.SIGTERM)
            assert _wait_not_ready(url).json()["status"] == "draining"
            told = time.monotonic()
            child.send_signal(signal.SIGTERM)
            code = child.wait(timeout=WAIT_S)
            exited_s = time.monotonic() - told

        assert code == -signal.SIGTERM
        assert exited_s < 5, f"exit took {exited_s:.1f}s"
