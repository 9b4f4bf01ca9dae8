//! Attention and Transformer layers: `F::scaled_dot_product_attention`, `MultiheadAttention`,
//! `TransformerEncoder(Layer)`, `TransformerDecoder(Layer)` and `Transformer` against PyTorch
//! (outputs, attention weights and every gradient, from tests/fixtures/attention.safetensors,
//! written by scripts/fixtures_attention.py), finite-difference gradients, compiled training
//! equal to eager with no graph break, PyTorch's parameter names and initialisation, dropout
//! in train mode only, and errors that name the layer, the shapes and the caller's line.

use kiln::autograd::{gradcheck, GradcheckOpts};
use kiln::nn::{
    self, DecoderArgs, EncoderArgs, MhaArgs, MhaOpts, Module, TransformerActivation, TransformerArgs,
    TransformerLayerOpts, TransformerOpts,
};
use kiln::optim::{Optimizer, SGDConfig, SGD};
use kiln::prelude::*;
use kiln::{Error, StateDict};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[path = "common/module_grad.rs"]
mod module_grad;
#[path = "common/seeded.rs"]
mod seeded;
use module_grad::{check_gradients, randn64};
use seeded::seeded;

const HERE: &str = "tests/nn_attention.rs";

fn fixture() -> StateDict {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/attention.safetensors");
    kiln::load(path).expect("tests/fixtures/attention.safetensors (python3 scripts/fixtures_attention.py)")
}

/// One case's configuration, `key=value;…` as the fixture's metadata spells it.
struct Config(String);

impl Config {
    fn get(&self, key: &str) -> &str {
        self.0
            .split(';')
            .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .unwrap_or_else(|| panic!("{key} missing from {}", self.0))
    }
    fn num(&self, key: &str) -> usize {
        self.get(key).parse().unwrap_or_else(|e| panic!("{key} in {}: {e}", self.0))
    }
    fn flag(&self, key: &str) -> bool {
        self.num(key) == 1
    }
    fn layer_opts(&self) -> TransformerLayerOpts {
        let activation = match self.get("activation") {
            "relu" => TransformerActivation::Relu,
            "gelu" => TransformerActivation::Gelu,
            other => panic!("activation {other}"),
        };
        TransformerLayerOpts::default()
            .dim_feedforward(self.num("dim_feedforward"))
            .activation(activation)
            .norm_first(self.flag("norm_first"))
            .batch_first(self.flag("batch_first"))
    }
}

/// The cases of one kind: `(name, config)`.
fn cases(fx: &StateDict, kind: &str) -> Vec<(String, Config)> {
    fx.metadata_entries()
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("case:").map(|name| (name.to_string(), Config(v.clone()))))
        .filter(|(_, c)| c.get("kind") == kind)
        .collect()
}

/// Asserts `got` has `want`'s shape and values to f64 rounding (sums run in another order).
fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.contiguous().to_vec::<f64>(), want.to_vec::<f64>());
    for (k, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= 1e-12 + 1e-9 * b.abs(), "{what}[{k}]: kiln {a} vs PyTorch {b}");
    }
}

/// The keys and shapes in order, as the fixture's `keys:` metadata spells them.
fn key_list(sd: &StateDict) -> String {
    sd.iter()
        .map(|(k, t)| format!("{k}:{}", t.shape().iter().map(usize::to_string).collect::<Vec<_>>().join("x")))
        .collect::<Vec<_>>()
        .join(",")
}

/// A case's tensors: the fixture's `{name}/{key}`, float inputs requiring grad.
struct Case<'a> {
    fx: &'a StateDict,
    name: &'a str,
}

