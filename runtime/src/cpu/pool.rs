//! 2-d pooling kernels over planes: max pooling (with PyTorch's argmax indices), average
//! pooling and adaptive average pooling, forward and backward.
//!
//! Inputs are contiguous `planes x h x w` (`planes = N * C`), outputs `planes x oh x ow`.
//! Windows follow PyTorch's CPU kernels exactly (which elements, which divisor, which index
//! wins a tie: the first; NaN wins over numbers). Planes are split over kiln's pool.

use super::buffer::CpuBuf;
use super::parallel::{for_chunks_of, pool, GRAIN};
use crate::dtype::num_like::Float;
use rayon::prelude::*;

/// The geometry of a 2-d pooling with a fixed window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolGeom {
    /// Number of planes (`N * C`).
    pub planes: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// Window (rows, columns).
    pub kernel: [usize; 2],
    /// Stride (rows, columns).
    pub stride: [usize; 2],
    /// Padding on each side (rows, columns).
    pub pad: [usize; 2],
    /// Dilation (rows, columns); average pooling uses 1.
    pub dilation: [usize; 2],
}

/// How average pooling divides a window's sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgMode {
    /// Count padding elements in the divisor.
    pub count_include_pad: bool,
    /// Divide by this instead.
    pub divisor_override: Option<usize>,
}

/// Calls `f(first plane, chunk of `chunk_planes` planes of `plane_len` each)` over `out`, in
/// parallel when the work (`plane_work` per plane) is large enough.
fn for_planes<T: Send>(out: &mut [T], plane_len: usize, plane_work: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if out.is_empty() || plane_len == 0 {
        return;
    }
    let per_task = (GRAIN / plane_work.max(1)).max(1);
    for_chunks_of(out, per_task * plane_len, |start, c| f(start / plane_len, c));
}

/// Max pooling: values and the flat index `iy * w + ix` of each maximum within its plane.
pub fn max_pool2d_forward<T: Float>(g: &PoolGeom, x: &[T]) -> (CpuBuf<T>, CpuBuf<i64>) {
    assert_eq!(x.len(), g.planes * g.h * g.w, "max_pool2d: input length");
    let (ol, il) = (g.oh * g.ow, g.h * g.w);
    let mut vals = CpuBuf::<T>::uninit(g.planes * ol);
    let mut idx = CpuBuf::<i64>::uninit(g.planes * ol);
    if ol == 0 {
        return (vals, idx);
    }
    let per_task = (GRAIN / (ol * g.kernel[0] * g.kernel[1]).max(1)).max(1);
    let first_x = first_columns(g);
    let run = |p0: usize, v: &mut [T], ix: &mut [i64]| {
        for (pi, (vo, io)) in v.chunks_mut(ol).zip(ix.chunks_mut(ol)).enumerate() {
            max_plane(g, &first_x, &x[(p0 + pi) * il..(p0 + pi + 1) * il], vo, io);
        }
    };
    if g.planes <= per_task {
        run(0, &mut vals, &mut idx);
    } else {
        let chunk = per_task * ol;
        pool().install(|| {
            vals.par_chunks_mut(chunk)
                .zip(idx.par_chunks_mut(chunk))
                .enumerate()
                .for_each(|(c, (v, ix))| run(c * per_task, v, ix))
        });
    }
    (vals, idx)
}

/// The first column inside the input of each output column's window.
fn first_columns(g: &PoolGeom) -> Vec<isize> {
    let (sw, dw, pw) = (g.stride[1] as isize, g.dilation[1] as isize, g.pad[1] as isize);
    (0..g.ow as isize)
        .map(|ox| {
            let mut x = ox * sw - pw;
            while x < 0 {
                x += dw;
            }
            x
        })
        .collect()
}

