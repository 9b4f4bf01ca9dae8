//! Recurrent layers: `RNN`, `LSTM`, `GRU` and their cells against PyTorch (outputs, final states
//! and every gradient, from tests/fixtures/rnn.safetensors, written by scripts/fixtures_rnn.py),
//! finite-difference gradients, compiled training equal to eager, PyTorch's parameter names and
//! printed form, dropout between layers, and errors that name the layer, the shapes and the
//! caller's line.

use kiln::nn::{self, Module, RNNNonlinearity, RNNOpts};
use kiln::prelude::*;
use kiln::{Error, StateDict};

#[path = "common/compiled_training.rs"]
mod compiled_training;
#[path = "common/module_grad.rs"]
mod module_grad;
#[path = "common/rnn_fixture.rs"]
mod rnn_fixture;
#[path = "common/seeded.rs"]
mod seeded;
use compiled_training::Trained;
use module_grad::{check_gradients, check_second_order, randn64};
use rnn_fixture::{assert_close, case_state_dict, key_list, panic_text};
use seeded::seeded;

const HERE: &str = "tests/nn_rnn.rs";

fn fixture() -> StateDict {
    rnn_fixture::load("rnn.safetensors", "fixtures_rnn.py")
}

/// One case's configuration, as the fixture's metadata spells it.
#[derive(Debug)]
struct Config {
    mode: String,
    input_size: usize,
    hidden_size: usize,
    opts: RNNOpts,
    state: bool,
}

fn parse(text: &str) -> Config {
    let get = |key: &str| rnn_fixture::field(text, key);
    let num = |key: &str| -> usize { rnn_fixture::number(text, key) };
    let flag = |key: &str| num(key) == 1;
    let nonlinearity = match get("nonlinearity") {
        "tanh" => RNNNonlinearity::Tanh,
        "relu" => RNNNonlinearity::Relu,
        other => panic!("nonlinearity {other}"),
    };
    Config {
        mode: get("mode").to_string(),
        input_size: num("input_size"),
        hidden_size: num("hidden_size"),
        opts: RNNOpts {
            num_layers: num("num_layers"),
            bias: flag("bias"),
            batch_first: flag("batch_first"),
            dropout: 0.0,
            bidirectional: flag("bidirectional"),
            nonlinearity,
            proj_size: num("proj_size"),
        },
        state: flag("state"),
    }
}

/// A kiln module of any of the six kinds, run the way the fixture ran PyTorch's.
enum Layer {
    Rnn(nn::RNN),
    Lstm(nn::LSTM),
    Gru(nn::GRU),
    RnnCell(nn::RNNCell),
    LstmCell(nn::LSTMCell),
    GruCell(nn::GRUCell),
}

impl Layer {
    fn new(c: &Config) -> Layer {
        let (i, h, o) = (c.input_size, c.hidden_size, c.opts);
        match c.mode.as_str() {
            "RNN" => Layer::Rnn(nn::RNN::with_opts(i, h, o)),
            "LSTM" => Layer::Lstm(nn::LSTM::with_opts(i, h, o)),
            "GRU" => Layer::Gru(nn::GRU::with_opts(i, h, o)),
            "RNNCell" => Layer::RnnCell(nn::RNNCell::with_opts(i, h, o.bias, o.nonlinearity)),
            "LSTMCell" => Layer::LstmCell(nn::LSTMCell::with_bias(i, h, o.bias)),
            "GRUCell" => Layer::GruCell(nn::GRUCell::with_bias(i, h, o.bias)),
            other => panic!("unknown mode {other}"),
        }
    }

    fn module(&mut self) -> &mut dyn Module {
        match self {
            Layer::Rnn(m) => m,
            Layer::Lstm(m) => m,
            Layer::Gru(m) => m,
            Layer::RnnCell(m) => m,
            Layer::LstmCell(m) => m,
            Layer::GruCell(m) => m,
        }
    }

