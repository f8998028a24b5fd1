//! The tests of [`super`] (Kokoro's weights by name): synthetic graphs for every way an
//! initializer is consumed and dequantized, then the real int8 file against the module doc's
//! table. A file of their own, as `weights.rs` is long enough with the table.

use super::super::dequantize::canonical_module;
use super::*;
use crate::onnx::{data_type, AttributeProto, NodeProto};
use prost::bytes::Bytes;

fn init(name: &str, data_type: i32, dims: &[i64], raw: Vec<u8>) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type,
        name: name.into(),
        raw_data: Bytes::from(raw),
        ..Default::default()
    }
}

fn f32s(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    init(
        name,
        data_type::FLOAT,
        dims,
        values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
}

fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: name.into(),
        op_type: op.into(),
        attribute: vec![],
    }
}

fn values(w: &Weights, name: &str) -> (Vec<usize>, Vec<f32>) {
    let t = w.get(name).unwrap();
    (
        t.dims().to_vec(),
        t.flatten_all().unwrap().to_vec1().unwrap(),
    )
}

#[test]
fn scopes_collapse_to_state_dict_modules() {
    for (node, module) in [
        ("/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant", "text_encoder.cnn.0.0"),
        ("/decoder/decoder/generator/ups.0/ConvTranspose", "decoder.generator.ups.0"),
        ("/decoder/decoder/asr_res/asr_res.0/Conv_quant", "decoder.asr_res.0"),
        ("/encoder/F0.1/conv1x1/Conv_quant", "predictor.F0.1.conv1x1"),
        ("/encoder/shared/LSTM_quant", "predictor.shared"),
        ("/encoder/N_proj/Conv_quant", "predictor.N_proj"),
        ("/encoder/predictor/lstm/LSTM_quant", "predictor.lstm"),
        (
            "/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/attention/query_11/MatMul_quant",
            "bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query",
        ),
        (
            "/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/ffn_output/MatMul_quant",
            "bert.encoder.albert_layer_groups.0.albert_layers.0.ffn_output",
        ),
        ("/encoder/bert_encoder/MatMul_quant", "bert_encoder"),
        ("/predictor/F0.0/conv1/Conv", "predictor.F0.0.conv1"),
    ] {
        assert_eq!(canonical_module(node).as_deref(), Some(module), "{node}");
    }
    assert_eq!(
        state_dict_name("decoder.decoder.generator.resblocks.1.alpha2.0").as_deref(),
        Some("decoder.generator.resblocks.1.alpha2.0")
    );
    assert_eq!(
        state_dict_name("encoder.predictor.F0.0.conv1.bias").as_deref(),
        Some("predictor.F0.0.conv1.bias")
    );
    assert_eq!(state_dict_name("onnx::LSTM_6929"), None);
    assert_eq!(state_dict_name("encoder.bert_encoder.weight_scale"), None);
}

