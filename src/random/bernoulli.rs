//! `torch.bernoulli(p)`: a one wherever a uniform draw falls below the probability in `p`.
//!
//! Built from ops that already exist everywhere: `rand` of `p`'s shape (f64 draws for an f64
//! `p`, f32 otherwise) compared with `p`, cast to `p`'s dtype. So it runs on the CPU and CUDA
//! with the same numbers, and inside `kiln::compile` the draw is a `Rand` node fused with the
//! comparison into one kernel, equal to the eager result bit for bit.
//!
//! Probabilities must lie in `[0, 1]` (NaN is refused too), as PyTorch checks. The check reads
//! `p` (one reduction and a read-back; on CUDA a sync). Inside a compiled step it runs on a `p`
//! that entered the step realized; a `p` computed inside the step is not read, since that would
//! break the graph, and a value outside `[0, 1]` then acts as clamped to it (NaN as 0).

use super::{Dist, Generator};
use crate::error::{bail, OrPanic, Result};
use crate::Tensor;
use kiln_runtime::DType;

/// An error unless every element of `p` is in `[0, 1]` (skipped for a `p` being computed by
/// the compiled step around this call).
#[track_caller]
fn check_probabilities(op: &'static str, p: &Tensor) -> Result<()> {
    if !p.dtype().is_float() {
        bail!(op, DType, "expected a floating-point tensor of probabilities, but got {}", p.dtype());
    }
    if p.numel() == 0 || (crate::capture::is_active() && p.cell().capture.is_lazy()) {
        return Ok(());
    }
    let inside = crate::capture::as_realizing(|| {
        let _off = crate::autograd::no_grad_guard();
        Ok::<bool, crate::Error>(p.try_ge(0.0)?.logical_and(&p.try_le(1.0)?).all().item::<bool>())
    })?;
    if !inside {
        bail!(
            op,
            Value,
            "expected every probability to be in [0, 1] (and not NaN), but p of shape {:?} ({}) has one outside",
            p.shape(),
            p.dtype()
        );
    }
    Ok(())
}

/// Ones where a uniform draw (from `generator`, else the global one) is below `p`.
#[track_caller]
fn draw_below(op: &'static str, p: &Tensor, generator: Option<&mut Generator>) -> Result<Tensor> {
    check_probabilities(op, p)?;
    crate::cuda::check_available(op, p.device())?;
    let dtype = if p.dtype() == DType::F64 { DType::F64 } else { DType::F32 };
    let u = match generator {
        None => Tensor::try_rand_opts(p.shape(), dtype, p.device())?,
        Some(g) => {
            let u = Tensor::zeros_opts(p.shape(), dtype, p.device());
            super::sample_into(op, &u, Dist::Uniform { low: 0.0, high: 1.0 }, Some(g))?;
            u
        }
    };
    let _off = crate::autograd::no_grad_guard();
    u.try_lt(p)?.try_to_dtype(p.dtype())
}

impl Tensor {
    /// A tensor of `self`'s shape, dtype and device holding 1 with the probability in the same
    /// place of `self` and 0 otherwise (`torch.bernoulli(p)`); not differentiable. Panics
    /// unless `self` is floating-point with every value in `[0, 1]`.
    #[track_caller]
    pub fn bernoulli(&self) -> Tensor {
        self.try_bernoulli().or_panic()
    }

