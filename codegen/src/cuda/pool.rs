//! 2-d pooling kernels over contiguous planes (`planes x h x w` in, `planes x oh x ow` out):
//! max pooling with argmax indices and its gradient, average pooling and its gradient,
//! adaptive average pooling and its gradient.
//!
//! Each kernel is a grid-stride loop with one thread per element it writes; the geometry
//! (sizes, window, stride, padding, dilation, the average's divisor rule) is passed as
//! arguments, so one kernel per (kind, dtype) serves every shape. Windows, divisors and ties
//! follow the CPU kernels (`kiln_runtime::cpu::pool`, PyTorch's): the first maximum wins, NaN
//! wins over numbers, windows clipped to the input (and to the padding for the divisor).
//!
//! The gradients are gathers, not scatters: each input element sums, in ascending window
//! order, the output gradients of the windows that cover it (for max pooling, of those whose
//! argmax it is). No atomics, so the result is deterministic, and its sums run in the CPU's
//! order with the CPU's roundings.
//!
//! Signature: the buffers (max forward `x, y, idx`; max backward `gy, idx, gx`; average
//! and adaptive forward `x, y`; average and adaptive backward `gy, gx`), then `n` (elements
//! written) and the geometry words `h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw,
//! count_include_pad, divisor` (divisor 0: none), every number `unsigned long long`.

use super::grid::{emit_grid_kernel, GridBuffer};
use super::strided::storage_type;
use kiln_runtime::cuda::{CudaError, CudaErrorKind};
use kiln_runtime::DType;

/// The geometry words after `n`, in order.
pub const POOL_GEOMETRY_WORDS: [&str; 14] =
    ["h", "w", "oh", "ow", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw", "count_include_pad", "divisor"];

/// Which pooling kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolKind {
    /// Max pooling: values and int64 argmax indices (`iy * w + ix` within the plane).
    MaxForward,
    /// The gradient of max pooling: each input element sums the output gradients whose argmax
    /// it is.
    MaxBackward,
    /// Average pooling.
    AvgForward,
    /// The gradient of average pooling: each input element sums the output gradients of the
    /// windows covering it, each divided by its window's divisor.
    AvgBackward,
    /// Adaptive average pooling: output `(oy, ox)` averages input rows
    /// `floor(oy*h/oh)..ceil((oy+1)*h/oh)` and the columns likewise (PyTorch's rule; the
    /// window, stride, padding and dilation words are unused).
    AdaptiveForward,
    /// The gradient of adaptive average pooling: each input element sums, in ascending
    /// window order, the output gradients of the windows covering it, each divided by its
    /// window's size. Input row `iy` lies in the windows `floor(iy*oh/h)..ceil((iy+1)*oh/h)`
    /// (the same rule with the roles swapped), and likewise for columns.
    AdaptiveBackward,
}

impl PoolKind {
    /// Every kind.
    pub const ALL: [PoolKind; 6] = [
        PoolKind::MaxForward,
        PoolKind::MaxBackward,
        PoolKind::AvgForward,
        PoolKind::AvgBackward,
        PoolKind::AdaptiveForward,
        PoolKind::AdaptiveBackward,
    ];

    /// The kind's name in kernel names and messages.
    pub fn name(self) -> &'static str {
        match self {
            PoolKind::MaxForward => "max_pool2d",
            PoolKind::MaxBackward => "max_pool2d_backward",
            PoolKind::AvgForward => "avg_pool2d",
            PoolKind::AvgBackward => "avg_pool2d_backward",
            PoolKind::AdaptiveForward => "adaptive_avg_pool2d",
            PoolKind::AdaptiveBackward => "adaptive_avg_pool2d_backward",
        }
    }

    /// The kernel's buffer parameters in order, each with whether it holds int64 indices and
    /// whether the kernel writes it.
    pub fn buffers(self) -> &'static [(&'static str, bool, bool)] {
        match self {
            PoolKind::MaxForward => &[("x", false, false), ("y", false, true), ("idx", true, true)],
            PoolKind::MaxBackward => &[("gy", false, false), ("idx", true, false), ("gx", false, true)],
            PoolKind::AvgForward | PoolKind::AdaptiveForward => &[("x", false, false), ("y", false, true)],
            PoolKind::AvgBackward | PoolKind::AdaptiveBackward => &[("gy", false, false), ("gx", false, true)],
        }
    }

    /// True when the kernel writes one element per input element (a gradient), false when one
    /// per output element.
    pub fn writes_input_shape(self) -> bool {
        matches!(self, PoolKind::MaxBackward | PoolKind::AvgBackward | PoolKind::AdaptiveBackward)
    }
}

