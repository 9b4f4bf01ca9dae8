//! 2-d convolution kernels: `im2col`/`col2im` over one image, and the three products of a
//! convolution (forward, gradient of the input, gradient of the weight) as `gemm` calls over
//! those columns, with groups, stride, padding and dilation.
//!
//! Layouts are contiguous row-major: input `(N, C_in, H, W)`, weight `(C_out, C_in/G, KH, KW)`,
//! output `(N, C_out, OH, OW)`. A 1-d convolution is the same with `H = KH = OH = 1`.
//!
//! Threads: with at least as many images as threads, images are split over kiln's pool (each
//! task with its own column buffer, `gemm` single-threaded); with fewer, images run one after
//! another and each `gemm` is split inside. The weight gradient sums per-task partial products
//! in task order, so the result does not depend on scheduling for a fixed thread count.

use super::buffer::CpuBuf;
use super::parallel::{for_chunks_of, map_tasks, num_threads, pool};
use crate::dtype::num_like::Float;

/// The geometry of one 2-d convolution. Padding is given for the top/left side; the
/// bottom/right padding is whatever makes the output `oh x ow` (so asymmetric "same" padding
/// is expressed by the output size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeom {
    /// Batch size.
    pub n: usize,
    /// Input channels.
    pub c_in: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub c_out: usize,
    /// Groups (`c_in` and `c_out` are multiples of it).
    pub groups: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Stride (rows, columns).
    pub stride: [usize; 2],
    /// Padding before the first row / column.
    pub pad: [usize; 2],
    /// Dilation (rows, columns).
    pub dilation: [usize; 2],
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
}

impl ConvGeom {
    /// Input channels per group.
    pub fn cig(&self) -> usize {
        self.c_in / self.groups
    }
    /// Output channels per group.
    pub fn cog(&self) -> usize {
        self.c_out / self.groups
    }
    /// Rows of one group's column matrix: `cig * kh * kw`.
    pub fn k(&self) -> usize {
        self.cig() * self.kh * self.kw
    }
    /// Output positions per image: `oh * ow`.
    pub fn l(&self) -> usize {
        self.oh * self.ow
    }
    /// Elements of one input image.
    pub fn in_image(&self) -> usize {
        self.c_in * self.h * self.w
    }
    /// Elements of one output image.
    pub fn out_image(&self) -> usize {
        self.c_out * self.l()
    }
    /// Elements of the weight.
    pub fn weight_len(&self) -> usize {
        self.c_out * self.k()
    }
    /// Multiply-adds of one product over the whole batch.
    pub fn macs(&self) -> usize {
        self.n * self.c_out * self.l() * self.k()
    }
    /// True when the column matrix of a group is that group's input itself (1x1 kernel, stride
    /// 1, no padding).
    pub fn col_is_input(&self) -> bool {
        self.kh == 1
            && self.kw == 1
            && self.stride == [1, 1]
            && self.pad == [0, 0]
            && self.oh == self.h
            && self.ow == self.w
    }
    /// The output columns `ox` whose input column `ox*s + kj*d - p` lies in `0..w`, for kernel
    /// column `kj`: `lo..hi` (empty when none).
    fn valid_cols(&self, kj: usize) -> (usize, usize) {
        valid_range(self.ow, self.w, self.stride[1], kj * self.dilation[1], self.pad[1])
    }
    /// As `valid_cols` for rows and kernel row `ki`.
    fn valid_rows(&self, ki: usize) -> (usize, usize) {
        valid_range(self.oh, self.h, self.stride[0], ki * self.dilation[0], self.pad[0])
    }
}

/// The outputs `o` in `0..out` with `0 <= o*s + off - p < len`, as `lo..hi`.
fn valid_range(out: usize, len: usize, s: usize, off: usize, p: usize) -> (usize, usize) {
    // o*s + off >= p  <=>  o >= ceil((p - off) / s)
    let lo = if off >= p { 0 } else { (p - off).div_ceil(s) };
    // o*s + off - p < len  <=>  o*s < len + p - off  <=>  o <= (len + p - off - 1) / s
    let hi = if len + p <= off { 0 } else { (len + p - off - 1) / s + 1 };
    let hi = hi.min(out);
    (lo.min(hi), hi)
}

