//! cat and stack: every dim, negative dims, views, mixed dtypes, empty and zero-size inputs,
//! large inputs, and errors. Expected values are hand-computed (the few marked ones were checked
//! with PyTorch).

use kiln::{DType, Tensor};

fn arange(shape: &[usize], from: i64) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((from..from + n as i64).collect::<Vec<i64>>(), shape)
}

#[test]
fn cat_every_dim_of_a_3d_tensor() {
    let a = arange(&[2, 2, 2], 0);
    let b = arange(&[2, 2, 2], 100);
    let c0 = Tensor::cat(&[&a, &b], 0);
    assert_eq!(c0.shape(), &[4, 2, 2]);
    assert_eq!(c0.to_vec::<i64>(), vec![0, 1, 2, 3, 4, 5, 6, 7, 100, 101, 102, 103, 104, 105, 106, 107]);
    let c1 = Tensor::cat(&[&a, &b], 1);
    assert_eq!(c1.shape(), &[2, 4, 2]);
    assert_eq!(c1.to_vec::<i64>(), vec![0, 1, 2, 3, 100, 101, 102, 103, 4, 5, 6, 7, 104, 105, 106, 107]);
    let c2 = Tensor::cat(&[&a, &b], 2);
    assert_eq!(c2.shape(), &[2, 2, 4]);
    assert_eq!(c2.to_vec::<i64>(), vec![0, 1, 100, 101, 2, 3, 102, 103, 4, 5, 104, 105, 6, 7, 106, 107]);
    // Negative dims count from the end.
    assert_eq!(Tensor::cat(&[&a, &b], -1).to_vec::<i64>(), c2.to_vec::<i64>());
    assert_eq!(Tensor::cat(&[&a, &b], -3).to_vec::<i64>(), c0.to_vec::<i64>());
    // Unequal sizes along the dim, three inputs.
    let c = arange(&[2, 1, 2], 50);
    let d = Tensor::cat(&[&a, &c, &b], 1);
    assert_eq!(d.shape(), &[2, 5, 2]);
    assert_eq!(d.to_vec3::<i64>()[1], vec![vec![4, 5], vec![6, 7], vec![52, 53], vec![104, 105], vec![106, 107]]);
}

#[test]
fn cat_of_views() {
    let a = arange(&[2, 3], 0);
    let b = arange(&[2, 3], 10);
    // Checked with PyTorch: torch.cat([a.t(), b.t()], -1)
    let t = Tensor::cat(&[&a.t(), &b.t()], -1);
    assert_eq!(t.to_vec2::<i64>(), vec![vec![0, 3, 10, 13], vec![1, 4, 11, 14], vec![2, 5, 12, 15]]);
    // Sliced, expanded (broadcast) and selected inputs mixed with a contiguous one.
    let n = a.narrow(1, 1, 2);
    let e = arange(&[1, 2], 7).expand([2, 2]);
    let out = Tensor::cat(&[&n, &e, &b.narrow(1, 0, 1)], 1);
    assert_eq!(out.to_vec2::<i64>(), vec![vec![1, 2, 7, 8, 10], vec![4, 5, 7, 8, 13]]);
    // The same storage several times.
    let out = Tensor::cat(&[&a, &a, &a.narrow(0, 1, 1)], 0);
    assert_eq!(out.to_vec::<i64>(), vec![0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 3, 4, 5]);
    // The result owns its storage, even for one input.
    let one = Tensor::cat(&[&a], 0);
    assert!(!one.shares_storage_with(&a));
    assert_eq!(one.to_vec::<i64>(), a.to_vec::<i64>());
    // Owned tensors work too (e.g. the pieces of a chunk).
    let pieces = a.chunk(3, 1);
    assert_eq!(Tensor::cat(&pieces, 1).to_vec::<i64>(), a.to_vec::<i64>());
}

