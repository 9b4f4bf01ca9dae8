//! Transposed and 3-d convolutions, 1-d/3-d and adaptive max poolings and the bilinear layer
//! (`F::conv_transpose1d/2d`, `F::conv3d`, `F::max_pool1d`, `F::avg_pool1d`,
//! `F::max_pool3d`, `F::adaptive_max_pool2d`, `F::bilinear` and their modules): outputs,
//! indices and gradients against PyTorch (tests/fixtures/layers.safetensors, written by
//! scripts/fixtures_layers.py), f64 finite-difference gradients of first and second order,
//! `kiln::compile` equal to eager with no graph break, PyTorch's reprs, parameter names and
//! initialisation bounds, and errors that name the op, the shapes and the caller's line.

#[path = "common/op_checks.rs"]
mod op_checks;
#[path = "common/seeded.rs"]
mod seeded;

use kiln::nn::functional::{
    AvgPool1dOpts, Conv3dOpts, ConvOpts, ConvTransposeOpts, MaxPool1dOpts, MaxPool3dOpts, Padding,
};
use kiln::nn::{self, Module};
use kiln::prelude::*;
use kiln::{ErrorKind, StateDict};
use op_checks::{check_gradients, compiled_equals_eager, leaf, GradCase};
use seeded::seeded;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

const HERE: &str = "tests/nn_layers_nd.rs";

fn fixture() -> StateDict {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/layers.safetensors");
    kiln::load(path).expect("tests/fixtures/layers.safetensors (python3 scripts/fixtures_layers.py)")
}

/// One case's options, `key=v1,v2;…` as the fixture's metadata spells them.
struct Config(String);

impl Config {
    fn get(&self, key: &str) -> &str {
        self.0
            .split(';')
            .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .unwrap_or_else(|| panic!("{key} missing from {}", self.0))
    }
    fn ints<const N: usize>(&self, key: &str) -> [usize; N] {
        let v: Vec<usize> = self.get(key).split(',').map(|x| x.parse().unwrap()).collect();
        v.try_into().unwrap_or_else(|v| panic!("{key}: {v:?} in {}", self.0))
    }
    fn int(&self, key: &str) -> usize {
        self.ints::<1>(key)[0]
    }
    fn flag(&self, key: &str) -> bool {
        self.int(key) == 1
    }
    fn transposed<const N: usize>(&self) -> ConvTransposeOpts<N> {
        ConvTransposeOpts {
            stride: self.ints("stride"),
            padding: self.ints("padding"),
            output_padding: self.ints("output_padding"),
            groups: self.int("groups"),
            dilation: self.ints("dilation"),
        }
    }
    fn max_pool3d(&self) -> MaxPool3dOpts {
        MaxPool3dOpts {
            kernel_size: self.ints("kernel"),
            stride: Some(self.ints("stride")),
            padding: self.ints("padding"),
            dilation: self.ints("dilation"),
            ceil_mode: self.flag("ceil_mode"),
        }
    }
    fn conv3d(&self) -> Conv3dOpts {
        let padding = match self.get("padding") {
            "same" => Padding::Same,
            _ => Padding::Explicit(self.ints("padding")),
        };
        ConvOpts { stride: self.ints("stride"), padding, dilation: self.ints("dilation"), groups: self.int("groups") }
    }
}

/// The cases of `op`: `(name, options)`.
fn cases(fx: &StateDict, op: &str) -> Vec<(String, Config)> {
    let all = fx.metadata_entries().iter().filter_map(|(k, v)| Some((k.strip_prefix("case:")?.to_string(), v)));
    all.map(|(name, v)| (name, Config(v.clone()))).filter(|(_, c)| c.get("op") == op).collect()
}

/// Asserts `got` has `want`'s shape and values to f64 rounding (sums run in another order),
/// NaN where NaN, infinities where infinities.
fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_dtype(DType::F64).contiguous().to_vec::<f64>(), want.to_dtype(DType::F64).to_vec::<f64>());
    for (k, (a, b)) in g.iter().zip(&w).enumerate() {
        let same = a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12 + 1e-9 * b.abs();
        assert!(same, "{what}[{k}]: kiln {a} vs PyTorch {b}");
    }
}

