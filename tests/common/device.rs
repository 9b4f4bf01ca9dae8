//! Running one op test on every device: `test_device!` runs a body on the CPU and, in a second
//! test ignored unless asked for (a GPU machine runs the ignored tests:
//! `scripts/gpu-check.sh`), on `cuda:0`, checking that the CUDA results match the CPU ones.
//! Every test that needs a CUDA device is `#[ignore = "needs a CUDA device (…)"]` in the same
//! words, so `cargo test` lists it as ignored, never as passed, and `--include-ignored` on a
//! machine without a device fails it.
//!
//! Use it from a test file with `#[path = "common/device.rs"] #[macro_use] mod device;`.

use kiln::{DType, Device, Tensor};

/// Defines a module `$name` of two tests: `cpu` runs `$body` (with `$dev` bound to the device,
/// returning a `Vec<Tensor>`; its own assertions run too) on the CPU; `cuda_matches_cpu`, ignored unless asked for, runs it
/// on the CPU and on `cuda:0` and compares the two result lists with [`assert_same`].
#[macro_export]
macro_rules! test_device {
    ($name:ident, |$dev:ident| $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($dev: kiln::Device) -> Vec<kiln::Tensor> {
                $body
            }

            #[test]
            fn cpu() {
                // The body's own assertions and checks run on the CPU.
                drop(run(kiln::Device::Cpu));
            }

            #[test]
            #[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
            fn cuda_matches_cpu() {
                let cpu = run(kiln::Device::Cpu);
                let cuda = run(kiln::Device::Cuda(0));
                $crate::device::assert_same(stringify!($name), &cpu, &cuda);
            }
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
