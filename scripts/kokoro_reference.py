#!/usr/bin/env python3
"""Reference ("oracle") for the native Kokoro-82M port: onnxruntime runs of the shipped graph.

Why: the candle port of Kokoro (crates/models) is checked stage by stage against numbers that
come from the official graph run by onnxruntime, never from our own code. The shipped graph,
`kokoro-v1.0.int8.onnx`, is dynamically quantized: its activations are quantized per call
(DynamicQuantizeLinear), so no float implementation can match it exactly. This script therefore
builds the *all-f32* version of the same graph (every quantized weight replaced by its
dequantized value, the integer ops by their float twins) and takes the fixtures from that one;
the int8 graph as shipped gives looser fixtures (durations, audio).

The rewrite (`rewrite_to_f32`), weight by weight, with `w = f32(q - zero_point) * scale`
computed in f32 (exact: one rounding):
  - DynamicQuantizeLinear(x) -> ConvInteger(xq, Wq) [-> Add(int32 bias)] -> Cast -> Mul(scale)
      becomes Conv(x, W, bias) where bias is the float bias that the int8 graph floors onto the
      x_scale*w_scale grid at run time (the float graph adds it as is).
  - DynamicQuantizeLinear(x) -> MatMulInteger(xq, Wq) -> Cast -> Mul(scale)  becomes MatMul(x, W)
      (scale per output column; the float bias Add after it is untouched).
  - com.microsoft DynamicQuantizeLSTM(X, Wq[d,in,4H], Rq[d,H,4H], B, ...) becomes ONNX LSTM with
      W[d,4H,in], R[d,4H,H] (transposed back to ONNX layout; gate order i,o,f,c kept), same B,
      initial states and attributes.
  - Gather(Wq, ids) -> DequantizeLinear  becomes Gather(W, ids).
  Nodes left without consumers are removed, and so are unused initializers. Float contrib ops
  (SkipLayerNormalization, FastGelu, FusedMatMul) stay as they are.

Subcommands (run with the venv of scripts/kokoro-venv.sh):
  rewrite   --int8 M.onnx --out F32.onnx          write the all-f32 graph
  fixtures  --int8 M.onnx --voices DIR --out DIR  write the case fixtures and the unit fixtures
  compare   --int8 M.onnx --voices DIR            rewrite vs int8 on the cases: durations, audio
  semantics --int8 M.onnx --voices DIR [--out DIR] the README's op semantics in numpy vs the graph
The fixture layout, the node each array comes from and the measured numbers are in
crates/models/tests/fixtures/kokoro/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

# ---------------------------------------------------------------------------------------------
# The f32 rewrite


class _Graph:
    """Producer/consumer indices over a GraphProto, rebuilt when nodes change."""

    def __init__(self, graph: onnx.GraphProto):
        self.graph = graph
        self.inits = {i.name: i for i in graph.initializer}
        self.producer = {}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for n in graph.node:
            for o in n.output:
                self.producer[o] = n
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)

    def init_array(self, name: str) -> np.ndarray:
        return numpy_helper.to_array(self.inits[name])

    def only_consumer(self, name: str) -> onnx.NodeProto:
        cs = self.consumers.get(name, [])
        if len(cs) != 1:
            raise ValueError(f"{name} has {len(cs)} consumers, expected 1")
        return cs[0]


def _dequantize(q: np.ndarray, zp: np.ndarray, scale: np.ndarray) -> np.ndarray:
    # (q - zp) is an exact small integer in f32, so this is one rounding, as a port computes it.
    return (q.astype(np.float32) - zp.astype(np.float32)) * scale.astype(np.float32)


def _scale_init(g: _Graph, scale_mul_input: str) -> str:
    """The weight-scale initializer behind the `x_scale * w_scale` Mul of an integer op."""
    mul = g.producer[scale_mul_input]
    inits = [i for i in mul.input if i in g.inits]
    if mul.op_type != "Mul" or len(inits) != 1:
        raise ValueError(f"unexpected scale producer {mul.name}")
    return inits[0]


def _walk_integer_tail(g: _Graph, node: onnx.NodeProto):
    """From ConvInteger/MatMulInteger, follow [Add int bias] -> Cast -> Mul(scale) to the end.

    Returns (float bias initializer name or None, weight scale initializer, the final Mul)."""
    cur = g.only_consumer(node.output[0])
    bias = None
    if cur.op_type == "Add":
        other = [i for i in cur.input if i != node.output[0]][0]
        # Reshape <- Cast(int32) <- Floor <- Div(bias_f32, x_scale*w_scale)
        p = g.producer[other]
        while p.op_type in ("Reshape", "Cast", "Floor"):
            p = g.producer[p.input[0]]
        if p.op_type != "Div" or p.input[0] not in g.inits:
            raise ValueError(f"unexpected bias chain at {cur.name}")
        bias = p.input[0]
        cur = g.only_consumer(cur.output[0])
    if cur.op_type != "Cast" or helper.get_attribute_value(cur.attribute[0]) != onnx.TensorProto.FLOAT:
        raise ValueError(f"expected Cast to float after {node.name}, got {cur.op_type} {cur.name}")
    mul = g.only_consumer(cur.output[0])
    if mul.op_type != "Mul":
        raise ValueError(f"expected Mul after {cur.name}")
    scale_in = [i for i in mul.input if i != cur.output[0]][0]
    return bias, _scale_init(g, scale_in), mul


def _float_input(g: _Graph, quantized: str) -> str:
    dql = g.producer[quantized]
    if dql.op_type != "DynamicQuantizeLinear":
        raise ValueError(f"{quantized} is not from DynamicQuantizeLinear")
    return dql.input[0]


def rewrite_to_f32(model: onnx.ModelProto) -> onnx.ModelProto:
    """The all-f32 twin of the int8 graph (see the module doc for the rules)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    g = _Graph(graph)
    new_inits: dict[str, onnx.TensorProto] = {}

    def add_init(name: str, arr: np.ndarray) -> str:
        if name not in new_inits:
            new_inits[name] = numpy_helper.from_array(np.ascontiguousarray(arr.astype(np.float32)), name)
        return name

    replaced: dict[str, onnx.NodeProto] = {}  # name of the first node of a replaced chain -> new node
    dropped: set[str] = set()  # the last node of each replaced chain: its output now comes from the new node
    counts = {"ConvInteger": 0, "MatMulInteger": 0, "DynamicQuantizeLSTM": 0, "DequantizeLinear": 0}
    for n in list(graph.node):
        if n.op_type == "ConvInteger":
            xq, wq, _, wzp = n.input
            bias, wscale, tail = _walk_integer_tail(g, n)
            out = tail.output[0]
            dropped.add(tail.name)
            w = _dequantize(g.init_array(wq), g.init_array(wzp), g.init_array(wscale))
            if g.init_array(wscale).size != 1:
                raise ValueError(f"{n.name}: per-channel conv scale not handled")
            inputs = [_float_input(g, xq), add_init(wq + "_dequantized", w)]
            if bias is not None:
                inputs.append(bias)
            name = n.name[: -len("_quant")] if n.name.endswith("_quant") else n.name + "_f32"
            new = helper.make_node("Conv", inputs, [out], name=name)
            new.attribute.extend(n.attribute)
            replaced[n.name] = new
            counts["ConvInteger"] += 1
        elif n.op_type == "MatMulInteger":
            xq, wq, _, wzp = n.input
            if wq not in g.inits:
                raise ValueError(f"{n.name}: weight is not input B")
            bias, wscale, tail = _walk_integer_tail(g, n)
            out = tail.output[0]
            dropped.add(tail.name)
            if bias is not None:
                raise ValueError(f"{n.name}: integer bias on MatMulInteger not expected")
            q = g.init_array(wq)
            zp = g.init_array(wzp).reshape(1, -1)
            s = g.init_array(wscale).reshape(1, -1)
            w = _dequantize(q, zp, s)
            name = n.name[: -len("_quant")] if n.name.endswith("_quant") else n.name + "_f32"
            new = helper.make_node("MatMul", [_float_input(g, xq), add_init(wq + "_dequantized", w)], [out], name=name)
            replaced[n.name] = new
            counts["MatMulInteger"] += 1
        elif n.op_type == "DynamicQuantizeLSTM":
            x, wq, rq, b, seq, h0, c0, p, ws, wzp, rs, rzp = (list(n.input) + [""] * 12)[:12]
            if p:
                raise ValueError(f"{n.name}: peepholes not handled")
            dirs = g.init_array(ws).reshape(-1, 1, 1)
            w = _dequantize(g.init_array(wq), g.init_array(wzp).reshape(-1, 1, 1), dirs).transpose(0, 2, 1)
            r = _dequantize(
                g.init_array(rq), g.init_array(rzp).reshape(-1, 1, 1), g.init_array(rs).reshape(-1, 1, 1)
            ).transpose(0, 2, 1)
            inputs = [x, add_init(wq + "_dequantized", w), add_init(rq + "_dequantized", r), b, seq, h0, c0]
            name = n.name[: -len("_quant")] if n.name.endswith("_quant") else n.name + "_f32"
            new = helper.make_node("LSTM", inputs, list(n.output), name=name)
            new.attribute.extend(n.attribute)
            replaced[n.name] = new
            counts["DynamicQuantizeLSTM"] += 1
        elif n.op_type == "DequantizeLinear":
            src, scale, zp = n.input
            gather = g.producer[src]
            if gather.op_type != "Gather" or gather.input[0] not in g.inits:
                raise ValueError(f"{n.name}: not a quantized embedding")
            table = _dequantize(g.init_array(gather.input[0]), g.init_array(zp), g.init_array(scale))
            name = gather.name[: -len("_quant")] if gather.name.endswith("_quant") else gather.name + "_f32"
            new = helper.make_node(
                "Gather", [add_init(gather.input[0] + "_dequantized", table), gather.input[1]], list(n.output), name=name
            )
            new.attribute.extend(gather.attribute)
            replaced[n.name] = new
            counts["DequantizeLinear"] += 1

    nodes = []
    for n in graph.node:
        if n.name not in dropped:
            nodes.append(replaced.get(n.name, n))
    graph.initializer.extend(new_inits.values())
    _prune(graph, nodes)
    left = [n.op_type for n in graph.node if n.op_type in counts or "Integer" in n.op_type or "Quantize" in n.op_type]
    if left:
        raise ValueError(f"integer ops left after the rewrite: {sorted(set(left))}")
    print(f"rewrite: {counts}", file=sys.stderr)
    return model