/// A case's tensors, `{name}/{key}` in the fixture; inputs are leaves requiring grad.
struct Case<'a> {
    fx: &'a StateDict,
    name: &'a str,
    inputs: Vec<(&'static str, Tensor)>,
}

impl<'a> Case<'a> {
    fn new(fx: &'a StateDict, name: &'a str) -> Self {
        let inputs = ["x", "x1", "x2", "weight", "bias"]
            .into_iter()
            .filter_map(|k| Some((k, fx.get(&format!("{name}/{k}"))?.detach().requires_grad_(true))))
            .collect();
        Case { fx, name, inputs }
    }
    fn get(&self, key: &str) -> Tensor {
        self.fx.get(&format!("{}/{key}", self.name)).unwrap_or_else(|| panic!("{}/{key}", self.name)).clone()
    }
    fn input(&self, key: &str) -> Option<&Tensor> {
        self.inputs.iter().find(|(k, _)| *k == key).map(|(_, t)| t)
    }
    fn x(&self) -> &Tensor {
        self.input("x").unwrap()
    }

    /// Compares the output (and the indices, when given), backpropagates the fixture's `gy`
    /// and compares every input's gradient.
    fn check(&self, out: Tensor, indices: Option<Tensor>) {
        let name = self.name;
        assert_close(&format!("{name}: out"), &out, &self.get("out"));
        if let Some(i) = indices {
            assert_eq!(i.to_vec::<i64>(), self.get("indices").to_vec::<i64>(), "{name}: indices");
        }
        (&out * &self.get("gy")).sum().backward();
        for (key, t) in &self.inputs {
            let g = t.grad().unwrap_or_else(|| panic!("{name}: {key} has no gradient"));
            assert_close(&format!("{name}: grad {key}"), &g, &self.get(&format!("grad/{key}")));
        }
    }
}

/// Runs `run` on each case of `op` (at least `min` of them).
fn each_case(op: &str, min: usize, run: impl Fn(&Case, &Config)) {
    let fx = fixture();
    let all = cases(&fx, op);
    assert!(all.len() >= min, "{op}: only {} cases", all.len());
    for (name, config) in &all {
        run(&Case::new(&fx, name), config);
    }
}

#[test]
fn conv_transposes_match_pytorch() {
    let _seeded = seeded();
    each_case("conv_transpose2d", 5, |c, o| {
        c.check(F::conv_transpose2d(c.x(), c.input("weight").unwrap(), c.input("bias"), &o.transposed()), None)
    });
    each_case("conv_transpose1d", 3, |c, o| {
        c.check(F::conv_transpose1d(c.x(), c.input("weight").unwrap(), c.input("bias"), &o.transposed()), None)
    });
}

#[test]
fn conv3d_matches_pytorch() {
    let _seeded = seeded();
    each_case("conv3d", 5, |c, o| {
        c.check(F::conv3d(c.x(), c.input("weight").unwrap(), c.input("bias"), &o.conv3d()), None)
    });
}