impl Case<'_> {
    fn get(&self, key: &str) -> Option<Tensor> {
        self.fx.get(&format!("{}/{key}", self.name)).cloned()
    }
    fn input(&self, key: &str) -> Option<Tensor> {
        self.get(key).map(|t| if t.dtype() == DType::Bool || key.contains("mask") { t } else { t.requires_grad_(true) })
    }

    /// Converts `module` to f64, checks its keys and loads the case's state dict.
    fn load(&self, module: &mut dyn Module) {
        module.to_dtype(DType::F64);
        module.eval();
        let name = self.name;
        assert_eq!(key_list(&module.state_dict()), self.fx.metadata(&format!("keys:{name}")).unwrap(), "{name}: keys");
        let prefix = format!("{name}/sd/");
        let mut sd = StateDict::new();
        for (k, t) in self.fx.iter() {
            if let Some(key) = k.strip_prefix(&prefix) {
                sd.insert(key, t.clone());
            }
        }
        module.load_state_dict(&sd).unwrap_or_else(|e| panic!("{name}: {e}"));
    }

    /// Compares the results, backpropagates the fixture's weighted sum and compares the
    /// gradients of `inputs` and `params`.
    fn check(&self, results: &[(&str, Tensor)], inputs: &[(&str, &Tensor)], params: &[(String, Tensor)]) {
        let name = self.name;
        let mut loss = Tensor::scalar(0.0f64);
        for (key, got) in results {
            assert_close(&format!("{name}: {key}"), got, &self.get(key).unwrap());
            let w = if *key == "output" { "dout".to_string() } else { format!("d{key}") };
            loss = &loss + &(got * &self.get(&w).unwrap()).sum();
        }
        loss.backward();
        for (key, t) in inputs {
            let g = t.grad().unwrap_or_else(|| panic!("{name}: {key} has no gradient"));
            assert_close(&format!("{name}: grad {key}"), &g, &self.get(&format!("grad/{key}")).unwrap());
        }
        for (key, p) in params {
            let g = p.grad().unwrap_or_else(|| panic!("{name}: {key} has no gradient"));
            assert_close(&format!("{name}: grad {key}"), &g, &self.get(&format!("grad/{key}")).unwrap());
        }
    }
}

#[test]
fn scaled_dot_product_attention_matches_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let all = cases(&fx, "sdpa");
    assert_eq!(all.len(), 7);
    for (name, config) in &all {
        let case = Case { fx: &fx, name };
        let (q, k, v) = (case.input("query").unwrap(), case.input("key").unwrap(), case.input("value").unwrap());
        let mask = case.get("attn_mask");
        let scale = match config.get("scale") {
            "none" => None,
            s => Some(s.parse::<f64>().unwrap()),
        };
        let y = F::scaled_dot_product_attention(&q, &k, &v, mask.as_ref(), 0.0, config.flag("causal"), scale);
        case.check(&[("output", y)], &[("query", &q), ("key", &k), ("value", &v)], &[]);
    }
    // The fully masked row gives zeros, and no NaN reached the gradients (checked above).
    let case = Case { fx: &fx, name: "sdpa_bool_mask" };
    let row = case.get("output").unwrap().select(2, 1);
    assert!(row.eq(0.0).all().item::<bool>());
}

#[test]
fn multihead_attention_matches_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let all = cases(&fx, "mha");
    assert_eq!(all.len(), 9);
    for (name, c) in &all {
        let case = Case { fx: &fx, name };
        let opts = MhaOpts::default()
            .dropout(0.1)
            .batch_first(c.flag("batch_first"))
            .kdim(c.num("kdim"))
            .vdim(c.num("vdim"))
            .bias(c.flag("bias"))
            .add_bias_kv(c.flag("add_bias_kv"))
            .add_zero_attn(c.flag("add_zero_attn"));
        let mut mha = nn::MultiheadAttention::with_opts(c.num("embed_dim"), c.num("num_heads"), opts);
        case.load(&mut mha);
        let q = case.input("query").unwrap();
        let (k, v) = if c.flag("self_attn") {
            (q.clone(), q.clone())
        } else {
            (case.input("key").unwrap(), case.input("value").unwrap())
        };
        let (kpm, am) = (case.get("key_padding_mask"), case.get("attn_mask"));
        let mut args = MhaArgs::default().need_weights(c.flag("need_weights")).average_attn_weights(c.flag("average"));
        args.key_padding_mask = kpm.as_ref();
        args.attn_mask = am.as_ref();
        let (y, w) = mha.forward_with(&q, &k, &v, args);
        assert_eq!(w.is_some(), c.flag("need_weights"), "{name}: weights returned");
        let mut results = vec![("output", y)];
        results.extend(w.map(|w| ("weights", w)));
        let inputs: Vec<(&str, &Tensor)> =
            if c.flag("self_attn") { vec![("query", &q)] } else { vec![("query", &q), ("key", &k), ("value", &v)] };
        case.check(&results, &inputs, &mha.named_parameters());
    }
}

