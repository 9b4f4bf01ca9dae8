//! The CUDA pooling emitter (max pooling with indices, average and adaptive average pooling,
//! their gradients): its text and errors (always), the adaptive windows' inverse rule the
//! gradient gathers with (always), NVRTC compiling every (kind, dtype) kernel to CUBIN for
//! sm_80 and sm_90 (skipping with a printed line when NVRTC is absent), and, on a GPU, every
//! kernel against the CPU kernels of `kiln_runtime::cpu::pool` (bit for bit: same windows,
//! same summation order) over geometries with padding, dilation, overlapping windows and
//! ceil-mode edges, and adaptive pooling up and down.

use kiln_codegen::cuda::{emit_pool, pool_ops, LoadedPool, PoolKind, POOL_GEOMETRY_WORDS};
use kiln_runtime::cpu::pool::{self as cpu, AvgMode, PoolGeom};
use kiln_runtime::cuda::{CudaBuffer, CudaErrorKind};
use kiln_runtime::DType;

mod common;

#[test]
fn kernels_take_buffers_then_the_geometry() {
    let k = emit_pool(PoolKind::MaxForward, DType::F32).unwrap();
    let s = &k.source;
    assert!(k.name.starts_with("kiln_pool_max_pool2d_f32_"), "{}", k.name);
    assert!(s.contains("(const float* __restrict__ x, float* __restrict__ y, long long* __restrict__ idx, unsigned long long n, unsigned long long h_, unsigned long long w_,"), "{s}");
    assert!(s.contains("unsigned long long count_include_pad_, unsigned long long divisor_)"), "{s}");
    assert_eq!(POOL_GEOMETRY_WORDS.len(), 14);
    // The first maximum wins, NaN wins over numbers; the search starts from -inf.
    assert!(
        s.contains("if (v > best || v != v) { best = v; best_i = j; }")
            && s.contains("float best = __int_as_float(0xff800000);"),
        "{s}"
    );
    let d = emit_pool(PoolKind::MaxForward, DType::F64).unwrap().source;
    assert!(d.contains("double best = __longlong_as_double(0xfff0000000000000LL);"), "{d}");
}

#[test]
fn gradients_are_gathers_without_atomics() {
    for kind in [PoolKind::MaxBackward, PoolKind::AvgBackward] {
        let s = emit_pool(kind, DType::F32).unwrap().source;
        assert!(!s.contains("atomic"), "{s}");
        assert!(s.contains("gx[i] = g;"), "{s}");
    }
    let m = emit_pool(PoolKind::MaxBackward, DType::F64).unwrap().source;
    assert!(
        m.contains("(const double* __restrict__ gy, const long long* __restrict__ idx, double* __restrict__ gx,"),
        "{m}"
    );
    assert!(m.contains("if (idx[o] == here) g += gy[o];"), "{m}");
    let a = emit_pool(PoolKind::AvgBackward, DType::F32).unwrap().source;
    assert!(a.contains("g += gy[(p * oh + oy) * ow + ox] / (float)div;"), "{a}");
    assert!(a.contains("divisor != 0 ? divisor : (count_include_pad != 0 ? pool_size : (y1 - y0) * (x1 - x0))"), "{a}");
}

#[test]
fn adaptive_kernels_use_pytorchs_windows() {
    let f = emit_pool(PoolKind::AdaptiveForward, DType::F32).unwrap();
    assert!(f.name.starts_with("kiln_pool_adaptive_avg_pool2d_f32_"), "{}", f.name);
    let s = &f.source;
    assert!(s.contains("const long long y0 = oy * h / oh, y1 = ((oy + 1) * h + oh - 1) / oh;"), "{s}");
    assert!(s.contains("const long long x0 = ox * w / ow, x1 = ((ox + 1) * w + ow - 1) / ow;"), "{s}");
    assert!(s.contains("y[i] = s / (float)((y1 - y0) * (x1 - x0));"), "{s}");
    let b = emit_pool(PoolKind::AdaptiveBackward, DType::F64).unwrap().source;
    assert!(!b.contains("atomic"), "{b}");
    // The output windows covering an input row: the same rule, the sizes' roles swapped.
    assert!(b.contains("const long long oy0 = iy * oh / h, oy1 = ((iy + 1) * oh + h - 1) / h;"), "{b}");
    assert!(
        b.contains("g += gy[(p * oh + oy) * ow + ox] / (double)((y1 - y0) * (x1 - x0));") && b.contains("gx[i] = g;"),
        "{b}"
    );
}