/// Fills `col` (`cig*kh*kw` rows of `oh*ow`) with the patches of one group of one image
/// (`x`: `cig` planes of `h*w`); padding reads as zero.
pub fn im2col<T: Float>(g: &ConvGeom, x: &[T], col: &mut [T]) {
    let (l, hw, ow) = (g.l(), g.h * g.w, g.ow);
    let (sh, sw) = (g.stride[0], g.stride[1]);
    for c in 0..g.cig() {
        let plane = &x[c * hw..(c + 1) * hw];
        for ki in 0..g.kh {
            let (ylo, yhi) = g.valid_rows(ki);
            for kj in 0..g.kw {
                let row = (c * g.kh + ki) * g.kw + kj;
                let dst = &mut col[row * l..(row + 1) * l];
                let (xlo, xhi) = g.valid_cols(kj);
                dst[..ylo * ow].fill(T::zero());
                dst[yhi * ow..].fill(T::zero());
                for oy in ylo..yhi {
                    let iy = oy * sh + ki * g.dilation[0] - g.pad[0];
                    let src = &plane[iy * g.w..(iy + 1) * g.w];
                    let out = &mut dst[oy * ow..(oy + 1) * ow];
                    out[..xlo].fill(T::zero());
                    out[xhi..].fill(T::zero());
                    if xlo == xhi {
                        continue;
                    }
                    let x0 = xlo * sw + kj * g.dilation[1] - g.pad[1];
                    if sw == 1 {
                        out[xlo..xhi].copy_from_slice(&src[x0..x0 + (xhi - xlo)]);
                    } else {
                        for (i, o) in out[xlo..xhi].iter_mut().enumerate() {
                            *o = src[x0 + i * sw];
                        }
                    }
                }
            }
        }
    }
}

/// Adds the columns `col` (as [`im2col`] lays them out) back into the planes `x` of one
/// group of one image: the adjoint of `im2col`.
pub fn col2im<T: Float>(g: &ConvGeom, col: &[T], x: &mut [T]) {
    let (l, hw, ow) = (g.l(), g.h * g.w, g.ow);
    let (sh, sw) = (g.stride[0], g.stride[1]);
    for c in 0..g.cig() {
        let plane = &mut x[c * hw..(c + 1) * hw];
        for ki in 0..g.kh {
            let (ylo, yhi) = g.valid_rows(ki);
            for kj in 0..g.kw {
                let row = (c * g.kh + ki) * g.kw + kj;
                let src = &col[row * l..(row + 1) * l];
                let (xlo, xhi) = g.valid_cols(kj);
                if xlo == xhi {
                    continue;
                }
                for oy in ylo..yhi {
                    let iy = oy * sh + ki * g.dilation[0] - g.pad[0];
                    let dst = &mut plane[iy * g.w..(iy + 1) * g.w];
                    let s = &src[oy * ow..(oy + 1) * ow];
                    let x0 = xlo * sw + kj * g.dilation[1] - g.pad[1];
                    if sw == 1 {
                        for (d, &v) in dst[x0..x0 + (xhi - xlo)].iter_mut().zip(&s[xlo..xhi]) {
                            *d = *d + v;
                        }
                    } else {
                        for (i, &v) in s[xlo..xhi].iter().enumerate() {
                            let d = &mut dst[x0 + i * sw];
                            *d = *d + v;
                        }
                    }
                }
            }
        }
    }
}

/// A row-major or transposed matrix operand of [`gemm_call`]: pointer, row stride, column stride.
#[derive(Clone, Copy)]
struct Mat<T> {
    ptr: *const T,
    rs: isize,
    cs: isize,
}

/// `dst (m x n, row-major) = [dst +] lhs (m x k) @ rhs (k x n)`.
///
/// # Safety
/// `lhs` must address `m x k` readable elements through its strides, `rhs` `k x n`, `dst`
/// must hold `m * n` elements, and none of them may alias `dst`.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_call<T: Float>(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [T],
    accumulate: bool,
    lhs: Mat<T>,
    rhs: Mat<T>,
    par: gemm::Parallelism,
) {
    assert!(dst.len() >= m * n);
    // SAFETY: `gemm` supports f32 and f64 (the only `Float` types); the caller guarantees the
    // operands' extents; `dst` is borrowed mutably for the call. With `accumulate`, alpha = 1
    // keeps the old contents (`dst = dst + lhs @ rhs`); otherwise they are not read.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.ptr,
            lhs.cs,
            lhs.rs,
            rhs.ptr,
            rhs.cs,
            rhs.rs,
            if accumulate { T::one() } else { T::zero() },
            T::one(),
            false,
            false,
            false,
            par,
        )
    }
}

