//! `gradcheck` and `gradgradcheck`: compare the gradients autograd computes with central finite
//! differences, in f64 (`torch.autograd.gradcheck`).

use super::{grad, no_grad_guard, GradOpts};

use crate::tensor::Tensor;
use kiln_runtime::DType;
use std::fmt;

/// Tolerances of [`gradcheck`]: an element passes when
/// `|analytic - numeric| <= atol + rtol * |numeric|`.
#[derive(Clone, Copy, Debug)]
pub struct GradcheckOpts {
    /// The finite-difference step.
    pub eps: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance.
    pub rtol: f64,
}

impl Default for GradcheckOpts {
    /// PyTorch's defaults: `eps=1e-6, atol=1e-5, rtol=1e-3`.
    fn default() -> Self {
        GradcheckOpts { eps: 1e-6, atol: 1e-5, rtol: 1e-3 }
    }
}

/// The worst disagreement [`gradcheck`] found.
#[derive(Clone, Debug)]
pub struct GradcheckError {
    /// Which input (index into the inputs that require grad are counted among all inputs).
    pub input: usize,
    /// Flat (row-major) index of the input element.
    pub input_element: usize,
    /// Flat index of the output element.
    pub output_element: usize,
    /// d output / d input from backward.
    pub analytic: f64,
    /// The same from central differences.
    pub numeric: f64,
    /// What else went wrong, when the check could not run (empty otherwise).
    pub message: String,
}

impl fmt::Display for GradcheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.message.is_empty() {
            return write!(f, "gradcheck: {}", self.message);
        }
        write!(
            f,
            "gradcheck: Jacobian mismatch for output element {} with respect to input {} element {}: analytic {} vs numeric {} (difference {:e})",
            self.output_element,
            self.input,
            self.input_element,
            self.analytic,
            self.numeric,
            (self.analytic - self.numeric).abs()
        )
    }
}

impl std::error::Error for GradcheckError {}

fn failure(message: String) -> GradcheckError {
    GradcheckError { input: 0, input_element: 0, output_element: 0, analytic: 0.0, numeric: 0.0, message }
}

/// Checks the gradient of `f` at `inputs` against central finite differences: every input that
/// requires grad (an f64 leaf) is perturbed element by element by ±`eps`, and the difference
/// quotient of every output element is compared with the Jacobian row that backward computes.
/// `f` may use the inputs in any way (views, broadcasting, …); the inputs should be contiguous
/// leaves. Returns the worst element when any is outside the tolerance.
pub fn gradcheck(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    opts: GradcheckOpts,
) -> Result<(), GradcheckError> {
    let checked: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].requires_grad()).collect();
    if checked.is_empty() {
        return Err(failure("no input requires grad".into()));
    }
    for &i in &checked {
        if inputs[i].dtype() != DType::F64 {
            return Err(failure(format!("input {i} has dtype {}; gradcheck needs f64 inputs", inputs[i].dtype())));
        }
    }
    let out = f(inputs);
    if out.dtype() != DType::F64 {
        return Err(failure(format!("the output has dtype {}; gradcheck needs an f64 output", out.dtype())));
    }
    let n_out = out.numel();
    // analytic[i][j][k]: d out[j] / d input_i[k]
    let mut analytic: Vec<Vec<Vec<f64>>> = checked.iter().map(|&i| vec![vec![0.0; inputs[i].numel()]; n_out]).collect();
    if out.requires_grad() {
        let refs: Vec<&Tensor> = checked.iter().map(|&i| &inputs[i]).collect();
        for j in 0..n_out {
            let mut onehot = vec![0.0f64; n_out];
            onehot[j] = 1.0;
            let v = Tensor::from_vec(onehot, out.shape());
            let opts = GradOpts { retain_graph: true, allow_unused: true, ..Default::default() };
            let grads = grad(&[&out], &refs, Some(&[&v]), opts).map_err(|e| failure(e.to_string()))?;
            for (c, g) in grads.into_iter().enumerate() {
                if let Some(g) = g {
                    analytic[c][j] = g.contiguous().to_vec::<f64>();
                }
            }
        }
    }
    let mut worst: Option<(f64, GradcheckError)> = None;
    for (c, &i) in checked.iter().enumerate() {
        let base = inputs[i].contiguous().to_vec::<f64>();
        for k in 0..base.len() {
            let eval = |delta: f64| {
                let mut vals = base.clone();
                vals[k] += delta;
                let mut args = inputs.to_vec();
                args[i] = Tensor::from_vec(vals, inputs[i].shape()).requires_grad_(true);
                f(&args).contiguous().to_vec::<f64>()
            };
            let (plus, minus) = (eval(opts.eps), eval(-opts.eps));
            for j in 0..n_out {
                let numeric = (plus[j] - minus[j]) / (2.0 * opts.eps);
                let a = analytic[c][j][k];
                let excess = (a - numeric).abs() - (opts.atol + opts.rtol * numeric.abs());
                let bad = excess > 0.0 || a.is_nan() != numeric.is_nan();
                if bad && worst.as_ref().is_none_or(|(w, _)| excess > *w) {
                    let e = GradcheckError {
                        input: i,
                        input_element: k,
                        output_element: j,
                        analytic: a,
                        numeric,
                        message: String::new(),
                    };
                    worst = Some((if excess.is_nan() { f64::INFINITY } else { excess }, e));
                }
            }
        }
    }
    match worst {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Checks second derivatives: [`gradcheck`] of the function
/// `(inputs, v) -> Σ_i <w_i, d<f(inputs), v>/d input_i>` (with `create_graph`), where `v` is an
/// extra input of `f`'s output shape and the `w_i` are fixed random weights, so every second
/// derivative of `f` (and the cross terms with `v`) takes part.
pub fn gradgradcheck(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    opts: GradcheckOpts,
) -> Result<(), GradcheckError> {
    let checked: Vec<usize> = (0..inputs.len()).filter(|&i| inputs[i].requires_grad()).collect();
    let out_shape = {
        let _off = no_grad_guard();
        f(inputs).shape().to_vec()
    };
    let v = Tensor::randn(&out_shape).to_dtype(DType::F64).requires_grad_(true);
    let weights: Vec<Tensor> = checked.iter().map(|&i| Tensor::randn(inputs[i].shape()).to_dtype(DType::F64)).collect();
    let n = inputs.len();
    let projected = |args: &[Tensor]| -> Tensor {
        let (xs, v) = (&args[..n], &args[n]);
        let out = f(xs);
        let refs: Vec<&Tensor> = checked.iter().map(|&i| &xs[i]).collect();
        let opts = GradOpts { create_graph: true, allow_unused: true, ..Default::default() };
        let grads = grad(&[&out], &refs, Some(&[v]), opts).expect("first derivative");
        let mut total = Tensor::scalar(0.0f64);
        for (g, w) in grads.iter().zip(&weights) {
            if let Some(g) = g {
                total = &total + &(g * w).sum();
            }
        }
        total
    };
    let mut args = inputs.to_vec();
    args.push(v);
    gradcheck(projected, &args, opts)
}
