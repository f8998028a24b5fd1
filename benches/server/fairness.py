#!/usr/bin/env python3
"""Short-request latency while a long request is being synthesized, against idle latency.

Against a running server: first the idle latency of short one-sentence requests (whole body,
unique texts, cache off), then the same requests while a 4,096-character request streams in
the background. Prints medians and their ratio (the issue's goal: about 2x or less).

Usage: python3 benches/server/fairness.py --url http://127.0.0.1:8880 [--rounds 7]
"""

import argparse
import json
import statistics
import threading
import time
import urllib.request


def post(url, body):
    request = urllib.request.Request(
        f"{url}/v1/audio/speech", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as response:
        response.read()
    return time.perf_counter() - started


def short(url, i):
    text = f"Short request number {i} is here."
    return post(url, {"model": "tts-1", "voice": "alloy", "input": text,
                      "response_format": "wav", "stream": False, "cache": False})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    short(args.url, -1)  # warm up
    idle = [short(args.url, i) for i in range(args.rounds)]
    sentence = "The long request keeps the workers busy with one sentence after another. "
    long_text = (sentence * (4096 // len(sentence) + 1))[:4096]
    done = threading.Event()

    def long_request():
        post(args.url, {"model": "tts-1", "voice": "alloy", "input": long_text,
                        "response_format": "pcm", "cache": False})
        done.set()

    threading.Thread(target=long_request, daemon=True).start()
    time.sleep(1.0)  # the long request is under way
    busy = []
    for i in range(args.rounds):
        if done.is_set():
            break
        busy.append(short(args.url, 100 + i))
        time.sleep(0.3)
    ratio = statistics.median(busy) / statistics.median(idle)
    print(f"idle   median {statistics.median(idle) * 1000:7.1f} ms over {len(idle)}")
    print(f"beside median {statistics.median(busy) * 1000:7.1f} ms over {len(busy)} "
          f"(max {max(busy) * 1000:.1f} ms); long request finished early: {done.is_set()}")
    print(f"ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
