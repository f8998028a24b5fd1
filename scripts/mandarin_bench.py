"""misaki 0.9.4's Mandarin G2P (as Kokoro v1.0 builds it) timed on the oracle corpus, for
scripts/bench-mandarin.sh, which runs our front end (benches/mandarin.rs) in the same run.
Prints the same `key: value` lines as the Rust bench.

    .venv-cjk/bin/python scripts/mandarin_bench.py
"""

import resource
import statistics
import time
from pathlib import Path

ROUNDS = 21
CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "cjk" / "zh-corpus.txt"


def resident_bytes():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main():
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    sentences = [l.strip() for l in lines if l.strip() and not l.startswith("#")]
    before = resident_bytes()
    started = time.perf_counter()
    from misaki import zh

    g2p = zh.ZHG2P(version=None)
    g2p(sentences[0])  # jieba and pypinyin load their dictionaries on first use
    load = time.perf_counter() - started
    after = resident_bytes()
    print(f"dictionary load: {load * 1e3:.1f} ms")
    print(f"dictionary resident: {(after - before) / (1 << 20):.1f} MiB")
    rounds = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for sentence in sentences:
            g2p(sentence)
        rounds.append((time.perf_counter() - started) / len(sentences))
    print(f"sentences: {len(sentences)}")
    print(f"per sentence (median of {ROUNDS} rounds): {statistics.median(rounds) * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