/// The rule the adaptive gradient gathers with: input `i` of `len` lies in output `o`'s
/// window (`adaptive_range(o, out, len)`) exactly when `o` lies in
/// `adaptive_range(i, len, out)`, for every size pair, shrinking and growing.
#[test]
fn adaptive_windows_covering_an_input_follow_the_swapped_rule() {
    for len in 1..=13 {
        for out in 1..=13 {
            for i in 0..len {
                let (o0, o1) = cpu::adaptive_range(i, len, out);
                for o in 0..out {
                    let (i0, i1) = cpu::adaptive_range(o, out, len);
                    assert_eq!(
                        (i0..i1).contains(&i),
                        (o0..o1).contains(&o),
                        "len {len}, out {out}, input {i}, output {o}"
                    );
                }
                assert!(o0 < o1 && o1 <= out, "every input is in some window: len {len}, out {out}, input {i}");
            }
        }
    }
}

#[test]
fn integer_and_half_dtypes_are_errors() {
    for d in [DType::F16, DType::BF16, DType::I64] {
        let e = emit_pool(PoolKind::AvgForward, d).unwrap_err();
        assert_eq!(e.kind, CudaErrorKind::Unsupported);
        assert!(e.message.contains("CUDA pooling kernels take float32 and float64"), "{e}");
    }
    assert_eq!(pool_ops().len(), 12);
}

#[test]
fn every_pool_kernel_compiles_to_cubin_for_sm80_and_sm90() {
    let kernels: Vec<(String, String)> = pool_ops()
        .into_iter()
        .map(|(kind, dtype)| {
            let k = emit_pool(kind, dtype).unwrap();
            (k.name, k.source)
        })
        .collect();
    common::compile_each_to_cubin("pooling", &kernels);
}

/// Geometries: plain 2x2, overlapping 3x3 windows with stride 2 and padding, dilation,
/// ceil-mode edge windows, and a 1x1 plane.
fn geometries() -> Vec<PoolGeom> {
    let g = |planes, h, w, oh, ow, kernel, stride, pad, dilation| PoolGeom {
        planes,
        h,
        w,
        oh,
        ow,
        kernel,
        stride,
        pad,
        dilation,
    };
    vec![
        g(6, 28, 28, 14, 14, [2, 2], [2, 2], [0, 0], [1, 1]),
        g(3, 9, 11, 5, 6, [3, 3], [2, 2], [1, 1], [1, 1]),
        g(2, 10, 9, 4, 3, [3, 2], [2, 3], [1, 1], [2, 3]),
        g(4, 7, 7, 4, 4, [2, 2], [2, 2], [0, 0], [1, 1]), // ceil_mode: the last window is clipped
        g(5, 1, 1, 1, 1, [1, 1], [1, 1], [0, 0], [1, 1]),
    ]
}

/// Values with ties and a NaN: `planes * h * w` of them.
fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| if i % 97 == 13 { f32::NAN } else { ((i * 29 + 7) % 23) as f32 * 0.25 - 2.0 }).collect()
}