def _prune(graph: onnx.GraphProto, nodes: list[onnx.NodeProto]) -> None:
    """Keeps the nodes that reach a graph output, in order, and the initializers they use."""
    needed = {o.name for o in graph.output}
    keep = []
    for n in reversed(nodes):
        if any(o in needed for o in n.output if o):
            keep.append(n)
            needed.update(i for i in n.input if i)
    keep.reverse()
    del graph.node[:]
    graph.node.extend(keep)
    inits = [i for i in graph.initializer if i.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(inits)
    vi = [v for v in graph.value_info if v.name in needed]
    del graph.value_info[:]
    graph.value_info.extend(vi)


# ---------------------------------------------------------------------------------------------
# Sessions with intermediate outputs


def with_outputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """The same graph with node outputs `names` added as graph outputs (types left to the runtime)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    produced = {o for n in model.graph.node for o in n.output}
    have = {o.name for o in model.graph.output}
    for name in names:
        if name not in produced:
            raise KeyError(f"no node output named {name}")
        if name not in have:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
    return model


def session(model: onnx.ModelProto, threads: int = 1) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


# ---------------------------------------------------------------------------------------------
# Cases and stages

# Node outputs of the f32 graph, in pipeline order (names as in the shipped graph; the f32
# rewrite keeps every float tensor name). Shapes: T = tokens incl. both pads, F = frames
# (sum of pred_dur), S = 600*F audio samples, K = 120*F + 1 STFT frames.
STAGES = {
    # ALBERT (12 applications of the one shared layer) output, [1, T, 768]
    "bert": "/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/full_layer_layer_norm_11/LayerNormalization_output_0",
    # bert_encoder Linear(768 -> 512), [1, T, 512]
    "bert_encoder": "/encoder/bert_encoder/Add_output_0",
    # text encoder (embedding, 3 x conv5/LayerNorm/LeakyReLU(0.2), BiLSTM) = t_en, [1, 512, T]
    "t_en": "/encoder/text_encoder/Transpose_2_output_0",
    # duration encoder (3 x BiLSTM + AdaLayerNorm, style concatenated) = d, [1, T, 640]
    "dur_encoder": "/encoder/predictor/text_encoder/Concat_4_output_0",
    # predictor BiLSTM over d, [1, T, 512]
    "dur_lstm": "/encoder/predictor/lstm/Transpose_2_output_0",
    # duration_proj Linear(512 -> 50) before the sigmoid, [1, T, 50]
    "dur_logits": "/encoder/predictor/duration_proj/linear_layer/Add_output_0",
    # sum of sigmoid(dur_logits) over the 50, before / speed and rounding, [1, T]
    "dur_sum": "/encoder/predictor/ReduceSum_output_0",
    # round_half_even(dur_sum / speed) clipped to >= 1, int64 [T]
    "pred_dur": "/encoder/Cast_output_0",
    # en = d^T x alignment, [1, 640, F]
    "en": "/encoder/MatMul_output_0",
    # F0 and N predictions (shared BiLSTM, 3 AdainResBlk1d each, 1x1 proj), [1, 2F]
    "f0": "/encoder/Reshape_output_0",
    "n": "/encoder/Reshape_1_output_0",
    # asr = t_en x alignment, the decoder's input, [1, 512, F]
    "asr": "/encoder/MatMul_1_output_0",
    # decoder.encode AdainResBlk1d output, [1, 1024, F]
    "dec_encode": "/decoder/decoder/encode/Div_3_output_0",
    # decoder.decode.3 output (upsampled x2), the generator's input, [1, 512, 2F]
    "dec_out": "/decoder/decoder/decode.3/Div_4_output_0",
    # harmonic source tanh(Linear(9 sines)), [1, S, 1]
    "har_source": "/decoder/decoder/generator/m_source/l_tanh/Tanh_output_0",
    # STFT of the reflect-padded source, [1, K, 11, 2] (real, imag)
    "har_stft": "/decoder/decoder/generator/STFT_output_0",
    # [magnitude(11); phase(11)] fed to noise_convs, [1, 22, K]
    "har": "/decoder/decoder/generator/Concat_3_output_0",
    # conv_post output: 11 log-magnitudes then 11 phase pre-activations, [1, 22, K]
    "conv_post": "/decoder/decoder/generator/conv_post/Conv_output_0",
    # iSTFT ConvTranspose output before the window_sum division, x4 and trim, [1, 1, 5K + 15]
    "istft_raw": "/decoder/decoder/generator/istft/stft/ConvTranspose_output_0",
    # the graph output, [S]
    "audio": "audio",
}


def voice_pack(voices_dir: Path, voice: str) -> np.ndarray:
    """A kokoro-js voice file: raw little-endian f32 [510, 1, 256]."""
    pack = np.fromfile(voices_dir / f"{voice}.bin", dtype="<f4")
    return pack.reshape(510, 1, 256)


def style_row(n_tokens: int) -> int:
    """The pack row kokoro-onnx 0.6.1 uses: `voice[min(n, 510) - 1]`, n = tokens without pads."""
    return min(n_tokens, 510) - 1


def phonemize(text: str, lang: str) -> tuple[str, list[int]]:
    """kokoro-onnx's own front end: espeak-ng IPA (its bundled library), vocab filter, ids."""
    from kokoro_onnx.tokenizer import Tokenizer

    tok = Tokenizer()
    phonemes = tok.phonemize(text, lang)
    phonemes = " ".join(phonemes.split())
    return phonemes, tok.tokenize(phonemes)


CASES = [
    # name, voice, lang, speed, text
    ("hello", "af_heart", "en-us", 1.0, "Hello world. This is a test."),
    ("emma", "bf_emma", "en-gb", 1.25, "Thank you."),
]
# What each case keeps (the fixtures stay small): "hello" covers the encoder and predictor
# stages, "emma" (shorter) everything, with the decoder's and generator's inputs in full so
# that those modules can be checked alone, and the generator's large internals as crops of one
# alignment frame (600 samples, 120 STFT frames) where F0 peaks.
CASE_STAGES = {
    "hello": ["bert_encoder", "t_en", "dur_encoder", "dur_logits", "dur_sum", "pred_dur", "f0", "n", "audio"],
    "emma": [
        "bert", "bert_encoder", "t_en", "dur_encoder", "dur_logits", "dur_sum", "pred_dur",
        "f0", "n", "asr", "dec_out", "audio",
    ],
}
CROPPED = ["har_source", "har_stft", "har", "conv_post", "istft_raw"]


def case_inputs(voices_dir: Path, voice: str, lang: str, speed: float, text: str):
    phonemes, ids = phonemize(text, lang)
    row = style_row(len(ids))
    style = voice_pack(voices_dir, voice)[row]  # [1, 256]
    feeds = {
        "tokens": np.array([[0, *ids, 0]], dtype=np.int64),
        "style": style.astype(np.float32),
        "speed": np.array([speed], dtype=np.float32),
    }
    return phonemes, row, feeds


def _crop(stage: str, arr: np.ndarray, frame: int) -> np.ndarray:
    """One alignment frame of a generator tensor: samples [600a, 600a+600), STFT frames [120a, 120a+120)."""
    s0, k0 = 600 * frame, 120 * frame
    if stage in ("har_source",):
        return arr[0, s0 : s0 + 600, 0]
    if stage == "istft_raw":
        return arr[0, 0, s0 : s0 + 600]
    if stage == "har_stft":
        return arr[0, k0 : k0 + 120]
    return arr[0, :, k0 : k0 + 120]


def run_stages(model: onnx.ModelProto, feeds: dict, stages: list[str], threads: int = 1) -> dict:
    names = [STAGES[s] for s in stages]
    sess = session(with_outputs(model, [n for n in names if n != "audio"]), threads)
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    return {s: outs[STAGES[s]] for s in stages}


def _kokoro_onnx_audio(int8_path: Path, voices_dir: Path, voice: str, phonemes: str, speed: float) -> np.ndarray:
    """kokoro-onnx's own untrimmed synthesis of `phonemes`, to check that our feeds are its feeds."""
    import tempfile

    from kokoro_onnx import Kokoro

    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "voices.npz"
        np.savez(npz, **{voice: voice_pack(voices_dir, voice)})
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(str(int8_path), so, providers=["CPUExecutionProvider"])
        k = Kokoro.from_session(sess, str(npz))
        audio, _ = k._create_audio(phonemes, k.voices[voice], speed)
    return audio


def make_case_fixtures(int8_path: Path, f32: onnx.ModelProto, voices_dir: Path, out: Path) -> list[dict]:
    int8 = onnx.load(str(int8_path))
    report = []
    for name, voice, lang, speed, text in CASES:
        phonemes, row, feeds = case_inputs(voices_dir, voice, lang, speed, text)
        every = list(STAGES)
        ref = run_stages(f32, feeds, every)
        q = run_stages(int8, feeds, ["dur_sum", "pred_dur", "f0", "bert_encoder", "t_en", "audio"])
        theirs = _kokoro_onnx_audio(int8_path, voices_dir, voice, phonemes, speed)
        if not np.array_equal(theirs, q["audio"]):
            raise SystemExit(f"{name}: kokoro-onnx's own run differs from ours on the int8 graph")
        n_frames = int(ref["pred_dur"].sum())
        f0 = ref["f0"].reshape(-1)[: 2 * n_frames].reshape(n_frames, 2).mean(1)
        frame = int(np.argmax(f0))
        arrays = {
            "tokens": feeds["tokens"][0],
            "style": feeds["style"][0],
            "style_row": np.int64(row),
            "speed": np.float32(speed),
            "crop_frame": np.int64(frame),
        }
        for st in CASE_STAGES[name]:
            a = ref[st]
            arrays[st] = a.reshape(-1) if st in ("pred_dur", "dur_sum", "audio", "f0", "n") else a[0]
        if name == "emma":
            for st in CROPPED:
                arrays[st + "_crop"] = _crop(st, ref[st], frame)
        for k, v in arrays.items():
            if v.dtype == np.float64:
                arrays[k] = v.astype(np.float32)
        np.savez(out / f"{name}.npz", **arrays)
        np.savez(out / f"int8_{name}.npz", pred_dur=q["pred_dur"].reshape(-1), audio=q["audio"].reshape(-1))
        ds = ref["dur_sum"].reshape(-1) / speed
        margin = float(np.abs(ds - np.floor(ds) - 0.5).min())
        report.append(
            {
                "case": name, "voice": voice, "lang": lang, "speed": speed, "text": text,
                "phonemes": phonemes, "tokens": len(arrays["tokens"]), "style_row": row,
                "frames": n_frames, "samples": int(ref["audio"].size), "crop_frame": frame,
                "round_margin": margin, "ref": ref, "int8": q,
                "shapes": {k: (tuple(v.shape), str(v.dtype)) for k, v in arrays.items()},
            }
        )
    return report


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    return float(np.corrcoef(a, b)[0, 1])


def compare_report(report: list[dict]) -> str:
    """Rewrite vs int8, per case: what moves and by how much."""
    lines = []
    for r in report:
        ref, q = r["ref"], r["int8"]
        pd_r, pd_q = ref["pred_dur"].reshape(-1), q["pred_dur"].reshape(-1)
        line = (
            f"{r['case']}: T={r['tokens']} durations differing {int((pd_r != pd_q).sum())}/{pd_r.size} "
            f"(max |diff| {int(np.abs(pd_r - pd_q).max())}), frames f32 {pd_r.sum()} vs int8 {pd_q.sum()}; "
            f"dur_sum max |diff| {float(np.abs(ref['dur_sum'] - q['dur_sum']).max()):.4f}; "
            f"corr bert_encoder {_corr(ref['bert_encoder'], q['bert_encoder']):.4f}, t_en {_corr(ref['t_en'], q['t_en']):.4f}"
        )
        a_r, a_q = ref["audio"].reshape(-1), q["audio"].reshape(-1)
        if a_r.size == a_q.size:
            f0_r, f0_q = ref["f0"].reshape(-1), q["f0"].reshape(-1)
            voiced = (f0_r > 10) & (f0_q > 10)
            line += (
                f"; audio corr {_corr(a_r, a_q):.4f}, F0 voiced mean |diff| {float(np.abs(f0_r - f0_q)[voiced].mean()):.2f} Hz"
            )
        else:
            line += f"; audio lengths {a_r.size} vs {a_q.size}"
        # the envelope is what a loose check can hold the port to
        n = min(a_r.size, a_q.size) // 600
        env_r = np.sqrt((a_r[: 600 * n].reshape(n, 600) ** 2).mean(1))
        env_q = np.sqrt((a_q[: 600 * n].reshape(n, 600) ** 2).mean(1))
        line += f"; RMS envelope (600-sample frames) corr {_corr(env_r, env_q):.4f}"
        line += f"; RMS f32 {float(np.sqrt((a_r**2).mean())):.4f} int8 {float(np.sqrt((a_q**2).mean())):.4f}"
        lines.append(line)
    return "\n".join(lines)


def timing(model: onnx.ModelProto, feeds: dict, repeat: int = 3) -> float:
    sess = session(model, 1)
    sess.run(None, feeds)
    best = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, feeds)
        best.append(time.perf_counter() - t)
    return float(np.median(best))


