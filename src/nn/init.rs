//! `kiln::nn::init` (PyTorch's `torch.nn.init`): in-place initialisation of parameters, under
//! `no_grad`, drawing from kiln's seeded generator.

use crate::{no_grad_guard, DType, Tensor};

/// Which fan `kaiming_*` keeps the variance of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FanMode {
    /// Preserves the variance of the forward pass (PyTorch's default).
    #[default]
    FanIn,
    /// Preserves the variance of the backward pass.
    FanOut,
}

/// The nonlinearity a gain is computed for (`torch.nn.init.calculate_gain`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Nonlinearity {
    /// Linear, convolutions, sigmoid: gain 1.
    Linear,
    /// Sigmoid: gain 1.
    Sigmoid,
    /// Tanh: gain 5/3.
    Tanh,
    /// ReLU: gain √2.
    Relu,
    /// Leaky ReLU with this negative slope: gain √(2 / (1 + slope²)).
    LeakyRelu(f64),
    /// SELU: gain 3/4.
    Selu,
}

/// The recommended gain for a nonlinearity (`torch.nn.init.calculate_gain`).
pub fn calculate_gain(nonlinearity: Nonlinearity) -> f64 {
    match nonlinearity {
        Nonlinearity::Linear | Nonlinearity::Sigmoid => 1.0,
        Nonlinearity::Tanh => 5.0 / 3.0,
        Nonlinearity::Relu => 2f64.sqrt(),
        Nonlinearity::LeakyRelu(slope) => (2.0 / (1.0 + slope * slope)).sqrt(),
        Nonlinearity::Selu => 0.75,
    }
}

/// `(fan_in, fan_out)` of a weight: dim 1 and dim 0 times the receptive field (the product of
/// the dims after the first two), as PyTorch computes them.
#[track_caller]
pub fn calculate_fan_in_and_fan_out(tensor: &Tensor) -> (usize, usize) {
    let shape = tensor.shape();
    if shape.len() < 2 {
        crate::error::fail(
            "calculate_fan_in_and_fan_out",
            crate::ErrorKind::Shape,
            format!(
                "fan in and fan out can not be computed for a tensor with fewer than 2 dimensions (shape {shape:?})"
            ),
        );
    }
    let receptive: usize = shape[2..].iter().product();
    (shape[1] * receptive, shape[0] * receptive)
}

fn fan(tensor: &Tensor, mode: FanMode) -> usize {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(tensor);
    match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
    }
}

/// Fills with U(low, high).
#[track_caller]
pub fn uniform_(tensor: &Tensor, low: f64, high: f64) -> &Tensor {
    let _guard = no_grad_guard();
    tensor.uniform_(low, high)
}

/// Fills with N(mean, std²).
#[track_caller]
pub fn normal_(tensor: &Tensor, mean: f64, std: f64) -> &Tensor {
    let _guard = no_grad_guard();
    tensor.normal_(mean, std)
}

/// Fills with `value`.
#[track_caller]
pub fn constant_(tensor: &Tensor, value: f64) -> &Tensor {
    let _guard = no_grad_guard();
    tensor.fill_(value)
}

/// Fills with zeros.
#[track_caller]
pub fn zeros_(tensor: &Tensor) -> &Tensor {
    constant_(tensor, 0.0)
}

/// Fills with ones.
#[track_caller]
pub fn ones_(tensor: &Tensor) -> &Tensor {
    constant_(tensor, 1.0)
}

/// Glorot uniform: U(-a, a) with a = gain·√(6 / (fan_in + fan_out)).
#[track_caller]
pub fn xavier_uniform_(tensor: &Tensor, gain: f64) -> &Tensor {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(tensor);
    let bound = gain * (6.0 / (fan_in + fan_out) as f64).sqrt();
    uniform_(tensor, -bound, bound)
}

/// Glorot normal: N(0, std²) with std = gain·√(2 / (fan_in + fan_out)).
#[track_caller]
pub fn xavier_normal_(tensor: &Tensor, gain: f64) -> &Tensor {
    let (fan_in, fan_out) = calculate_fan_in_and_fan_out(tensor);
    normal_(tensor, 0.0, gain * (2.0 / (fan_in + fan_out) as f64).sqrt())
}

