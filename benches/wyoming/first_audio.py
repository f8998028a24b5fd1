#!/usr/bin/env python3
"""Time to first audio over Wyoming, against HTTP streaming in the same run.

For each round a fresh two-sentence text (so the audio cache never answers) is spoken three
ways against one running server: a Wyoming one-shot `synthesize`, a Wyoming text stream
(`synthesize-start`, the text in 6-character chunks, `synthesize-stop`), and HTTP
`POST /v1/audio/speech` streamed as pcm (the baseline). Reports medians and the ratios to the
HTTP baseline.

Usage: .venv-wyoming/bin/python benches/wyoming/first_audio.py --http http://127.0.0.1:8880 \
           --host 127.0.0.1 --port 10200 [--rounds 9]
"""

import argparse
import asyncio
import json
import statistics
import time
import urllib.request

from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def text(round_no: int, way: int) -> str:
    a = " ".join(WORDS[(round_no * 3 + way + i) % len(WORDS)] for i in range(6))
    return f"Round {round_no} way {way}: {a}. The second sentence follows here."


async def first_chunk(client: AsyncTcpClient, started: float) -> float:
    while True:
        event = await client.read_event()
        if event is None:
            raise RuntimeError("connection closed before audio")
        if AudioChunk.is_type(event.type):
            return time.perf_counter() - started


async def one_shot(host: str, port: int, words: str) -> float:
    async with AsyncTcpClient(host, port) as client:
        started = time.perf_counter()
        await client.write_event(Synthesize(text=words).event())
        return await first_chunk(client, started)


async def streamed(host: str, port: int, words: str) -> float:
    async with AsyncTcpClient(host, port) as client:
        started = time.perf_counter()
        await client.write_event(SynthesizeStart().event())
        for i in range(0, len(words), 6):
            await client.write_event(SynthesizeChunk(text=words[i : i + 6]).event())
        await client.write_event(SynthesizeStop().event())
        return await first_chunk(client, started)


def http_first_byte(url: str, words: str) -> float:
    body = json.dumps(
        {"model": "tts-1", "voice": "alloy", "input": words, "response_format": "pcm"}
    ).encode()
    request = urllib.request.Request(
        f"{url}/v1/audio/speech", body, {"Content-Type": "application/json"}
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request) as response:
        response.read(1)
        elapsed = time.perf_counter() - started
        response.read()
    return elapsed


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--http", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    results = {"wyoming one-shot": [], "wyoming streamed": [], "http pcm stream": []}
    await one_shot(args.host, args.port, "Warm up.")  # voice loaded, code paths hot
    for r in range(args.rounds):
        results["wyoming one-shot"].append(await one_shot(args.host, args.port, text(r, 0)))
        results["wyoming streamed"].append(await streamed(args.host, args.port, text(r, 1)))
        results["http pcm stream"].append(http_first_byte(args.http, text(r, 2)))
    base = statistics.median(results["http pcm stream"])
    print(f"{'path':<18} {'median ms':>10} {'min ms':>8} {'vs http':>8}")
    for name, values in results.items():
        median = statistics.median(values)
        print(f"{name:<18} {median * 1000:>10.1f} {min(values) * 1000:>8.1f} {median / base:>8.2f}")


if __name__ == "__main__":
    asyncio.run(main())