/// One plane of max pooling (`first_x` from [`first_columns`]), with PyTorch's `cpu_max_pool`
/// result: each window scanned row by row, the first maximum kept unless a later element is NaN
/// (the last NaN wins), and a window's index starting at its first element inside the input.
///
/// The scan runs one window offset `(ky, kx)` at a time over a whole row of outputs, so the
/// innermost loop updates independent outputs, and it keeps only each output's index (its
/// value is the plane's element there: a window's first element starts both), so the update is
/// an integer select, not a branch: which element wins is unpredictable on real data, and the
/// mispredicted branches of a window-by-window loop cost ~9 ns per output.
fn max_plane<T: Float>(g: &PoolGeom, first_x: &[isize], plane: &[T], vals: &mut [T], idx: &mut [i64]) {
    let (h, w) = (g.h as isize, g.w as isize);
    let (sh, sw) = (g.stride[0] as isize, g.stride[1] as isize);
    let (dh, dw) = (g.dilation[0] as isize, g.dilation[1] as isize);
    let (ph, pw) = (g.pad[0] as isize, g.pad[1] as isize);
    let ow = g.ow;
    for oy in 0..g.oh {
        let (vrow, irow) = (&mut vals[oy * ow..(oy + 1) * ow], &mut idx[oy * ow..(oy + 1) * ow]);
        let y_base = oy as isize * sh - ph;
        let mut first_y = y_base;
        while first_y < 0 {
            first_y += dh;
        }
        for (i, &x) in irow.iter_mut().zip(first_x) {
            *i = (first_y * w + x) as i64;
        }
        for ky in 0..g.kernel[0] as isize {
            let y = y_base + ky * dh;
            if y < 0 || y >= h {
                continue;
            }
            let row = &plane[(y * w) as usize..((y + 1) * w) as usize];
            for kx in 0..g.kernel[1] as isize {
                // Output `ox` reads column `ox·sw + off`, inside the row for `ox` in `lo..hi`.
                let off = kx * dw - pw;
                let lo = if off >= 0 { 0 } else { (-off + sw - 1) / sw };
                let hi = if w - 1 - off < 0 { 0 } else { ((w - 1 - off) / sw + 1).min(ow as isize) };
                for ox in lo..hi {
                    let x = ox * sw + off;
                    let (v, o) = (row[x as usize], ox as usize);
                    let take = (v > plane[irow[o] as usize]) | v.is_nan();
                    irow[o] = std::hint::select_unpredictable(take, (y * w + x) as i64, irow[o]);
                }
            }
        }
        for (v, &i) in vrow.iter_mut().zip(irow.iter()) {
            *v = plane[i as usize];
        }
    }
}

/// The gradient of max pooling: each output gradient added at its argmax.
pub fn max_pool2d_backward<T: Float>(g: &PoolGeom, gy: &[T], idx: &[i64]) -> CpuBuf<T> {
    let (ol, il) = (g.oh * g.ow, g.h * g.w);
    assert_eq!(gy.len(), g.planes * ol, "max_pool2d_backward: gradient length");
    assert_eq!(idx.len(), g.planes * ol, "max_pool2d_backward: indices length");
    let mut gx = CpuBuf::<T>::zeros(g.planes * il);
    for_planes(&mut gx, il, il + ol, |p0, chunk| {
        for (pi, plane) in chunk.chunks_mut(il).enumerate() {
            let p = p0 + pi;
            for (&i, &v) in idx[p * ol..(p + 1) * ol].iter().zip(&gy[p * ol..(p + 1) * ol]) {
                let d = &mut plane[i as usize];
                *d = *d + v;
            }
        }
    });
    gx
}

/// One window of average pooling: the clipped rows and columns and the divisor (PyTorch's
/// `cpu_avg_pool`); `None` when the window holds no input element.
fn avg_window(g: &PoolGeom, mode: AvgMode, oy: usize, ox: usize) -> Option<(usize, usize, usize, usize, f64)> {
    let (h, w) = (g.h as isize, g.w as isize);
    let y0 = (oy * g.stride[0]) as isize - g.pad[0] as isize;
    let x0 = (ox * g.stride[1]) as isize - g.pad[1] as isize;
    let y1 = (y0 + g.kernel[0] as isize).min(h + g.pad[0] as isize);
    let x1 = (x0 + g.kernel[1] as isize).min(w + g.pad[1] as isize);
    let pool_size = (y1 - y0) * (x1 - x0);
    let (y0, x0, y1, x1) = (y0.max(0), x0.max(0), y1.min(h), x1.min(w));
    if y0 >= y1 || x0 >= x1 {
        return None;
    }
    let div = match mode.divisor_override {
        Some(d) => d as isize,
        None if mode.count_include_pad => pool_size,
        None => (y1 - y0) * (x1 - x0),
    };
    Some((y0 as usize, y1 as usize, x0 as usize, x1 as usize, div as f64))
}

