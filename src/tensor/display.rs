//! Printing tensors exactly as PyTorch's `print(x)` / `repr(x)` does, with its default print
//! options (`torch/_tensor_str.py`: precision 4, threshold 1000, 3 edge items, line width 80).
//!
//! The rules, as PyTorch applies them:
//! - one formatter per tensor, built from the printed elements (after summarisation): floats use
//!   fixed notation with 4 decimals, or *integer mode* (`1.`, `-3.`) when every finite value is a
//!   whole number, or scientific notation (`1.0000e-05`) when the largest/smallest nonzero finite
//!   magnitudes differ by more than 1000×, or the largest exceeds 1e8, or the smallest is below
//!   1e-4; every element is right-aligned to the widest one;
//! - more than 1000 elements are summarised: 3 items at each end of every dim with `...` between;
//! - rows wrap at 80 columns; `dtype=torch.…` is appended unless the dtype is float32, int64 or
//!   bool (always for empty tensors that are not float32), `device='cuda:0'` for non-CPU
//!   tensors, and `size=(…)` for empty tensors that are not 1-D.

use super::Tensor;
use kiln_runtime::{match_cpu, CpuStorage, DType, Device, Element, Layout};
use std::fmt;

const PRECISION: usize = 4;
const THRESHOLD: usize = 1000;
const EDGE_ITEMS: usize = 3;
const LINE_WIDTH: usize = 80;
const PREFIX: &str = "tensor(";

/// The printed elements, in row-major order of the printed indices.
enum Values {
    Float(Vec<f64>),
    Int(Vec<i64>),
    Bool(Vec<bool>),
}

/// The printed indices of a dim of `size`; `None` stands for the `...` of a summarised dim.
fn shown_indices(size: usize, summarize: bool) -> Vec<Option<usize>> {
    if summarize && size > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS).map(Some).chain([None]).chain((size - EDGE_ITEMS..size).map(Some)).collect()
    } else {
        (0..size).map(Some).collect()
    }
}

/// Reads the printed elements out of a CPU storage (only those: a huge tensor is not copied).
fn read_values(storage: &CpuStorage, layout: &Layout, shown: &[Vec<Option<usize>>]) -> Values {
    let mut offsets = vec![layout.offset()];
    for (idx, &stride) in shown.iter().zip(layout.strides()) {
        offsets = offsets.iter().flat_map(|&o| idx.iter().flatten().map(move |&i| o + i * stride)).collect();
    }
    match_cpu!(storage, |buf: T| {
        let elems = offsets.iter().map(|&o| buf[o]);
        if T::DTYPE.is_float() {
            Values::Float(elems.map(Element::to_f64).collect())
        } else if T::DTYPE == DType::Bool {
            Values::Bool(elems.map(|x| x.to_i64() != 0).collect())
        } else {
            Values::Int(elems.map(Element::to_i64).collect())
        }
    })
}

/// How floats are written.
#[derive(Clone, Copy, Debug, PartialEq)]
enum FloatMode {
    /// `1.5000`
    Fixed,
    /// `2.` (every finite value is whole)
    Whole,
    /// `1.0000e-05`
    Sci,
}

/// One float without padding, as Python formats it.
fn format_float(v: f64, mode: FloatMode) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    match mode {
        FloatMode::Fixed => format!("{v:.PRECISION$}"),
        FloatMode::Whole => format!("{v:.0}."),
        FloatMode::Sci => {
            // Rust writes `1.0000e-5`; Python writes the exponent signed, with two digits.
            let s = format!("{v:.PRECISION$e}");
            let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
            let exp: i32 = exp.parse().unwrap_or(0);
            format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.unsigned_abs())
        }
    }
}

/// The formatter shared by every element of one printed tensor (PyTorch's `_Formatter`).
struct Formatter<'a> {
    values: &'a Values,
    mode: FloatMode,
    width: usize,
}

