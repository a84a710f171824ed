"""The serving engine, usable without FastAPI: score cache, admission, batching, model thread.

:class:`RerankEngine` is the async object (``start``/``stop``/``async with``); :mod:`.batching` packs
candidates under a token budget (pure functions); :mod:`.cache` is the score cache.
"""

from reranker_service.engine._engine import EngineResult, EngineStats, RerankEngine
from reranker_service.engine.batching import batch_cost, plan_batches
from reranker_service.engine.cache import ScoreCache

__all__ = ["EngineResult", "EngineStats", "RerankEngine", "ScoreCache", "batch_cost", "plan_batches"]