#[test]
fn poolings_match_pytorch() {
    let _seeded = seeded();
    each_case("max_pool1d", 3, |c, o| {
        let opts = MaxPool1dOpts {
            kernel_size: o.int("kernel"),
            stride: Some(o.int("stride")),
            padding: o.int("padding"),
            dilation: o.int("dilation"),
            ceil_mode: o.flag("ceil_mode"),
        };
        let (v, i) = F::max_pool1d_with_indices(c.x(), &opts);
        c.check(v, Some(i));
    });
    each_case("avg_pool1d", 3, |c, o| {
        let opts = AvgPool1dOpts {
            kernel_size: o.int("kernel"),
            stride: Some(o.int("stride")),
            padding: o.int("padding"),
            ceil_mode: o.flag("ceil_mode"),
            count_include_pad: o.flag("count_include_pad"),
        };
        c.check(F::avg_pool1d_opts(c.x(), &opts), None);
    });
    // With ties and NaN: PyTorch's element (the first maximum, the latest NaN), its index and
    // its gradient.
    each_case("max_pool3d", 5, |c, o| {
        let (v, i) = F::max_pool3d_with_indices(c.x(), &o.max_pool3d());
        c.check(v, Some(i));
    });
    // A window reading padding alone: -inf, at PyTorch's index past the channel.
    each_case("max_pool3d_forward", 1, |c, o| {
        let (v, i) = F::max_pool3d_with_indices(c.x(), &o.max_pool3d());
        assert_close(&format!("{}: out", c.name), &v, &c.get("out"));
        assert_eq!(i.to_vec::<i64>(), c.get("indices").to_vec::<i64>(), "{}: indices", c.name);
    });
    each_case("adaptive_max_pool2d", 4, |c, o| {
        let (v, i) = F::adaptive_max_pool2d_with_indices(c.x(), o.ints("output_size"));
        c.check(v, Some(i));
    });
    // An output size of 0: empty values and indices of PyTorch's shapes; the (zero) gradient
    // still reaches the input (PyTorch's backward refuses an empty output gradient).
    each_case("adaptive_max_pool2d_empty", 2, |c, o| {
        let (v, i) = F::adaptive_max_pool2d_with_indices(c.x(), o.ints("output_size"));
        assert_eq!((v.shape(), i.shape()), (c.get("out").shape(), c.get("indices").shape()), "{}", c.name);
        assert_eq!((v.numel(), i.dtype()), (0, DType::I64));
        v.sum().backward();
        let g = c.x().grad().expect("a gradient");
        assert_eq!((g.shape(), g.abs().sum().item::<f64>()), (c.x().shape(), 0.0));
    });
}

#[test]
fn bilinear_matches_pytorch() {
    let _seeded = seeded();
    each_case("bilinear", 4, |c, _| {
        let (x1, x2) = (c.input("x1").unwrap(), c.input("x2").unwrap());
        c.check(F::bilinear(x1, x2, c.input("weight").unwrap(), c.input("bias")), None)
    });
}

#[test]
fn small_cases_by_hand() {
    let _seeded = seeded();
    // A 1x1 input through a stride-2 transposed convolution places the kernel: ones(1, 1, 1, 1)
    // by arange(4).view(1, 1, 2, 2) is the kernel itself; output_padding adds a zero row/column.
    let x = Tensor::ones([1, 1, 1, 1]);
    let w = Tensor::arange(4).to_dtype(DType::F32).view([1, 1, 2, 2]);
    let o = ConvTransposeOpts { stride: [2, 2], output_padding: [1, 1], ..Default::default() };
    let y = F::conv_transpose2d(&x, &w, None, &o);
    assert_eq!(y.to_vec::<f32>(), [0.0, 1.0, 0.0, 2.0, 3.0, 0.0, 0.0, 0.0, 0.0]);
    // Adaptive max over [0, 5, 1, 4, 2, 3] to 2 windows of 3: [5, 4] at [1, 3].
    let x = Tensor::from_slice(&[0.0f32, 5.0, 1.0, 4.0, 2.0, 3.0]).view([1, 1, 6]);
    let (v, i) = F::adaptive_max_pool2d_with_indices(&x, [1, 2]);
    assert_eq!((v.to_vec::<f32>(), i.to_vec::<i64>()), (vec![5.0, 4.0], vec![1, 3]));
    assert_eq!(F::max_pool1d(&x, 2).to_vec::<f32>(), [5.0, 4.0, 3.0]);
    assert_eq!(F::avg_pool1d(&x, 3).to_vec::<f32>(), [2.0, 3.0]);
    // f16 inputs compute in f32 and keep their dtype.
    let h = Tensor::ones([1, 1, 2, 2, 2]).to_dtype(DType::F16);
    let y = F::conv3d(&h, &Tensor::ones([1, 1, 2, 2, 2]).to_dtype(DType::F16), None, &Default::default());
    assert_eq!((y.dtype(), y.to_dtype(DType::F32).to_vec::<f32>()), (DType::F16, vec![8.0]));
}