impl<'a> Formatter<'a> {
    fn new(values: &'a Values) -> Formatter<'a> {
        let widest = |strs: &mut dyn Iterator<Item = usize>| strs.max().unwrap_or(0).max(1);
        let (mode, width) = match values {
            Values::Int(v) => (FloatMode::Fixed, widest(&mut v.iter().map(|x| x.to_string().len()))),
            Values::Bool(v) => (FloatMode::Fixed, widest(&mut v.iter().map(|&b| if b { 4 } else { 5 }))),
            Values::Float(v) => {
                let nonzero: Vec<f64> = v.iter().copied().filter(|x| x.is_finite() && *x != 0.0).collect();
                if nonzero.is_empty() {
                    (FloatMode::Whole, 1)
                } else {
                    let whole = nonzero.iter().all(|x| *x == x.ceil());
                    let max = nonzero.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                    let min = nonzero.iter().fold(f64::INFINITY, |m, x| m.min(x.abs()));
                    let mode = if max / min > 1000.0 || max > 1.0e8 || min < 1.0e-4 {
                        FloatMode::Sci
                    } else if whole {
                        FloatMode::Whole
                    } else {
                        FloatMode::Fixed
                    };
                    (mode, widest(&mut nonzero.iter().map(|&x| format_float(x, mode).len())))
                }
            }
        };
        Formatter { values, mode, width }
    }

    /// Element `i` of the printed elements, right-aligned to the common width.
    fn format(&self, i: usize) -> String {
        let s = match self.values {
            Values::Float(v) => format_float(v[i], self.mode),
            Values::Int(v) => v[i].to_string(),
            Values::Bool(v) => if v[i] { "True" } else { "False" }.to_string(),
        };
        format!("{s:>width$}", width = self.width)
    }
}

/// Lays out the printed elements with PyTorch's nesting, indentation and line wrapping.
struct Printer<'a> {
    fmt: Formatter<'a>,
    shown: &'a [Vec<Option<usize>>],
    /// Distance between consecutive printed indices of each dim, in printed elements.
    steps: Vec<usize>,
}

impl Printer<'_> {
    /// The sub-tensor at dim `d` whose first printed element is `base` (`_tensor_str_with_formatter`).
    fn tensor_str(&self, d: usize, base: usize, indent: usize) -> String {
        let ndim = self.shown.len();
        if d == ndim {
            return self.fmt.format(base);
        }
        let mut k = 0;
        let mut items = Vec::with_capacity(self.shown[d].len());
        for idx in &self.shown[d] {
            items.push(match idx {
                None if d + 1 == ndim => " ...".to_string(),
                None => "...".to_string(),
                Some(_) if d + 1 == ndim => self.fmt.format(base + k),
                Some(_) => self.tensor_str(d + 1, base + k * self.steps[d], indent + 1),
            });
            k += idx.is_some() as usize;
        }
        if d + 1 < ndim {
            let sep = format!(",{}{}", "\n".repeat(ndim - d - 1), " ".repeat(indent + 1));
            return format!("[{}]", items.join(&sep));
        }
        // The innermost dim wraps at the line width (`_vector_str`).
        let per_line = (LINE_WIDTH.saturating_sub(indent) / (self.fmt.width + 2)).max(1);
        let lines: Vec<String> = items.chunks(per_line).map(|c| c.join(", ")).collect();
        format!("[{}]", lines.join(&format!(",\n{}", " ".repeat(indent + 1))))
    }
}