#[test]
fn transformer_encoder_matches_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let all = cases(&fx, "encoder");
    assert_eq!(all.len(), 4);
    for (name, c) in &all {
        let case = Case { fx: &fx, name };
        let d = c.num("d_model");
        let layer = nn::TransformerEncoderLayer::with_opts(d, c.num("nhead"), c.layer_opts());
        let norm = c.flag("final_norm").then(|| nn::LayerNorm::new([d]));
        let mut enc = nn::TransformerEncoder::new(layer, c.num("num_layers"), norm);
        assert!(enc.is_training());
        case.load(&mut enc);
        assert!(!enc.is_training());
        let x = case.input("src").unwrap();
        let (kpm, mask) = (case.get("src_key_padding_mask"), case.get("mask"));
        let args =
            EncoderArgs { src_mask: mask.as_ref(), src_key_padding_mask: kpm.as_ref(), is_causal: mask.is_some() };
        let y = enc.forward_with(&x, args);
        case.check(&[("output", y)], &[("src", &x)], &enc.named_parameters());
    }
}

#[test]
fn transformer_matches_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let all = cases(&fx, "transformer");
    assert_eq!(all.len(), 2);
    for (name, c) in &all {
        let case = Case { fx: &fx, name };
        let l = c.layer_opts();
        let opts = TransformerOpts {
            d_model: c.num("d_model"),
            nhead: c.num("nhead"),
            num_encoder_layers: c.num("num_layers"),
            num_decoder_layers: c.num("num_layers"),
            dim_feedforward: l.dim_feedforward,
            activation: l.activation,
            batch_first: l.batch_first,
            norm_first: l.norm_first,
            ..Default::default()
        };
        let mut model = nn::Transformer::with_opts(opts);
        case.load(&mut model);
        let (src, tgt) = (case.input("src").unwrap(), case.input("tgt").unwrap());
        let (tgt_mask, kpm) = (case.get("tgt_mask").unwrap(), case.get("key_padding_mask").unwrap());
        let args = TransformerArgs::default()
            .tgt_mask(&tgt_mask)
            .tgt_is_causal(true)
            .src_key_padding_mask(&kpm)
            .memory_key_padding_mask(&kpm);
        let y = model.forward_with(&src, &tgt, args);
        case.check(&[("output", y)], &[("src", &src), ("tgt", &tgt)], &model.named_parameters());
    }
    // generate_square_subsequent_mask(4).tolist() in PyTorch.
    let want = fx.metadata("square_subsequent_mask_4").unwrap();
    let got = nn::Transformer::generate_square_subsequent_mask(4).to_vec2::<f32>();
    let text = format!(
        "[{}]",
        got.iter()
            .map(|r| format!(
                "[{}]",
                r.iter()
                    .map(|&x| if x == 0.0 { "0.0".to_string() } else { format!("{x}") })
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert_eq!(text, want);
}

#[test]
fn parameters_have_pytorchs_names_and_initialisation() {
    let _seeded = seeded();
    kiln::manual_seed(1);
    let mha = nn::MultiheadAttention::new(16, 4);
    let names: Vec<String> = mha.named_parameters().into_iter().map(|(k, _)| k).collect();
    assert_eq!(names, ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]);
    assert!(mha.qkv_same_embed_dim());
    // xavier_uniform on (48, 16): U(±√(6/64)); the biases are zero.
    let w = mha.in_proj_weight.as_ref().unwrap().to_vec::<f32>();
    let bound = (6.0f32 / 64.0).sqrt();
    let max = w.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    assert!(max <= bound && max > 0.8 * bound, "max |w| {max} vs bound {bound}");
    assert!(mha.in_proj_bias.as_ref().unwrap().eq(0.0).all().item::<bool>());
    assert!(mha.out_proj.bias.as_ref().unwrap().eq(0.0).all().item::<bool>());
    // out_proj keeps Linear's init: U(±1/√16).
    let o = mha.out_proj.weight.to_vec::<f32>();
    assert!(o.iter().all(|x| x.abs() <= 0.25) && o.iter().any(|x| x.abs() > 0.2));
    let sep = nn::MultiheadAttention::with_opts(4, 2, MhaOpts::default().kdim(3).vdim(2).add_bias_kv(true).bias(false));
    assert_eq!(
        key_list(&sep.state_dict()),
        "q_proj_weight:4x4,k_proj_weight:4x3,v_proj_weight:4x2,bias_k:1x1x4,bias_v:1x1x4,out_proj.weight:4x4"
    );
    assert!(!sep.qkv_same_embed_dim());

    // An encoder's layers start as equal copies with separate storage.
    let layer = nn::TransformerEncoderLayer::with_opts(8, 2, TransformerLayerOpts::default().dim_feedforward(16));
    let enc = nn::TransformerEncoder::new(layer, 3, None);
    let sd = enc.state_dict();
    assert_eq!(sd.len(), 3 * 12);
    let a = sd.get("layers.0.linear1.weight").unwrap();
    let b = sd.get("layers.2.linear1.weight").unwrap();
    assert!(a.allclose(b, 0.0, 0.0));
    assert!(!a.shares_storage_with(b));
    enc.layers[2].linear1.weight.detach().add_(1.0);
    assert!(!enc.layers[0].linear1.weight.allclose(&enc.layers[2].linear1.weight, 0.0, 0.0));
    // bias=false drops the biases of the linear layers, the norms and the attention.
    let nb =
        nn::TransformerDecoderLayer::with_opts(4, 2, TransformerLayerOpts::default().dim_feedforward(8).bias(false));
    let names: Vec<String> = nb.state_dict().keys().map(str::to_string).collect();
    assert_eq!(
        names,
        [
            "self_attn.in_proj_weight",
            "self_attn.out_proj.weight",
            "multihead_attn.in_proj_weight",
            "multihead_attn.out_proj.weight",
            "linear1.weight",
            "linear2.weight",
            "norm1.weight",
            "norm2.weight",
            "norm3.weight"
        ]
    );
    // Transformer: every matrix xavier-uniform, norms ones.
    let t = nn::Transformer::with_opts(TransformerOpts {
        d_model: 8,
        nhead: 2,
        num_encoder_layers: 1,
        num_decoder_layers: 1,
        dim_feedforward: 24,
        ..Default::default()
    });
    let w = t.state_dict().get("encoder.layers.0.linear1.weight").unwrap().to_vec::<f32>();
    let bound = (6.0f32 / 32.0).sqrt();
    assert!(w.iter().all(|x| x.abs() <= bound) && w.iter().any(|x| x.abs() > 0.8 * bound));
    assert!(t.state_dict().get("decoder.norm.weight").unwrap().eq(1.0).all().item::<bool>());
}

#[test]
fn multihead_attention_gradients_match_finite_differences() {
    let _seeded = seeded();
    kiln::manual_seed(11);
    let opts = MhaOpts::default().kdim(3).add_bias_kv(true).batch_first(true);
    let mha = nn::MultiheadAttention::with_opts(4, 2, opts);
    let kpm = Tensor::new(&[[false, false, true], [false, false, false]]);
    let am = Tensor::randn([2, 3]).to_dtype(DType::F64);
    let inputs = vec![randn64(&[2, 2, 4]), randn64(&[2, 3, 3]), randn64(&[2, 3, 4])];
    check_gradients(mha, inputs, |m, a| {
        let args = MhaArgs::default().key_padding_mask(&kpm).attn_mask(&am).average_attn_weights(false);
        let (y, w) = m.forward_with(&a[0], &a[1], &a[2], args);
        Tensor::cat(&[y.flatten(0, -1), w.unwrap().flatten(0, -1)], 0)
    });
    // And the functional form with a causal mask.
    let (q, k, v) = (randn64(&[2, 3, 2]), randn64(&[2, 4, 2]), randn64(&[2, 4, 3]));
    let f = |a: &[Tensor]| F::scaled_dot_product_attention(&a[0], &a[1], &a[2], None, 0.0, true, Some(0.7));
    gradcheck(f, &[q, k, v], GradcheckOpts::default()).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn mha_forms_agree() {
    let _seeded = seeded();
    kiln::manual_seed(5);
    let mha = nn::MultiheadAttention::new(8, 4);
    let mut bf = nn::MultiheadAttention::with_opts(8, 4, MhaOpts::default().batch_first(true));
    bf.load_state_dict(&mha.state_dict()).unwrap();
    let x = Tensor::randn([5, 3, 8]);
    let (y, w) = mha.forward_with(&x, &x, &x, MhaArgs::default());
    assert_eq!(y.shape(), &[5, 3, 8]);
    assert_eq!(w.as_ref().unwrap().shape(), &[3, 5, 5]);
    // Averaged weights are rows of probabilities.
    assert!(w.unwrap().sum_dim(-1).allclose(&Tensor::ones([3, 5]), 1e-5, 1e-5));
    let xb = x.transpose(0, 1);
    let (yb, _) = bf.forward_with(&xb, &xb, &xb, MhaArgs::default());
    assert!(yb.transpose(0, 1).allclose(&y, 1e-5, 1e-5));
    // Module::forward is self-attention; a copy of x (not the same tensor) gives the same.
    assert!(mha.forward(&x).allclose(&y, 1e-6, 1e-6));
    let x2 = x.deep_clone();
    assert!(mha.forward_with(&x2, &x2.deep_clone(), &x2, MhaArgs::default()).0.allclose(&y, 1e-5, 1e-5));
    // Unbatched equals its batch row; a Bool mask equals its float form; the causal hint
    // without weights gives the same as the mask it stands for.
    let (yu, wu) = mha.forward_with(&x.select(1, 2), &x.select(1, 2), &x.select(1, 2), MhaArgs::default());
    assert!(yu.allclose(&y.select(1, 2), 1e-5, 1e-5));
    assert_eq!(wu.unwrap().shape(), &[5, 5]);
    let causal = nn::Transformer::generate_square_subsequent_mask(5);
    let bool_causal = causal.eq(f64::NEG_INFINITY);
    let a = mha.forward_with(&x, &x, &x, MhaArgs::default().attn_mask(&causal)).0;
    let b = mha.forward_with(&x, &x, &x, MhaArgs::default().attn_mask(&bool_causal)).0;
    let c = mha.forward_with(&x, &x, &x, MhaArgs::default().attn_mask(&causal).is_causal(true).need_weights(false)).0;
    assert!(a.allclose(&b, 1e-6, 1e-6) && a.allclose(&c, 1e-5, 1e-5));
    assert!(!a.allclose(&y, 1e-3, 1e-3), "the mask changes the output");
    // The first query sees only the first key: its output does not depend on the others.
    let x3 = x.clone();
    let x3 = Tensor::cat(&[x3.narrow(0, 0, 1), Tensor::randn([4, 3, 8])], 0);
    let a3 = mha.forward_with(&x3, &x3, &x3, MhaArgs::default().attn_mask(&causal)).0;
    assert!(a3.select(0, 0).allclose(&a.select(0, 0), 1e-5, 1e-5));
}

#[test]
fn dropout_acts_in_train_mode_only() {
    let _seeded = seeded();
    kiln::manual_seed(21);
    let (q, k, v) = (Tensor::randn([2, 3, 4]), Tensor::randn([2, 5, 4]), Tensor::randn([2, 5, 4]));
    // p = 1 drops every weight: zeros.
    let y = F::scaled_dot_product_attention(&q, &k, &v, None, 1.0, false, None);
    assert!(y.eq(0.0).all().item::<bool>());
    let y0 = F::scaled_dot_product_attention(&q, &k, &v, None, 0.0, false, None);
    let yd = F::scaled_dot_product_attention(&q, &k, &v, None, 0.5, false, None);
    assert!(!yd.allclose(&y0, 1e-3, 1e-3));
    let mut mha = nn::MultiheadAttention::with_opts(4, 2, MhaOpts::default().dropout(1.0));
    let x = Tensor::randn([3, 2, 4]);
    let (_, w) = mha.forward_with(&x, &x, &x, MhaArgs::default());
    assert!(w.unwrap().eq(0.0).all().item::<bool>(), "p = 1 in train mode zeroes the weights");
    mha.eval();
    let (_, w) = mha.forward_with(&x, &x, &x, MhaArgs::default());
    assert!(w.unwrap().sum_dim(-1).allclose(&Tensor::ones([2, 3]), 1e-5, 1e-5));
    // An encoder layer's dropouts follow train()/eval() too.
    let mut layer =
        nn::TransformerEncoderLayer::with_opts(4, 2, TransformerLayerOpts::default().dim_feedforward(8).dropout(0.5));
    let a = layer.forward(&x);
    let b = layer.forward(&x);
    assert!(!a.allclose(&b, 1e-4, 1e-4), "train mode draws new masks");
    layer.eval();
    assert!(layer.forward(&x).allclose(&layer.forward(&x), 0.0, 0.0));
}

/// A tiny sequence classifier: an encoder over the sequence, a linear head on the mean.
#[derive(Module)]
struct Classifier {
    encoder: nn::TransformerEncoder,
    head: nn::Linear,
}

impl Module for Classifier {
    fn forward(&self, x: &Tensor) -> Tensor {
        let mask = nn::Transformer::generate_square_subsequent_mask(x.size(1));
        let y = self.encoder.forward_with(x, EncoderArgs::default().src_mask(&mask).is_causal(true));
        self.head.forward(&y.mean_dim(1))
    }
}

type Trained = (Vec<f32>, Vec<Tensor>, Vec<Tensor>, Vec<(usize, usize, usize)>);

/// Losses of `steps` SGD steps, the parameters and their last gradients; compiled or eager.
fn train_classifier(compiled: bool, steps: usize) -> Trained {
    kiln::manual_seed(5);
    let opts = TransformerLayerOpts::default()
        .dim_feedforward(16)
        .dropout(0.0)
        .batch_first(true)
        .norm_first(true)
        .activation(TransformerActivation::Gelu);
    let layer = nn::TransformerEncoderLayer::with_opts(8, 2, opts);
    let net = Classifier {
        encoder: nn::TransformerEncoder::new(layer, 2, Some(nn::LayerNorm::new([8]))),
        head: nn::Linear::new(8, 3),
    };
    let mut opt = SGD::new(net.parameters(), SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() });
    let x = Tensor::randn([4, 5, 8]);
    let y = Tensor::randint(0, 3, [4]);
    let criterion = nn::CrossEntropyLoss::new();
    let mut body = |(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let loss = criterion.forward(&net.forward(x), y);
        loss.backward();
        opt.step();
        loss
    };
    let (mut losses, mut stats) = (Vec::new(), Vec::new());
    if compiled {
        let mut step = kiln::compile(&mut body);
        for _ in 0..steps {
            losses.push(step.call((&x, &y)).item::<f32>());
            let s = step.stats();
            stats.push((s.graph_breaks, s.graphs, s.kernels_launched));
        }
    } else {
        for _ in 0..steps {
            losses.push(body((&x, &y)).item::<f32>());
        }
    }
    let params = net.parameters();
    let grads = params.iter().map(|p| p.grad().expect("a gradient")).collect();
    (losses, params.iter().map(Tensor::detach).collect(), grads, stats)
}

#[test]
fn compiled_encoder_training_matches_eager() {
    let _seeded = seeded();
    let (eager, p_eager, g_eager, _) = train_classifier(false, 3);
    let (compiled, p_compiled, g_compiled, stats) = train_classifier(true, 3);
    for (a, b) in compiled.iter().zip(&eager) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "losses: compiled {compiled:?} vs eager {eager:?}");
    }
    for (what, c, e) in [("parameter", &p_compiled, &p_eager), ("gradient", &g_compiled, &g_eager)] {
        assert_eq!(c.len(), e.len());
        for (k, (c, e)) in c.iter().zip(e).enumerate() {
            for (x, y) in c.to_vec::<f32>().iter().zip(e.to_vec::<f32>()) {
                assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "{what} {k}: compiled {x} vs eager {y}");
            }
        }
    }
    assert!(eager[2] < eager[0], "training lowers the loss: {eager:?}");
    assert!(stats.iter().all(|&(b, g, k)| b == 0 && g == 1 && k > 0), "(breaks, graphs, kernels) per step: {stats:?}");
}