fn gradient_cases() -> [GradCase; 8] {
    [
        (
            "conv_transpose2d",
            |t| {
                let o = ConvTransposeOpts {
                    stride: [2, 1],
                    padding: [1, 0],
                    output_padding: [1, 0],
                    groups: 2,
                    dilation: [1, 2],
                };
                F::conv_transpose2d(&t[0], &t[1], Some(&t[2]), &o)
            },
            vec![leaf(&[1, 2, 2, 3]), leaf(&[2, 1, 2, 2]), leaf(&[2])],
        ),
        (
            "conv_transpose1d",
            |t| {
                let o = ConvTransposeOpts { stride: [2], padding: [1], output_padding: [1], ..Default::default() };
                F::conv_transpose1d(&t[0], &t[1], Some(&t[2]), &o)
            },
            vec![leaf(&[2, 2, 3]), leaf(&[2, 2, 3]), leaf(&[2])],
        ),
        (
            "conv3d",
            |t| {
                let o = Conv3dOpts {
                    stride: [2, 1, 1],
                    padding: Padding::Explicit([1, 0, 1]),
                    dilation: [1, 1, 2],
                    groups: 2,
                };
                F::conv3d(&t[0], &t[1], Some(&t[2]), &o)
            },
            vec![leaf(&[1, 2, 3, 2, 3]), leaf(&[2, 1, 2, 2, 2]), leaf(&[2])],
        ),
        (
            "max_pool1d",
            |t| F::max_pool1d_opts(&t[0], &MaxPool1dOpts { stride: Some(2), padding: 1, ..MaxPool1dOpts::new(3) }),
            vec![leaf(&[2, 2, 6])],
        ),
        (
            "avg_pool1d",
            |t| {
                F::avg_pool1d_opts(
                    &t[0],
                    &AvgPool1dOpts { padding: 1, count_include_pad: false, ..AvgPool1dOpts::new(3) },
                )
            },
            vec![leaf(&[2, 7])],
        ),
        (
            "max_pool3d",
            |t| {
                let o = MaxPool3dOpts { stride: Some([1, 2, 2]), padding: [1, 0, 1], ..MaxPool3dOpts::new([2, 2, 3]) };
                F::max_pool3d_opts(&t[0], &o)
            },
            vec![leaf(&[1, 2, 3, 4, 4])],
        ),
        ("adaptive_max_pool2d", |t| F::adaptive_max_pool2d(&t[0], [2, 3]), vec![leaf(&[2, 5, 4])]),
        (
            "bilinear",
            |t| F::bilinear(&t[0], &t[1], &t[2], Some(&t[3])),
            vec![leaf(&[3, 2]), leaf(&[3, 3]), leaf(&[2, 2, 3]), leaf(&[2])],
        ),
    ]
}

#[test]
fn gradients_match_finite_differences() {
    let _seeded = seeded();
    kiln::manual_seed(7);
    check_gradients(gradient_cases());
}

#[test]
fn compiled_equals_eager_without_graph_breaks() {
    let _seeded = seeded();
    kiln::manual_seed(8);
    let f32_leaves = |case: &GradCase| case.2.iter().map(|t| t.detach().to_dtype(DType::F32)).collect::<Vec<_>>();
    for case in gradient_cases() {
        let f = case.1;
        compiled_equals_eager(&f32_leaves(&case), |ts| {
            let y = f(ts);
            let loss = (&y * &y).sum();
            loss.backward();
            loss
        });
    }
}