    /// The results under the fixture's names: `output`, `h_n` (layers), `c_n` (LSTM, LSTMCell).
    fn run(&self, x: &Tensor, h0: Option<&Tensor>, c0: Option<&Tensor>) -> Vec<(&'static str, Tensor)> {
        let state = h0.zip(c0);
        match self {
            Layer::Rnn(m) => {
                let (y, h) = m.forward_with_state(x, h0);
                vec![("output", y), ("h_n", h)]
            }
            Layer::Gru(m) => {
                let (y, h) = m.forward_with_state(x, h0);
                vec![("output", y), ("h_n", h)]
            }
            Layer::Lstm(m) => {
                let (y, (h, c)) = m.forward_with_state(x, state);
                vec![("output", y), ("h_n", h), ("c_n", c)]
            }
            Layer::RnnCell(m) => vec![("output", m.forward_with_state(x, h0))],
            Layer::GruCell(m) => vec![("output", m.forward_with_state(x, h0))],
            Layer::LstmCell(m) => {
                let (h, c) = m.forward_with_state(x, state);
                vec![("output", h), ("c_n", c)]
            }
        }
    }
}

#[test]
fn outputs_states_and_gradients_match_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let cases = rnn_fixture::cases(&fx);
    assert_eq!(cases.len(), 21, "cases in the fixture: {cases:?}");
    let mut kinds = std::collections::BTreeSet::new();
    for (name, text) in &cases {
        let config = parse(text);
        kinds.insert(config.mode.clone());
        let get = |key: &str| fx.get(&format!("{name}/{key}")).cloned();
        let mut layer = Layer::new(&config);
        let module = layer.module();
        module.to_dtype(DType::F64);
        // PyTorch's names, shapes and order, then PyTorch's state dict loads unchanged.
        assert_eq!(key_list(&module.state_dict()), fx.metadata(&format!("keys:{name}")).unwrap(), "{name}: keys");
        module.load_state_dict(&case_state_dict(&fx, name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let params = module.named_parameters();

        let x = get("input").unwrap().requires_grad_(true);
        let h0 = get("h0").map(|t| t.requires_grad_(true));
        let c0 = get("c0").map(|t| t.requires_grad_(true));
        assert_eq!(h0.is_some(), config.state, "{name}: h0 present");
        let results = layer.run(&x, h0.as_ref(), c0.as_ref());
        let mut loss = Tensor::scalar(0.0f64);
        for (key, got) in &results {
            assert_close(&format!("{name}: {key}"), got, &get(key).unwrap());
            let weight = match *key {
                "output" => "dout",
                "h_n" => "dh",
                _ => "dc",
            };
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
    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
    assert_eq!(kinds, ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]);
}

#[test]
fn bidirectional_projected_lstm_has_pytorchs_parameters() {
    let _seeded = seeded();
    let lstm = nn::LSTM::with_opts(3, 4, RNNOpts::default().num_layers(2).bidirectional(true).proj_size(2));
    // [(k, tuple(v.shape)) for k, v in nn.LSTM(3, 4, num_layers=2, bidirectional=True,
    // proj_size=2).state_dict().items()]
    let want: Vec<(&str, Vec<usize>)> = vec![
        ("weight_ih_l0", vec![16, 3]),
        ("weight_hh_l0", vec![16, 2]),
        ("bias_ih_l0", vec![16]),
        ("bias_hh_l0", vec![16]),
        ("weight_hr_l0", vec![2, 4]),
        ("weight_ih_l0_reverse", vec![16, 3]),
        ("weight_hh_l0_reverse", vec![16, 2]),
        ("bias_ih_l0_reverse", vec![16]),
        ("bias_hh_l0_reverse", vec![16]),
        ("weight_hr_l0_reverse", vec![2, 4]),
        ("weight_ih_l1", vec![16, 4]),
        ("weight_hh_l1", vec![16, 2]),
        ("bias_ih_l1", vec![16]),
        ("bias_hh_l1", vec![16]),
        ("weight_hr_l1", vec![2, 4]),
        ("weight_ih_l1_reverse", vec![16, 4]),
        ("weight_hh_l1_reverse", vec![16, 2]),
        ("bias_ih_l1_reverse", vec![16]),
        ("bias_hh_l1_reverse", vec![16]),
        ("weight_hr_l1_reverse", vec![2, 4]),
    ];
    let got: Vec<(String, Vec<usize>)> =
        lstm.state_dict().iter().map(|(k, t)| (k.to_string(), t.shape().to_vec())).collect();
    let want: Vec<(String, Vec<usize>)> = want.into_iter().map(|(k, s)| (k.to_string(), s)).collect();
    assert_eq!(got, want);
    // The fixture's PyTorch module of the same configuration lists the same.
    let listed = key_list(&lstm.state_dict());
    assert_eq!(fixture().metadata("keys:lstm_proj_2l_bidir"), Some(listed.as_str()));
    // The same tensors through named_parameters and all_weights; all train.
    let named: Vec<String> = lstm.named_parameters().into_iter().map(|(k, _)| k).collect();
    assert_eq!(named, got.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>());
    let all = lstm.all_weights();
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|w| w.len() == 5));
    assert!(all[3][4].shares_storage_with(&lstm.named_parameters()[19].1));
    assert!(lstm.parameters().iter().all(|p| p.requires_grad()));
}

