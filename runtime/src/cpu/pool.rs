//! 2-d pooling kernels over planes: max pooling (with PyTorch's argmax indices), average
//! pooling and adaptive average pooling, forward and backward.
//!
//! Inputs are contiguous `planes x h x w` (`planes = N * C`), outputs `planes x oh x ow`.
//! Windows follow PyTorch's CPU kernels exactly (which elements, which divisor, which index
//! wins a tie: the first; NaN wins over numbers). Planes are split over kiln's pool.

use super::buffer::CpuBuf;
use super::parallel::{pool, GRAIN};
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
    let chunk = per_task * plane_len;
    if out.len() <= chunk {
        return f(0, out);
    }
    pool().install(|| out.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i * per_task, c)));
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
    let run = |p0: usize, v: &mut [T], ix: &mut [i64]| {
        for (pi, (vo, io)) in v.chunks_mut(ol).zip(ix.chunks_mut(ol)).enumerate() {
            max_plane(g, &x[(p0 + pi) * il..(p0 + pi + 1) * il], vo, io);
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

/// One plane of max pooling (PyTorch's `cpu_max_pool` loop).
fn max_plane<T: Float>(g: &PoolGeom, plane: &[T], vals: &mut [T], idx: &mut [i64]) {
    let (h, w) = (g.h as isize, g.w as isize);
    let (dh, dw) = (g.dilation[0] as isize, g.dilation[1] as isize);
    for oy in 0..g.oh {
        let mut y0 = (oy * g.stride[0]) as isize - g.pad[0] as isize;
        let y1 = (y0 + (g.kernel[0] as isize - 1) * dh + 1).min(h);
        while y0 < 0 {
            y0 += dh;
        }
        for ox in 0..g.ow {
            let mut x0 = (ox * g.stride[1]) as isize - g.pad[1] as isize;
            let x1 = (x0 + (g.kernel[1] as isize - 1) * dw + 1).min(w);
            while x0 < 0 {
                x0 += dw;
            }
            let mut best_i = y0 * w + x0;
            let mut best = T::c(f64::NEG_INFINITY);
            let mut y = y0;
            while y < y1 {
                let mut xx = x0;
                while xx < x1 {
                    let i = y * w + xx;
                    let v = plane[i as usize];
                    if v > best || v.is_nan() {
                        best = v;
                        best_i = i;
                    }
                    xx += dw;
                }
                y += dh;
            }
            vals[oy * g.ow + ox] = best;
            idx[oy * g.ow + ox] = best_i as i64;
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

    #[test]
    fn adaptive_ranges_overlap_for_non_divisible_sizes() {
        // 5 -> 3: [0, 2), [1, 4), [3, 5)
        assert_eq!((0..3).map(|o| adaptive_range(o, 3, 5)).collect::<Vec<_>>(), vec![(0, 2), (1, 4), (3, 5)]);
    }
}
