//! The CUDA column kernels of a convolution (`im2col`, and `col2im` as a gather): their text,
//! errors and launch sizes (always), NVRTC compiling every (kind, dtype) kernel to CUBIN for
//! sm_80 and sm_90 (skipping with a printed line when NVRTC is absent), and, on a GPU, both
//! kernels against the CPU's `kiln_runtime::cpu::conv::{im2col, col2im}` bit for bit over
//! geometries with padding (symmetric and "same"'s asymmetric), stride, dilation, several
//! channels and images, and a 1x1 kernel.

use kiln_codegen::cuda::{col_ops, emit_col, ColKind, LoadedCol, COL_GEOMETRY_WORDS};
use kiln_runtime::cpu::conv::{self as cpu, ConvGeom};
use kiln_runtime::cuda::{CudaBuffer, CudaErrorKind};
use kiln_runtime::DType;

mod common;

/// A geometry of `n` images of `c_in` channels, `groups` groups, kernel `k`, stride `s`,
/// padding `p` before (and `p_after` after) the input, dilation `d`.
#[allow(clippy::too_many_arguments)]
fn geom(
    n: usize,
    c_in: usize,
    h: usize,
    w: usize,
    groups: usize,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    p_after: [usize; 2],
    d: [usize; 2],
) -> ConvGeom {
    let out = |len: usize, i: usize| (len + p[i] + p_after[i] - d[i] * (k[i] - 1) - 1) / s[i] + 1;
    ConvGeom {
        n,
        c_in,
        h,
        w,
        c_out: 2 * groups,
        groups,
        kh: k[0],
        kw: k[1],
        stride: s,
        pad: p,
        dilation: d,
        oh: out(h, 0),
        ow: out(w, 1),
    }
}

/// Plain 3x3; padded, strided and dilated with groups; "same" padding with a 2x4 kernel (the
/// odd zero after the input); stride larger than the kernel (inputs no column reads); 1x1.
fn geometries() -> Vec<ConvGeom> {
    vec![
        geom(2, 3, 8, 7, 1, [3, 3], [1, 1], [0, 0], [0, 0], [1, 1]),
        geom(3, 4, 9, 11, 2, [3, 2], [2, 1], [1, 2], [1, 2], [1, 2]),
        geom(1, 2, 5, 6, 1, [2, 4], [1, 1], [0, 1], [1, 2], [1, 1]),
        geom(2, 6, 10, 9, 3, [2, 2], [3, 3], [1, 0], [1, 0], [2, 1]),
        geom(2, 5, 4, 4, 5, [1, 1], [1, 1], [0, 0], [0, 0], [1, 1]),
    ]
}

#[test]
fn kernels_take_two_buffers_then_the_geometry() {
    let k = emit_col(ColKind::Im2col, DType::F32).unwrap();
    let s = &k.source;
    assert!(k.name.starts_with("kiln_col_im2col_f32_"), "{}", k.name);
    assert!(s.contains("(const float* __restrict__ x, float* __restrict__ col, unsigned long long n, unsigned long long h_, unsigned long long w_,"), "{s}");
    assert!(s.contains("unsigned long long dh_, unsigned long long dw_)"), "{s}");
    assert_eq!(COL_GEOMETRY_WORDS.len(), 12);
    // The padding reads as zero; the input element is found from the tap and output position.
    assert!(s.contains("const long long iy = (l / ow) * sh - ph + ki * dh, ix = (l % ow) * sw - pw + kj * dw;"), "{s}");
    assert!(
        s.contains("col[i] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[(p * h + iy) * w + ix] : (float)0;"),
        "{s}"
    );
    let d = emit_col(ColKind::Col2im, DType::F64).unwrap();
    assert!(d.name.starts_with("kiln_col_col2im_f64_"), "{}", d.name);
    assert!(
        d.source.contains("(const double* __restrict__ col, double* __restrict__ im, unsigned long long n,"),
        "{}",
        d.source
    );
}

#[test]
fn col2im_gathers_each_tap_once_without_atomics() {
    let s = emit_col(ColKind::Col2im, DType::F32).unwrap().source;
    assert!(!s.contains("atomic"), "{s}");
    // A tap contributes only where the stride divides the distance exactly and the output
    // position exists; taps in ascending (ki, kj) order, summed from 0.
    assert!(s.contains("if (ty < 0 || ty % sh != 0 || ty / sh >= oh) continue;"), "{s}");
    assert!(s.contains("if (tx < 0 || tx % sw != 0 || tx / sw >= ow) continue;"), "{s}");
    assert!(
        s.contains("float g = (float)0;") && s.contains("g += plane[((ki * kw + kj) * oh + ty / sh) * ow + tx / sw];"),
        "{s}"
    );
    assert!(s.contains("im[i] = g;"), "{s}");
}