#[test]
fn parameters_start_uniform_within_one_over_sqrt_hidden() {
    let _seeded = seeded();
    kiln::manual_seed(3);
    let gru = nn::GRU::with_opts(5, 16, RNNOpts::default().num_layers(2));
    let cell = nn::LSTMCell::new(5, 16);
    let bound = 0.25 + 1e-7;
    for (name, p) in gru.named_parameters().into_iter().chain(cell.named_parameters()) {
        let v = p.to_vec::<f32>();
        let (lo, hi) = v.iter().fold((f32::MAX, f32::MIN), |(l, h), &x| (l.min(x), h.max(x)));
        assert!(-bound <= lo as f64 && hi as f64 <= bound, "{name}: [{lo}, {hi}]");
        // Spread over the interval, not a constant: the largest |value| reaches past half the bound.
        assert!(lo < -0.125 && hi > 0.125, "{name}: [{lo}, {hi}]");
    }
}

#[test]
fn lstm_gradients_match_finite_differences() {
    let _seeded = seeded();
    kiln::manual_seed(11);
    let opts = RNNOpts::default().num_layers(2).bidirectional(true).proj_size(2);
    let lstm = nn::LSTM::with_opts(2, 3, opts);
    let inputs = vec![randn64(&[3, 2, 2]), randn64(&[4, 2, 2]), randn64(&[4, 2, 3])];
    check_gradients(lstm, inputs, |m, a| {
        let (y, (h, c)) = m.forward_with_state(&a[0], Some((&a[1], &a[2])));
        Tensor::cat(&[y.flatten(0, -1), h.flatten(0, -1), c.flatten(0, -1)], 0)
    });
}

#[test]
fn gru_gradients_match_finite_differences() {
    let _seeded = seeded();
    kiln::manual_seed(12);
    let gru = nn::GRU::with_opts(2, 3, RNNOpts::default().num_layers(2).bidirectional(true).batch_first(true));
    let inputs = vec![randn64(&[2, 3, 2]), randn64(&[4, 2, 3])];
    check_gradients(gru, inputs, |m, a| {
        let (y, h) = m.forward_with_state(&a[0], Some(&a[1]));
        Tensor::cat(&[y.flatten(0, -1), h.flatten(0, -1)], 0)
    });
}