/// Average pooling.
pub fn avg_pool2d_forward<T: Float>(g: &PoolGeom, mode: AvgMode, x: &[T]) -> CpuBuf<T> {
    let (ol, il) = (g.oh * g.ow, g.h * g.w);
    assert_eq!(x.len(), g.planes * il, "avg_pool2d: input length");
    let mut out = CpuBuf::<T>::uninit(g.planes * ol);
    for_planes(&mut out, ol, ol * g.kernel[0] * g.kernel[1], |p0, chunk| {
        for (pi, o) in chunk.chunks_mut(ol).enumerate() {
            let plane = &x[(p0 + pi) * il..(p0 + pi + 1) * il];
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    o[oy * g.ow + ox] = match avg_window(g, mode, oy, ox) {
                        None => T::zero(),
                        Some((y0, y1, x0, x1, div)) => {
                            let mut s = T::zero();
                            for y in y0..y1 {
                                for &v in &plane[y * g.w + x0..y * g.w + x1] {
                                    s = s + v;
                                }
                            }
                            s / T::c(div)
                        }
                    };
                }
            }
        }
    });
    out
}

/// The gradient of average pooling: each output gradient spread over its window.
pub fn avg_pool2d_backward<T: Float>(g: &PoolGeom, mode: AvgMode, gy: &[T]) -> CpuBuf<T> {
    let (ol, il) = (g.oh * g.ow, g.h * g.w);
    assert_eq!(gy.len(), g.planes * ol, "avg_pool2d_backward: gradient length");
    let mut gx = CpuBuf::<T>::zeros(g.planes * il);
    for_planes(&mut gx, il, ol * g.kernel[0] * g.kernel[1], |p0, chunk| {
        for (pi, plane) in chunk.chunks_mut(il).enumerate() {
            let gp = &gy[(p0 + pi) * ol..(p0 + pi + 1) * ol];
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    if let Some((y0, y1, x0, x1, div)) = avg_window(g, mode, oy, ox) {
                        let v = gp[oy * g.ow + ox] / T::c(div);
                        for y in y0..y1 {
                            for d in &mut plane[y * g.w + x0..y * g.w + x1] {
                                *d = *d + v;
                            }
                        }
                    }
                }
            }
        }
    });
    gx
}

/// The input range `start..end` that adaptive pooling output `o` of `out` averages over an
/// input of `len`: `floor(o*len/out)..ceil((o+1)*len/out)`.
pub fn adaptive_range(o: usize, out: usize, len: usize) -> (usize, usize) {
    (o * len / out, ((o + 1) * len).div_ceil(out))
}

/// Adaptive average pooling of `planes` planes of `h x w` to `oh x ow`.
pub fn adaptive_avg_pool2d_forward<T: Float>(
    planes: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    x: &[T],
) -> CpuBuf<T> {
    let (ol, il) = (oh * ow, h * w);
    assert_eq!(x.len(), planes * il, "adaptive_avg_pool2d: input length");
    let mut out = CpuBuf::<T>::uninit(planes * ol);
    for_planes(&mut out, ol, il.max(ol), |p0, chunk| {
        for (pi, o) in chunk.chunks_mut(ol).enumerate() {
            let plane = &x[(p0 + pi) * il..(p0 + pi + 1) * il];
            for oy in 0..oh {
                let (y0, y1) = adaptive_range(oy, oh, h);
                for ox in 0..ow {
                    let (x0, x1) = adaptive_range(ox, ow, w);
                    let mut s = T::zero();
                    for y in y0..y1 {
                        for &v in &plane[y * w + x0..y * w + x1] {
                            s = s + v;
                        }
                    }
                    o[oy * ow + ox] = s / T::c(((y1 - y0) * (x1 - x0)) as f64);
                }
            }
        }
    });
    out
}