fn place(e: &Error) -> (String, String) {
    (e.location.file().to_string(), e.to_string())
}

/// Asserts `e` is an error located in this file whose message contains every one of `parts`.
fn assert_error<T>(e: Result<T, Error>, parts: &[&str]) {
    let Err(e) = e else { panic!("expected an error containing {parts:?}") };
    let (file, text) = place(&e);
    assert_eq!(file, HERE, "{text}");
    for p in parts {
        assert!(text.contains(p), "{text:?} should contain {p:?}");
    }
}

fn panic_text(f: impl FnOnce()) -> String {
    let e = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

#[test]
fn bad_inputs_name_the_layer_the_shapes_and_the_callers_line() {
    let _seeded = seeded();
    let z = |shape: &[usize]| Tensor::zeros(shape);
    let sdpa = |q: &Tensor, k: &Tensor, v: &Tensor, m: Option<&Tensor>, causal: bool| {
        F::try_scaled_dot_product_attention(q, k, v, m, 0.0, causal, None)
    };
    let (q, k, v) = (z(&[2, 3, 4]), z(&[2, 5, 4]), z(&[2, 5, 6]));
    assert!(sdpa(&q, &k, &v, None, false).is_ok());
    assert_error(
        sdpa(&q, &z(&[2, 5, 3]), &v, None, false),
        &["scaled_dot_product_attention", "[2, 3, 4]", "[2, 5, 3]"],
    );
    assert_error(
        sdpa(&q, &k, &z(&[2, 4, 6]), None, false),
        &["scaled_dot_product_attention", "[2, 5, 4]", "[2, 4, 6]"],
    );
    assert_error(sdpa(&z(&[3, 3, 4]), &k, &v, None, false), &["batch dims", "[3, 3, 4]"]);
    assert_error(sdpa(&q, &k, &v, Some(&z(&[3, 4])), false), &["attn_mask", "[3, 4]", "[2, 3, 5]"]);
    assert_error(sdpa(&q, &k, &v, Some(&z(&[3, 5])), true), &["is_causal"]);
    assert_error(sdpa(&q, &k, &v, Some(&z(&[3, 5]).to_dtype(DType::I64)), false), &["attn_mask", "int64"]);
    assert_error(sdpa(&q, &k.to_dtype(DType::F64), &v, None, false), &["float64", "float32"]);

    let mha = nn::MultiheadAttention::new(8, 2);
    let x = z(&[5, 2, 8]);
    let run = |q: &Tensor, kv: &Tensor, args: MhaArgs| mha.try_forward_with(q, kv, kv, args);
    assert!(run(&x, &x, MhaArgs::default()).is_ok());
    assert_error(
        run(&z(&[5, 2, 6]), &z(&[5, 2, 6]), MhaArgs::default()),
        &["MultiheadAttention", "[5, 2, 6]", "embed_dim = 8"],
    );
    assert_error(run(&z(&[5, 2, 2, 8]), &x, MhaArgs::default()), &["MultiheadAttention", "[5, 2, 2, 8]"]);
    assert_error(run(&x, &z(&[5, 8]), MhaArgs::default()), &["MultiheadAttention", "3-d", "[5, 8]"]);
    assert_error(run(&x, &z(&[7, 3, 8]), MhaArgs::default()), &["MultiheadAttention", "batch", "[7, 3, 8]"]);
    let kpm = z(&[2, 4]).to_dtype(DType::Bool);
    assert_error(
        run(&x, &x, MhaArgs::default().key_padding_mask(&kpm)),
        &["MultiheadAttention", "key_padding_mask", "[2, 5]", "[2, 4]"],
    );
    let am = z(&[5, 4]);
    assert_error(run(&x, &x, MhaArgs::default().attn_mask(&am)), &["attn_mask", "[5, 5] or [4, 5, 5]", "[5, 4]"]);
    assert_error(run(&x, &x, MhaArgs::default().is_causal(true)), &["MultiheadAttention", "is_causal", "attn_mask"]);
    assert_error(run(&x.to_dtype(DType::F64), &x, MhaArgs::default()), &["MultiheadAttention", "float64", "float32"]);

    let layer = nn::TransformerEncoderLayer::with_opts(8, 2, TransformerLayerOpts::default().dim_feedforward(16));
    assert_error(
        layer.try_forward_with(&z(&[5, 2, 6]), EncoderArgs::default()),
        &["TransformerEncoderLayer", "self_attn", "[5, 2, 6]"],
    );
    let enc = nn::TransformerEncoder::new(layer, 2, None);
    let bad = z(&[3, 3]);
    assert_error(
        enc.try_forward_with(&x, EncoderArgs::default().src_mask(&bad)),
        &["TransformerEncoder", "attn_mask", "[3, 3]"],
    );
    let dec = nn::TransformerDecoderLayer::with_opts(8, 2, TransformerLayerOpts::default().dim_feedforward(16));
    assert_error(
        dec.try_forward_with(&x, &z(&[4, 3, 8]), DecoderArgs::default()),
        &["TransformerDecoderLayer", "multihead_attn", "[4, 3, 8]"],
    );
    let t = nn::Transformer::with_opts(TransformerOpts {
        d_model: 8,
        nhead: 2,
        num_encoder_layers: 1,
        num_decoder_layers: 1,
        dim_feedforward: 16,
        ..Default::default()
    });
    assert_error(
        t.try_forward_with(&x, &z(&[4, 3, 8]), TransformerArgs::default()),
        &["Transformer", "batch", "[4, 3, 8]"],
    );
    assert_error(
        t.try_forward_with(&x, &z(&[4, 2, 7]), TransformerArgs::default()),
        &["Transformer", "d_model", "[4, 2, 7]"],
    );

    // The panicking forms (and constructors) report the same at this file's line.
    for text in [
        panic_text(|| drop(nn::MultiheadAttention::new(10, 3))),
        panic_text(|| drop(nn::MultiheadAttention::with_opts(8, 2, MhaOpts::default().dropout(2.0)))),
        panic_text(|| drop(nn::TransformerEncoderLayer::new(10, 4))),
        panic_text(|| drop(mha.forward(&z(&[5, 2, 6])))),
        panic_text(|| drop(mha.forward_with(&x, &x, &x, MhaArgs::default().attn_mask(&am)))),
        panic_text(|| drop(F::scaled_dot_product_attention(&q, &z(&[2, 5, 3]), &v, None, 0.0, false, None))),
        panic_text(|| drop(dec.forward(&x))),
        panic_text(|| drop(enc.forward(&z(&[5, 2, 6])))),
    ] {
        assert!(text.contains(&format!("(at {HERE}:")), "{text}");
        assert!(
            ["MultiheadAttention", "Transformer", "scaled_dot_product_attention"].iter().any(|l| text.contains(l)),
            "{text}"
        );
    }
    assert!(panic_text(|| drop(nn::MultiheadAttention::new(10, 3))).contains("divisible"));
}

#[test]
fn prints_the_module_tree() {
    let _seeded = seeded();
    let layer = nn::TransformerEncoderLayer::with_opts(4, 2, TransformerLayerOpts::default().dim_feedforward(8));
    let text = layer.to_string();
    assert!(text.starts_with("TransformerEncoderLayer(\n  activation=relu, dropout=0.1\n  (self_attn): MultiheadAttention(\n    (out_proj): Linear(in_features=4, out_features=4, bias=True)\n  )\n  (linear1): Linear(in_features=4, out_features=8, bias=True)"), "{text}");
    assert!(text.contains("(norm2): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"), "{text}");
}