/// One of each quantized consumer, with values small enough to check by hand.
#[test]
fn dequantizes_each_consumer_as_onnxruntime_would() {
    let graph = GraphProto {
        node: vec![
            node(
                "/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant",
                "ConvInteger",
                &[
                    "x",
                    "/encoder/text_encoder/cnn.0/Mul_output_0_quantized",
                    "xz",
                    "czp",
                ],
                &["c"],
            ),
            node(
                "/encoder/bert_encoder/MatMul_quant",
                "MatMulInteger",
                &["x", "onnx::MatMul_1_quantized", "xz", "mzp"],
                &["m"],
            ),
            node(
                "/encoder/bert_encoder/MatMul_quant_scales_mul",
                "Mul",
                &["xs", "onnx::MatMul_1_scale"],
                &["ms"],
            ),
            node(
                "/encoder/shared/LSTM_quant",
                "DynamicQuantizeLSTM",
                &[
                    "x",
                    "lw_quantized",
                    "lr_quantized",
                    "lb",
                    "",
                    "",
                    "",
                    "",
                    "lws",
                    "lzp",
                    "lrs",
                    "lzp",
                ],
                &["y"],
            ),
            node(
                "/encoder/bert/embeddings/word_embeddings/Gather_quant",
                "Gather",
                &[
                    "encoder.bert.embeddings.word_embeddings.weight_quantized",
                    "ids",
                ],
                &["g"],
            ),
            node(
                "/encoder/bert/embeddings/word_embeddings/Gather_quant_DequantizeLinear",
                "DequantizeLinear",
                &[
                    "g",
                    "encoder.bert.embeddings.word_embeddings.weight_scale",
                    "gzp",
                ],
                &["e"],
            ),
            node(
                "/decoder/decoder/generator/resblocks.0/Mul",
                "Mul",
                &["decoder.decoder.generator.resblocks.0.alpha1.0", "h"],
                &["h2"],
            ),
            node(
                "encoder.text_encoder.cnn.0.0.bias_tmp_qaunt",
                "Div",
                &["encoder.text_encoder.cnn.0.0.bias", "s"],
                &["b"],
            ),
        ],
        initializer: vec![
            init(
                "/encoder/text_encoder/cnn.0/Mul_output_0_quantized",
                data_type::UINT8,
                &[1, 2, 2],
                vec![10, 12, 9, 255],
            ),
            init("czp", data_type::UINT8, &[], vec![10]),
            f32s(
                "/encoder/text_encoder/cnn.0/Mul_output_0_scale",
                &[],
                &[0.5],
            ),
            // [K=2, N=3], per-column scales.
            init(
                "onnx::MatMul_1_quantized",
                data_type::INT8,
                &[2, 3],
                [1i8, 2, 3, -1, -2, -3].iter().map(|&v| v as u8).collect(),
            ),
            init("mzp", data_type::INT8, &[3], vec![0, 0, 0]),
            f32s("onnx::MatMul_1_scale", &[3], &[1.0, 10.0, 100.0]),
            // W [2 dirs, in=1, 4H=4], R [2, H=1, 4].
            init(
                "lw_quantized",
                data_type::INT8,
                &[2, 1, 4],
                vec![1, 2, 3, 4, 5, 6, 7, 8],
            ),
            init("lr_quantized", data_type::INT8, &[2, 1, 4], vec![1; 8]),
            f32s("lb", &[2, 8], &[0.25; 16]),
            f32s("lws", &[2], &[1.0, -1.0]),
            f32s("lrs", &[2], &[2.0, 3.0]),
            init("lzp", data_type::INT8, &[2], vec![0, 1]),
            init(
                "encoder.bert.embeddings.word_embeddings.weight_quantized",
                data_type::INT8,
                &[2, 2],
                [-3i8, 0, 3, 6].iter().map(|&v| v as u8).collect(),
            ),
            f32s(
                "encoder.bert.embeddings.word_embeddings.weight_scale",
                &[],
                &[0.25],
            ),
            init("gzp", data_type::INT8, &[], vec![3]),
            f32s(
                "decoder.decoder.generator.resblocks.0.alpha1.0",
                &[1, 2, 1],
                &[0.5, 2.0],
            ),
            f32s("encoder.text_encoder.cnn.0.0.bias", &[2], &[1.0, -1.0]),
        ],
    };
    let w = Weights::from_graph(&graph, Path::new("k.onnx"), &Device::Cpu).unwrap();
    assert_eq!(
        values(&w, "text_encoder.cnn.0.0.weight"),
        (vec![1, 2, 2], vec![0.0, 1.0, -0.5, 122.5])
    );
    // Stored [K, N] → [N, K], column n scaled by scale[n].
    assert_eq!(
        values(&w, "bert_encoder.weight"),
        (vec![3, 2], vec![1.0, -1.0, 20.0, -20.0, 300.0, -300.0])
    );
    // W [2, 1, 4] → [2, 4, 1]; direction 1 has scale −1, zero point 1.
    assert_eq!(
        values(&w, "predictor.shared.W"),
        (
            vec![2, 4, 1],
            vec![1.0, 2.0, 3.0, 4.0, -4.0, -5.0, -6.0, -7.0]
        )
    );
    assert_eq!(
        values(&w, "predictor.shared.R"),
        (vec![2, 4, 1], vec![2.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0])
    );
    assert_eq!(values(&w, "predictor.shared.B").0, vec![2, 8]);
    assert_eq!(
        values(&w, "bert.embeddings.word_embeddings.weight"),
        (vec![2, 2], vec![-1.5, -0.75, 0.0, 0.75])
    );
    assert_eq!(
        values(&w, "decoder.generator.resblocks.0.alpha1.0").1,
        vec![0.5, 2.0]
    );
    assert_eq!(values(&w, "text_encoder.cnn.0.0.bias").1, vec![1.0, -1.0]);
    // Scales and zero points are no parameters of their own.
    assert_eq!(w.tensors.len(), 8, "{:?}", w.names_with_prefix(""));
    let err = w.get("decoder.nothing").unwrap_err().to_string();
    assert!(
        err.contains("k.onnx") && err.contains("decoder.nothing"),
        "{err}"
    );
}

