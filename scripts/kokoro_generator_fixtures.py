#!/usr/bin/env python3
"""Unit fixtures for the Kokoro generator's weight-free steps, cut out of the shipped graph.

Why: the harmonic source (F0 upsampling, the sine phase and its two linear Resizes, the
l_linear + tanh merge), the source STFT with its Atan/Where phase and the iSTFT tail (the
ConvTranspose with the fixed basis, the window_sum division, the x4 gain and the trim) carry
no quantized weights, so the shipped int8 graph computes them exactly as the f32 one does.
Cutting those subgraphs out of `kokoro-v1.0.int8.onnx` and running them with onnxruntime on
small inputs gives the candle port (crates/models/src/kokoro/generator.rs) exact references
for each step, independent of the network around them.

Writes crates/models/tests/fixtures/kokoro/generator_source.npz and generator_istft.npz.
Usage: scripts/kokoro_generator_fixtures.py --model voices/kokoro/kokoro-v1.0.int8.onnx
(a venv with onnx, onnxruntime and numpy).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

G = "/decoder/decoder/generator"
# F0 at the predictor's rate (2 values per alignment frame), [1, 1, 2F], as fed to f0_upsamp.
F0_IN = "/decoder/decoder/Unsqueeze_output_0"
SOURCE_OUT = {
    # cumulative phase of the 9 harmonics at the 2F rate, x 2 pi x 300, [1, 9, 2F]
    "phase_frames": f"{G}/m_source/l_sin_gen/Mul_4",
    # harmonic source tanh(l_linear(9 sines)), [1, S]
    "har_source": f"{G}/Squeeze_output_0",
    # STFT of the reflect-padded source, [1, K, 11, 2]
    "har_stft": f"{G}/STFT_output_0",
    # [magnitude(11); phase(11)], [1, 22, K]
    "har": f"{G}/Concat_3_output_0",
}
# conv_post output, [1, 22, K]
CONV_POST = f"{G}/conv_post/Conv_output_0"
AUDIO = f"{G}/istft/stft/Slice_4_output_0"


def extract(model: Path, inputs: list[str], outputs: list[str]) -> ort.InferenceSession:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "part.onnx"
        onnx.utils.extract_model(str(model), str(path), inputs, outputs, check_model=False)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("crates/models/tests/fixtures/kokoro"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    # 8 alignment frames (0.2 s): silence, a threshold edge (5 and 9 Hz stay unvoiced, the
    # threshold is F0 > 10), a rising and falling voiced stretch, a gap, a second stretch.
    f0 = np.array(
        [0, 0, 5, 120.5, 131, 150, 181.25, 200, 210, 190, 0, 0, 220, 243.7, 261, 9],
        dtype=np.float32,
    ).reshape(1, 1, -1)
    sess = extract(args.model, [F0_IN], list(SOURCE_OUT.values()))
    got = sess.run(None, {F0_IN: f0})
    arrays = {"f0": f0.reshape(-1)}
    for (name, _), value in zip(SOURCE_OUT.items(), got):
        arrays[name] = value
        print(name, value.shape, value.dtype)
    np.savez_compressed(args.out / "generator_source.npz", **arrays)

    # The iSTFT on a conv_post-like input: log-magnitudes around -2, phases spread over radians.
    rng = np.random.default_rng(23)
    k = 120 * 4 + 1
    conv_post = np.concatenate(
        [rng.normal(-2.0, 1.5, (1, 11, k)), rng.normal(0.0, 2.0, (1, 11, k))], axis=1
    ).astype(np.float32)
    sess = extract(args.model, [CONV_POST], [AUDIO])
    (audio,) = sess.run(None, {CONV_POST: conv_post})
    print("audio", audio.shape)
    np.savez_compressed(args.out / "generator_istft.npz", conv_post=conv_post, audio=audio)


if __name__ == "__main__":
    main()