/// A module of the fixture's `repr:` and `keys:` entries, built as the fixture's script builds it.
fn module(name: &str) -> Box<dyn Module> {
    let ct = |stride, padding, output_padding, groups| ConvTransposeOpts {
        stride,
        padding,
        output_padding,
        groups,
        dilation: [1, 1],
    };
    match name {
        "conv_transpose2d" => {
            Box::new(nn::ConvTranspose2d::with_opts(4, 6, [3, 3], ct([2, 2], [1, 1], [1, 1], 2), true))
        }
        "conv_transpose2d_plain" => Box::new(nn::ConvTranspose2d::with_opts(2, 3, [2, 3], Default::default(), false)),
        "conv_transpose1d" => {
            let o = ConvTransposeOpts { dilation: [2], ..Default::default() };
            Box::new(nn::ConvTranspose1d::with_opts(2, 3, 3, o, true))
        }
        "conv3d" => {
            let o = Conv3dOpts { stride: [1, 2, 1], padding: Padding::Explicit([1; 3]), ..Default::default() };
            Box::new(nn::Conv3d::with_opts(2, 4, [2, 3, 3], o, true))
        }
        "conv3d_groups" => {
            Box::new(nn::Conv3d::with_opts(4, 2, [3; 3], Conv3dOpts { groups: 2, ..Default::default() }, false))
        }
        "max_pool1d" => Box::new(nn::MaxPool1d::new(2)),
        "avg_pool1d" => Box::new(nn::AvgPool1d::with_opts(AvgPool1dOpts { stride: Some(2), ..AvgPool1dOpts::new(3) })),
        "max_pool3d" => Box::new(nn::MaxPool3d::with_opts(MaxPool3dOpts::new([2, 1, 2]))),
        "max_pool3d_padded" => Box::new(nn::MaxPool3d::with_opts(MaxPool3dOpts {
            stride: Some([2; 3]),
            padding: [1; 3],
            ceil_mode: true,
            ..MaxPool3dOpts::new([3; 3])
        })),
        "adaptive_max_pool2d" => Box::new(nn::AdaptiveMaxPool2d::new([2, 3])),
        "adaptive_max_pool2d_empty" => Box::new(nn::AdaptiveMaxPool2d::new([0, 2])),
        "bilinear" => Box::new(nn::Bilinear::new(3, 4, 5)),
        "bilinear_no_bias" => Box::new(nn::Bilinear::with_bias(2, 2, 1, false)),
        "identity" => Box::new(nn::Identity),
        other => panic!("no module {other}"),
    }
}

/// A boxed module printed as `println!("{module}")` prints it.
struct Printed<'a>(&'a dyn Module);

impl std::fmt::Display for Printed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        nn::fmt_module(self.0, f)
    }
}

#[test]
fn modules_print_and_name_their_parameters_like_pytorch() {
    let _seeded = seeded();
    let fx = fixture();
    let mut seen = 0;
    for (key, repr) in fx.metadata_entries() {
        let Some(name) = key.strip_prefix("repr:") else { continue };
        let m = module(name);
        assert_eq!(Printed(&*m).to_string(), *repr, "{name}: repr");
        let sd = m.state_dict();
        let keys = sd
            .iter()
            .map(|(k, t)| format!("{k}:{}", t.shape().iter().map(usize::to_string).collect::<Vec<_>>().join("x")));
        assert_eq!(keys.collect::<Vec<_>>().join(","), fx.metadata(&format!("keys:{name}")).unwrap(), "{name}: keys");
        seen += 1;
    }
    assert!(seen >= 14, "only {seen} modules");
}

/// Asserts every value of `t` lies in `[-bound, bound]` and some come near both ends.
fn assert_uniform_within(what: &str, t: &Tensor, bound: f64) {
    let v = t.to_dtype(DType::F64).to_vec::<f64>();
    let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    assert!(lo >= -bound && hi <= bound, "{what}: [{lo}, {hi}] outside ±{bound}");
    assert!(lo < -0.7 * bound && hi > 0.7 * bound, "{what}: [{lo}, {hi}] does not span ±{bound}");
}

