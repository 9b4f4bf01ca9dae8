//! Printing: `Display`/`Debug` match PyTorch's `repr` character for character. Every expected
//! string below was produced by PyTorch 2.x (`repr(expr)` for the Python expression in the
//! comment above it), and each Rust tensor holds the same values.

use kiln::{DType, Device, Tensor};

/// Checks both `Display` and `Debug`.
#[track_caller]
fn check(t: Tensor, want: &str) {
    assert_eq!(t.to_string(), want);
    assert_eq!(format!("{t:?}"), want);
}

/// A 1-D f32 tensor with `f(i)` at index `i`.
fn f32s(n: usize, f: impl Fn(usize) -> f32) -> Tensor {
    Tensor::from_vec((0..n).map(f).collect(), [n])
}

#[test]
fn floats_fixed_and_whole() {
    // torch.tensor([[1., 2.], [3., 4.]])
    check(
        Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]]),
        r#"tensor([[1., 2.],
        [3., 4.]])"#,
    );
    // torch.tensor([[1.5, 2.], [3., -4.25]])
    check(
        Tensor::new(&[[1.5f32, 2.0], [3.0, -4.25]]),
        r#"tensor([[ 1.5000,  2.0000],
        [ 3.0000, -4.2500]])"#,
    );
    // torch.tensor([1.5, 2.], dtype=torch.float64)
    check(Tensor::new(&[1.5f64, 2.0]), r#"tensor([1.5000, 2.0000], dtype=torch.float64)"#);
    // torch.zeros(2, 3)
    check(
        Tensor::zeros([2, 3]),
        r#"tensor([[0., 0., 0.],
        [0., 0., 0.]])"#,
    );
    // torch.tensor([-0., 1., 2.])
    check(Tensor::new(&[-0.0f32, 1.0, 2.0]), r#"tensor([-0., 1., 2.])"#);
    // torch.tensor([[0.5, 1.5, 2.5]])
    check(Tensor::new(&[[0.5f32, 1.5, 2.5]]), r#"tensor([[0.5000, 1.5000, 2.5000]])"#);
}

#[test]
fn zero_dim() {
    // torch.tensor(3.5)
    check(Tensor::new(&3.5f32), r#"tensor(3.5000)"#);
    // torch.tensor(-3.5)
    check(Tensor::new(&-3.5f32), r#"tensor(-3.5000)"#);
    // torch.tensor(3.)
    check(Tensor::new(&3.0f32), r#"tensor(3.)"#);
    // torch.tensor(3)
    check(Tensor::new(&3i64), r#"tensor(3)"#);
    // torch.tensor(True)
    check(Tensor::new(&true), r#"tensor(True)"#);
    // torch.tensor(0.1, dtype=torch.float64)
    check(Tensor::new(&0.1f64), r#"tensor(0.1000, dtype=torch.float64)"#);
    // torch.tensor(1e-5)
    check(Tensor::new(&1e-5f32), r#"tensor(1.0000e-05)"#);
}

#[test]
fn empty() {
    // torch.zeros(0)
    check(Tensor::zeros([0]), r#"tensor([])"#);
    // torch.zeros(0, 3)
    check(Tensor::zeros([0, 3]), r#"tensor([], size=(0, 3))"#);
    // torch.zeros(0, dtype=torch.int64)
    check(Tensor::zeros_opts([0], DType::I64, Device::Cpu), r#"tensor([], dtype=torch.int64)"#);
    // torch.zeros(2, 0, 3, dtype=torch.bool)
    check(Tensor::zeros_opts([2, 0, 3], DType::Bool, Device::Cpu), r#"tensor([], size=(2, 0, 3), dtype=torch.bool)"#);
}

#[test]
fn scientific() {
    // torch.tensor([1e-5, 1.])
    check(Tensor::new(&[1e-5f32, 1.0]), r#"tensor([1.0000e-05, 1.0000e+00])"#);
    // torch.tensor([1e9, 1.])
    check(Tensor::new(&[1e9f32, 1.0]), r#"tensor([1.0000e+09, 1.0000e+00])"#);
    // torch.tensor([0.001, 2., 3.5])
    check(Tensor::new(&[0.001f32, 2.0, 3.5]), r#"tensor([1.0000e-03, 2.0000e+00, 3.5000e+00])"#);
    // torch.tensor([1e10, 1., -2.])
    check(Tensor::new(&[1e10f32, 1.0, -2.0]), r#"tensor([ 1.0000e+10,  1.0000e+00, -2.0000e+00])"#);
}

#[test]
fn non_finite() {
    // torch.tensor([1.5, float('inf'), float('-inf'), float('nan')])
    check(
        Tensor::new(&[1.5f32, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]),
        r#"tensor([1.5000,    inf,   -inf,    nan])"#,
    );
    // torch.tensor([float('nan'), 1., float('-inf')])
    check(Tensor::new(&[f32::NAN, 1.0, f32::NEG_INFINITY]), r#"tensor([nan, 1., -inf])"#);
    // torch.tensor([float('nan'), float('nan')])
    check(Tensor::new(&[f32::NAN, f32::NAN]), r#"tensor([nan, nan])"#);
}

#[test]
fn integers_and_bools() {
    // torch.tensor([-1, 10, 100])
    check(Tensor::new(&[-1i64, 10, 100]), r#"tensor([ -1,  10, 100])"#);
    // torch.tensor([[1, -2], [30, 4]], dtype=torch.int32)
    check(
        Tensor::new(&[[1i32, -2], [30, 4]]),
        r#"tensor([[ 1, -2],
        [30,  4]], dtype=torch.int32)"#,
    );
    // torch.tensor([0, 7, 255], dtype=torch.uint8)
    check(Tensor::new(&[0u8, 7, 255]), r#"tensor([  0,   7, 255], dtype=torch.uint8)"#);
    // torch.tensor([[True, False], [False, True]])
    check(
        Tensor::new(&[[true, false], [false, true]]),
        r#"tensor([[ True, False],
        [False,  True]])"#,
    );
}

#[test]
fn half_types() {
    // torch.tensor([1.7, -2.9, 1000.], dtype=torch.float16)
    check(
        Tensor::new(&[1.7f32, -2.9, 1000.0]).to_dtype(DType::F16),
        r#"tensor([   1.7002,   -2.9004, 1000.0000], dtype=torch.float16)"#,
    );
    // torch.tensor([1.7, -2.9, 3.], dtype=torch.bfloat16)
    check(
        Tensor::new(&[1.7f32, -2.9, 3.0]).to_dtype(DType::BF16),
        r#"tensor([ 1.7031, -2.9062,  3.0000], dtype=torch.bfloat16)"#,
    );
    // torch.tensor([1., 2.], dtype=torch.float16)
    check(Tensor::new(&[1.0f32, 2.0]).to_dtype(DType::F16), r#"tensor([1., 2.], dtype=torch.float16)"#);
}

#[test]
fn nesting_and_wrapping() {
    // torch.arange(24.).reshape(2, 3, 4)
    check(
        f32s(24, |i| i as f32).reshape([2, 3, 4]),
        r#"tensor([[[ 0.,  1.,  2.,  3.],
         [ 4.,  5.,  6.,  7.],
         [ 8.,  9., 10., 11.]],

        [[12., 13., 14., 15.],
         [16., 17., 18., 19.],
         [20., 21., 22., 23.]]])"#,
    );
    // torch.arange(30, dtype=torch.float32) / 3
    check(
        f32s(30, |i| i as f32 / 3.0),
        r#"tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,
        3.0000, 3.3333, 3.6667, 4.0000, 4.3333, 4.6667, 5.0000, 5.3333, 5.6667,
        6.0000, 6.3333, 6.6667, 7.0000, 7.3333, 7.6667, 8.0000, 8.3333, 8.6667,
        9.0000, 9.3333, 9.6667])"#,
    );
    // torch.arange(12, dtype=torch.float64) / 7
    check(
        Tensor::from_vec((0..12).map(|i| i as f64 / 7.0).collect(), [12]),
        r#"tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,
        1.2857, 1.4286, 1.5714], dtype=torch.float64)"#,
    );
    // torch.arange(40) * 1000
    check(
        Tensor::from_vec((0..40).map(|i| i * 1000i64).collect(), [40]),
        r#"tensor([    0,  1000,  2000,  3000,  4000,  5000,  6000,  7000,  8000,  9000,
        10000, 11000, 12000, 13000, 14000, 15000, 16000, 17000, 18000, 19000,
        20000, 21000, 22000, 23000, 24000, 25000, 26000, 27000, 28000, 29000,
        30000, 31000, 32000, 33000, 34000, 35000, 36000, 37000, 38000, 39000])"#,
    );
}

#[test]
fn views_print_their_values() {
    // torch.arange(6.).reshape(2, 3).t() / 4
    check(
        f32s(6, |i| i as f32 / 4.0).reshape([2, 3]).t(),
        r#"tensor([[0.0000, 0.7500],
        [0.2500, 1.0000],
        [0.5000, 1.2500]])"#,
    );
    // torch.arange(12).reshape(3, 4)[:, 1:3]
    check(
        Tensor::arange(12).reshape([3, 4]).narrow(1, 1, 2),
        r#"tensor([[ 1,  2],
        [ 5,  6],
        [ 9, 10]])"#,
    );
    // torch.tensor([1.25, -2.]).expand(3, 2)
    check(
        Tensor::new(&[1.25f32, -2.0]).expand([3, 2]),
        r#"tensor([[ 1.2500, -2.0000],
        [ 1.2500, -2.0000],
        [ 1.2500, -2.0000]])"#,
    );
}

#[test]
fn summarised_past_1000_elements() {
    // torch.arange(2000, dtype=torch.float32)
    check(
        f32s(2000, |i| i as f32),
        r#"tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,
        1.9990e+03])"#,
    );
    // torch.arange(1600).reshape(40, 40)
    check(
        Tensor::arange(1600).reshape([40, 40]),
        r#"tensor([[   0,    1,    2,  ...,   37,   38,   39],
        [  40,   41,   42,  ...,   77,   78,   79],
        [  80,   81,   82,  ...,  117,  118,  119],
        ...,
        [1480, 1481, 1482,  ..., 1517, 1518, 1519],
        [1520, 1521, 1522,  ..., 1557, 1558, 1559],
        [1560, 1561, 1562,  ..., 1597, 1598, 1599]])"#,
    );
    // (torch.arange(2000, dtype=torch.float32) / 8).reshape(10, 10, 20)
    check(
        f32s(2000, |i| i as f32 / 8.0).reshape([10, 10, 20]),
        r#"tensor([[[0.0000e+00, 1.2500e-01, 2.5000e-01,  ..., 2.1250e+00,
          2.2500e+00, 2.3750e+00],
         [2.5000e+00, 2.6250e+00, 2.7500e+00,  ..., 4.6250e+00,
          4.7500e+00, 4.8750e+00],
         [5.0000e+00, 5.1250e+00, 5.2500e+00,  ..., 7.1250e+00,
          7.2500e+00, 7.3750e+00],
         ...,
         [1.7500e+01, 1.7625e+01, 1.7750e+01,  ..., 1.9625e+01,
          1.9750e+01, 1.9875e+01],
         [2.0000e+01, 2.0125e+01, 2.0250e+01,  ..., 2.2125e+01,
          2.2250e+01, 2.2375e+01],
         [2.2500e+01, 2.2625e+01, 2.2750e+01,  ..., 2.4625e+01,
          2.4750e+01, 2.4875e+01]],

        [[2.5000e+01, 2.5125e+01, 2.5250e+01,  ..., 2.7125e+01,
          2.7250e+01, 2.7375e+01],
         [2.7500e+01, 2.7625e+01, 2.7750e+01,  ..., 2.9625e+01,
          2.9750e+01, 2.9875e+01],
         [3.0000e+01, 3.0125e+01, 3.0250e+01,  ..., 3.2125e+01,
          3.2250e+01, 3.2375e+01],
         ...,
         [4.2500e+01, 4.2625e+01, 4.2750e+01,  ..., 4.4625e+01,
          4.4750e+01, 4.4875e+01],
         [4.5000e+01, 4.5125e+01, 4.5250e+01,  ..., 4.7125e+01,
          4.7250e+01, 4.7375e+01],
         [4.7500e+01, 4.7625e+01, 4.7750e+01,  ..., 4.9625e+01,
          4.9750e+01, 4.9875e+01]],

        [[5.0000e+01, 5.0125e+01, 5.0250e+01,  ..., 5.2125e+01,
          5.2250e+01, 5.2375e+01],
         [5.2500e+01, 5.2625e+01, 5.2750e+01,  ..., 5.4625e+01,
          5.4750e+01, 5.4875e+01],
         [5.5000e+01, 5.5125e+01, 5.5250e+01,  ..., 5.7125e+01,
          5.7250e+01, 5.7375e+01],
         ...,
         [6.7500e+01, 6.7625e+01, 6.7750e+01,  ..., 6.9625e+01,
          6.9750e+01, 6.9875e+01],
         [7.0000e+01, 7.0125e+01, 7.0250e+01,  ..., 7.2125e+01,
          7.2250e+01, 7.2375e+01],
         [7.2500e+01, 7.2625e+01, 7.2750e+01,  ..., 7.4625e+01,
          7.4750e+01, 7.4875e+01]],

        ...,

        [[1.7500e+02, 1.7512e+02, 1.7525e+02,  ..., 1.7712e+02,
          1.7725e+02, 1.7738e+02],
         [1.7750e+02, 1.7762e+02, 1.7775e+02,  ..., 1.7962e+02,
          1.7975e+02, 1.7988e+02],
         [1.8000e+02, 1.8012e+02, 1.8025e+02,  ..., 1.8212e+02,
          1.8225e+02, 1.8238e+02],
         ...,
         [1.9250e+02, 1.9262e+02, 1.9275e+02,  ..., 1.9462e+02,
          1.9475e+02, 1.9488e+02],
         [1.9500e+02, 1.9512e+02, 1.9525e+02,  ..., 1.9712e+02,
          1.9725e+02, 1.9738e+02],
         [1.9750e+02, 1.9762e+02, 1.9775e+02,  ..., 1.9962e+02,
          1.9975e+02, 1.9988e+02]],

        [[2.0000e+02, 2.0012e+02, 2.0025e+02,  ..., 2.0212e+02,
          2.0225e+02, 2.0238e+02],
         [2.0250e+02, 2.0262e+02, 2.0275e+02,  ..., 2.0462e+02,
          2.0475e+02, 2.0488e+02],
         [2.0500e+02, 2.0512e+02, 2.0525e+02,  ..., 2.0712e+02,
          2.0725e+02, 2.0738e+02],
         ...,
         [2.1750e+02, 2.1762e+02, 2.1775e+02,  ..., 2.1962e+02,
          2.1975e+02, 2.1988e+02],
         [2.2000e+02, 2.2012e+02, 2.2025e+02,  ..., 2.2212e+02,
          2.2225e+02, 2.2238e+02],
         [2.2250e+02, 2.2262e+02, 2.2275e+02,  ..., 2.2462e+02,
          2.2475e+02, 2.2488e+02]],

        [[2.2500e+02, 2.2512e+02, 2.2525e+02,  ..., 2.2712e+02,
          2.2725e+02, 2.2738e+02],
         [2.2750e+02, 2.2762e+02, 2.2775e+02,  ..., 2.2962e+02,
          2.2975e+02, 2.2988e+02],
         [2.3000e+02, 2.3012e+02, 2.3025e+02,  ..., 2.3212e+02,
          2.3225e+02, 2.3238e+02],
         ...,
         [2.4250e+02, 2.4262e+02, 2.4275e+02,  ..., 2.4462e+02,
          2.4475e+02, 2.4488e+02],
         [2.4500e+02, 2.4512e+02, 2.4525e+02,  ..., 2.4712e+02,
          2.4725e+02, 2.4738e+02],
         [2.4750e+02, 2.4762e+02, 2.4775e+02,  ..., 2.4962e+02,
          2.4975e+02, 2.4988e+02]]])"#,
    );
    // (torch.arange(1200) % 3 == 0)
    check(
        Tensor::from_vec((0..1200).map(|i| i % 3 == 0).collect(), [1200]),
        r#"tensor([ True, False, False,  ...,  True, False, False])"#,
    );
    // torch.arange(2000, dtype=torch.float32) / 3 * 1e-3
    check(
        f32s(2000, |i| i as f32 / 3.0 * 1e-3),
        r#"tensor([0.0000e+00, 3.3333e-04, 6.6667e-04,  ..., 6.6567e-01, 6.6600e-01,
        6.6633e-01])"#,
    );
    // torch.arange(1005).reshape(1005, 1)
    check(
        Tensor::arange(1005).reshape([1005, 1]),
        r#"tensor([[   0],
        [   1],
        [   2],
        ...,
        [1002],
        [1003],
        [1004]])"#,
    );
}

