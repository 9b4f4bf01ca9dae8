//! One-pass eager CPU kernels for composite ops that PyTorch runs as one kernel (silu, gelu
//! with the tanh approximation). Their decompositions into primitive ops
//! (`src/ops/composite.rs`) take four to eight passes over memory in eager mode; these take
//! one, and are 2–2.5× faster (`cargo bench --bench activations`, docs/perf.md). A kernel
//! belongs here only when that bench shows it beats the decomposition: softplus, whose f32
//! `log1p` is a scalar libm call, was slower as one pass than decomposed, so it has none.
//! Only eager code calls them: inside `kiln::compile` the decomposition is captured, so the
//! code generators know only primitives. `tests/composite_ops.rs` checks each kernel, and the
//! backward rule that goes with it, against the decomposition.

use super::simd::vecmath;
use crate::dtype::num_like::Float;

/// A composite op with a one-pass eager kernel, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FastUnary {
    /// `x·sigmoid(x)`.
    Silu,
    /// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    GeluTanh,
}

impl FastUnary {
    /// The op on one value, computed in `F` (the kernel for f64 and for strided f32 inputs;
    /// the f32 slice kernel [`Self::apply_f32`] gives the same bits).
    #[inline(always)]
    pub fn eval<F: Float>(self, x: F) -> F {
        let one = F::one();
        match self {
            FastUnary::Silu => x / (one + (-x).exp()),
            FastUnary::GeluTanh => {
                let inner = F::c(0.797_884_560_802_865_4) * (x + F::c(0.044715) * x * x * x);
                F::c(0.5) * x * (one + inner.tanh())
            }
        }
    }

    /// `out[i] = self(src[i])` over equal-length f32 slices, in parallel, with the vectorized
    /// forms of `super::simd::vecmath`: bit for bit [`Self::eval`].
    pub fn apply_f32(self, src: &[f32], out: &mut [f32]) {
        match self {
            FastUnary::Silu => vecmath::par_map_f32(src, out, vecmath::silu_f32),
            FastUnary::GeluTanh => vecmath::par_map_f32(src, out, vecmath::gelu_tanh_f32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FastUnary;

    #[test]
    fn slice_kernels_give_the_scalar_bits() {
        let src: Vec<f32> = (0..70_001).map(|i| (i as f32 - 35_000.0) / 997.0).chain([f32::INFINITY, -0.0]).collect();
        for op in [FastUnary::Silu, FastUnary::GeluTanh] {
            let mut out = vec![0.0; src.len()];
            op.apply_f32(&src, &mut out);
            for (&x, &y) in src.iter().zip(&out) {
                assert_eq!(y.to_bits(), op.eval(x).to_bits(), "{op:?} at {x}");
            }
        }
    }
}
