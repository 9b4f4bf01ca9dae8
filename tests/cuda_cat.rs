//! `cat` and `stack` on CUDA tensors against the CPU (`test_device!`): every dim, negative
//! dims, transposed, sliced and expanded inputs, mixed dtypes (promoted), skipped 1-D empty
//! inputs, empty results, and gradients (each input's slice of the output's).

#[path = "common/device.rs"]
#[macro_use]
mod device;

use kiln::{DType, Device, Tensor};

/// `0, 1, 2, …` as a tensor of `shape` and `dtype` on `d`, plus `base`.
fn seq(shape: &[usize], base: f32, dtype: DType, d: Device) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| base + i as f32).collect(), shape).to_dtype(dtype).to(&d)
}

test_device!(cat_along_every_dim_of_views, |d| {
    let f = DType::F32;
    let a = seq(&[2, 3, 4], 0.0, f, d);
    let b = seq(&[2, 5, 4], 100.0, f, d);
    let c = seq(&[4, 3, 2], 200.0, f, d).transpose(0, 2); // [2, 3, 4], transposed
    let wide = seq(&[2, 3, 9], 300.0, f, d).narrow(2, 2, 4); // sliced rows
    let row = seq(&[1, 3, 4], 400.0, f, d).expand([2, 3, 4]); // stride-0 batch
    vec![
        Tensor::cat(&[&a, &c, &wide, &row], 0),
        Tensor::cat(&[&a, &b, &c], 1),
        Tensor::cat(&[&a, &c, &wide], -1),
        Tensor::cat(&[&c], 2),
        // Odd shapes: one column next to many.
        Tensor::cat(&[&seq(&[7, 1], 0.0, f, d), &seq(&[7, 13], 50.0, f, d).t().t()], 1),
    ]
});

test_device!(cat_promotes_skips_and_handles_empties, |d| {
    let i = seq(&[2, 3], 0.0, DType::I64, d);
    let h = seq(&[2, 3], 0.5, DType::F16, d);
    let u = seq(&[1, 3], 250.0, DType::U8, d);
    let empty1d = Tensor::zeros_opts([0], DType::F64, d);
    let none = Tensor::zeros_opts([0, 3], DType::F32, d);
    vec![
        Tensor::cat(&[&i, &h, &u], 0),             // promoted to f16
        Tensor::cat(&[&i, &u], 0),                 // int64
        Tensor::cat(&[&empty1d, &i, &empty1d], 1), // 1-D empties skipped; f64 by promotion
        Tensor::cat(&[&none, &i.to_dtype(DType::F32)], 0),
        Tensor::cat(&[&none, &none], 0),
        Tensor::cat(&[&empty1d, &empty1d], 0),
        Tensor::cat(&[&i.ge(2), &u.ge(251)], 0), // bool
    ]
});

test_device!(stack_along_new_dims, |d| {
    let f = DType::F32;
    let a = seq(&[3, 4], 0.0, f, d);
    let b = seq(&[4, 3], 20.0, f, d).t();
    let c = seq(&[3, 8], 40.0, f, d).narrow(1, 2, 4);
    vec![
        Tensor::stack(&[&a, &b, &c], 0),
        Tensor::stack(&[&a, &b, &c], 1),
        Tensor::stack(&[&a, &b], 2),
        Tensor::stack(&[&a, &c], -1),
        Tensor::stack(&[&seq(&[5], 0.0, DType::BF16, d), &seq(&[5], 9.0, DType::BF16, d)], 0),
    ]
});

test_device!(gradients_of_cat_and_stack, |d| {
    let f = DType::F32;
    let leaf = |t: Tensor| t.requires_grad_(true);
    let a = leaf(seq(&[2, 3], 0.0, f, d));
    let b = leaf(seq(&[2, 5], 10.0, f, d));
    let h = leaf(seq(&[2, 2], 1.0, DType::F64, d));
    let y = Tensor::cat(&[&a, &b, &h.to_dtype(f)], 1);
    (&y * seq(&[2, 10], -3.0, f, d)).sum().backward();
    let s = Tensor::stack(&[&a, &a.t().t(), &(&a * 2.0)], 1);
    (&s * seq(&[2, 3, 3], 1.0, f, d)).sum().backward();
    vec![y, s, a.grad().expect("a's gradient"), b.grad().expect("b's gradient"), h.grad().expect("h's gradient")]
});

test_device!(cat_errors_name_the_op_and_devices, |d| {
    let a = seq(&[2, 3], 0.0, DType::F32, d);
    let e = Tensor::try_cat(&[&a, &seq(&[3, 2], 0.0, DType::F32, d)], 0).unwrap_err().to_string();
    assert!(e.starts_with("cat: sizes of tensors must match except in dimension 0"), "{e}");
    if d.is_cuda() {
        let e = Tensor::try_cat(&[&a, &seq(&[2, 3], 0.0, DType::F32, Device::Cpu)], 0).unwrap_err().to_string();
        assert!(e.starts_with("cat: expected all tensors to be on the same device, but found cuda:0 and cpu"), "{e}");
        let e = Tensor::try_stack(&[&a, &a.to(&Device::Cpu)], 0).unwrap_err().to_string();
        assert!(e.starts_with("stack: expected all tensors to be on the same device"), "{e}");
    }
    vec![]
});