# ---------------------------------------------------------------------------------------------
# Unit fixtures: single ops run by onnxruntime


def _single_op_model(node: onnx.NodeProto, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph([node], "unit", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def make_lstm_fixture(out: Path) -> None:
    """A bidirectional ONNX LSTM (gate order i, o, f, c), with bias, zero initial state."""
    rng = np.random.default_rng(23)
    seq, batch, inp, hid = 7, 1, 5, 8
    x = rng.standard_normal((seq, batch, inp)).astype(np.float32)
    w = (rng.standard_normal((2, 4 * hid, inp)) * 0.4).astype(np.float32)
    r = (rng.standard_normal((2, 4 * hid, hid)) * 0.4).astype(np.float32)
    b = (rng.standard_normal((2, 8 * hid)) * 0.2).astype(np.float32)
    node = helper.make_node(
        "LSTM", ["X", "W", "R", "B"], ["Y", "Y_h", "Y_c"], direction="bidirectional", hidden_size=hid
    )
    f = onnx.TensorProto.FLOAT
    model = _single_op_model(
        node,
        [helper.make_tensor_value_info(n, f, a.shape) for n, a in (("X", x), ("W", w), ("R", r), ("B", b))],
        [helper.make_tensor_value_info(n, f, None) for n in ("Y", "Y_h", "Y_c")],
    )
    y, yh, yc = session(model).run(None, {"X": x, "W": w, "R": r, "B": b})
    np.savez(out / "lstm.npz", x=x, w=w, r=r, b=b, y=y, y_h=yh, y_c=yc)
    _check_lstm_numpy(x, w, r, b, y)


def _check_lstm_numpy(x, w, r, b, y) -> None:
    """The layout as documented, in numpy: must reproduce onnxruntime's Y."""
    hid = r.shape[2]

    def sig(v):
        return 1 / (1 + np.exp(-v))

    for d in range(2):
        h = np.zeros(hid, np.float32)
        c = np.zeros(hid, np.float32)
        steps = range(x.shape[0]) if d == 0 else reversed(range(x.shape[0]))
        for t in steps:
            g = w[d] @ x[t, 0] + r[d] @ h + b[d, : 4 * hid] + b[d, 4 * hid :]
            i, o, f, cc = (g[k * hid : (k + 1) * hid] for k in range(4))
            c = sig(f) * c + sig(i) * np.tanh(cc)
            h = sig(o) * np.tanh(c)
            if np.abs(h - y[t, d, 0]).max() > 1e-5:
                raise SystemExit("LSTM layout check failed")


def make_dqlstm_check() -> tuple[float, float]:
    """DynamicQuantizeLSTM vs LSTM with the weights dequantized and transposed as the rewrite does.

    Only activations are quantized on the int8 side, so the two agree to quantization noise; a
    wrong transpose or gate order would not."""
    rng = np.random.default_rng(5)
    seq, inp, hid = 9, 6, 4
    x = rng.standard_normal((seq, 1, inp)).astype(np.float32)
    wq = rng.integers(-127, 128, (2, inp, 4 * hid)).astype(np.int8)
    rq = rng.integers(-127, 128, (2, hid, 4 * hid)).astype(np.int8)
    ws = np.array([0.004, 0.006], np.float32)
    rs = np.array([0.005, 0.003], np.float32)
    zp = np.zeros(2, np.int8)
    b = (rng.standard_normal((2, 8 * hid)) * 0.2).astype(np.float32)
    f = onnx.TensorProto.FLOAT
    inits = [
        numpy_helper.from_array(a, n)
        for n, a in (("Wq", wq), ("Rq", rq), ("B", b), ("ws", ws), ("rs", rs), ("zp", zp))
    ]
    q = helper.make_node(
        "DynamicQuantizeLSTM", ["X", "Wq", "Rq", "B", "", "", "", "", "ws", "zp", "rs", "zp"], ["Y"],
        domain="com.microsoft", direction="bidirectional", hidden_size=hid,
    )
    mq = helper.make_model(
        helper.make_graph([q], "q", [helper.make_tensor_value_info("X", f, x.shape)],
                          [helper.make_tensor_value_info("Y", f, None)], inits),
        opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)], ir_version=9,
    )
    full = rewrite_to_f32(mq)
    yq = session(mq).run(None, {"X": x})[0]
    yf = session(full).run(None, {"X": x})[0]
    # The same weights read with PyTorch's gate order (i, f, g, o) instead: what a layout slip costs.
    perm = np.concatenate([np.arange(k * hid, (k + 1) * hid) for k in (0, 2, 3, 1)])
    wrong = onnx.ModelProto.FromString(full.SerializeToString())
    for init in wrong.graph.initializer:
        a = numpy_helper.to_array(init)
        if init.name.endswith("_dequantized"):
            init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(a[:, perm]), init.name))
    yw = session(wrong).run(None, {"X": x})[0]
    return float(np.abs(yq - yf).max()), float(np.abs(yq - yw).max())