/// The layers merge `weight_hh`'s gradient into one product over all steps; under
/// `create_graph` they record the ordinary per-step products instead, so the gradients
/// differentiate again (RNN and LSTM through the gates, GRU through `b_hh`, with and without it).
#[test]
fn second_order_gradients_match_finite_differences() {
    let _seeded = seeded();
    kiln::manual_seed(14);
    let state = |m: &nn::LSTM, a: &[Tensor]| {
        let (y, (h, c)) = m.forward_with_state(&a[0], None);
        Tensor::cat(&[y.flatten(0, -1), h.flatten(0, -1), c.flatten(0, -1)], 0)
    };
    check_second_order(nn::LSTM::with_opts(2, 2, RNNOpts::default().proj_size(1)), vec![randn64(&[3, 1, 2])], state);
    for bias in [true, false] {
        let gru = nn::GRU::with_opts(2, 2, RNNOpts::default().bias(bias));
        check_second_order(gru, vec![randn64(&[3, 1, 2])], |m, a| m.forward(&a[0]).flatten(0, -1));
    }
    let rnn = nn::RNN::with_opts(2, 2, RNNOpts::default().bidirectional(true));
    check_second_order(rnn, vec![randn64(&[3, 1, 2])], |m, a| m.forward(&a[0]).flatten(0, -1));
}

/// Each layer and direction gives `weight_hh` its gradient through one merged node.
#[test]
fn the_recurrent_weight_gradient_is_one_node_per_layer_and_direction() {
    let lstm = nn::LSTM::with_opts(3, 4, RNNOpts::default().num_layers(2).bidirectional(true));
    let y = lstm.forward(&Tensor::randn([5, 2, 3]));
    let (mut seen, mut stack, mut merged) = (Vec::new(), vec![y.grad_fn().expect("a recorded output")], 0);
    while let Some(f) = stack.pop() {
        if seen.contains(&f) {
            continue;
        }
        merged += usize::from(f.name() == "RecurrentWeightBackward");
        stack.extend(f.next_functions().into_iter().flatten());
        seen.push(f);
    }
    assert_eq!(merged, 4);
    y.sum().backward();
    for (name, p) in lstm.named_parameters() {
        assert!(p.grad().is_some(), "{name} has no gradient");
    }
}

#[test]
fn cell_gradients_match_finite_differences() {
    let _seeded = seeded();
    kiln::manual_seed(13);
    check_gradients(nn::LSTMCell::new(2, 3), vec![randn64(&[2, 2]), randn64(&[2, 3]), randn64(&[2, 3])], |m, a| {
        let (h, c) = m.forward_with_state(&a[0], Some((&a[1], &a[2])));
        Tensor::cat(&[h.flatten(0, -1), c.flatten(0, -1)], 0)
    });
    check_gradients(nn::GRUCell::new(2, 3), vec![randn64(&[2, 2]), randn64(&[2, 3])], |m, a| {
        m.forward_with_state(&a[0], Some(&a[1])).flatten(0, -1)
    });
    let relu = nn::RNNCell::with_opts(2, 3, true, RNNNonlinearity::Relu);
    check_gradients(relu, vec![randn64(&[2, 2]), randn64(&[2, 3])], |m, a| {
        m.forward_with_state(&a[0], Some(&a[1])).flatten(0, -1)
    });
}

/// A tiny sequence classifier: an LSTM over the sequence, a linear head on the last output.
#[derive(Module)]
struct Tagger {
    lstm: nn::LSTM,
    head: nn::Linear,
}

impl Module for Tagger {
    fn forward(&self, x: &Tensor) -> Tensor {
        let y = self.lstm.forward(x);
        let last = y.select(1, -1);
        self.head.forward(&last)
    }
}

/// `steps` SGD steps of the tagger, compiled or eager.
fn train_tagger(compiled: bool, steps: usize) -> Trained {
    kiln::manual_seed(5);
    let lstm = nn::LSTM::with_opts(3, 5, RNNOpts::default().num_layers(2).batch_first(true));
    let net = Tagger { lstm, head: nn::Linear::new(5, 4) };
    let x = Tensor::randn([6, 4, 3]);
    let y = Tensor::randint(0, 4, [6]);
    let criterion = nn::CrossEntropyLoss::new();
    Trained::sgd(net.parameters(), || criterion.forward(&net.forward(&x), &y), compiled, steps)
}