#[test]
fn cat_every_dtype() {
    for dtype in DType::ALL {
        let a = arange(&[2, 2], 0).to_dtype(dtype);
        let b = arange(&[2, 1], 1).to_dtype(dtype).t();
        let out = Tensor::cat(&[&a, &b], 0);
        assert_eq!(out.dtype(), dtype);
        let want: Vec<f64> = [0, 1, 2, 3, 1, 2]
            .iter()
            .map(|&v: &i64| if dtype == DType::Bool { (v != 0) as i64 as f64 } else { v as f64 })
            .collect();
        assert_eq!(out.to_dtype(DType::F64).to_vec::<f64>(), want, "{dtype}");
    }
}

#[test]
fn cat_promotes_dtypes() {
    // torch.cat([int32, uint8, bool]).dtype == int32; [bool, float16] -> float16; an empty
    // float64 input still takes part: [empty(0, f64), f32] -> float64 (checked with PyTorch).
    let i = Tensor::new(&[1i32, 2]);
    let u = Tensor::new(&[3u8]);
    let b = Tensor::new(&[true]);
    let out = Tensor::cat(&[&i, &u, &b], 0);
    assert_eq!(out.dtype(), DType::I32);
    assert_eq!(out.to_vec::<i32>(), vec![1, 2, 3, 1]);
    let h = Tensor::new(&[0.5f32]).to_dtype(DType::F16);
    let out = Tensor::cat(&[&b, &h], 0);
    assert_eq!(out.dtype(), DType::F16);
    assert_eq!(out.to_dtype(DType::F32).to_vec::<f32>(), vec![1.0, 0.5]);
    let e = Tensor::zeros_opts([0], DType::F64, kiln::Device::Cpu);
    let out = Tensor::cat(&[&e, &Tensor::ones([2, 3])], 0);
    assert_eq!((out.dtype(), out.shape()), (DType::F64, &[2usize, 3][..]));
    let out = Tensor::cat(&[&Tensor::new(&[1i64]), &Tensor::new(&[2.5f64])], 0);
    assert_eq!(out.to_vec::<f64>(), vec![1.0, 2.5]);
}

#[test]
fn empty_and_zero_size_inputs() {
    let a = arange(&[2, 3], 0);
    let empty = Tensor::zeros([0]).to_dtype(DType::I64);
    // Legacy rule: 1-D empty tensors are skipped whatever the dim.
    assert_eq!(Tensor::cat(&[&empty, &a, &empty], 1).to_vec2::<i64>(), a.to_vec2::<i64>());
    assert_eq!(Tensor::cat(&[&empty, &empty], 0).shape(), &[0]);
    // Zero size along the dim contributes nothing.
    let z = arange(&[0, 3], 0);
    let out = Tensor::cat(&[&z, &a, &z], 0);
    assert_eq!(out.to_vec2::<i64>(), a.to_vec2::<i64>());
    // Zero size in another dim: an empty result of the right shape.
    let w = arange(&[2, 0], 0);
    assert_eq!(Tensor::cat(&[&w, &w], 0).shape(), &[4, 0]);
    assert_eq!(Tensor::cat(&[&w, &a], 1).to_vec2::<i64>(), a.to_vec2::<i64>());
}

#[test]
fn large_inputs_take_the_parallel_path() {
    let a = arange(&[300, 500], 0).to_dtype(DType::F32);
    let b = arange(&[500, 300], 1_000_000).to_dtype(DType::F32).t();
    let out = Tensor::cat(&[&a, &b], 1);
    assert_eq!(out.shape(), &[300, 1000]);
    let v = out.to_vec::<f32>();
    for r in [0, 1, 150, 299] {
        for c in [0, 1, 499, 500, 501, 999] {
            let want = if c < 500 { (r * 500 + c) as f32 } else { (1_000_000 + (c - 500) * 300 + r) as f32 };
            assert_eq!(v[r * 1000 + c], want, "({r}, {c})");
        }
    }
    let rows = Tensor::cat(&[&a, &a], 0);
    assert_eq!(rows.shape(), &[600, 500]);
    let v = rows.to_vec::<f32>();
    assert!(v[..150_000] == v[150_000..] && v[149_999] == 149_999.0);
}