#[test]
fn parameters_are_initialised_as_pytorch_does() {
    let _seeded = seeded();
    kiln::manual_seed(9);
    // ConvTranspose2d(4, 60, 3, groups=2): weight (4, 30, 3, 3), fan_in = 30·9; kaiming-uniform
    // a = √5 and the bias are both U(±1/√fan_in).
    let opts = ConvTransposeOpts { groups: 2, ..Default::default() };
    let ct = nn::ConvTranspose2d::with_opts(4, 60, [3, 3], opts, true);
    assert_eq!(ct.weight.shape(), &[4, 30, 3, 3]);
    assert_uniform_within("ConvTranspose2d weight", &ct.weight, 1.0 / 270f64.sqrt());
    assert_uniform_within("ConvTranspose2d bias", ct.bias.as_ref().unwrap(), 1.0 / 270f64.sqrt());
    let c3 = nn::Conv3d::new(2, 8, 2);
    assert_uniform_within("Conv3d weight", &c3.weight, 1.0 / 16f64.sqrt());
    let bl = nn::Bilinear::new(4, 3, 60);
    assert_uniform_within("Bilinear weight", &bl.weight, 0.5);
    assert_uniform_within("Bilinear bias", bl.bias.as_ref().unwrap(), 0.5);
    assert!(ct.weight.requires_grad() && bl.weight.requires_grad());
}

#[test]
fn modules_forward_their_functions() {
    let _seeded = seeded();
    kiln::manual_seed(10);
    let x = Tensor::randn([2, 4, 3, 3]);
    let ct = nn::ConvTranspose2d::new(4, 2, 2);
    assert_eq!(
        ct.forward(&x).to_vec::<f32>(),
        F::conv_transpose2d(&x, &ct.weight, ct.bias.as_ref(), &ct.opts).to_vec::<f32>()
    );
    assert_eq!(nn::Conv3d::new(3, 2, 2).forward(&Tensor::randn([1, 3, 4, 3, 3])).shape(), &[1, 2, 3, 2, 2]);
    let seq = Tensor::randn([2, 3, 8]);
    assert_eq!(nn::ConvTranspose1d::new(3, 5, 3).forward(&seq).shape(), &[2, 5, 10]);
    assert_eq!(nn::MaxPool1d::new(2).forward_with_indices(&seq).1.shape(), &[2, 3, 4]);
    assert_eq!(nn::AvgPool1d::new(4).forward(&seq).shape(), &[2, 3, 2]);
    assert_eq!(nn::MaxPool3d::new(2).forward(&x).shape(), &[2, 2, 1, 1]);
    let (v, i) = nn::MaxPool3d::new(2).forward_with_indices(&x);
    assert_eq!((v.shape(), i.shape(), i.dtype()), (&[2, 2, 1, 1][..], &[2, 2, 1, 1][..], DType::I64));
    assert_eq!(nn::AdaptiveMaxPool2d::new([2, 1]).forward_with_indices(&x).0.shape(), &[2, 4, 2, 1]);
    let bl = nn::Bilinear::new(3, 8, 2);
    assert_eq!(bl.forward_with(&seq.narrow(2, 0, 3), &seq).shape(), &[2, 3, 2]);
    assert_eq!(nn::Identity.forward(&x).to_vec::<f32>(), x.to_vec::<f32>());
    let one_input =
        catch_unwind(AssertUnwindSafe(|| bl.forward(&seq))).expect_err("Bilinear::forward takes two inputs");
    let text = one_input.downcast_ref::<String>().unwrap();
    assert!(text.contains("forward_with") && text.contains("[2, 3, 8]"), "{text}");
}

/// The error of `r`, checked to name `op`, the caller's line in this file and each of `words`.
#[track_caller]
fn assert_error(r: kiln::Result<Tensor>, op: &str, kind: ErrorKind, words: &[&str]) {
    let e = r.expect_err("expected an error");
    let text = e.to_string();
    assert_eq!((e.op, e.kind), (op, kind), "{text}");
    assert_eq!(e.location.file(), HERE, "{text}");
    assert_eq!(e.location.line(), std::panic::Location::caller().line(), "{text}");
    for w in words {
        assert!(text.contains(w), "{text} lacks {w:?}");
    }
}

