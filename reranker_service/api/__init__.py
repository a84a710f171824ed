"""The HTTP layer: the app factory, the schemas and the error mapping."""

from reranker_service.api.app import create_app
from reranker_service.api.server import create_server

__all__ = ["create_app", "create_server"]
