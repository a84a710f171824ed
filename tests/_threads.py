"""Calling one shared object from several threads at once, for the tokenizer race tests.

A Hugging Face fast tokenizer keeps its truncation and padding settings in state that every call
rewrites; threads sharing one interleave between a call setting its state and encoding only when the
GIL changes hands there, which at the default switch interval (5 ms) is rare. :func:`calls_at_once`
hands the GIL over every 10 µs while its threads run, so a shared tokenizer shows on every run.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any


def calls_at_once(
    call: Callable[[int], Any],
    expected: Sequence[Any],
    same: Callable[[Any, Any], bool],
    *,
    threads: int = 8,
    rounds: int = 3,
) -> tuple[list[bool], list[BaseException]]:
    """``call(i)`` for every index of ``expected`` from ``threads`` threads at once, ``rounds`` times.

    Returns, per index, whether every result was ``same`` as ``expected[i]``; and the ``ValueError``s and
    ``RuntimeError``s raised (the serializer's "max_length=... is too small", the tokenizer's "Already
    borrowed", transformers' "Unable to create tensor"): a thread stops at its first.
    """
    n = len(expected)
    ok = [True] * n
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def work(k: int) -> None:
        start.wait()
        for _ in range(rounds):
            for i in range(k, n, threads):
                try:
                    result = call(i)
                except (ValueError, RuntimeError) as exc:
                    errors.append(exc)
                    return
                ok[i] = ok[i] and same(result, expected[i])

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(interval)
    return ok, errors
