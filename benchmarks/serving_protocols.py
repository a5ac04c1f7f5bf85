"""What each serving protocol spends turning a text delta into wire bytes (no HTTP, no model).

The same stream of events (``TextDelta`` pieces, then ``UsageUpdate`` and ``Finished``) goes through
the frame generator of each protocol module: ``openai_compat`` (chat.completion.chunk frames),
``ai_sdk`` (UI message stream chunks) and ``ag_ui`` (AG-UI events built and encoded by the
``ag-ui-protocol`` package). The figure is microseconds per text delta, best of ``--rounds``: the
translation layer's own cost, which every streamed token pays on top of the edge and the chain.

    .venv/bin/python benchmarks/serving_protocols.py [--deltas 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def events(deltas: int) -> list[Any]:
    from chatclient.events import Finished, TextDelta, UsageUpdate
    from chatclient.models.base import ChatResponse, Usage

    out: list[Any] = [TextDelta("token ") for _ in range(deltas)]
    usage = Usage(prompt_tokens=5, completion_tokens=deltas)
    out += [UsageUpdate(usage), Finished(ChatResponse.of_text("token " * 3).with_usage(usage))]
    return out


async def replay(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def producers() -> dict[str, Callable[[list[Any]], AsyncIterator[bytes]]]:
    from ag_ui.encoder import EventEncoder

    from chatclient.serving import ag_ui, ai_sdk, openai_compat
    from chatclient.serving._edge import ChatTurn

    parsed = openai_compat._Parsed("chatclient", ChatTurn(()), True, False, None)
    return {
        "openai_app": lambda items: openai_compat._chunks(replay(items), parsed),
        "ai_sdk_app": lambda items: ai_sdk._frames(replay(items)),
        "ag_ui_app": lambda items: ag_ui._frames(
            replay(items), ag_ui._Translation("thread", "run", OrderedDict(), "thread"), EventEncoder()
        ),
    }


async def drain(frames: AsyncIterator[bytes]) -> int:
    size = 0
    async for frame in frames:
        size += len(frame)
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    items = events(args.deltas)
    print(f"{args.deltas} text deltas per round, best of {args.rounds} rounds")
    for name, produce in producers().items():
        best = float("inf")
        size = 0
        for _ in range(args.rounds):
            start = time.perf_counter()
            size = asyncio.run(drain(produce(items)))
            best = min(best, time.perf_counter() - start)
        print(f"{name:11} {best / args.deltas * 1e6:6.2f} us per delta  {size / args.deltas:6.1f} bytes per delta")


if __name__ == "__main__":
    main()
