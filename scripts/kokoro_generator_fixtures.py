#!/usr/bin/env python3
"""Unit fixtures for the Kokoro generator's weight-free steps, cut out of the shipped graph.

Why: the harmonic source (F0 upsampling, the sine phase and its two linear Resizes, the
l_linear + tanh merge), the source STFT with its Atan/Where phase and the iSTFT tail (the
ConvTranspose with the fixed basis, the window_sum division, the x4 gain and the trim) carry
no quantized weights, so the shipped int8 graph computes them exactly as the f32 one does.
Cutting those subgraphs out of `kokoro-v1.0.int8.onnx` and running them with onnxruntime on
small inputs gives the candle port (crates/models/src/kokoro/generator.rs) exact references
for each step, independent of the network around them.

Writes crates/models/tests/fixtures/kokoro/generator_source.npz (`f0` [2F], `phase_frames`
[2F, 9], `har_source` [600F], `har` [22, 120F + 1]; F = 8, from the int8 file, whose steps
here are float) and generator_net.npz (`f0` [8], `dec_out` [512, 8], `style` [128], `har`
[22, 481], `conv_post` [22, 481], `audio` [2400]: four frames of the oracle's emma case through
the generator of the all-f32 rewrite), uncompressed, batch axis dropped.
Usage: .venv-kokoro/bin/python scripts/kokoro_generator_fixtures.py \
    --model voices/kokoro/kokoro-v1.0.int8.onnx
(the venv of scripts/kokoro-venv.sh; emma.npz from scripts/kokoro_reference.py must exist).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).parent))

G = "/decoder/decoder/generator"
# F0 at the predictor's rate (2 values per alignment frame), [1, 1, 2F], as fed to f0_upsamp.
F0_IN = "/decoder/decoder/Unsqueeze_output_0"
SOURCE_OUT = {
    # cumulative phase of the 9 harmonics at the 2F rate, x 2 pi x 300, [1, 2F, 9]
    "phase_frames": f"{G}/m_source/l_sin_gen/Mul_4",
    # harmonic source tanh(l_linear(9 sines)), [1, S]
    "har_source": f"{G}/Squeeze_output_0",
    # [magnitude(11); phase(11)], [1, 22, K]
    "har": f"{G}/Concat_3_output_0",
}
# the decoder's output (decode.3), [1, 512, 2F], and the decoder half of the style, [1, 128]
DEC_OUT = "/decoder/decoder/decode.3/Div_4_output_0"
STYLE = "/decoder/Slice_output_0"
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
        arrays[name] = value[0]
        print(name, value.shape, value.dtype)
    np.savez(args.out / "generator_source.npz", **arrays)

    # The network: four alignment frames of the oracle's emma case (frames 8..12, voiced, around
    # its F0 peak) through the generator of the all-f32 rewrite (`kokoro_reference.py`), from the
    # decoder output, F0 and style: the source spectrum, conv_post and the audio.
    from kokoro_reference import rewrite_to_f32

    emma = np.load(args.out / "emma.npz")
    frames = slice(16, 24)
    dec_out = emma["dec_out"][None, :, frames].astype(np.float32)
    f0 = emma["f0"][None, None, frames].astype(np.float32)
    style = emma["style"][None, :128].astype(np.float32)
    model = rewrite_to_f32(onnx.load(str(args.model)))
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "f32.onnx"
        onnx.save(model, str(full), save_as_external_data=True, location="f32.data")
        sess = extract(full, [DEC_OUT, F0_IN, STYLE], [SOURCE_OUT["har"], CONV_POST, AUDIO])
    har, conv_post, audio = sess.run(None, {DEC_OUT: dec_out, F0_IN: f0, STYLE: style})
    print("net: har", har.shape, "conv_post", conv_post.shape, "audio", audio.shape)
    np.savez(
        args.out / "generator_net.npz",
        f0=f0.reshape(-1),
        dec_out=dec_out[0],
        style=style[0],
        har=har[0],
        conv_post=conv_post[0],
        audio=audio.reshape(-1),
    )


if __name__ == "__main__":
    main()