#[test]
fn compiled_lstm_training_matches_eager() {
    let _seeded = seeded();
    let eager = train_tagger(false, 4);
    // One graph per step, no breaks, and the gate arithmetic runs as generated kernels; equal
    // to f32 rounding, 1e-5 relative.
    train_tagger(true, 4).assert_matches(&eager, 1e-5);
}

#[test]
fn prints_like_pytorch() {
    let _seeded = seeded();
    // print(...) of the same modules in PyTorch.
    let o = RNNOpts::default();
    let lstm = nn::LSTM::with_opts(3, 4, o.proj_size(2).bias(false).batch_first(true).bidirectional(true));
    assert_eq!(lstm.to_string(), "LSTM(3, 4, proj_size=2, bias=False, batch_first=True, bidirectional=True)");
    let rnn = nn::RNN::with_opts(3, 4, o.nonlinearity(RNNNonlinearity::Relu).num_layers(2).dropout(0.5));
    assert_eq!(rnn.to_string(), "RNN(3, 4, num_layers=2, dropout=0.5)");
    assert_eq!(
        nn::LSTM::with_opts(10, 20, o.num_layers(2).batch_first(true)).to_string(),
        "LSTM(10, 20, num_layers=2, batch_first=True)"
    );
    assert_eq!(nn::GRU::new(3, 4).to_string(), "GRU(3, 4)");
    let cell = nn::RNNCell::with_opts(3, 4, false, RNNNonlinearity::Relu);
    assert_eq!(cell.to_string(), "RNNCell(3, 4, bias=False, nonlinearity=relu)");
    assert_eq!(nn::GRUCell::new(3, 4).to_string(), "GRUCell(3, 4)");
    assert_eq!(nn::LSTMCell::with_bias(3, 4, false).to_string(), "LSTMCell(3, 4, bias=False)");
    let net = Tagger { lstm: nn::LSTM::new(3, 5), head: nn::Linear::new(5, 4) };
    assert_eq!(
        net.to_string(),
        "Tagger(\n  (lstm): LSTM(3, 5)\n  (head): Linear(in_features=5, out_features=4, bias=True)\n)"
    );
}

#[test]
fn dropout_acts_between_layers_in_train_mode_only() {
    let _seeded = seeded();
    kiln::manual_seed(21);
    let x = Tensor::randn([5, 2, 3]);
    let mut lstm = nn::LSTM::with_opts(3, 4, RNNOpts::default().num_layers(2).dropout(1.0));
    assert!(lstm.is_training());
    // p = 1 zeroes everything between the layers: layer 1 sees zeros, so the output is what
    // a one-layer LSTM with layer 1's weights makes of a zero input.
    let mut top = nn::LSTM::new(4, 4);
    let mut sd = StateDict::new();
    for (k, t) in lstm.state_dict().iter() {
        if let Some(base) = k.strip_suffix("_l1") {
            sd.insert(format!("{base}_l0"), t.clone());
        }
    }
    top.load_state_dict(&sd).unwrap();
    let (train_out, (train_h, _)) = lstm.forward_with_state(&x, None);
    let (want_out, (want_h, _)) = top.forward_with_state(&Tensor::zeros([5, 2, 4]), None);
    assert!(train_out.allclose(&want_out, 1e-6, 1e-6), "{train_out} vs {want_out}");
    assert!(train_h.select(0, 1).allclose(&want_h.select(0, 0), 1e-6, 1e-6));
    // Layer 0's final state is not dropped.
    let (_, (bottom_h, _)) = {
        let mut bottom = nn::LSTM::new(3, 4);
        let mut sd = StateDict::new();
        for (k, t) in lstm.state_dict().iter() {
            if k.ends_with("_l0") {
                sd.insert(k, t.clone());
            }
        }
        bottom.load_state_dict(&sd).unwrap();
        bottom.forward_with_state(&x, None)
    };
    assert!(train_h.select(0, 0).allclose(&bottom_h.select(0, 0), 1e-6, 1e-6));
    // In eval mode there is no dropout: equal to the same weights built without it.
    lstm.eval();
    assert!(!lstm.is_training());
    let mut plain = nn::LSTM::with_opts(3, 4, RNNOpts::default().num_layers(2));
    plain.load_state_dict(&lstm.state_dict()).unwrap();
    assert!(lstm.forward(&x).allclose(&plain.forward(&x), 0.0, 0.0));
    assert!(!lstm.forward(&x).allclose(&train_out, 1e-3, 1e-3), "eval differs from the dropped train output");
}