/// The gradient of adaptive average pooling.
pub fn adaptive_avg_pool2d_backward<T: Float>(
    planes: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    gy: &[T],
) -> CpuBuf<T> {
    let (ol, il) = (oh * ow, h * w);
    assert_eq!(gy.len(), planes * ol, "adaptive_avg_pool2d_backward: gradient length");
    let mut gx = CpuBuf::<T>::zeros(planes * il);
    for_planes(&mut gx, il, il.max(ol), |p0, chunk| {
        for (pi, plane) in chunk.chunks_mut(il).enumerate() {
            let gp = &gy[(p0 + pi) * ol..(p0 + pi + 1) * ol];
            for oy in 0..oh {
                let (y0, y1) = adaptive_range(oy, oh, h);
                for ox in 0..ow {
                    let (x0, x1) = adaptive_range(ox, ow, w);
                    let v = gp[oy * ow + ox] / T::c(((y1 - y0) * (x1 - x0)) as f64);
                    for y in y0..y1 {
                        for d in &mut plane[y * w + x0..y * w + x1] {
                            *d = *d + v;
                        }
                    }
                }
            }
        }
    });
    gx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_pool_takes_the_first_maximum_and_nan() {
        let g = PoolGeom {
            planes: 1,
            h: 2,
            w: 4,
            oh: 1,
            ow: 2,
            kernel: [2, 2],
            stride: [2, 2],
            pad: [0, 0],
            dilation: [1, 1],
        };
        let x = [1.0, 3.0, 2.0, f64::NAN, 3.0, 0.0, 5.0, 1.0];
        let (v, i) = max_pool2d_forward(&g, &x);
        assert_eq!(v[0], 3.0);
        assert_eq!(i[0], 1);
        assert!(v[1].is_nan());
        assert_eq!(i[1], 3);
        let gx = max_pool2d_backward(&g, &[1.0, 2.0], &i);
        assert_eq!(&gx[..], &[0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0]);
    }

    /// Max pooling window by window, as PyTorch's `cpu_max_pool` loop scans it.
    fn max_pool_by_window(g: &PoolGeom, x: &[f64]) -> (Vec<f64>, Vec<i64>) {
        let (mut vals, mut idx) = (Vec::new(), Vec::new());
        let (h, w) = (g.h as isize, g.w as isize);
        for plane in x.chunks(g.h * g.w) {
            for oy in 0..g.oh as isize {
                for ox in 0..g.ow as isize {
                    let ys = (0..g.kernel[0] as isize)
                        .map(|k| oy * g.stride[0] as isize - g.pad[0] as isize + k * g.dilation[0] as isize);
                    let xs = |k: isize| ox * g.stride[1] as isize - g.pad[1] as isize + k * g.dilation[1] as isize;
                    let inside: Vec<isize> = ys
                        .filter(|y| (0..h).contains(y))
                        .flat_map(|y| {
                            (0..g.kernel[1] as isize).map(xs).filter(|x| (0..w).contains(x)).map(move |x| y * w + x)
                        })
                        .collect();
                    let (mut best, mut best_i) = (f64::NEG_INFINITY, inside[0]);
                    for &i in &inside {
                        let v = plane[i as usize];
                        if v > best || v.is_nan() {
                            (best, best_i) = (v, i);
                        }
                    }
                    vals.push(best);
                    idx.push(best_i as i64);
                }
            }
        }
        (vals, idx)
    }

    #[test]
    fn max_pool_equals_the_window_by_window_scan() {
        // Few distinct values (ties), with NaN and -inf among them.
        let pick = [0.5, -1.0, 2.0, f64::NEG_INFINITY, 2.0, f64::NAN, 0.0];
        for (k, s, p, d, (h, w)) in [
            (2, 2, 0, 1, (6, 8)),
            (3, 1, 1, 1, (5, 7)),
            (3, 2, 1, 2, (9, 6)),
            (2, 3, 1, 1, (7, 7)),
            (1, 1, 0, 1, (3, 4)),
        ] {
            let out = |n: usize| (n + 2 * p - d * (k - 1) - 1).div_ceil(s) + 1; // ceil mode
            let (oh, ow) = (out(h).min((h + p - 1) / s + 1), out(w).min((w + p - 1) / s + 1));
            let g = PoolGeom { planes: 3, h, w, oh, ow, kernel: [k, k], stride: [s, s], pad: [p, p], dilation: [d, d] };
            let x: Vec<f64> = (0..3 * h * w).map(|i| pick[(i * 7 + i / 5) % pick.len()]).collect();
            let (v, i) = max_pool2d_forward(&g, &x);
            let (want_v, want_i) = max_pool_by_window(&g, &x);
            assert_eq!(&i[..], &want_i[..], "indices, k {k} s {s} p {p} d {d}");
            let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
            assert!(v.iter().zip(&want_v).all(|(&a, &b)| same(a, b)), "values, k {k} s {s} p {p} d {d}");
        }
    }

    #[test]
    fn adaptive_ranges_overlap_for_non_divisible_sizes() {
        // 5 -> 3: [0, 2), [1, 4), [3, 5)
        assert_eq!((0..3).map(|o| adaptive_range(o, 3, 5)).collect::<Vec<_>>(), vec![(0, 2), (1, 4), (3, 5)]);
    }
}