#[test]
fn summarised_large_tensor() {
    // torch.arange(200000, dtype=torch.float64).reshape(400, 500)
    check(
        Tensor::from_vec((0..200_000).map(|i| i as f64).collect(), [400, 500]),
        r#"tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.9700e+02, 4.9800e+02,
         4.9900e+02],
        [5.0000e+02, 5.0100e+02, 5.0200e+02,  ..., 9.9700e+02, 9.9800e+02,
         9.9900e+02],
        [1.0000e+03, 1.0010e+03, 1.0020e+03,  ..., 1.4970e+03, 1.4980e+03,
         1.4990e+03],
        ...,
        [1.9850e+05, 1.9850e+05, 1.9850e+05,  ..., 1.9900e+05, 1.9900e+05,
         1.9900e+05],
        [1.9900e+05, 1.9900e+05, 1.9900e+05,  ..., 1.9950e+05, 1.9950e+05,
         1.9950e+05],
        [1.9950e+05, 1.9950e+05, 1.9950e+05,  ..., 2.0000e+05, 2.0000e+05,
         2.0000e+05]], dtype=torch.float64)"#,
    );
}

#[test]
fn autograd_suffixes() {
    // x = torch.ones(2, 2, requires_grad=True); y = x + 2; out = (y * y * 3).mean()
    let x = Tensor::ones([2, 2]).requires_grad_(true);
    check(x.clone(), "tensor([[1., 1.],\n        [1., 1.]], requires_grad=True)");
    let y = &x + 2.0;
    check(y.clone(), "tensor([[3., 3.],\n        [3., 3.]], grad_fn=<AddBackward0>)");
    check((&y * &y * 3.0).mean(), "tensor(27., grad_fn=<MeanBackward0>)");
    // torch.ones(2, dtype=torch.float64, requires_grad=True) * 2
    let z = Tensor::ones([2]).to_dtype(DType::F64).requires_grad_(true) * 2.0;
    check(z, "tensor([2., 2.], dtype=torch.float64, grad_fn=<MulBackward0>)");
}