#[test]
fn integer_and_half_dtypes_are_errors() {
    for d in [DType::F16, DType::BF16, DType::I64] {
        let e = emit_col(ColKind::Col2im, d).unwrap_err();
        assert_eq!(e.kind, CudaErrorKind::Unsupported);
        assert!(e.message.contains("CUDA column kernels take float32 and float64"), "{e}");
    }
    assert_eq!(col_ops().len(), 4);
}

#[test]
fn launch_sizes_count_every_image_and_channel() {
    // 3 images of 4 channels, 9x11 input, 3x2 kernel, 5x13 output: groups change nothing.
    let g = geometries()[1];
    assert_eq!((g.oh, g.ow), (5, 13));
    let (image, cols) = (3 * 4 * 9 * 11, 3 * 4 * 3 * 2 * 5 * 13);
    assert_eq!(ColKind::Im2col.lengths(&g), (image, cols));
    assert_eq!(ColKind::Col2im.lengths(&g), (cols, image));
    // The columns are [N, G, K, L] with K = C_in/G * kh * kw, L = oh * ow.
    assert_eq!(cols, g.n * g.groups * g.k() * g.l());
    // "same" padding: the output keeps the input's size.
    let s = geometries()[2];
    assert_eq!((s.oh, s.ow), (s.h, s.w));
}

#[test]
fn every_col_kernel_compiles_to_cubin_for_sm80_and_sm90() {
    let kernels: Vec<(String, String)> = col_ops()
        .into_iter()
        .map(|(kind, dtype)| {
            let k = emit_col(kind, dtype).unwrap();
            (k.name, k.source)
        })
        .collect();
    common::compile_each_to_cubin("column", &kernels);
}

/// `g` as the CPU kernels' one-group geometry over all of its planes (`n * c_in`), which
/// lays the columns out as the CUDA kernels do.
fn all_planes(g: &ConvGeom) -> ConvGeom {
    ConvGeom { n: 1, c_in: g.n * g.c_in, c_out: 1, groups: 1, ..*g }
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn col_kernels_match_the_cpu_bit_for_bit_on_a_gpu() {
    let load = |kind| LoadedCol::load(&emit_col(kind, DType::F32).unwrap(), 0).unwrap();
    let (im2col, col2im) = (load(ColKind::Im2col), load(ColKind::Col2im));
    for g in geometries() {
        let (il, cl) = ColKind::Im2col.lengths(&g);
        let x: Vec<f32> = (0..il).map(|i| ((i * 29 + 7) % 23) as f32 * 0.25 - 2.0).collect();
        let c: Vec<f32> = (0..cl).map(|i| ((i * 13 + 5) % 11) as f32 * 0.375 - 1.5).collect();
        let cg = all_planes(&g);
        let (mut want_col, mut want_im) = (vec![0.0f32; cl], vec![0.0f32; il]);
        cpu::im2col(&cg, &x, &mut want_col);
        cpu::col2im(&cg, &c, &mut want_im);
        let (dx, dc) = (CudaBuffer::from_slice(0, &x).unwrap(), CudaBuffer::from_slice(0, &c).unwrap());
        let (mut col, mut im) = (CudaBuffer::alloc(0, cl * 4).unwrap(), CudaBuffer::alloc(0, il * 4).unwrap());
        im2col.run(&g, &dx, &mut col).unwrap();
        col2im.run(&g, &dc, &mut im).unwrap();
        assert_eq!(col.to_vec::<f32>().unwrap(), want_col, "im2col, {g:?}");
        let got = im.to_vec::<f32>().unwrap();
        assert!(got.iter().zip(&want_im).all(|(a, b)| a.to_bits() == b.to_bits()), "col2im, {g:?}");
    }
    // A launch with a buffer too small is refused before anything runs.
    let g = geometries()[0];
    let small = CudaBuffer::alloc(0, 16).unwrap();
    let mut out = CudaBuffer::alloc(0, 1 << 20).unwrap();
    let e = im2col.run(&g, &small, &mut out).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument, "{e}");
}