/// Asserts `e` is an error located in this file whose message contains every one of `parts`.
fn assert_error(e: Result<(), Error>, parts: &[&str]) {
    rnn_fixture::assert_error(e, HERE, parts)
}

#[test]
fn bad_inputs_name_the_layer_the_shapes_and_the_callers_line() {
    let _seeded = seeded();
    let lstm = nn::LSTM::with_opts(3, 4, RNNOpts::default().num_layers(2));
    let ok = Tensor::zeros([5, 2, 3]);
    let run = |x: &Tensor, h: Option<(&Tensor, &Tensor)>| lstm.try_forward_with_state(x, h).map(drop);
    assert_error(run(&Tensor::zeros([5, 2, 3, 1]), None), &["LSTM", "[5, 2, 3, 1]", "2-d", "3-d"]);
    assert_error(run(&Tensor::zeros([5, 2, 7]), None), &["LSTM", "[5, 2, 7]", "input_size 3"]);
    assert_error(run(&Tensor::zeros([0, 2, 3]), None), &["LSTM", "[0, 2, 3]", "length"]);
    let (h, c) = (Tensor::zeros([2, 2, 4]), Tensor::zeros([2, 2, 4]));
    assert!(run(&ok, Some((&h, &c))).is_ok());
    let bad_h = Tensor::zeros([1, 2, 4]);
    assert_error(run(&ok, Some((&bad_h, &c))), &["LSTM", "h0", "[2, 2, 4]", "[1, 2, 4]", "[5, 2, 3]"]);
    let bad_c = Tensor::zeros([2, 3, 4]);
    assert_error(run(&ok, Some((&h, &bad_c))), &["LSTM", "c0", "[2, 3, 4]"]);
    // An unbatched input takes unbatched states.
    assert_error(run(&Tensor::zeros([5, 3]), Some((&h, &c))), &["LSTM", "h0", "[2, 4]", "[2, 2, 4]"]);
    assert_error(run(&ok.to_dtype(DType::F64), None), &["LSTM", "float64", "float32"]);

    let gru = nn::GRU::with_opts(3, 4, RNNOpts::default().batch_first(true));
    assert_error(
        gru.try_forward_with_state(&Tensor::zeros([2, 5, 4]), None).map(drop),
        &["GRU", "(N, L, H_in)", "[2, 5, 4]"],
    );
    let rnn = nn::RNN::new(3, 4);
    assert_error(
        rnn.try_forward_with_state(&ok, Some(&Tensor::zeros([1, 3, 4]))).map(drop),
        &["RNN", "[1, 2, 4]", "[1, 3, 4]"],
    );

    let cell = nn::LSTMCell::new(3, 4);
    assert_error(cell.try_forward_with_state(&Tensor::zeros([2, 2, 3]), None).map(drop), &["LSTMCell", "[2, 2, 3]"]);
    let (h, c) = (Tensor::zeros([2, 5]), Tensor::zeros([2, 4]));
    assert_error(
        cell.try_forward_with_state(&Tensor::zeros([2, 3]), Some((&h, &c))).map(drop),
        &["LSTMCell", "hx", "[2, 4]", "[2, 5]"],
    );
    let gru_cell = nn::GRUCell::new(3, 4);
    assert_error(
        gru_cell.try_forward_with_state(&Tensor::zeros([2, 6]), None).map(drop),
        &["GRUCell", "[2, 6]", "input_size 3"],
    );
    let rnn_cell = nn::RNNCell::new(3, 4);
    assert_error(
        rnn_cell.try_forward_with_state(&Tensor::zeros([3]), Some(&Tensor::zeros([1, 4]))).map(drop),
        &["RNNCell", "[4]", "[1, 4]"],
    );

    // The panicking forms (and Module::forward) report the same at this file's line.
    for text in [
        panic_text(|| drop(lstm.forward(&Tensor::zeros([5, 2, 7])))),
        panic_text(|| drop(gru.forward_with_state(&Tensor::zeros([2, 5, 4]), None))),
        panic_text(|| drop(cell.forward(&Tensor::zeros([2, 7])))),
        panic_text(|| drop(nn::GRU::with_opts(3, 4, RNNOpts::default().proj_size(2)))),
        panic_text(|| drop(nn::LSTM::with_opts(3, 4, RNNOpts::default().proj_size(4)))),
        panic_text(|| drop(nn::LSTM::with_opts(3, 4, RNNOpts::default().nonlinearity(RNNNonlinearity::Relu)))),
        panic_text(|| drop(nn::RNN::with_opts(3, 4, RNNOpts::default().dropout(1.5)))),
        panic_text(|| drop(nn::RNN::with_opts(3, 4, RNNOpts::default().num_layers(0)))),
        panic_text(|| drop(nn::GRUCell::new(3, 0))),
    ] {
        assert!(text.contains(&format!("(at {HERE}:")), "{text}");
        assert!(["LSTM", "GRU", "RNN"].iter().any(|l| text.contains(l)), "{text}");
    }
}

