"""The HTTP layer: the app factory, the schemas and the error mapping."""

from reranker_service.api.app import create_app

__all__ = ["create_app"]