#[test]
fn bad_inputs_are_errors_naming_the_op_shapes_and_line() {
    let _seeded = seeded();
    let x = Tensor::zeros([1, 2, 3, 3]);
    let w = Tensor::zeros([3, 2, 2, 2]);
    let d = ConvTransposeOpts::default();
    #[rustfmt::skip]
    assert_error(F::try_conv_transpose2d(&x, &w, None, &d), "conv_transpose2d", ErrorKind::Shape, &["[3, 2, 2, 2]", "[1, 2, 3, 3]", "3 channels"]);
    let bad_pad = ConvTransposeOpts { stride: [2, 2], output_padding: [2, 0], ..d };
    #[rustfmt::skip]
    assert_error(F::try_conv_transpose2d(&x, &w.narrow(0, 0, 2), None, &bad_pad), "conv_transpose2d", ErrorKind::Value, &["output padding must be smaller"]);
    let crop = ConvTransposeOpts { padding: [3], ..Default::default() };
    #[rustfmt::skip]
    assert_error(F::try_conv_transpose1d(&Tensor::zeros([1, 1, 2]), &Tensor::zeros([1, 1, 2]), None, &crop), "conv_transpose1d", ErrorKind::Shape, &["too small", "[1, 1, 2]"]);
    #[rustfmt::skip]
    assert_error(F::try_conv3d(&x, &Tensor::zeros([1, 1, 3, 2, 2]), None, &Default::default()), "conv3d", ErrorKind::Shape, &["kernel size can't be greater", "[1, 2, 3, 3]"]);
    #[rustfmt::skip]
    assert_error(F::try_conv3d(&Tensor::zeros([1, 3, 2, 2, 2]), &Tensor::zeros([1, 2, 1, 1, 1]), None, &Default::default()), "conv3d", ErrorKind::Shape, &["to have 2 channels", "[1, 3, 2, 2, 2]"]);
    #[rustfmt::skip]
    assert_error(F::try_max_pool1d_opts(&x, &MaxPool1dOpts::new(2)), "max_pool1d", ErrorKind::Shape, &["2D (unbatched) or 3D", "[1, 2, 3, 3]"]);
    let seq = Tensor::zeros([2, 3]);
    #[rustfmt::skip]
    assert_error(F::try_avg_pool1d_opts(&seq, &AvgPool1dOpts { padding: 2, ..AvgPool1dOpts::new(2) }), "avg_pool1d", ErrorKind::Value, &["half of kernel size"]);
    #[rustfmt::skip]
    assert_error(F::try_max_pool3d_opts(&x, &MaxPool3dOpts::new([2, 4, 2])), "max_pool3d", ErrorKind::Shape, &["too small", "[1, 2, 3, 3]"]);
    #[rustfmt::skip]
    assert_error(F::try_max_pool3d_with_indices(&seq, &MaxPool3dOpts::new([1; 3])).map(|r| r.1), "max_pool3d", ErrorKind::Shape, &["4D (unbatched) or 5D", "[2, 3]"]);
    #[rustfmt::skip]
    assert_error(F::try_adaptive_max_pool2d(&Tensor::zeros([4]), [2, 2]), "adaptive_max_pool2d", ErrorKind::Shape, &["[4]"]);
    #[rustfmt::skip]
    assert_error(F::try_bilinear(&seq, &seq, &Tensor::zeros([2, 3, 4]), None), "bilinear", ErrorKind::Shape, &["[2, 3]", "[2, 3, 4]"]);
    // The panicking form reports the caller's line too.
    let line = line!() + 1;
    let err = catch_unwind(AssertUnwindSafe(|| F::conv3d(&x, &w, None, &Default::default()))).expect_err("panics");
    let text = err.downcast_ref::<String>().unwrap();
    assert!(text.starts_with("conv3d: ") && text.contains(&format!("(at {HERE}:{line}")), "{text}");
}