# Every Resize of the graph, as (fixture name, mode, coordinate_transformation_mode, nearest_mode,
# scale on the last axis, input length, where it is used).
RESIZES = [
    ("resize_nearest_x2", "nearest", "asymmetric", "floor", 2.0, 13,
     "F0.1/N.1 and decoder decode.3 upsample (AdainResBlk1d upsample)"),
    ("resize_nearest_x300", "nearest", "asymmetric", "floor", 300.0, 4, "generator f0_upsamp"),
    ("resize_linear_down300", "linear", "half_pixel", "floor", 1.0 / 300.0, 1200,
     "l_sin_gen Resize: rad values down by 300 (no antialias)"),
    ("resize_linear_x300", "linear", "half_pixel", "floor", 300.0, 4, "l_sin_gen Resize_1: phase up by 300"),
]


def make_resize_fixtures(out: Path) -> None:
    rng = np.random.default_rng(7)
    f = onnx.TensorProto.FLOAT
    for name, mode, ctm, nm, scale, length, _ in RESIZES:
        x = rng.standard_normal((1, 2, length)).astype(np.float32)
        scales = np.array([1.0, 1.0, scale], np.float32)  # as the graph stores it (f32)
        node = helper.make_node(
            "Resize", ["X", "", "scales"], ["Y"], mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nm
        )
        model = _single_op_model(
            node, [helper.make_tensor_value_info("X", f, x.shape)], [helper.make_tensor_value_info("Y", f, None)],
            [numpy_helper.from_array(scales, "scales")],
        )
        y = session(model).run(None, {"X": x})[0]
        np.savez(out / f"{name}.npz", x=x, scales=scales, y=y)