/// `(2, 3)` / `(5,)`: a shape as Python prints a tuple.
fn py_tuple(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// Appends `, suffix` items, starting a new line when one would pass the line width
/// (`_add_suffixes`).
fn add_suffixes(mut s: String, suffixes: &[String]) -> String {
    let indent = PREFIX.len();
    // PyTorch's count: the last line's length plus 2.
    let mut last_line_len = match s.rfind('\n') {
        Some(p) => s.len() - p + 1,
        None => s.len() + 2,
    };
    for suffix in suffixes {
        if last_line_len + suffix.len() + 2 > LINE_WIDTH {
            s.push_str(&format!(",\n{}{suffix}", " ".repeat(indent)));
            last_line_len = indent + suffix.len();
        } else {
            s.push_str(&format!(", {suffix}"));
            last_line_len += suffix.len() + 2;
        }
    }
    s.push(')');
    s
}

/// The full `tensor(...)` text; `values` is `None` when the data cannot be read on this build
/// (printed as `...` with the size, as PyTorch prints meta tensors).
fn repr(
    values: Option<&Values>,
    shown: &[Vec<Option<usize>>],
    shape: &[usize],
    dtype: DType,
    device: Device,
    autograd: Option<String>,
) -> String {
    let mut suffixes = Vec::new();
    if device != Device::Cpu {
        suffixes.push(format!("device='{device}'"));
    }
    let numel: usize = shape.iter().product();
    let body = match values {
        None => {
            suffixes.push(format!("size={}", py_tuple(shape)));
            "...".to_string()
        }
        Some(_) if numel == 0 => {
            if shape.len() != 1 {
                suffixes.push(format!("size={}", py_tuple(shape)));
            }
            "[]".to_string()
        }
        Some(values) => {
            let counts: Vec<usize> = shown.iter().map(|s| s.iter().flatten().count()).collect();
            let steps = (0..counts.len()).map(|d| counts[d + 1..].iter().product()).collect();
            Printer { fmt: Formatter::new(values), shown, steps }.tensor_str(0, 0, PREFIX.len())
        }
    };
    let default_dtype =
        if numel == 0 { dtype == DType::F32 } else { matches!(dtype, DType::F32 | DType::I64 | DType::Bool) };
    if !default_dtype {
        suffixes.push(format!("dtype=torch.{}", dtype.torch_name()));
    }
    // `grad_fn=<AddBackward0>` or `requires_grad=True`: after device and dtype, as PyTorch.
    suffixes.extend(autograd);
    add_suffixes(format!("{PREFIX}{body}"), &suffixes)
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let summarize = self.numel() > THRESHOLD;
        let shown: Vec<_> = self.shape().iter().map(|&s| shown_indices(s, summarize)).collect();
        // A CUDA tensor prints a host copy of its values.
        let host = crate::cuda::to_device("print", self, Device::Cpu).ok();
        let values = host.and_then(|h| h.with_cpu("print", |s, l| read_values(s, l, &shown)).ok());
        let autograd = match self.grad_fn() {
            Some(g) => Some(format!("grad_fn={g}")),
            None if self.requires_grad() => Some("requires_grad=True".to_string()),
            None => None,
        };
        f.write_str(&repr(values.as_ref(), &shown, self.shape(), self.dtype(), self.device(), autograd))
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_float_formats() {
        assert_eq!(format_float(1e-5, FloatMode::Sci), "1.0000e-05");
        assert_eq!(format_float(-123456789.0, FloatMode::Sci), "-1.2346e+08");
        assert_eq!(format_float(1e100, FloatMode::Sci), "1.0000e+100");
        assert_eq!(format_float(0.0, FloatMode::Sci), "0.0000e+00");
        assert_eq!(format_float(-0.0, FloatMode::Whole), "-0.");
        assert_eq!(format_float(2.5, FloatMode::Whole), "2.");
        assert_eq!(format_float(0.125, FloatMode::Fixed), "0.1250");
        assert_eq!(format_float(f64::NAN, FloatMode::Whole), "nan");
        assert_eq!(format_float(f64::NEG_INFINITY, FloatMode::Sci), "-inf");
    }

    #[test]
    fn cuda_and_unreadable_suffixes() {
        let vals = Values::Float(vec![1.0, 2.5]);
        let shown = vec![shown_indices(2, false)];
        let s = repr(Some(&vals), &shown, &[2], DType::F32, Device::Cuda(0), None);
        assert_eq!(s, "tensor([1.0000, 2.5000], device='cuda:0')");
        let s = repr(Some(&vals), &shown, &[2], DType::F64, Device::Cuda(1), None);
        assert_eq!(s, "tensor([1.0000, 2.5000], device='cuda:1', dtype=torch.float64)");
        let s = repr(None, &shown, &[2], DType::F32, Device::Cuda(0), None);
        assert_eq!(s, "tensor(..., device='cuda:0', size=(2,))");
    }

    #[test]
    fn long_suffixes_wrap() {
        let s = add_suffixes(format!("{PREFIX}[{}]", "1".repeat(60)), &["dtype=torch.float64".to_string()]);
        assert_eq!(s, format!("tensor([{}],\n       dtype=torch.float64)", "1".repeat(60)));
    }
}