/// Whether `a` and `b` hold the same bits (any NaN matching any NaN).
fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn pool_kernels_match_the_cpu_bit_for_bit_on_a_gpu() {
    let load = |kind| LoadedPool::load(&emit_pool(kind, DType::F32).unwrap(), 0).unwrap();
    let (max_f, max_b, avg_f, avg_b) = (
        load(PoolKind::MaxForward),
        load(PoolKind::MaxBackward),
        load(PoolKind::AvgForward),
        load(PoolKind::AvgBackward),
    );
    let modes = [
        AvgMode { count_include_pad: true, divisor_override: None },
        AvgMode { count_include_pad: false, divisor_override: None },
        AvgMode { count_include_pad: true, divisor_override: Some(3) },
    ];
    for g in geometries() {
        let (il, ol) = (g.planes * g.h * g.w, g.planes * g.oh * g.ow);
        let x = values(il);
        let gy: Vec<f32> = (0..ol).map(|i| ((i * 13 + 5) % 11) as f32 - 5.0).collect();
        let (dx, dgy) = (CudaBuffer::from_slice(0, &x).unwrap(), CudaBuffer::from_slice(0, &gy).unwrap());
        let (mut y, mut idx, mut gx) = (
            CudaBuffer::alloc(0, ol * 4).unwrap(),
            CudaBuffer::alloc(0, ol * 8).unwrap(),
            CudaBuffer::alloc(0, il * 4).unwrap(),
        );
        let plain = modes[0];
        max_f.run(&g, plain, &[&dx], &mut [&mut y, &mut idx]).unwrap();
        let (want_v, want_i) = cpu::max_pool2d_forward(&g, &x);
        assert!(same(&y.to_vec::<f32>().unwrap(), &want_v), "max_pool2d values, {g:?}");
        assert_eq!(idx.to_vec::<i64>().unwrap(), want_i.to_vec(), "max_pool2d indices, {g:?}");
        max_b.run(&g, plain, &[&dgy, &idx], &mut [&mut gx]).unwrap();
        assert!(
            same(&gx.to_vec::<f32>().unwrap(), &cpu::max_pool2d_backward(&g, &gy, &want_i)),
            "max_pool2d backward, {g:?}"
        );
        if g.dilation != [1, 1] {
            continue; // average pooling has no dilation
        }
        for mode in modes {
            avg_f.run(&g, mode, &[&dx], &mut [&mut y]).unwrap();
            assert!(
                same(&y.to_vec::<f32>().unwrap(), &cpu::avg_pool2d_forward(&g, mode, &x)),
                "avg_pool2d, {g:?}, {mode:?}"
            );
            avg_b.run(&g, mode, &[&dgy], &mut [&mut gx]).unwrap();
            assert!(
                same(&gx.to_vec::<f32>().unwrap(), &cpu::avg_pool2d_backward(&g, mode, &gy)),
                "avg_pool2d backward, {g:?}, {mode:?}"
            );
        }
    }
    // Adaptive pooling, shrinking (overlapping windows), growing (repeated inputs) and mixed.
    let (ada_f, ada_b) = (load(PoolKind::AdaptiveForward), load(PoolKind::AdaptiveBackward));
    for (planes, h, w, oh, ow) in
        [(6, 28, 28, 7, 7), (3, 10, 7, 4, 3), (2, 3, 5, 7, 8), (4, 9, 2, 4, 5), (5, 1, 1, 1, 1)]
    {
        let g = PoolGeom { planes, h, w, oh, ow, kernel: [1, 1], stride: [1, 1], pad: [0, 0], dilation: [1, 1] };
        let (il, ol) = (planes * h * w, planes * oh * ow);
        let x = values(il);
        let gy: Vec<f32> = (0..ol).map(|i| ((i * 13 + 5) % 11) as f32 - 5.0).collect();
        let (dx, dgy) = (CudaBuffer::from_slice(0, &x).unwrap(), CudaBuffer::from_slice(0, &gy).unwrap());
        let (mut y, mut gx) = (CudaBuffer::alloc(0, ol * 4).unwrap(), CudaBuffer::alloc(0, il * 4).unwrap());
        ada_f.run(&g, modes[0], &[&dx], &mut [&mut y]).unwrap();
        assert!(
            same(&y.to_vec::<f32>().unwrap(), &cpu::adaptive_avg_pool2d_forward(planes, h, w, oh, ow, &x)),
            "adaptive_avg_pool2d, {g:?}"
        );
        ada_b.run(&g, modes[0], &[&dgy], &mut [&mut gx]).unwrap();
        assert!(
            same(&gx.to_vec::<f32>().unwrap(), &cpu::adaptive_avg_pool2d_backward(planes, h, w, oh, ow, &gy)),
            "adaptive backward, {g:?}"
        );
    }
    // A launch with a buffer too small is refused before anything runs.
    let g = geometries()[0];
    let small = CudaBuffer::alloc(0, 16).unwrap();
    let mut out = CudaBuffer::alloc(0, 16).unwrap();
    let e = avg_f.run(&g, modes[0], &[&small], &mut [&mut out]).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument, "{e}");
}
