"""Times kokoro-onnx (onnxruntime on the same int8 file) on the oracle's `hello` case: the
same tokens and style row the native bench uses, `--threads` intra-op threads, best and median
of `--runs` calls after one warm-up. Run by scripts/bench-kokoro.sh in .venv-kokoro."""

import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--fixture", required=True)
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--runs", type=int, default=10)
args = parser.parse_args()

case = np.load(args.fixture)
options = ort.SessionOptions()
options.intra_op_num_threads = args.threads
options.inter_op_num_threads = 1
session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
feeds = {
    "tokens": case["tokens"].astype(np.int64)[None, :],
    "style": case["style"].astype(np.float32)[None, :],
    "speed": np.array([float(case["speed"])], dtype=np.float32),
}
session.run(None, feeds)
times = []
for _ in range(args.runs):
    start = time.perf_counter()
    (audio,) = session.run(None, feeds)[:1]
    times.append(time.perf_counter() - start)
print(
    f"kokoro-onnx threads={args.threads}: best {min(times):.3f} s, median "
    f"{statistics.median(times):.3f} s for {audio.size / 24000:.2f} s of audio"
)