# ---------------------------------------------------------------------------------------------
# Graph layout: the weights that carry no parameter name


def anonymous_initializers(model: onnx.ModelProto) -> list[tuple]:
    """(name, dtype, shape, first consumer node, its input index, number of consumers) for every
    float/int8/uint8 initializer of two or more elements whose name is not a state-dict name
    (`encoder.*`, `decoder.*`): a loader can only place these by the node that consumes them."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    consumers: dict[str, list[tuple[str, int]]] = {}
    for n in g.node:
        for k, i in enumerate(n.input):
            if i in inits:
                consumers.setdefault(i, []).append((n.name, k))
    names = {onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.INT8: "i8", onnx.TensorProto.UINT8: "u8"}
    rows = []
    for i in g.initializer:
        size = int(np.prod(i.dims)) if i.dims else 1
        if i.name.startswith(("encoder.", "decoder.")) or i.data_type not in names or size < 2:
            continue
        cs = consumers.get(i.name, [])
        rows.append((i.name, names[i.data_type], list(i.dims), cs[0][0] if cs else "", cs[0][1] if cs else -1, len(cs)))
    return rows


def write_layout(model: onnx.ModelProto, out: Path) -> None:
    with open(out / "anonymous-initializers.tsv", "w") as f:
        f.write("initializer\tdtype\tshape\tfirst_consumer\tinput_index\tconsumers\n")
        for row in anonymous_initializers(model):
            f.write("\t".join(str(x).replace(" ", "") if k == 2 else str(x) for k, x in enumerate(row)) + "\n")


# ---------------------------------------------------------------------------------------------
# The README's op semantics, in numpy, against a full run of the graph


def _linear_half_pixel(x: np.ndarray, scale: float) -> np.ndarray:
    """Resize linear / half_pixel on the last axis, coordinates in f32 as onnxruntime computes them."""
    f32 = np.float32
    s, n_in = f32(scale), x.shape[-1]
    n = int(np.floor(f32(n_in) * s))
    u = np.clip((np.arange(n, dtype=f32) + f32(0.5)) / s - f32(0.5), f32(0), f32(n_in - 1)).astype(f32)
    i0 = np.floor(u).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w = (u - i0.astype(f32)).astype(f32)
    return (x[..., i0] * (f32(1) - w) + x[..., i1] * w).astype(f32)


def check_semantics(f32: onnx.ModelProto, voices_dir: Path, out: Path) -> None:
    """Re-derives alignment, sine source, STFT, magnitude/phase and iSTFT from the stage tensors
    and the initializers, as the README states them; fails if any differs beyond its bound."""
    inits = {i.name: numpy_helper.to_array(i) for i in f32.graph.initializer}
    window = next(inits[n.input[2]] for n in f32.graph.node if n.op_type == "STFT")
    _, voice, lang, speed, text = CASES[1]
    _, _, feeds = case_inputs(voices_dir, voice, lang, speed, text)
    r = run_stages(f32, feeds, list(STAGES))
    errors = {}

    pd = r["pred_dur"].reshape(-1)
    edges = np.concatenate([[0], np.cumsum(pd)])
    aln = np.zeros((pd.size, edges[-1]), np.float32)
    for i in range(pd.size):
        aln[i, edges[i] : edges[i + 1]] = 1
    errors["asr"] = (np.abs(r["t_en"][0] @ aln - r["asr"][0]).max(), 0.0)
    errors["en"] = (np.abs(r["dur_encoder"][0].T @ aln - r["en"][0]).max(), 0.0)

    f = np.float32
    up = np.repeat(r["f0"].reshape(1, 1, -1).astype(f), 300, axis=-1)
    rad = up * np.arange(1, 10, dtype=f).reshape(1, 9, 1) / f(24000)
    rad = rad - np.floor(rad)
    phase = np.cumsum(_linear_half_pixel(rad, 1 / 300), axis=-1, dtype=f) * f(2) * f(np.pi) * f(300)
    sines = np.sin(_linear_half_pixel(phase.astype(f), 300.0)) * f(0.1) * (up > 10).astype(f)
    w = inits["onnx::MatMul_6993"].reshape(9)
    b = inits["decoder.decoder.generator.m_source.l_linear.bias"]
    har_source = np.tanh(np.einsum("h,bht->bt", w, sines) + b)
    errors["har_source"] = (np.abs(har_source[0] - r["har_source"][0, :, 0]).max(), 5e-4)

    x = np.pad(r["har_source"][0, :, 0].astype(np.float64), 10, mode="reflect")
    k = (x.size - 20) // 5 + 1
    frames = np.stack([x[5 * i : 5 * i + 20] * window for i in range(k)])
    spec = np.fft.rfft(frames, axis=1)
    errors["har_stft"] = (np.abs(np.stack([spec.real, spec.imag], -1) - r["har_stft"][0]).max(), 1e-5)

    re, im = r["har_stft"][0, ..., 0].T, r["har_stft"][0, ..., 1].T
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.arctan(im / re)
    pi = f(np.pi)
    ph = np.where(re < 0, np.where(im > 0, a + pi, a - pi), a)
    errors["har magnitude"] = (np.abs(np.sqrt(re * re + im * im) - r["har"][0, :11]).max(), 1e-6)
    errors["har phase"] = (np.abs(ph - r["har"][0, 11:]).max(), 1e-6)

    cp = r["conv_post"][0].astype(np.float64)
    mag, p = np.exp(cp[:11]), np.sin(cp[11:])
    spec = np.concatenate([mag * np.cos(p), mag * np.sin(p)], 0)
    basis = inits["decoder.decoder.generator.stft.istft.stft.inverse_basis"][:, 0, :]
    y = np.zeros(5 * (spec.shape[1] - 1) + 20)
    for i in range(spec.shape[1]):
        y[5 * i : 5 * i + 20] += spec[:, i] @ basis
    errors["istft_raw"] = (np.abs(y - r["istft_raw"][0, 0]).max(), 1e-6)
    ws = inits["decoder.decoder.generator.stft.istft.stft.window_sum"]
    idx = np.nonzero(ws > np.finfo(np.float32).tiny)[0]
    y[idx] /= ws[idx]
    errors["audio from conv_post"] = (np.abs(4 * y[10:-10] - r["audio"]).max(), 1e-5)

    for name, op, ctm, _, scale, _, _ in RESIZES:
        z = np.load(out / f"{name}.npz")
        xr = z["x"]
        got = np.repeat(xr, int(scale), axis=-1) if op == "nearest" else _linear_half_pixel(xr, scale)
        errors[name] = (np.abs(got - z["y"]).max(), 1e-6 if op == "linear" else 0.0)

    bad = []
    for name, (err, bound) in errors.items():
        print(f"  {name}: max |diff| {err:.3g} (bound {bound:g})")
        if not err <= bound:
            bad.append(name)
    if bad:
        raise SystemExit(f"semantics differ from the README: {bad}")


# ---------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd in ("rewrite", "fixtures", "compare", "semantics"):
        p = sub.add_parser(cmd)
        p.add_argument("--int8", type=Path, required=True, help="kokoro-v1.0.int8.onnx")
        if cmd == "rewrite":
            p.add_argument("--out", type=Path, required=True)
        else:
            p.add_argument("--voices", type=Path, required=True, help="directory of <voice>.bin packs")
        if cmd in ("fixtures", "semantics"):
            p.add_argument("--out", type=Path, default=Path("crates/models/tests/fixtures/kokoro"))
    args = ap.parse_args()

    int8 = onnx.load(str(args.int8))
    f32 = rewrite_to_f32(int8)
    if args.cmd == "rewrite":
        onnx.save(f32, str(args.out))
        return
    if args.cmd == "semantics":
        check_semantics(f32, args.voices, args.out)
        return
    if args.cmd == "fixtures":
        args.out.mkdir(parents=True, exist_ok=True)
        write_layout(int8, args.out)
        make_lstm_fixture(args.out)
        make_resize_fixtures(args.out)
        ok, wrong = make_dqlstm_check()
        print(f"DynamicQuantizeLSTM vs rewritten LSTM, max |diff|: {ok:.2e} (gates misread: {wrong:.2e})")
        report = make_case_fixtures(args.int8, f32, args.voices, args.out)
    else:
        report = []
        for name, voice, lang, speed, text in CASES:
            _, _, feeds = case_inputs(args.voices, voice, lang, speed, text)
            every = ["bert_encoder", "t_en", "dur_sum", "pred_dur", "f0", "audio"]
            report.append({"case": name, "tokens": feeds["tokens"].size,
                           "ref": run_stages(f32, feeds, every), "int8": run_stages(int8, feeds, every)})
    for r in report:
        if "shapes" in r:
            print(f"{r['case']}: {r['voice']} {r['speed']} {r['text']!r} -> {r['phonemes']!r}, row {r['style_row']}, "
                  f"F={r['frames']}, crop frame {r['crop_frame']}, rounding margin {r['round_margin']:.4f}")
            for k, (shape, dt) in r["shapes"].items():
                print(f"    {k}: {shape} {dt}")
    print(compare_report(report))
    _, _, feeds = case_inputs(args.voices, *CASES[0][1:])
    print(f"onnxruntime {ort.__version__}, 1 thread, {CASES[0][0]}: "
          f"int8 {timing(int8, feeds):.3f} s, f32 {timing(f32, feeds):.3f} s")


if __name__ == "__main__":
    main()