    /// [`Tensor::bernoulli`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_bernoulli(&self) -> Result<Tensor> {
        draw_below("bernoulli", self, None)
    }

    /// [`Tensor::bernoulli`] drawing from `generator` (`torch.bernoulli(p, generator=g)`).
    #[track_caller]
    pub fn bernoulli_with(&self, generator: &mut Generator) -> Tensor {
        self.try_bernoulli_with(generator).or_panic()
    }

    /// [`Tensor::bernoulli_with`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_bernoulli_with(&self, generator: &mut Generator) -> Result<Tensor> {
        draw_below("bernoulli", self, Some(generator))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The uniform draws of `n` elements that [`Tensor::bernoulli_with`] makes from a
    /// generator seeded with `seed`.
    fn uniforms(seed: u64, n: usize, dtype: DType) -> Vec<f64> {
        let u = Tensor::zeros_opts([n], dtype, kiln_runtime::Device::Cpu);
        super::super::sample_into(
            "test",
            &u,
            Dist::Uniform { low: 0.0, high: 1.0 },
            Some(&mut Generator::with_seed(seed)),
        )
        .unwrap();
        u.to_dtype(DType::F64).to_vec::<f64>()
    }

    #[test]
    fn ones_fall_where_the_draw_is_below_p() {
        let p = Tensor::from_vec(
            (0..1000).map(|i| (i % 11) as f64 / 10.0).map(|v| v.min(1.0)).collect::<Vec<f64>>(),
            [10, 100],
        );
        let b = p.bernoulli_with(&mut Generator::with_seed(11));
        assert_eq!((b.shape(), b.dtype()), (&[10usize, 100][..], DType::F64));
        let want: Vec<f64> = uniforms(11, 1000, DType::F64)
            .iter()
            .zip(p.to_vec::<f64>())
            .map(|(u, p)| if *u < p { 1.0 } else { 0.0 })
            .collect();
        assert_eq!(b.to_vec::<f64>(), want);
        // p = 0 never, p = 1 always, and some of each in between.
        assert!(want.iter().zip(p.to_vec::<f64>()).all(|(b, p)| (p != 0.0 || *b == 0.0) && (p != 1.0 || *b == 1.0)));
        assert!(want.iter().sum::<f64>() > 300.0 && want.iter().sum::<f64>() < 700.0);
        // f32 probabilities compare with f32 draws.
        let p32 = p.to_dtype(DType::F32);
        let want32: Vec<f32> = uniforms(4, 1000, DType::F32)
            .iter()
            .zip(p32.to_vec::<f32>())
            .map(|(u, p)| if (*u as f32) < p { 1.0 } else { 0.0 })
            .collect();
        assert_eq!(p32.bernoulli_with(&mut Generator::with_seed(4)).to_vec::<f32>(), want32);
    }

    #[test]
    fn the_frequency_matches_p_in_every_float_dtype() {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let p = Tensor::full([20_000], 0.25).to_dtype(dtype);
            let b = p.bernoulli();
            assert_eq!(b.dtype(), dtype);
            let mean = b.to_dtype(DType::F64).mean().item::<f64>();
            // 20,000 draws: the standard error is 0.003; 5 of them.
            assert!((mean - 0.25).abs() < 0.015, "{dtype}: {mean}");
        }
    }

    #[test]
    fn a_generator_replays_its_numbers_and_moves_on() {
        let p = Tensor::full([64], 0.5);
        let (mut g1, mut g2) = (Generator::with_seed(9), Generator::with_seed(9));
        let first = p.bernoulli_with(&mut g1).to_vec::<f32>();
        assert_eq!(first, p.bernoulli_with(&mut g2).to_vec::<f32>());
        assert_ne!(p.bernoulli_with(&mut g1).to_vec::<f32>(), first);
    }

    #[test]
    fn bad_probabilities_are_errors_naming_the_op() {
        for bad in [-0.1f32, 1.5, f32::NAN] {
            let e = Tensor::from_slice(&[0.5f32, bad]).try_bernoulli().unwrap_err();
            assert!(
                e.message.contains("expected every probability to be in [0, 1]") && e.message.contains("[2]"),
                "{e}"
            );
            assert_eq!(e.op, "bernoulli");
        }
        let e = Tensor::from_slice(&[1i64, 0]).try_bernoulli().unwrap_err();
        assert!(e.message.contains("floating-point") && e.message.contains("int64"), "{e}");
        assert_eq!(Tensor::zeros([0, 3]).bernoulli().shape(), &[0, 3]);
    }
}
