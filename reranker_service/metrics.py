"""Prometheus metrics of one service instance, in their own registry (no process-wide state).

``GET /metrics`` renders :attr:`ServiceMetrics.registry` in the Prometheus text format, or in OpenMetrics
when the scraper's ``Accept`` header asks for it. Names follow
TEI's split of a request's time (tokenize, queue, inference) so the same dashboards read both.

| metric | type | labels |
|---|---|---|
| ``harvest_requests_total`` | counter | route, status |
| ``harvest_request_duration_seconds`` | histogram | route |
| ``harvest_{tokenize,queue,inference}_duration_seconds`` | histogram | |
| ``harvest_batch_size`` / ``harvest_batch_tokens`` | histogram | |
| ``harvest_queue_depth`` | gauge | |
| ``harvest_candidates_total`` / ``harvest_tokens_total`` | counter | |
| ``harvest_score_cache_total`` | counter | result (hit, miss) |
| ``harvest_rejected_total`` | counter | reason (overloaded, cancelled, failed) |
| ``harvest_model_info`` | gauge (1) | name, version, revision |
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

__all__ = ["ServiceMetrics"]

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_TOKENS = (64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


class ServiceMetrics:
    """The service's metrics; the engine and the HTTP layer record into it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "harvest_requests", "HTTP requests answered.", ["route", "status"], registry=r
        )
        self.request_duration = Histogram(
            "harvest_request_duration_seconds",
            "Time to answer a request.",
            ["route"],
            buckets=_LATENCY,
            registry=r,
        )
        self.tokenize_duration = Histogram(
            "harvest_tokenize_duration_seconds",
            "Serializing and tokenizing a request.",
            buckets=_LATENCY,
            registry=r,
        )
        self.queue_duration = Histogram(
            "harvest_queue_duration_seconds",
            "Time a request waited for the batcher.",
            buckets=_LATENCY,
            registry=r,
        )
        self.inference_duration = Histogram(
            "harvest_inference_duration_seconds", "One model batch.", buckets=_LATENCY, registry=r
        )
        self.batch_size = Histogram(
            "harvest_batch_size", "Candidates per model batch.", buckets=_SIZES, registry=r
        )
        self.batch_tokens = Histogram(
            "harvest_batch_tokens", "Tokens computed per model batch.", buckets=_TOKENS, registry=r
        )
        self.queue_depth = Gauge(
            "harvest_queue_depth", "Requests admitted and waiting for the model.", registry=r
        )
        self.candidates = Counter("harvest_candidates", "Candidates scored (cached or not).", registry=r)
        self.tokens = Counter("harvest_tokens", "Tokens of the candidates the model scored.", registry=r)
        self.cache = Counter("harvest_score_cache", "Score-cache lookups.", ["result"], registry=r)
        self.rejected = Counter(
            "harvest_rejected", "Requests the engine did not score.", ["reason"], registry=r
        )
        self.model_info = Gauge(
            "harvest_model_info",
            "The model being served (value 1).",
            ["name", "version", "revision"],
            registry=r,
        )

    def watch_queue(self, depth: Callable[[], float]) -> None:
        """Read the queue depth from ``depth`` at every scrape."""
        self.queue_depth.set_function(depth)

    def serving(self, name: str, version: str | None, revision: str) -> None:
        """Record which model is served now (the previous one's series is removed)."""
        self.model_info.clear()
        self.model_info.labels(name=name, version=version or "", revision=revision).set(1)

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """Every metric, and its content type, in the format the scraper's ``Accept`` header asks for:
        OpenMetrics when it lists ``application/openmetrics-text`` (Prometheus 3 asks for it first),
        else the Prometheus text format 0.0.4, as prometheus_client's own exporters choose."""
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type