#[test]
fn unbatched_batch_first_and_states_agree_with_the_batched_run() {
    let _seeded = seeded();
    kiln::manual_seed(31);
    let lstm = nn::LSTM::with_opts(3, 4, RNNOpts::default().bidirectional(true));
    let mut batch_first = nn::LSTM::with_opts(3, 4, RNNOpts::default().bidirectional(true).batch_first(true));
    batch_first.load_state_dict(&lstm.state_dict()).unwrap();
    let x = Tensor::randn([6, 3, 3]);
    let (h0, c0) = (Tensor::randn([2, 3, 4]), Tensor::randn([2, 3, 4]));
    let (y, (h, c)) = lstm.forward_with_state(&x, Some((&h0, &c0)));
    assert_eq!(y.shape(), &[6, 3, 8]);
    assert_eq!(h.shape(), &[2, 3, 4]);
    // batch_first: the same numbers, batch and time swapped in the input and the output only.
    let (yb, (hb, cb)) = batch_first.forward_with_state(&x.transpose(0, 1), Some((&h0, &c0)));
    assert!(yb.transpose(0, 1).allclose(&y, 0.0, 0.0));
    assert!(hb.allclose(&h, 0.0, 0.0) && cb.allclose(&c, 0.0, 0.0));
    // One sequence unbatched equals its row of the batch.
    let (h1, c1) = (h0.select(1, 1), c0.select(1, 1));
    let (yu, (hu, cu)) = lstm.forward_with_state(&x.select(1, 1), Some((&h1, &c1)));
    assert!(yu.allclose(&y.select(1, 1), 1e-6, 1e-6));
    assert!(hu.allclose(&h.select(1, 1), 1e-6, 1e-6) && cu.allclose(&c.select(1, 1), 1e-6, 1e-6));
    // Carrying the state across two halves of the sequence equals one run over the whole.
    let (ya, (ha, ca)) = nn::LSTM::forward_with_state(&batch_first, &x.transpose(0, 1).narrow(1, 0, 2), None);
    let (yb2, _) = batch_first.forward_with_state(&x.transpose(0, 1).narrow(1, 2, 4), Some((&ha, &ca)));
    let (whole, _) = batch_first.forward_with_state(&x.transpose(0, 1), None);
    // The forward direction's half (features 0..4) continues exactly; the reverse one does not.
    assert!(ya.narrow(2, 0, 4).allclose(&whole.narrow(1, 0, 2).narrow(2, 0, 4), 1e-6, 1e-6));
    assert!(yb2.narrow(2, 0, 4).allclose(&whole.narrow(1, 2, 4).narrow(2, 0, 4), 1e-6, 1e-6));
}