/// A generated pooling kernel: its CUDA C and what a launch needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolKernel {
    /// The `extern "C"` kernel's name (`kiln_pool_<kind>_<dtype>_<hash>`).
    pub name: String,
    /// The CUDA C source.
    pub source: String,
    /// What it computes.
    pub kind: PoolKind,
    /// The dtype of the values and gradients (f32 or f64).
    pub dtype: DType,
}

/// The window of output `(oy, ox)` for average pooling, as PyTorch's `avg_pool2d`: sets
/// `y0 y1 x0 x1` (clipped to the input), `empty`, and `div` (the divisor).
const AVG_WINDOW: &str = "\
        long long y0 = oy * sh - ph, x0 = ox * sw - pw;
        long long y1 = min(y0 + kh, h + ph), x1 = min(x0 + kw, w + pw);
        const long long pool_size = (y1 - y0) * (x1 - x0);
        y0 = max(y0, 0LL); x0 = max(x0, 0LL); y1 = min(y1, h); x1 = min(x1, w);
        const bool empty = y0 >= y1 || x0 >= x1;
        const long long div = divisor != 0 ? divisor : (count_include_pad != 0 ? pool_size : (y1 - y0) * (x1 - x0));
";

/// C expressions of PyTorch's adaptive window along one dim: output `o` of `out` covers input
/// `floor(o*len/out)..ceil((o+1)*len/out)` (`kiln_runtime::cpu::pool::adaptive_range`).
fn adaptive_range(o: &str, out: &str, len: &str) -> (String, String) {
    (format!("{o} * {len} / {out}"), format!("(({o} + 1) * {len} + {out} - 1) / {out}"))
}

/// Declares the adaptive window `y0..y1`, `x0..x1` of output `(oy, ox)`, `indent` deep.
fn adaptive_window(indent: &str) -> String {
    let ((y0, y1), (x0, x1)) = (adaptive_range("oy", "oh", "h"), adaptive_range("ox", "ow", "w"));
    format!("{indent}const long long y0 = {y0}, y1 = {y1};\n{indent}const long long x0 = {x0}, x1 = {x1};\n")
}

