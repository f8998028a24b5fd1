#!/usr/bin/env python3
"""Script throughput: two multi-speaker scripts at once against the same two one after the other.

Against a running server: each round reads two different scripts (two speakers, `--lines`
lines each, unique texts, cache off) first one after the other, then both at once, and times
each way until both are done. Prints the medians and their ratio. The Python omnivoice-server
reads one script at a time (it answers 503 to the second), so for it "at once" is "one after
the other" at best; here the lines of both go through the batcher together.

Usage: python3 benches/server/scripts.py --url http://127.0.0.1:8880 [--rounds 5] [--lines 8]
       [--voices en_US-lessac-medium,en_US-ryan-medium]
"""

import argparse
import json
import statistics
import threading
import time
import urllib.request

SENTENCES = [
    "The harbor was quiet before the boats came in.",
    "Did you see the list of names on the door this morning?",
    "We counted forty-two crates, and three of them were open.",
    "Nobody knew who had left the lantern burning all night.",
    "Tomorrow the weather turns, so the nets must be mended today.",
    "She laughed, then asked whether the bridge would hold.",
]


def script(round_no, which, lines, voices):
    segments = []
    for i in range(lines):
        speaker = ("host", "guest")[i % 2]
        text = f"{SENTENCES[(i + which) % len(SENTENCES)]} Line {i}, round {round_no}{which}."
        segment = {"speaker": speaker, "text": text}
        if i < 2:
            segment["voice"] = voices[i % len(voices)]
        segments.append(segment)
    return {"script": segments, "response_format": "wav", "cache": False,
            "pause_between_speakers": 0.2}


def read(url, body):
    request = urllib.request.Request(
        f"{url}/v1/audio/script", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=900) as response:
        response.read()
        return float(response.headers.get("X-Audio-Duration-S", "0"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lines", type=int, default=8)
    ap.add_argument("--voices", default="")
    args = ap.parse_args()
    voices = [v for v in args.voices.split(",") if v] or [None]
    if voices == [None]:
        with urllib.request.urlopen(f"{args.url}/v1/audio/voices") as response:
            listed = json.load(response)["voices"]
        voices = [v["id"] for v in listed][:2]
    read(args.url, script(-1, 0, 2, voices))  # warm up: voices loaded
    sequential, together, audio = [], [], 0.0
    for r in range(args.rounds):
        started = time.perf_counter()
        audio = read(args.url, script(r, 0, args.lines, voices))
        audio += read(args.url, script(r, 1, args.lines, voices))
        sequential.append(time.perf_counter() - started)
        results = []

        def both(which, round_no=r):
            try:
                results.append(read(args.url, script(round_no + 1000, which, args.lines, voices)))
            except Exception as error:  # noqa: BLE001 - reported below
                results.append(error)

        threads = [threading.Thread(target=both, args=(w,)) for w in (0, 1)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        together.append(time.perf_counter() - started)
        failed = [x for x in results if isinstance(x, Exception)]
        assert not failed, f"a script failed: {failed}"
    seq, tog = statistics.median(sequential), statistics.median(together)
    print(f"voices {voices}; two scripts of {args.lines} lines, {audio:.1f} s of audio together")
    print(f"one after the other  median {seq:7.3f} s over {len(sequential)} rounds")
    print(f"both at once         median {tog:7.3f} s over {len(together)} rounds")
    print(f"at once / one after the other: {tog / seq:.2f} (throughput x{seq / tog:.2f})")


main()
