//! `RNN`, `LSTM` and `GRU` on packed sequences (`forward_packed`): outputs, final states and
//! every gradient against PyTorch's (tests/fixtures/rnn_packed.safetensors, written by
//! scripts/fixtures_rnn_packed.py: 2 layers, one or two directions, batch_first both ways,
//! unsorted lengths), each sequence run alone, finite differences through pack → LSTM → pad,
//! compiled training equal to eager without a graph break, and errors that name the layer, the
//! shapes and the caller's line.

use kiln::nn::utils::rnn::{pack_padded_sequence, pad_packed_sequence, PackedSequence};
use kiln::nn::{self, Module, RNNNonlinearity, RNNOpts};
use kiln::prelude::*;
use kiln::StateDict;

#[path = "common/compiled_training.rs"]
mod compiled_training;
#[path = "common/module_grad.rs"]
mod module_grad;
#[path = "common/rnn_fixture.rs"]
mod rnn_fixture;
#[path = "common/seeded.rs"]
mod seeded;
use compiled_training::Trained;
use module_grad::{check_gradients, randn64};
use rnn_fixture::{assert_close, case_state_dict, key_list, number, panic_text};
use seeded::seeded;

const HERE: &str = "tests/nn_rnn_packed.rs";

fn fixture() -> StateDict {
    rnn_fixture::load("rnn_packed.safetensors", "fixtures_rnn_packed.py")
}

/// A recurrent layer of any of the three kinds.
enum Layer {
    Rnn(nn::RNN),
    Lstm(nn::LSTM),
    Gru(nn::GRU),
}

impl Layer {
    fn new(mode: &str, input_size: usize, hidden_size: usize, opts: RNNOpts) -> Layer {
        match mode {
            "RNN" => Layer::Rnn(nn::RNN::with_opts(input_size, hidden_size, opts)),
            "LSTM" => Layer::Lstm(nn::LSTM::with_opts(input_size, hidden_size, opts)),
            "GRU" => Layer::Gru(nn::GRU::with_opts(input_size, hidden_size, opts)),
            other => panic!("unknown mode {other}"),
        }
    }

    fn module(&mut self) -> &mut dyn Module {
        match self {
            Layer::Rnn(m) => m,
            Layer::Lstm(m) => m,
            Layer::Gru(m) => m,
        }
    }

    /// The packed output, `h_n`, and `c_n` for an LSTM.
    fn run(
        &self,
        x: &PackedSequence,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
    ) -> (PackedSequence, Tensor, Option<Tensor>) {
        match self {
            Layer::Rnn(m) => {
                let (y, h) = m.forward_packed(x, h0);
                (y, h, None)
            }
            Layer::Gru(m) => {
                let (y, h) = m.forward_packed(x, h0);
                (y, h, None)
            }
            Layer::Lstm(m) => {
                let (y, (h, c)) = m.forward_packed(x, h0.zip(c0));
                (y, h, Some(c))
            }
        }
    }
}

fn usizes(t: &Tensor) -> Vec<usize> {
    t.to_vec::<i64>().into_iter().map(|v| v as usize).collect()
}