/// How a batch of per-image products is spread over threads.
struct Plan {
    /// Images run in parallel (each `gemm` on one thread).
    over_batch: bool,
    /// The `gemm` parallelism of one product.
    inner: gemm::Parallelism,
}

fn plan(g: &ConvGeom) -> Plan {
    let threads = num_threads();
    // Below this many multiply-adds in total the whole convolution runs on the caller's thread.
    const SMALL: usize = 1 << 16;
    if threads == 1 || g.macs() < SMALL {
        return Plan { over_batch: false, inner: gemm::Parallelism::None };
    }
    if g.n >= threads {
        return Plan { over_batch: true, inner: gemm::Parallelism::None };
    }
    let per_image = g.c_out * g.l() * g.k() / g.groups.max(1);
    let inner = if per_image >= gemm::get_threading_threshold() {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    Plan { over_batch: false, inner }
}

/// Runs `f(image index, output image, scratch)` for every image. With `over_batch`, the
/// images are cut into one contiguous range per thread, each range run by one task with its
/// own `scratch` of `scratch_len` elements (allocated once per task); otherwise they run in
/// order on the caller's thread (inside the pool, so that a threaded `gemm` uses it).
fn for_images<T: Float>(
    n: usize,
    out: &mut [T],
    image: usize,
    scratch_len: usize,
    over_batch: bool,
    f: impl Fn(usize, &mut [T], &mut Vec<T>) + Sync + Send,
) {
    if image == 0 || n == 0 {
        return;
    }
    let per_task = if over_batch { n.div_ceil(num_threads().min(n)) } else { n };
    let run = |t: usize, chunk: &mut [T]| {
        let mut s = vec![T::zero(); scratch_len];
        for (j, o) in chunk.chunks_mut(image).enumerate() {
            f(t * per_task + j, o, &mut s)
        }
    };
    pool().install(|| {
        if per_task == n {
            run(0, out)
        } else {
            for_chunks_of(out, per_task * image, |start, c| run(start / (per_task * image), c))
        }
    });
}

/// The convolution `out[n] = Σ_g W_g @ im2col(x[n, g]) (+ bias)`: `x` is `(N, C_in, H, W)`,
/// `w` `(C_out, C_in/G, KH, KW)`, `bias` `(C_out)`; returns `(N, C_out, OH, OW)`.
pub fn conv2d_forward<T: Float>(g: &ConvGeom, x: &[T], w: &[T], bias: Option<&[T]>) -> CpuBuf<T> {
    assert_eq!(x.len(), g.n * g.in_image(), "conv2d_forward: input length");
    assert_eq!(w.len(), g.weight_len(), "conv2d_forward: weight length");
    let mut out = CpuBuf::<T>::uninit(g.n * g.out_image());
    let (k, l, cig, cog) = (g.k(), g.l(), g.cig(), g.cog());
    let p = plan(g);
    let direct = g.col_is_input();
    let scratch = if direct { 0 } else { k * l };
    for_images(g.n, &mut out, g.out_image(), scratch, p.over_batch, |n, o, col| {
        for grp in 0..g.groups {
            let xg = &x[n * g.in_image() + grp * cig * g.h * g.w..][..cig * g.h * g.w];
            let og = &mut o[grp * cog * l..(grp + 1) * cog * l];
            let rhs = if direct {
                xg
            } else {
                im2col(g, xg, col);
                &col[..]
            };
            if let Some(b) = bias {
                for (c, row) in og.chunks_mut(l).enumerate() {
                    row.fill(b[grp * cog + c]);
                }
            }
            let wg = &w[grp * cog * k..(grp + 1) * cog * k];
            // SAFETY: wg is cog x k row-major, rhs k x l row-major, og cog x l; col is this
            // task's own scratch, distinct from og.
            unsafe {
                gemm_call(
                    cog,
                    l,
                    k,
                    og,
                    bias.is_some(),
                    Mat { ptr: wg.as_ptr(), rs: k as isize, cs: 1 },
                    Mat { ptr: rhs.as_ptr(), rs: l as isize, cs: 1 },
                    p.inner,
                )
            }
        }
    });
    out
}

/// The gradient of the input: `gx[n, g] = col2im(W_gᵀ @ gy[n, g])`, `(N, C_in, H, W)`.
pub fn conv2d_backward_input<T: Float>(g: &ConvGeom, gy: &[T], w: &[T]) -> CpuBuf<T> {
    assert_eq!(gy.len(), g.n * g.out_image(), "conv2d_backward_input: gradient length");
    assert_eq!(w.len(), g.weight_len(), "conv2d_backward_input: weight length");
    let mut gx = CpuBuf::<T>::uninit(g.n * g.in_image());
    let (k, l, cig, cog) = (g.k(), g.l(), g.cig(), g.cog());
    let p = plan(g);
    let direct = g.col_is_input();
    let scratch = if direct { 0 } else { k * l };
    for_images(g.n, &mut gx, g.in_image(), scratch, p.over_batch, |n, xi, col| {
        for grp in 0..g.groups {
            let xg = &mut xi[grp * cig * g.h * g.w..(grp + 1) * cig * g.h * g.w];
            let gyg = &gy[n * g.out_image() + grp * cog * l..][..cog * l];
            let wg = &w[grp * cog * k..(grp + 1) * cog * k];
            let lhs = Mat { ptr: wg.as_ptr(), rs: 1, cs: k as isize }; // W_gᵀ: k x cog
            let rhs = Mat { ptr: gyg.as_ptr(), rs: l as isize, cs: 1 };
            // SAFETY: Wᵀ is k x cog through strides (1, k) over wg, gyg is cog x l, the
            // destination (xg or this task's scratch) holds k x l and aliases neither.
            unsafe {
                if direct {
                    gemm_call(k, l, cog, xg, false, lhs, rhs, p.inner);
                } else {
                    gemm_call(k, l, cog, col, false, lhs, rhs, p.inner);
                    xg.fill(T::zero());
                    col2im(g, col, xg);
                }
            }
        }
    });
    gx
}

/// The gradient of the weight: `gw_g = Σ_n gy[n, g] @ im2col(x[n, g])ᵀ`,
/// `(C_out, C_in/G, KH, KW)`.
pub fn conv2d_backward_weight<T: Float>(g: &ConvGeom, x: &[T], gy: &[T]) -> CpuBuf<T> {
    assert_eq!(x.len(), g.n * g.in_image(), "conv2d_backward_weight: input length");
    assert_eq!(gy.len(), g.n * g.out_image(), "conv2d_backward_weight: gradient length");
    let (k, l, cig, cog) = (g.k(), g.l(), g.cig(), g.cog());
    let p = plan(g);
    let direct = g.col_is_input();
    // Accumulates images `range` into `acc` (zeroed by the caller).
    let images = |range: std::ops::Range<usize>, acc: &mut [T], inner: gemm::Parallelism| {
        let mut col = vec![T::zero(); if direct { 0 } else { k * l }];
        for n in range {
            for grp in 0..g.groups {
                let xg = &x[n * g.in_image() + grp * cig * g.h * g.w..][..cig * g.h * g.w];
                let gyg = &gy[n * g.out_image() + grp * cog * l..][..cog * l];
                let rhs_data = if direct {
                    xg
                } else {
                    im2col(g, xg, &mut col);
                    &col[..]
                };
                let acc_g = &mut acc[grp * cog * k..(grp + 1) * cog * k];
                // SAFETY: gyg is cog x l row-major, colᵀ is l x k through strides (1, l) over
                // a k x l buffer, acc_g holds cog x k and is this task's own.
                unsafe {
                    gemm_call(
                        cog,
                        k,
                        l,
                        acc_g,
                        true,
                        Mat { ptr: gyg.as_ptr(), rs: l as isize, cs: 1 },
                        Mat { ptr: rhs_data.as_ptr(), rs: 1, cs: l as isize },
                        inner,
                    )
                }
            }
        }
    };
    let len = g.weight_len();
    let mut gw = CpuBuf::<T>::zeros(len);
    if !p.over_batch {
        pool().install(|| images(0..g.n, &mut gw, p.inner));
        return gw;
    }
    let tasks = num_threads().min(g.n);
    let step = g.n.div_ceil(tasks);
    let partials: Vec<Vec<T>> = map_tasks(tasks, |t| {
        let mut acc = vec![T::zero(); len];
        images(t * step..((t + 1) * step).min(g.n), &mut acc, gemm::Parallelism::None);
        acc
    });
    for part in &partials {
        for (o, &v) in gw.iter_mut().zip(part) {
            *o = *o + v;
        }
    }
    gw
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(
        n: usize,
        c_in: usize,
        h: usize,
        w: usize,
        c_out: usize,
        groups: usize,
        k: [usize; 2],
        s: [usize; 2],
        p: [usize; 2],
        d: [usize; 2],
    ) -> ConvGeom {
        let oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) / s[0] + 1;
        let ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) / s[1] + 1;
        ConvGeom { n, c_in, h, w, c_out, groups, kh: k[0], kw: k[1], stride: s, pad: p, dilation: d, oh, ow }
    }

    /// The direct 7-loop convolution in f64.
    fn naive(g: &ConvGeom, x: &[f64], w: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; g.n * g.out_image()];
        let (cig, cog) = (g.cig(), g.cog());
        for n in 0..g.n {
            for co in 0..g.c_out {
                let grp = co / cog;
                for oy in 0..g.oh {
                    for ox in 0..g.ow {
                        let mut s = 0.0;
                        for ci in 0..cig {
                            for ki in 0..g.kh {
                                for kj in 0..g.kw {
                                    let iy = (oy * g.stride[0] + ki * g.dilation[0]) as isize - g.pad[0] as isize;
                                    let ix = (ox * g.stride[1] + kj * g.dilation[1]) as isize - g.pad[1] as isize;
                                    if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.w as isize {
                                        continue;
                                    }
                                    let xv = x[((n * g.c_in + grp * cig + ci) * g.h + iy as usize) * g.w + ix as usize];
                                    s += xv * w[((co * cig + ci) * g.kh + ki) * g.kw + kj];
                                }
                            }
                        }
                        out[((n * g.c_out + co) * g.oh + oy) * g.ow + ox] = s;
                    }
                }
            }
        }
        out
    }

    fn data(len: usize, seed: usize) -> Vec<f64> {
        (0..len).map(|i| ((i * 7 + seed) % 13) as f64 - 6.0).collect()
    }

    fn dot(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn forward_and_adjoints_match_the_direct_loops() {
        let cases = [
            geom(2, 4, 7, 6, 6, 2, [3, 2], [2, 1], [1, 2], [1, 2]),
            geom(3, 3, 5, 5, 2, 1, [1, 1], [1, 1], [0, 0], [1, 1]),
            geom(1, 2, 9, 4, 4, 2, [2, 3], [3, 2], [0, 1], [2, 1]),
            geom(5, 2, 6, 6, 3, 1, [3, 3], [1, 1], [1, 1], [1, 1]),
        ];
        for g in cases {
            let x = data(g.n * g.in_image(), 1);
            let w = data(g.weight_len(), 5);
            let y = conv2d_forward(&g, &x, &w, None);
            assert_eq!(&y[..], &naive(&g, &x, &w)[..], "{g:?}");
            // Adjoint identities: <gy, conv(x, w)> = <backward_input(gy, w), x> = <backward_weight(x, gy), w>.
            let gy = data(g.n * g.out_image(), 3);
            let lhs = dot(&gy, &y);
            assert_eq!(dot(&conv2d_backward_input(&g, &gy, &w), &x), lhs, "{g:?}");
            assert_eq!(dot(&conv2d_backward_weight(&g, &x, &gy), &w), lhs, "{g:?}");
        }
    }

    #[test]
    fn valid_ranges_skip_padding() {
        // out 0..5, len 4, stride 1, offset 0, pad 1: o - 1 in 0..4 -> o in 1..5
        assert_eq!(valid_range(5, 4, 1, 0, 1), (1, 5));
        // stride 2, offset 2, pad 1: 2o + 1 < 5 -> o <= 1
        assert_eq!(valid_range(3, 5, 2, 2, 1), (0, 2));
        // a kernel tap entirely in the padding
        assert_eq!(valid_range(1, 1, 1, 0, 2), (1, 1));
    }
}