/// He uniform: U(-b, b) with b = gain·√(3 / fan), gain from `nonlinearity` (PyTorch passes
/// `a` as the leaky-ReLU slope: its layers use `LeakyRelu(√5)`).
#[track_caller]
pub fn kaiming_uniform_(tensor: &Tensor, nonlinearity: Nonlinearity, mode: FanMode) -> &Tensor {
    let bound = calculate_gain(nonlinearity) * (3.0 / fan(tensor, mode) as f64).sqrt();
    uniform_(tensor, -bound, bound)
}

/// He normal: N(0, std²) with std = gain / √fan.
#[track_caller]
pub fn kaiming_normal_(tensor: &Tensor, nonlinearity: Nonlinearity, mode: FanMode) -> &Tensor {
    let std = calculate_gain(nonlinearity) / (fan(tensor, mode) as f64).sqrt();
    normal_(tensor, 0.0, std)
}

/// A (semi-)orthogonal matrix times `gain`, from the QR decomposition of a normal draw with the
/// signs of R's diagonal folded in (Saxe et al.; PyTorch's `orthogonal_`). Dims after the first
/// are flattened.
#[track_caller]
pub fn orthogonal_(tensor: &Tensor, gain: f64) -> &Tensor {
    let shape = tensor.shape();
    if shape.len() < 2 {
        crate::error::fail(
            "orthogonal_",
            crate::ErrorKind::Shape,
            format!("only tensors with 2 or more dimensions are supported (shape {shape:?})"),
        );
    }
    let rows = shape[0];
    let cols = tensor.numel() / rows.max(1);
    if rows == 0 || cols == 0 {
        return tensor;
    }
    // Orthonormalise the columns of a tall (n × m, n ≥ m) normal matrix.
    let (n, m) = (rows.max(cols), rows.min(cols));
    let mut a: Vec<f64> = Tensor::randn_opts([n, m], DType::F64, tensor.device()).to_vec();
    for j in 0..m {
        for k in 0..j {
            let dot: f64 = (0..n).map(|i| a[i * m + j] * a[i * m + k]).sum();
            for i in 0..n {
                a[i * m + j] -= dot * a[i * m + k];
            }
        }
        let norm = (0..n).map(|i| a[i * m + j] * a[i * m + j]).sum::<f64>().sqrt();
        for i in 0..n {
            a[i * m + j] /= norm;
        }
    }
    let q = Tensor::from_vec(a, [n, m]);
    let q = if rows < cols { q.t() } else { q };
    let q = (q * gain).reshape(shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
    let _guard = no_grad_guard();
    tensor.copy_(&q);
    tensor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fans_count_the_receptive_field() {
        assert_eq!(calculate_fan_in_and_fan_out(&Tensor::zeros([32, 16, 3, 3])), (144, 288));
        assert_eq!(calculate_fan_in_and_fan_out(&Tensor::zeros([10, 4])), (4, 10));
    }

    #[test]
    fn gains_match_pytorch() {
        // torch.nn.init.calculate_gain('leaky_relu', math.sqrt(5)) == 0.5773502691896257
        assert!((calculate_gain(Nonlinearity::LeakyRelu(5f64.sqrt())) - 0.5773502691896257).abs() < 1e-15);
        assert!((calculate_gain(Nonlinearity::Tanh) - 5.0 / 3.0).abs() < 1e-15);
    }

    #[test]
    fn kaiming_uniform_stays_inside_its_bound() {
        let w = Tensor::zeros([64, 100]);
        kaiming_uniform_(&w, Nonlinearity::LeakyRelu(5f64.sqrt()), FanMode::FanIn);
        let v: Vec<f32> = w.to_vec();
        let bound = 1.0 / 10.0; // 1/√fan_in
        assert!(v.iter().all(|x| x.abs() <= bound + 1e-7));
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        assert!(max > 0.09, "draws should fill the interval, max |w| = {max}");
    }

    #[test]
    fn orthogonal_rows_are_orthonormal() {
        for shape in [[3usize, 5], [5, 3]] {
            let w = Tensor::zeros(shape).to_dtype(DType::F64);
            orthogonal_(&w, 2.0);
            let gram = if shape[0] < shape[1] { w.matmul(&w.t()) } else { w.t().matmul(&w) };
            let k = shape[0].min(shape[1]);
            let g: Vec<f64> = gram.to_vec();
            for i in 0..k {
                for j in 0..k {
                    let want = if i == j { 4.0 } else { 0.0 };
                    assert!((g[i * k + j] - want).abs() < 1e-12, "gram[{i},{j}] = {}", g[i * k + j]);
                }
            }
        }
    }
}