/// The loop body of `kind` with values of C type `t`.
fn body(kind: PoolKind, t: &str, neg_inf: &str) -> String {
    match kind {
        PoolKind::MaxForward => format!(
            "\
        const long long ox = (long long)(i % ow), oy = (long long)((i / ow) % oh), p = (long long)(i / (ow * oh));
        const {t}* plane = x + p * h * w;
        long long y0 = oy * sh - ph;
        const long long y1 = min(y0 + (kh - 1) * dh + 1, h);
        while (y0 < 0) y0 += dh;
        long long x0 = ox * sw - pw;
        const long long x1 = min(x0 + (kw - 1) * dw + 1, w);
        while (x0 < 0) x0 += dw;
        long long best_i = y0 * w + x0;
        {t} best = {neg_inf};
        for (long long yy = y0; yy < y1; yy += dh) {{
            for (long long xx = x0; xx < x1; xx += dw) {{
                const long long j = yy * w + xx;
                const {t} v = plane[j];
                if (v > best || v != v) {{ best = v; best_i = j; }}
            }}
        }}
        y[i] = best;
        idx[i] = best_i;
"
        ),
        PoolKind::MaxBackward => format!(
            "\
        const long long xx = (long long)(i % w), yy = (long long)((i / w) % h), p = (long long)(i / (w * h));
        const long long span_h = (kh - 1) * dh + 1, span_w = (kw - 1) * dw + 1;
        const long long oy0 = yy + ph < span_h ? 0 : (yy + ph - span_h) / sh + 1;
        const long long oy1 = min((yy + ph) / sh + 1, oh);
        const long long ox0 = xx + pw < span_w ? 0 : (xx + pw - span_w) / sw + 1;
        const long long ox1 = min((xx + pw) / sw + 1, ow);
        const long long here = yy * w + xx;
        {t} g = ({t})0;
        for (long long oy = oy0; oy < oy1; ++oy) {{
            for (long long ox = ox0; ox < ox1; ++ox) {{
                const long long o = (p * oh + oy) * ow + ox;
                if (idx[o] == here) g += gy[o];
            }}
        }}
        gx[i] = g;
"
        ),
        PoolKind::AvgForward => format!(
            "\
        const long long ox = (long long)(i % ow), oy = (long long)((i / ow) % oh), p = (long long)(i / (ow * oh));
{AVG_WINDOW}        if (empty) {{ y[i] = ({t})0; continue; }}
        const {t}* plane = x + p * h * w;
        {t} s = ({t})0;
        for (long long yy = y0; yy < y1; ++yy) {{
            for (long long xx = x0; xx < x1; ++xx) s += plane[yy * w + xx];
        }}
        y[i] = s / ({t})div;
"
        ),
        PoolKind::AvgBackward => format!(
            "\
        const long long ix = (long long)(i % w), iy = (long long)((i / w) % h), p = (long long)(i / (w * h));
        const long long oy0 = iy + ph < kh ? 0 : (iy + ph - kh) / sh + 1;
        const long long oy1 = min((iy + ph) / sh + 1, oh);
        const long long ox0 = ix + pw < kw ? 0 : (ix + pw - kw) / sw + 1;
        const long long ox1 = min((ix + pw) / sw + 1, ow);
        {t} g = ({t})0;
        for (long long oy = oy0; oy < oy1; ++oy) {{
            for (long long ox = ox0; ox < ox1; ++ox) {{
{AVG_WINDOW}                if (empty) continue;
                g += gy[(p * oh + oy) * ow + ox] / ({t})div;
            }}
        }}
        gx[i] = g;
"
        ),
        PoolKind::AdaptiveForward => format!(
            "\
        const long long ox = (long long)(i % ow), oy = (long long)((i / ow) % oh), p = (long long)(i / (ow * oh));
{window}        const {t}* plane = x + p * h * w;
        {t} s = ({t})0;
        for (long long yy = y0; yy < y1; ++yy) {{
            for (long long xx = x0; xx < x1; ++xx) s += plane[yy * w + xx];
        }}
        y[i] = s / ({t})((y1 - y0) * (x1 - x0));
",
            window = adaptive_window("        ")
        ),
        PoolKind::AdaptiveBackward => {
            // The output windows covering input (iy, ix): the adaptive rule with the roles of
            // the input and output sizes swapped.
            let ((oy0, oy1), (ox0, ox1)) = (adaptive_range("iy", "h", "oh"), adaptive_range("ix", "w", "ow"));
            format!(
                "\
        const long long ix = (long long)(i % w), iy = (long long)((i / w) % h), p = (long long)(i / (w * h));
        const long long oy0 = {oy0}, oy1 = {oy1};
        const long long ox0 = {ox0}, ox1 = {ox1};
        {t} g = ({t})0;
        for (long long oy = oy0; oy < oy1; ++oy) {{
            for (long long ox = ox0; ox < ox1; ++ox) {{
{window}                g += gy[(p * oh + oy) * ow + ox] / ({t})((y1 - y0) * (x1 - x0));
            }}
        }}
        gx[i] = g;
",
                window = adaptive_window("                ")
            )
        }
    }
}

/// Emits the `kind` kernel for `dtype`. Errors (op `cuda_codegen`, `Unsupported`): a dtype
/// other than f32 and f64 (the tensor layer widens f16 and bf16 to f32 first, as on the CPU).
pub fn emit_pool(kind: PoolKind, dtype: DType) -> Result<PoolKernel, CudaError> {
    let neg_inf = match dtype {
        DType::F32 => "__int_as_float(0xff800000)",
        DType::F64 => "__longlong_as_double(0xfff0000000000000LL)",
        d => {
            let m = format!("CUDA pooling kernels take float32 and float64, not {d} ({})", kind.name());
            return Err(CudaError::new("cuda_codegen", CudaErrorKind::Unsupported, m));
        }
    };
    let t = storage_type(dtype);
    let buffers: Vec<GridBuffer<'_>> = kind
        .buffers()
        .iter()
        .map(|&(name, is_index, written)| GridBuffer { name, ty: if is_index { "long long" } else { t }, written })
        .collect();
    let (name, source) =
        emit_grid_kernel("pool", kind.name(), dtype, &buffers, &POOL_GEOMETRY_WORDS, &body(kind, t, neg_inf));
    Ok(PoolKernel { name, source, kind, dtype })
}

/// Every (kind, dtype) the tensor layer can ask for: each kind in f32 and f64.
pub fn pool_ops() -> Vec<(PoolKind, DType)> {
    PoolKind::ALL.iter().flat_map(|&k| [DType::F32, DType::F64].map(move |d| (k, d))).collect()
}
