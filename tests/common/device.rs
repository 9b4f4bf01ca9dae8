//! Running one op test on every device: `test_device!` runs a body on the CPU and, when a CUDA
//! device is available, on `cuda:0`, and checks that the CUDA results match the CPU ones.
//!
//! Use it from a test file with `#[path = "common/device.rs"] #[macro_use] mod device;`.

use kiln::{DType, Device, Tensor};

/// Defines `#[test] fn $name()`: `$body` (with `$dev` bound to the device, returning a
/// `Vec<Tensor>`) runs on the CPU, then on `cuda:0` when a CUDA device is available (else the
/// test prints that it skips the CUDA run), and [`assert_same`] compares the two result lists.
#[macro_export]
macro_rules! test_device {
    ($name:ident, |$dev:ident| $body:expr) => {
        #[test]
        fn $name() {
            let run = |$dev: kiln::Device| -> Vec<kiln::Tensor> { $body };
            let cpu = run(kiln::Device::Cpu);
            if !kiln::Device::cuda_is_available() {
                println!("no CUDA device, skipping the CUDA run of {}", stringify!($name));
                return;
            }
            let cuda = run(kiln::Device::Cuda(0));
            $crate::device::assert_same(stringify!($name), &cpu, &cuda);
        }
    };
}

/// The relative and absolute tolerance of a CUDA result against the CPU one: integer and bool
/// results exactly; float results within a few units in the last place (CUDA's math library
/// is not bit-identical to Rust's).
pub fn tolerance(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F64 => (1e-12, 1e-12),
        DType::F32 => (1e-5, 1e-6),
        DType::F16 => (2e-3, 1e-3),
        DType::BF16 => (1.6e-2, 1e-2),
        _ => (0.0, 0.0),
    }
}

/// Panics unless every CUDA result is on `cuda:0` with the CPU result's shape and dtype and
/// values within [`tolerance`] (NaN matching NaN), naming the test, the result and the first
/// differing element.
pub fn assert_same(test: &str, cpu: &[Tensor], cuda: &[Tensor]) {
    assert_eq!(cpu.len(), cuda.len(), "{test}: result counts differ");
    for (i, (c, g)) in cpu.iter().zip(cuda).enumerate() {
        assert_eq!(g.device(), Device::Cuda(0), "{test}: result {i} is not on cuda:0");
        assert_eq!((g.shape(), g.dtype()), (c.shape(), c.dtype()), "{test}: result {i}'s shape or dtype differs");
        let (rtol, atol) = tolerance(c.dtype());
        let want = c.to_dtype(DType::F64).contiguous().to_vec::<f64>();
        let got = g.to(&Device::Cpu).to_dtype(DType::F64).contiguous().to_vec::<f64>();
        for (k, (&w, &v)) in want.iter().zip(&got).enumerate() {
            let same = (w.is_nan() && v.is_nan()) || w == v || (v - w).abs() <= atol + rtol * w.abs();
            assert!(same, "{test}: result {i} ({}), element {k}: CPU {w}, CUDA {v}", c.dtype());
        }
    }
}