#[test]
fn packed_layers_match_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let cases = rnn_fixture::cases(&fx);
    assert_eq!(cases.len(), 9, "cases in the fixture: {cases:?}");
    for (name, text) in &cases {
        let get = |key: &str| fx.get(&format!("{name}/{key}")).cloned();
        let flag = |key: &str| number::<u8>(text, key) == 1;
        let opts = RNNOpts {
            num_layers: number(text, "num_layers"),
            bias: flag("bias"),
            batch_first: flag("batch_first"),
            dropout: 0.0,
            bidirectional: flag("bidirectional"),
            nonlinearity: if rnn_fixture::field(text, "nonlinearity") == "relu" {
                RNNNonlinearity::Relu
            } else {
                RNNNonlinearity::Tanh
            },
            proj_size: number(text, "proj_size"),
        };
        let mut layer = Layer::new(rnn_fixture::field(text, "mode"), 3, 4, opts);
        let module = layer.module();
        module.to_dtype(DType::F64);
        assert_eq!(key_list(&module.state_dict()), fx.metadata(&format!("keys:{name}")).unwrap(), "{name}: keys");
        module.load_state_dict(&case_state_dict(&fx, name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let params = module.named_parameters();

        // Packing, as PyTorch packs.
        let x = get("input").unwrap().requires_grad_(true);
        let lengths = usizes(&get("lengths").unwrap());
        let packed = pack_padded_sequence(&x, &lengths, opts.batch_first, flag("enforce_sorted"));
        assert_close(&format!("{name}: packed data"), packed.data(), &get("packed/data").unwrap());
        assert_eq!(packed.batch_sizes(), usizes(&get("packed/batch_sizes").unwrap()), "{name}: batch_sizes");
        let indices = |key: &str| get(key).map(|t| usizes(&t));
        assert_eq!(packed.sorted_indices().map(<[usize]>::to_vec), indices("packed/sorted_indices"), "{name}");
        assert_eq!(packed.unsorted_indices().map(<[usize]>::to_vec), indices("packed/unsorted_indices"), "{name}");

        // The layer on the packed batch, padded back as PyTorch pads.
        let h0 = get("h0").map(|t| t.requires_grad_(true));
        let c0 = get("c0").map(|t| t.requires_grad_(true));
        assert_eq!(h0.is_some(), flag("state"), "{name}: h0 present");
        let (y, h_n, c_n) = layer.run(&packed, h0.as_ref(), c0.as_ref());
        assert_eq!(y.batch_sizes(), packed.batch_sizes(), "{name}: the output keeps the packing");
        assert_eq!(y.sorted_indices(), packed.sorted_indices(), "{name}");
        let total_length = Some(number::<usize>(text, "total_length")).filter(|&t| t > 0);
        let (output, out_lengths) =
            pad_packed_sequence(&y, opts.batch_first, number(text, "padding_value"), total_length);
        assert_eq!(out_lengths, usizes(&get("out_lengths").unwrap()), "{name}: lengths");
        let mut results = vec![("output", "dout", output), ("h_n", "dh", h_n)];
        results.extend(c_n.map(|c| ("c_n", "dc", c)));
        let mut loss = Tensor::scalar(0.0f64);
        for (key, weight, got) in &results {
            assert_close(&format!("{name}: {key}"), got, &get(key).unwrap());
            loss = &loss + &(got * &get(weight).unwrap()).sum();
        }
        loss.backward();
        assert_close(&format!("{name}: grad input"), &x.grad().unwrap(), &get("grad/input").unwrap());
        for (key, t) in [("h0", &h0), ("c0", &c0)] {
            if let Some(t) = t {
                assert_close(&format!("{name}: grad {key}"), &t.grad().unwrap(), &get(&format!("grad/{key}")).unwrap());
            }
        }
        for (key, p) in &params {
            let g = p.grad().unwrap_or_else(|| panic!("{name}: {key} has no gradient"));
            assert_close(&format!("{name}: grad {key}"), &g, &get(&format!("grad/{key}")).unwrap());
        }
    }
}

#[test]
fn each_sequence_of_a_packed_batch_runs_as_if_alone() {
    let _seeded = seeded();
    kiln::manual_seed(51);
    let opts = RNNOpts::default().num_layers(2).bidirectional(true).proj_size(3);
    let lstm = nn::LSTM::with_opts(3, 5, opts);
    let lengths = [3, 6, 1, 4];
    let x = Tensor::randn([6, 4, 3]);
    let (h0, c0) = (Tensor::randn([4, 4, 3]), Tensor::randn([4, 4, 5]));
    let packed = pack_padded_sequence(&x, &lengths, false, false);
    let (y, (h_n, c_n)) = lstm.forward_packed(&packed, Some((&h0, &c0)));
    let (padded, _) = pad_packed_sequence(&y, false, 0.0, None);
    for (b, &n) in lengths.iter().enumerate() {
        // Sequence b on its own (unbatched), from its own initial state.
        let alone = x.select(1, b as i64).narrow(0, 0, n);
        let (h, c) = (h0.select(1, b as i64), c0.select(1, b as i64));
        let (want_y, (want_h, want_c)) = lstm.forward_with_state(&alone, Some((&h, &c)));
        let got_y = padded.select(1, b as i64).narrow(0, 0, n);
        assert!(got_y.allclose(&want_y, 1e-5, 1e-6), "sequence {b}: output {got_y} vs {want_y}");
        assert!(h_n.select(1, b as i64).allclose(&want_h, 1e-5, 1e-6), "sequence {b}: h_n");
        assert!(c_n.select(1, b as i64).allclose(&want_c, 1e-5, 1e-6), "sequence {b}: c_n");
        // Past its end the padded output is the padding value.
        let rest = padded.select(1, b as i64).narrow(0, n as i64, 6 - n);
        assert!(rest.eq(0.0).all().item::<bool>(), "sequence {b}: padding");
    }
}

#[test]
fn packed_lstm_gradients_match_finite_differences() {
    let _seeded = seeded();
    kiln::manual_seed(52);
    let opts = RNNOpts::default().num_layers(2).bidirectional(true).proj_size(2).batch_first(true);
    let lstm = nn::LSTM::with_opts(2, 3, opts);
    let inputs = vec![randn64(&[3, 4, 2]), randn64(&[4, 3, 2]), randn64(&[4, 3, 3])];
    check_gradients(lstm, inputs, |m, a| {
        let packed = pack_padded_sequence(&a[0], &[2, 4, 1], true, false);
        let (y, (h, c)) = m.forward_packed(&packed, Some((&a[1], &a[2])));
        let (out, _) = pad_packed_sequence(&y, true, 0.0, None);
        Tensor::cat(&[out.flatten(0, -1), h.flatten(0, -1), c.flatten(0, -1)], 0)
    });
}

/// A tagger over sequences of different lengths: a bidirectional LSTM on the packed batch, a
/// linear head on every padded step.
struct Tagger {
    lstm: nn::LSTM,
    head: nn::Linear,
}

impl Tagger {
    fn parameters(&self) -> Vec<Tensor> {
        [self.lstm.parameters(), self.head.parameters()].concat()
    }

    /// The tags of every step `(N, L, 2)` (zeros past each end go through the head too) and
    /// the final hidden states.
    fn run(&self, x: &Tensor, lengths: &[usize]) -> (Tensor, Tensor) {
        let packed = pack_padded_sequence(x, lengths, true, false);
        let (y, (h, _)) = self.lstm.forward_packed(&packed, None);
        let (padded, _) = pad_packed_sequence(&y, true, 0.0, Some(x.size(1)));
        (self.head.forward(&padded), h)
    }
}

/// `steps` SGD steps of the tagger on a batch of sequences of lengths 6, 2, 5 and 3, compiled
/// or eager.
fn train_tagger(compiled: bool, steps: usize) -> Trained {
    kiln::manual_seed(53);
    let lstm = nn::LSTM::with_opts(3, 4, RNNOpts::default().bidirectional(true).batch_first(true));
    let net = Tagger { lstm, head: nn::Linear::new(8, 2) };
    let x = Tensor::randn([4, 6, 3]);
    let target = Tensor::randn([4, 6, 2]);
    let criterion = nn::MSELoss::new();
    let loss = || {
        let (tags, h) = net.run(&x, &[6, 2, 5, 3]);
        criterion.forward(&tags, &target) + h.square().mean()
    };
    Trained::sgd(net.parameters(), loss, compiled, steps)
}

#[test]
fn compiled_packed_training_matches_eager() {
    let _seeded = seeded();
    let eager = train_tagger(false, 4);
    // Packing plans on the host from the lengths: one graph per step, no breaks; equal to f32
    // rounding.
    train_tagger(true, 4).assert_matches(&eager, 1e-5);
}

#[test]
fn bad_packed_inputs_name_the_layer_the_shapes_and_the_callers_line() {
    let _seeded = seeded();
    let lstm = nn::LSTM::with_opts(3, 4, RNNOpts::default().num_layers(2));
    let packed = pack_padded_sequence(&Tensor::zeros([5, 2, 3]), &[5, 2], false, true);
    let run = |x: &PackedSequence, h: Option<(&Tensor, &Tensor)>| lstm.try_forward_packed(x, h).map(drop);
    let error = |e, parts: &[&str]| rnn_fixture::assert_error(e, HERE, parts);
    let wide = pack_padded_sequence(&Tensor::zeros([5, 2, 7]), &[5, 2], false, true);
    error(run(&wide, None), &["LSTM", "[7, 7]", "input_size 3"]);
    let (h, c) = (Tensor::zeros([2, 2, 4]), Tensor::zeros([2, 2, 4]));
    assert!(run(&packed, Some((&h, &c))).is_ok());
    let bad_h = Tensor::zeros([2, 3, 4]);
    error(run(&packed, Some((&bad_h, &c))), &["LSTM", "h0", "[2, 2, 4]", "[2, 3, 4]", "2 sequences"]);
    error(run(&packed, Some((&h, &Tensor::zeros([1, 2, 4])))), &["LSTM", "c0", "[1, 2, 4]"]);
    error(run(&packed.to_dtype(DType::F64), None), &["LSTM", "float64", "float32"]);
    let gru = nn::GRU::new(3, 4);
    error(gru.try_forward_packed(&packed, Some(&Tensor::zeros([1, 4]))).map(drop), &["GRU", "h0", "[1, 2, 4]"]);
    // The panicking forms report the same at this file's line.
    for text in [
        panic_text(|| drop(lstm.forward_packed(&wide, None))),
        panic_text(|| drop(nn::RNN::new(3, 4).forward_packed(&wide, None))),
    ] {
        assert!(text.contains(&format!("(at {HERE}:")), "{text}");
        assert!(text.contains("input_size 3"), "{text}");
    }
}
