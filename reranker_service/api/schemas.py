"""Request and response bodies of the HTTP API (pydantic), with OpenAPI examples."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Candidate", "RerankRequest", "RerankResponse", "RerankResult", "Task", "Usage"]


class Task(BaseModel):
    """The problem the candidates try to solve."""

    model_config = ConfigDict(extra="forbid")
    prompt: str = Field(min_length=1, description="The task statement (issue text, user request).")
    id: str | None = Field(default=None, description="Your id for the task (e.g. a SWE-bench instance id).")
    domain: str | None = Field(default=None, description="swe, web, assistant, ...")


class Candidate(BaseModel):
    """One candidate to score."""

    model_config = ConfigDict(extra="forbid")
    content: str = Field(description="The candidate: a patch, an answer, or a proposed next action.")
    id: str | None = Field(default=None, description="Your id for the candidate, echoed back.")
    kind: Literal["patch", "answer", "action"] | None = Field(default=None)


class RerankRequest(BaseModel):
    """Score and rank the candidates of one task."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "task": {"prompt": "UsernameValidator allows trailing newline in usernames", "id": "django__django-11099"},
                    "candidates": [
                        {"id": "a", "content": "diff --git a/django/contrib/auth/validators.py ..."},
                        {"id": "b", "content": "diff --git a/django/core/validators.py ..."},
                    ],
                    "top_n": 1,
                }
            ]
        },
    )
    task: Task
    candidates: list[Candidate] = Field(min_length=1, description="The candidates, in your order.")
    top_n: int | None = Field(default=None, ge=1, description="Return only the best N results.")


class RerankResult(BaseModel):
    """One candidate's score; results are sorted best first."""

    index: int = Field(description="Position of the candidate in the request.")
    id: str | None = Field(default=None, description="The candidate's id, if the request gave one.")
    score: float = Field(description="Calibrated probability that the candidate succeeds.")
    value: float = Field(description="The model's raw head output.")
    rank: int = Field(description="1 for the best candidate.")


class Usage(BaseModel):
    """What the request cost."""

    candidates: int
    truncated: int = Field(description="Candidates whose input was truncated to the model's token budget.")
    duration_ms: float


class RerankResponse(BaseModel):
    """The ranking."""

    id: str = Field(description="Request id (also in the X-Request-ID header).")
    model: str
    results: list[RerankResult]
    usage: Usage
    warnings: list[str] = Field(default_factory=list)
