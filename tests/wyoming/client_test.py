#!/usr/bin/env python3
"""Drives a running Wyoming text-to-speech server with the reference client library.

What Home Assistant relies on is checked with the same client code it uses (AsyncTcpClient and
the event classes of the `wyoming` package): describe/info, one-shot synthesis with exactly one
audio-start/audio-stop pair, voice choice by language, streamed text split mid-word with one
pair per sentence and a final synthesize-stopped, refusals of unknown voices and of garbage
(after which the server must still answer), and concurrent connections.

Usage: python client_test.py --host 127.0.0.1 --port 10200 [--timeout 60]
Prints one line per check and a closing "N passed, M failed"; exits 1 if any check failed.
Needs only the standard library and `wyoming` (see tests/wyoming/requirements.txt).
"""

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, List, Optional

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info, TtsProgram
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

SENTENCES = ["This is sentence one.", "Here comes sentence two.", "And a third one."]
TEXT = " ".join(SENTENCES)


class CheckFailed(Exception):
    """A property of the server's answer that does not hold."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


@dataclass
class AudioRun:
    """One audio-start ... audio-stop run."""

    start: AudioStart
    chunks: List[AudioChunk] = field(default_factory=list)

    @property
    def samples(self) -> int:
        return sum(len(c.audio) for c in self.chunks) // (self.start.width * self.start.channels)

    @property
    def seconds(self) -> float:
        return self.samples / self.start.rate


class Harness:
    def __init__(self, host: str, port: int, timeout: float, samples_per_chunk: int) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.samples_per_chunk = samples_per_chunk

    def client(self) -> AsyncTcpClient:
        return AsyncTcpClient(self.host, self.port)

    async def read(self, client: AsyncTcpClient) -> Optional[Event]:
        return await asyncio.wait_for(client.read_event(), timeout=self.timeout)

    async def describe(self, client: AsyncTcpClient) -> TtsProgram:
        await client.write_event(Describe().event())
        while True:
            event = await self.read(client)
            check(event is not None, "connection closed before info")
            if Info.is_type(event.type):
                info = Info.from_event(event)
                check(len(info.tts) == 1, f"expected one tts program, got {len(info.tts)}")
                return info.tts[0]
            check(not Error.is_type(event.type), f"describe answered with error: {event.data}")

    async def read_runs(self, client: AsyncTcpClient, until: Callable[[Event], bool]) -> List[AudioRun]:
        """Reads audio runs until an event matching `until`; checks their framing."""
        runs: List[AudioRun] = []
        current: Optional[AudioRun] = None
        while True:
            event = await self.read(client)
            check(event is not None, "connection closed in the middle of the answer")
            if Error.is_type(event.type):
                err = Error.from_event(event)
                raise CheckFailed(f"server error {err.code}: {err.text}")
            if AudioStart.is_type(event.type):
                check(current is None, "audio-start inside an audio run")
                start = AudioStart.from_event(event)
                check(start.width == 2 and start.channels == 1,
                      f"expected 16-bit mono, got width={start.width} channels={start.channels}")
                check(start.rate > 0, "audio-start without a sample rate")
                current = AudioRun(start)
            elif AudioChunk.is_type(event.type):
                check(current is not None, "audio-chunk outside an audio run")
                chunk = AudioChunk.from_event(event)
                check((chunk.rate, chunk.width, chunk.channels)
                      == (current.start.rate, current.start.width, current.start.channels),
                      "audio-chunk format differs from its audio-start")
                check(len(chunk.audio) > 0, "empty audio-chunk")
                check(len(chunk.audio) % (chunk.width * chunk.channels) == 0,
                      "audio-chunk payload is not whole samples")
                current.chunks.append(chunk)
            elif AudioStop.is_type(event.type):
                check(current is not None, "audio-stop without audio-start")
                self.check_run(current)
                runs.append(current)
                current = None
            if until(event):
                check(current is None, "answer ended inside an audio run")
                return runs

    def check_run(self, run: AudioRun) -> None:
        check(run.chunks, "audio run without chunks")
        sizes = [len(c.audio) // 2 for c in run.chunks]
        check(all(n == self.samples_per_chunk for n in sizes[:-1]),
              f"chunks other than the last are not {self.samples_per_chunk} samples: {sizes[:8]}")
        check(0 < sizes[-1] <= self.samples_per_chunk, f"last chunk has {sizes[-1]} samples")
        check(run.samples == sum(sizes), "sample count differs from the chunk payloads")


async def check_describe(h: Harness) -> str:
    async with h.client() as client:
        tts = await h.describe(client)
    check(tts.installed, "tts program not installed")
    check(tts.supports_synthesize_streaming, "supports_synthesize_streaming is not true")
    check(len(tts.voices) > 0, "no voices")
    for voice in tts.voices:
        check(bool(voice.name), "voice without a name")
        check(len(voice.languages) > 0, f"voice {voice.name} lists no language")
        for language in voice.languages:
            check("-" not in language, f"voice {voice.name}: language {language!r} is not like en_US")
        check(voice.attribution is not None and voice.attribution.name is not None,
              f"voice {voice.name} has no attribution")
        if voice.speakers is not None:
            check(all(s.name for s in voice.speakers), f"voice {voice.name}: unnamed speaker")
    return f"{len(tts.voices)} voice(s): {', '.join(v.name for v in tts.voices[:5])}"


async def first_voice(h: Harness):
    async with h.client() as client:
        tts = await h.describe(client)
    return next(v for v in tts.voices if v.installed)


async def one_shot(h: Harness, voice: Optional[SynthesizeVoice], text: str = TEXT) -> AudioRun:
    async with h.client() as client:
        await client.write_event(Synthesize(text=text, voice=voice).event())
        runs = await h.read_runs(client, lambda e: AudioStop.is_type(e.type))
        check(len(runs) == 1, f"expected one audio-start/audio-stop pair, got {len(runs)}")
        # Nothing may trail the audio-stop: the next answer on this connection is info.
        tts = await h.describe(client)
        check(tts is not None, "no info after the audio")
    run = runs[0]
    check(run.samples > 0, "no samples")
    check(0.2 < run.seconds < 120, f"implausible duration {run.seconds:.2f}s for {len(text)} chars")
    return run


async def check_one_shot(h: Harness) -> str:
    voice = await first_voice(h)
    run = await one_shot(h, SynthesizeVoice(name=voice.name))
    plain = await one_shot(h, None)
    return (f"{voice.name}: {run.samples} samples in {len(run.chunks)} chunks at {run.start.rate} Hz; "
            f"default voice: {plain.seconds:.2f}s")


async def check_by_language(h: Harness) -> str:
    voice = await first_voice(h)
    language = voice.languages[0]
    run = await one_shot(h, SynthesizeVoice(language=language), "Speaking by language.")
    return f"{language}: {run.seconds:.2f}s"


async def check_streaming(h: Harness) -> str:
    voice = await first_voice(h)
    # Cut every 5 characters: most cuts fall inside words.
    chunks = [TEXT[i:i + 5] for i in range(0, len(TEXT), 5)]
    half = len(chunks) // 2 + 1  # past the end of the first sentence
    check(len("".join(chunks[:half])) > len(SENTENCES[0]) + 1, "test text too short")
    async with h.client() as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name=voice.name)).event())
        for chunk in chunks[:half]:
            await client.write_event(SynthesizeChunk(text=chunk).event())
        # The first sentence must be spoken while the stream is still open.
        started = time.monotonic()
        early = await h.read_runs(client, lambda e: AudioStop.is_type(e.type))
        first_after = time.monotonic() - started
        for chunk in chunks[half:]:
            await client.write_event(SynthesizeChunk(text=chunk).event())
        # Home Assistant repeats the whole text for servers without streaming; it must be ignored.
        await client.write_event(Synthesize(text=TEXT, voice=SynthesizeVoice(name=voice.name)).event())
        await client.write_event(SynthesizeStop().event())
        rest = await h.read_runs(client, lambda e: SynthesizeStopped.is_type(e.type))
    runs = early + rest
    check(len(runs) == len(SENTENCES),
          f"expected {len(SENTENCES)} audio runs (one per sentence), got {len(runs)}")
    check(all(r.samples > 0 for r in runs), "an audio run without samples")
    lengths = ", ".join(f"{r.seconds:.2f}s" for r in runs)
    return f"{len(runs)} runs ({lengths}); the first {first_after:.2f}s after its text"


async def check_unknown_voice(h: Harness) -> str:
    async with h.client() as client:
        await client.write_event(Synthesize(text="Hello.", voice=SynthesizeVoice(name="no-such-voice-xyz")).event())
        event = await h.read(client)
        check(event is not None and Error.is_type(event.type),
              f"expected an error event, got {event.type if event else 'a close'}")
        err = Error.from_event(event)
        check(bool(err.text), "error without text")
        closed = await h.read(client)
        check(closed is None, f"connection still open after the error ({closed.type if closed else ''})")
    return f"error {err.code}: {err.text}"


async def send_raw(h: Harness, data: bytes) -> str:
    """Sends raw bytes; returns how the server reacted (it must answer or close, not hang)."""
    reader, writer = await asyncio.open_connection(h.host, h.port)
    try:
        try:
            writer.write(data)
            await writer.drain()
        except (ConnectionError, OSError):
            return "closed while sending"
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=h.timeout)
        except (ConnectionError, OSError):
            return "reset"
        except ValueError:
            raise CheckFailed("server sent an over-long line")
        if not line:
            return "closed"
        check(b'"error"' in line, f"expected an error event, got {line[:120]!r}")
        return "error"
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def check_garbage(h: Harness) -> str:
    reactions = []
    for name, data in [
        ("random bytes", b"\x00\xff\xfe garbage {{{\n"),
        ("http request", b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ("oversized header", b'{"type":"describe","x":"' + b"a" * (256 * 1024)),
        ("huge data_length", b'{"type":"synthesize","data_length":1099511627776}\n'),
        ("huge payload_length", b'{"type":"synthesize","payload_length":1099511627776}\n'),
        ("bad data block", b'{"type":"synthesize","data_length":5}\nnope!'),
    ]:
        started = time.monotonic()
        reaction = await send_raw(h, data)
        took = time.monotonic() - started
        check(took < h.timeout, f"{name}: no reaction")
        reactions.append(f"{name}: {reaction}")
    # The server survived all of it.
    async with h.client() as client:
        await h.describe(client)
    return "; ".join(reactions)


async def check_concurrent(h: Harness, n: int = 4) -> str:
    voice = await first_voice(h)
    started = time.monotonic()
    runs = await asyncio.gather(*(
        one_shot(h, SynthesizeVoice(name=voice.name), f"Connection number {i} speaks now.")
        for i in range(n)
    ))
    check(all(r.samples > 0 for r in runs), "a connection got no audio")
    return f"{n} connections in {time.monotonic() - started:.2f}s"


CHECKS: List[tuple] = [
    ("describe", check_describe),
    ("one-shot", check_one_shot),
    ("by-language", check_by_language),
    ("streaming", check_streaming),
    ("unknown-voice", check_unknown_voice),
    ("garbage", check_garbage),
    ("concurrent", check_concurrent),
]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for any one event")
    parser.add_argument("--samples-per-chunk", type=int, default=1024)
    parser.add_argument("--only", action="append", help="run only the named check (repeatable)")
    args = parser.parse_args()
    h = Harness(args.host, args.port, args.timeout, args.samples_per_chunk)

    passed = failed = 0
    for name, run in CHECKS:
        if args.only and name not in args.only:
            continue
        try:
            detail = await run(h)
            passed += 1
            print(f"PASS {name}: {detail}", flush=True)
        except (CheckFailed, asyncio.TimeoutError, ConnectionError, OSError) as e:
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
