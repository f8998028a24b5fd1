#!/usr/bin/env python3
"""The Kokoro precision gate: our server's speech in each precision against kokoro-onnx's.

Why: a reduced precision may become Kokoro's `auto` only if listeners would not hear it as
worse than the model people actually run, kokoro-onnx on its int8 file. That is measured on
3 voices x 20 sentences with three independent judges:
- DNSMOS (scripts/dnsmos.py, .venv-mos): overall MOS no lower than kokoro-onnx's minus 0.05;
- DistillMOS (scripts/distillmos_score.py, .venv-distillmos): the same rule;
- offline Whisper (scripts/asr.py, .venv-asr): word error rate no worse than kokoro-onnx's
  plus 1 point.
The figures go to docs/performance.md §11a. With --write-fixture, kokoro-onnx's DNSMOS scores
(and the sentences and voices) are written to tests/fixtures/kokoro_gate/kokoro-onnx.json,
which tests/kokoro_gate.rs holds the `auto` precision to without torch.

Run through scripts/kokoro-gate.sh, which prepares the venvs and builds the server. Standard
library only; the judges run in their own venvs as subprocesses. Nothing is downloaded.
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests/fixtures/kokoro_gate/kokoro-onnx.json"

# (voice, espeak-ng language kokoro-onnx is given): the default voice, a male US voice and a
# British one, as in tests/asr.rs.
VOICES = [("af_heart", "en-us"), ("am_michael", "en-us"), ("bf_emma", "en-gb")]

# Twenty sentences: the eight of tests/asr.rs and twelve an assistant would say. No digits or
# compounds Whisper may spell another way: a spelling difference is not an error of speech.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog beside the quiet river.",
    "Please remember to bring an umbrella, because the forecast calls for heavy rain this afternoon.",
    "Could you tell me where the nearest train station is?",
    "Scientists discovered a new species of butterfly in the mountains of South America.",
    "She sells seashells by the seashore, and the shells she sells are surely seashells.",
    "Our meeting has been moved to Thursday morning, so please update your calendar.",
    "The old lighthouse keeper watched the ships sail past the rocky coast every evening.",
    "Fresh bread, warm soup and a cup of tea make a perfect winter lunch.",
    "Thank you for calling, how can I help you today?",
    "I found a few restaurants near you that are open late tonight.",
    "Your package was delivered this morning and left at the front door.",
    "Let me check the weather for you before you leave the house.",
    "The museum closes early on Sundays, so plan to arrive before noon.",
    "Would you like me to read the message again or send a reply?",
    "A gentle breeze carried the smell of pine through the open window.",
    "He finally finished the painting after working on it all summer.",
    "Turn left at the next corner and the library will be on your right.",
    "Remember to drink plenty of water and get some rest.",
    "The children laughed as the puppy chased its tail around the garden.",
    "I'm sorry, I didn't catch that; could you say it once more?",
]

# The gate's margins.
MOS_MARGIN = 0.05
WER_MARGIN_POINTS = 1.0


def words(text: str) -> list:
    return re.sub(r"[^a-z' ]+", " ", text.lower().replace("-", " ")).split()


def edit_distance(a: list, b: list) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def run_json(cmd: list) -> list:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def speak_ours(binary: str, precision: str, jobs: list) -> None:
    port = free_port()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--log-level", "warn", "--no-cache",
         "--kokoro-dir", "voices/kokoro", "--precision", precision],
        cwd=ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        for job in jobs:
            body = json.dumps({"model": "kokoro", "voice": job["voice"], "input": job["text"],
                               "response_format": "wav", "stream": False}).encode()
            request = urllib.request.Request(f"{url}/v1/audio/speech", data=body,
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=600) as response:
                Path(job["wav"]).write_bytes(response.read())
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


def mean(values: list) -> float:
    return sum(values) / len(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="target/debug/omnivoice-server")
    parser.add_argument("--precisions", default="f32,bf16,int8")
    parser.add_argument("--work", type=Path, default=ROOT / ".tmp-kokoro-gate")
    parser.add_argument("--write-fixture", action="store_true")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    sides = {"kokoro-onnx": []}
    cases = [(voice, lang, i, text) for voice, lang in VOICES for i, text in enumerate(SENTENCES)]
    jobs = [{"voice": v, "lang": lang, "text": t, "wav": str(args.work / f"kokoro-onnx-{v}-{i:02}.wav")}
            for v, lang, i, t in cases]
    sides["kokoro-onnx"] = jobs
    subprocess.run([str(ROOT / ".venv-kokoro/bin/python"), "scripts/kokoro_onnx_speak.py",
                    "--kokoro-dir", "voices/kokoro"], input=json.dumps(jobs), text=True,
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    for precision in args.precisions.split(","):
        ours = [dict(job, wav=str(args.work / f"{precision}-{job['voice']}-{n % 20:02}.wav"))
                for n, job in enumerate(jobs)]
        started = time.monotonic()
        speak_ours(args.binary, precision, ours)
        print(f"ours in {precision}: {len(ours)} files in {time.monotonic() - started:.0f} s",
              file=sys.stderr)
        sides[precision] = ours

    files = [job["wav"] for side in sides.values() for job in side]
    dns = {r["file"]: r for r in run_json([str(ROOT / ".venv-mos/bin/python"), "scripts/dnsmos.py", *files])}
    dmos = {r["file"]: r["mos"] for r in run_json(
        [str(ROOT / ".venv-distillmos/bin/python"), "scripts/distillmos_score.py", *files])}
    heard = {r["file"]: r["text"] for r in run_json(
        [str(ROOT / ".venv-asr/bin/python"), "scripts/asr.py", *files])}

    summary = {}
    for side, side_jobs in sides.items():
        rows = []
        for job in side_jobs:
            said = words(job["text"])
            rows.append({
                "voice": job["voice"],
                "ovrl": dns[job["wav"]]["ovrl"], "sig": dns[job["wav"]]["sig"],
                "bak": dns[job["wav"]]["bak"], "p808": dns[job["wav"]]["p808"],
                "distillmos": dmos[job["wav"]],
                "errors": edit_distance(said, words(heard[job["wav"]])), "words": len(said),
                "heard": heard[job["wav"]],
            })
        summary[side] = rows

    def figures(rows: list) -> dict:
        return {
            "dnsmos_ovrl": mean([r["ovrl"] for r in rows]),
            "dnsmos_sig": mean([r["sig"] for r in rows]),
            "dnsmos_bak": mean([r["bak"] for r in rows]),
            "dnsmos_p808": mean([r["p808"] for r in rows]),
            "distillmos": mean([r["distillmos"] for r in rows]),
            "wer_percent": 100.0 * sum(r["errors"] for r in rows) / sum(r["words"] for r in rows),
            "errors": sum(r["errors"] for r in rows),
            "words": sum(r["words"] for r in rows),
        }

    peer = figures(summary["kokoro-onnx"])
    print("| side | voices | DNSMOS OVRL | SIG | BAK | P.808 | DistillMOS | Whisper WER | gate |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    verdicts = {}
    for side, rows in summary.items():
        groups = [("all", rows)] + [(v, [r for r in rows if r["voice"] == v]) for v, _ in VOICES]
        for name, group in groups:
            f = figures(group)
            verdict = ""
            if side != "kokoro-onnx" and name == "all":
                checks = {
                    "DNSMOS": f["dnsmos_ovrl"] >= peer["dnsmos_ovrl"] - MOS_MARGIN,
                    "DistillMOS": f["distillmos"] >= peer["distillmos"] - MOS_MARGIN,
                    "WER": f["wer_percent"] <= peer["wer_percent"] + WER_MARGIN_POINTS,
                }
                verdicts[side] = all(checks.values())
                verdict = "passes" if verdicts[side] else "fails: " + ", ".join(
                    k for k, ok in checks.items() if not ok)
            print(f"| {side} | {name} | {f['dnsmos_ovrl']:.3f} | {f['dnsmos_sig']:.3f} | "
                  f"{f['dnsmos_bak']:.3f} | {f['dnsmos_p808']:.3f} | {f['distillmos']:.3f} | "
                  f"{f['wer_percent']:.1f} % ({f['errors']} of {f['words']}) | {verdict} |")
    for side, rows in summary.items():
        for job, row in zip(sides[side], rows):
            if row["errors"]:
                print(f"{side} {row['voice']}: {job['text']!r} heard as {row['heard']!r}",
                      file=sys.stderr)
    (args.work / "summary.json").write_text(json.dumps(summary, indent=1))

    if args.write_fixture:
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        fixture = {
            "about": "kokoro-onnx 0.6.1 (int8 file) scored by DNSMOS (speechmos 0.0.1.1), "
                     "written by scripts/kokoro-gate.sh; tests/kokoro_gate.rs holds ours to it",
            "voices": [[v, lang] for v, lang in VOICES],
            "sentences": SENTENCES,
            "margin": MOS_MARGIN,
            "dnsmos": [{k: row[k] for k in ("voice", "ovrl", "sig", "bak", "p808")}
                       for row in summary["kokoro-onnx"]],
            "peer_means": {k: round(v, 4) for k, v in peer.items()},
        }
        FIXTURE.write_text(json.dumps(fixture, indent=1) + "\n")
        print(f"wrote {FIXTURE.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