#[test]
fn stack_every_dim() {
    let a = arange(&[2, 3], 0);
    let b = arange(&[2, 3], 10);
    let s0 = Tensor::stack(&[&a, &b], 0);
    assert_eq!(s0.shape(), &[2, 2, 3]);
    assert_eq!(s0.to_vec::<i64>(), vec![0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15]);
    let s1 = Tensor::stack(&[&a, &b], 1);
    assert_eq!(s1.shape(), &[2, 2, 3]);
    assert_eq!(s1.to_vec::<i64>(), vec![0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15]);
    // Checked with PyTorch: torch.stack([a, b], 2)
    let s2 = Tensor::stack(&[&a, &b], 2);
    assert_eq!(
        s2.to_vec3::<i64>(),
        vec![vec![vec![0, 10], vec![1, 11], vec![2, 12]], vec![vec![3, 13], vec![4, 14], vec![5, 15]]]
    );
    assert_eq!(Tensor::stack(&[&a, &b], -1).to_vec::<i64>(), s2.to_vec::<i64>());
    assert_eq!(Tensor::stack(&[&a, &b], -3).to_vec::<i64>(), s0.to_vec::<i64>());
    // Views and 0-dim tensors; stack promotes like cat (torch.stack([tensor(1.), tensor(2)])).
    assert_eq!(Tensor::stack(&[&a.t(), &b.t()], 0).to_vec3::<i64>()[1][2], vec![12, 15]);
    let s = Tensor::stack(&[&Tensor::scalar(1.0f32), &Tensor::scalar(2i64)], 0);
    assert_eq!((s.dtype(), s.to_vec::<f32>()), (DType::F32, vec![1.0, 2.0]));
    // Zero-size inputs stack to a zero-size result.
    let z = arange(&[0, 3], 0);
    assert_eq!(Tensor::stack(&[&z, &z, &z], 1).shape(), &[0, 3, 3]);
}

#[test]
fn errors_name_the_tensors_and_shapes() {
    let e = |r: kiln::Result<Tensor>| r.unwrap_err().to_string();
    let a = Tensor::zeros([2, 3]);
    assert!(e(Tensor::try_cat::<&Tensor>(&[], 0))
        .starts_with("cat: expected a non-empty list of tensors (at tests/cat.rs:"));
    assert!(e(Tensor::try_cat(&[&a, &Tensor::scalar(1.0f32)], 0))
        .starts_with("cat: zero-dimensional tensor (at position 1) cannot be concatenated"));
    let msg = e(Tensor::try_cat(&[&a, &Tensor::zeros([2, 3, 1])], 0));
    assert!(
        msg.starts_with(
            "cat: tensors must have the same number of dimensions, but got [2, 3] (tensor 0) and [2, 3, 1] (tensor 1)"
        ),
        "{msg}"
    );
    let msg = e(Tensor::try_cat(&[&a, &a, &Tensor::zeros([3, 3])], 1));
    assert!(
        msg.starts_with("cat: sizes of tensors must match except in dimension 1: expected size 2 but got size 3 in dimension 0 for tensor 2 (shapes [2, 3] and [3, 3])"),
        "{msg}"
    );
    let msg = e(Tensor::try_cat(&[&a], 2));
    assert!(msg.starts_with("cat: dimension out of range (expected to be in range of [-2, 1], but got 2)"), "{msg}");
    assert!(e(Tensor::try_stack::<&Tensor>(&[], 0)).starts_with("stack: expected a non-empty list of tensors"));
    let msg = e(Tensor::try_stack(&[&a, &Tensor::zeros([3, 3])], 0));
    assert!(
        msg.starts_with(
            "stack: expected each tensor to be equal size, but got [2, 3] at entry 0 and [3, 3] at entry 1"
        ),
        "{msg}"
    );
    let msg = e(Tensor::try_stack(&[&a], 3));
    assert!(msg.starts_with("stack: dimension out of range (expected to be in range of [-3, 2], but got 3)"), "{msg}");
    let r = std::panic::catch_unwind(|| Tensor::cat(&[&a, &Tensor::zeros([2, 3, 1])], 0));
    let p = r.unwrap_err();
    let text = p.downcast_ref::<String>().unwrap();
    assert!(
        text.starts_with("cat: tensors must have the same number of dimensions") && text.contains("tests/cat.rs:"),
        "{text}"
    );
}