#[test]
fn float_graphs_load_by_consumer_too() {
    let mut gemm = node(
        "/encoder/predictor/duration_proj/linear_layer/Gemm",
        "Gemm",
        &["x", "onnx::Gemm_1", "onnx::Gemm_2"],
        &["y"],
    );
    gemm.attribute.push(AttributeProto {
        name: "transB".into(),
        i: 1,
        ..Default::default()
    });
    let half: Vec<u8> = [0x3c00u16, 0xc000]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let graph = GraphProto {
        node: vec![
            gemm,
            node(
                "/encoder/text_encoder/lstm/LSTM",
                "LSTM",
                &["x", "onnx::LSTM_1", "onnx::LSTM_2", "onnx::LSTM_3"],
                &["y"],
            ),
            node(
                "/decoder/decoder/generator/ups.0/ConvTranspose",
                "ConvTranspose",
                &["x", "/decoder/decoder/generator/Mul_output_0", "h"],
                &["y"],
            ),
        ],
        initializer: vec![
            f32s("onnx::Gemm_1", &[1, 2], &[1.0, 2.0]),
            f32s("onnx::Gemm_2", &[1], &[3.0]),
            f32s("onnx::LSTM_1", &[2, 4, 1], &[0.0; 8]),
            f32s("onnx::LSTM_2", &[2, 4, 1], &[0.0; 8]),
            f32s("onnx::LSTM_3", &[2, 8], &[0.0; 16]),
            init(
                "/decoder/decoder/generator/Mul_output_0",
                data_type::FLOAT16,
                &[1, 1, 2],
                half,
            ),
        ],
    };
    let w = Weights::from_graph(&graph, Path::new("f.onnx"), &Device::Cpu).unwrap();
    assert_eq!(
        values(&w, "predictor.duration_proj.linear_layer.weight"),
        (vec![1, 2], vec![1.0, 2.0])
    );
    assert_eq!(
        values(&w, "predictor.duration_proj.linear_layer.bias").1,
        vec![3.0]
    );
    assert_eq!(values(&w, "text_encoder.lstm.W").0, vec![2, 4, 1]);
    assert_eq!(values(&w, "text_encoder.lstm.B").0, vec![2, 8]);
    assert_eq!(
        values(&w, "decoder.generator.ups.0.weight").1,
        vec![1.0, -2.0]
    );
}

#[test]
fn a_missing_scale_is_an_error_naming_the_tensor() {
    let graph = GraphProto {
        node: vec![node(
            "/decoder/decoder/F0_conv/Conv_quant",
            "ConvInteger",
            &["x", "w_quantized"],
            &["y"],
        )],
        initializer: vec![init("w_quantized", data_type::UINT8, &[1, 1, 1], vec![3])],
    };
    let err = Weights::from_graph(&graph, Path::new("k.onnx"), &Device::Cpu)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("k.onnx") && err.contains("w_quantized") && err.contains("w_scale"),
        "{err}"
    );
}

/// The real model file.
mod real_file {
    use super::*;
    use crate::kokoro::testing::model_path;

    /// The shipped int8 file yields the names and shapes the module doc lists.
    #[test]
    fn the_int8_file_loads_under_the_documented_names() {
        let start = std::time::Instant::now();
        let w = Weights::from_onnx(&model_path(), &Device::Cpu).unwrap();
        eprintln!(
            "Weights::from_onnx: {:.0} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
        assert_eq!(w.tensors.len(), 430, "{:?}", w.names_with_prefix(""));
        for (name, shape) in [
            ("bert.embeddings.word_embeddings.weight", &[178, 128][..]),
            (
                "bert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight",
                &[2048, 768],
            ),
            ("bert_encoder.weight", &[512, 768]),
            ("text_encoder.cnn.2.0.weight", &[512, 512, 5]),
            ("text_encoder.lstm.W", &[2, 1024, 512]),
            ("predictor.shared.R", &[2, 1024, 256]),
            ("predictor.text_encoder.lstms.5.fc.weight", &[1024, 128]),
            ("predictor.F0.1.pool.weight", &[512, 1, 3]),
            ("predictor.N_proj.weight", &[1, 256, 1]),
            ("decoder.decode.3.conv1x1.weight", &[512, 1090, 1]),
            ("decoder.generator.ups.0.weight", &[512, 256, 20]),
            (
                "decoder.generator.noise_res.1.convs1.2.weight",
                &[128, 128, 11],
            ),
            ("decoder.generator.resblocks.5.alpha2.2", &[1, 128, 1]),
            ("decoder.generator.m_source.l_linear.weight", &[1, 9]),
            ("decoder.generator.stft.window", &[20]),
            (
                "decoder.generator.stft.istft.stft.inverse_basis",
                &[22, 1, 20],
            ),
        ] {
            assert_eq!(w.get(name).unwrap().dims(), shape, "{name}");
        }
        let prefixes = [
            "bert.",
            "bert_encoder.",
            "text_encoder.",
            "predictor.",
            "decoder.",
        ];
        for name in w.names_with_prefix("") {
            assert!(prefixes.iter().any(|p| name.starts_with(p)), "{name}");
        }
        // The export's strides and dilations reach the model code through the attributes.
        let ups = w.conv_attributes("decoder.generator.ups.1").unwrap();
        assert_eq!(
            (ups.strides.as_slice(), ups.pads.as_slice()),
            (&[6][..], &[3, 3][..])
        );
        let dilated = w
            .conv_attributes("decoder.generator.resblocks.1.convs1.2")
            .unwrap();
        assert_eq!(dilated.dilations, vec![5]);
    }

    #[test]
    fn a_truncated_file_is_an_error_naming_it() {
        let bytes = std::fs::read(model_path()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cut = dir.path().join("cut.onnx");
        std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
        let err = Weights::from_onnx(&cut, &Device::Cpu)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("cut.onnx"), "{err}");
    }
}
