//! `InstOp::Rand` in the Cranelift CPU back end against `kiln_runtime`'s Philox fillers: every
//! element equals the eager draw bit for bit, for calls that start mid-space (`row_start > 0`)
//! and for rank-1 chunks whose base pointers were moved (`index_base > 0`), on each path a
//! draw can take: the scalar loop (mixed f32/f64 outputs), the vector loop (f64, an untiled f32
//! kernel, an f32 kernel with more draws than tiles have stages; one helper call per lane) and
//! tiled f32 rows (one slice-routine call per tile and draw). A Rand in a reduction prologue,
//! or reading scalars that don't exist, is refused.

use kiln_codegen::cpu::{CpuKernel, MAX_STAGES, TILE};
use kiln_codegen::ir::{draw_words, RandDist};
use kiln_codegen::kernel::{ElementwiseKernel, InnerStride, Inst, InstOp, KernelInput, ReduceKernel, ReduceStage};
use kiln_runtime::cpu::philox::{self, Philox};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, ReduceOp};
use kiln_runtime::{DType, FloatElement};
use std::ops::Range;

mod common;

/// A draw whose seed and offset both use their high 32 bits.
fn draw() -> Philox {
    Philox::new(0x0123_4567_89ab_cdef, 4 * ((1u64 << 32) + 5))
}

/// The kernel's scalars: one unrelated scalar (0.5) first, then the draw's four words, so the
/// draw's `params` is 1.
fn scalars(draw: &Philox) -> Vec<f64> {
    let mut s = vec![0.5];
    s.extend(draw_words(draw).map(f64::from));
    s
}

/// The eager draw of `n` elements: uniform and normal, f32 and f64.
struct Eager {
    u32s: Vec<f32>,
    n32s: Vec<f32>,
    u64s: Vec<f64>,
    n64s: Vec<f64>,
}

fn eager(draw: &Philox, n: usize) -> Eager {
    let mut e = Eager { u32s: vec![0.0; n], n32s: vec![0.0; n], u64s: vec![0.0; n], n64s: vec![0.0; n] };
    philox::uniform(&mut e.u32s, draw, 0.0, 1.0);
    philox::normal(&mut e.n32s, draw, 0.0, 1.0);
    philox::uniform(&mut e.u64s, draw, 0.0, 1.0);
    philox::normal(&mut e.n64s, draw, 0.0, 1.0);
    e
}

/// Outputs: uniform f32, normal f32, uniform f64, normal f64, and `uniform f32 >= scalar 0`
/// (a Rand fused with a consumer, as dropout's mask is).
fn kernel(rank: usize) -> ElementwiseKernel {
    let rand = |dist, dtype| Inst { op: InstOp::Rand { dist, params: 1 }, dtype };
    ElementwiseKernel {
        rank,
        inputs: Vec::<KernelInput>::new(),
        scalars: 5,
        insts: vec![
            rand(RandDist::Uniform, DType::F32),
            rand(RandDist::Normal, DType::F32),
            rand(RandDist::Uniform, DType::F64),
            rand(RandDist::Normal, DType::F64),
            Inst { op: InstOp::Scalar(0), dtype: DType::F32 },
            Inst { op: InstOp::Cmp(CmpOp::Ge, 0, 4), dtype: DType::Bool },
        ],
        outputs: vec![0, 1, 2, 3, 5],
    }
}

/// The five output buffers for `n` elements.
struct Outs {
    u32s: Vec<f32>,
    n32s: Vec<f32>,
    u64s: Vec<f64>,
    n64s: Vec<f64>,
    keep: Vec<u8>,
}

impl Outs {
    fn new(n: usize) -> Outs {
        Outs {
            u32s: vec![f32::NAN; n],
            n32s: vec![f32::NAN; n],
            u64s: vec![f64::NAN; n],
            n64s: vec![f64::NAN; n],
            keep: vec![7; n],
        }
    }

    /// The output pointers at element `at`.
    fn ptrs(&mut self, at: usize) -> [*mut u8; 5] {
        [
            self.u32s[at..].as_mut_ptr() as *mut u8,
            self.n32s[at..].as_mut_ptr() as *mut u8,
            self.u64s[at..].as_mut_ptr() as *mut u8,
            self.n64s[at..].as_mut_ptr() as *mut u8,
            self.keep[at..].as_mut_ptr(),
        ]
    }

    /// Element `i` of every output equals element `i + shift` of the eager draw.
    fn check(&self, e: &Eager, range: std::ops::Range<usize>, shift: usize) {
        for i in range {
            let k = i + shift;
            assert_eq!(self.u32s[i].to_bits(), e.u32s[k].to_bits(), "uniform f32 at {i}");
            assert_eq!(self.n32s[i].to_bits(), e.n32s[k].to_bits(), "normal f32 at {i}");
            assert_eq!(self.u64s[i].to_bits(), e.u64s[k].to_bits(), "uniform f64 at {i}");
            assert_eq!(self.n64s[i].to_bits(), e.n64s[k].to_bits(), "normal f64 at {i}");
            assert_eq!(self.keep[i], (e.u32s[k] >= 0.5) as u8, "mask at {i}");
        }
    }
}

#[test]
fn rows_from_the_middle_draw_their_row_major_elements() {
    let d = draw();
    let (rows, inner) = (5usize, 37usize);
    let n = rows * inner;
    let e = eager(&d, n);
    let k = kernel(2);
    let kern = CpuKernel::compile(&k, "rand2").unwrap();
    assert!(!kern.is_vectorized(), "mixed f32/f64 outputs run the scalar loop");
    let sc = scalars(&d);
    let shape = [rows, inner];
    let mut outs = Outs::new(n);
    let op = outs.ptrs(0);
    let args = common::kernel_args(&[], &op, &sc, &shape, &[], 2..5);
    // SAFETY: the kernel has no inputs; each output holds all `n` elements of the space.
    unsafe { kern.call(&args) };
    outs.check(&e, 2 * inner..n, 0);
    assert!(outs.u32s[..2 * inner].iter().all(|x| x.is_nan()), "rows before row_start are untouched");
}

#[test]
fn a_moved_chunk_of_one_row_draws_from_its_index_base() {
    let d = draw();
    let n = 1001usize;
    let e = eager(&d, n);
    let k = kernel(1);
    let kern = CpuKernel::compile(&k, "rand1").unwrap();
    let sc = scalars(&d);
    let mut outs = Outs::new(n);
    // Three chunks, split as `launch` splits a rank-1 space: base pointers moved, j from 0.
    for (start, end) in [(0usize, 333usize), (333, 334), (334, n)] {
        let op = outs.ptrs(start);
        let len = [end - start];
        let args = common::kernel_args_at(&[], &op, &sc, &len, &[], 0..1, start);
        // SAFETY: each output pointer has `end - start` elements left after it.
        unsafe { kern.call(&args) };
    }
    outs.check(&e, 0..n, 0);
}

#[test]
fn index_base_shifts_the_draw() {
    // A chunk given index_base 1000 (and its own buffers) computes elements 1000.. of the draw.
    let d = draw();
    let e = eager(&d, 1000 + 41);
    let kern = CpuKernel::compile(&kernel(1), "rand_base").unwrap();
    let sc = scalars(&d);
    let mut outs = Outs::new(41);
    let op = outs.ptrs(0);
    let len = [41usize];
    let args = common::kernel_args_at(&[], &op, &sc, &len, &[], 0..1, 1000);
    // SAFETY: each output holds the 41 elements of the call.
    unsafe { kern.call(&args) };
    outs.check(&e, 0..41, 1000);
}

#[test]
fn bad_draws_are_refused() {
    let mut k = kernel(1);
    k.scalars = 4; // params 1 needs scalars 1..5
    let err = CpuKernel::compile(&k, "short").unwrap_err();
    assert!(err.contains("reads scalars 1..5"), "{err}");
    let mut k = kernel(1);
    k.insts[0].dtype = DType::I64;
    k.insts[5] = Inst { op: InstOp::Scalar(0), dtype: DType::Bool };
    let err = CpuKernel::compile(&k, "int").unwrap_err();
    assert!(err.contains("must be F32 or F64"), "{err}");
    let r = ReduceKernel {
        rank: 1,
        reduce_rank: 1,
        inputs: vec![],
        scalars: 4,
        stages: vec![ReduceStage {
            insts: vec![Inst { op: InstOp::Rand { dist: RandDist::Uniform, params: 0 }, dtype: DType::F32 }],
            reduced: 0,
            op: ReduceOp::Sum,
            output: DType::F32,
            scale: None,
        }],
        epilogue: None,
    };
    let err = CpuKernel::compile_reduce(&r, "reduce").unwrap_err();
    assert!(err.contains("reduction kernel does not support"), "{err}");
}

/// The draw's scalar `s` of the dropout kernels: after the draw's words.
const SCALE: f64 = 1.25;

/// Dropout-like kernel of float dtype `d` over input `x` (unit stride): outputs
/// `where(uniform >= p, x * s, 0)` (`p` scalar 0, `s` scalar 5) and `normal * x`, both from the
/// draw at scalars 1..5.
fn dropout_kernel(rank: usize, d: DType) -> ElementwiseKernel {
    let i = |op, dtype| Inst { op, dtype };
    ElementwiseKernel {
        rank,
        inputs: vec![KernelInput { dtype: d, inner: InnerStride::Unit }],
        scalars: 6,
        insts: vec![
            i(InstOp::Load(0), d),
            i(InstOp::Rand { dist: RandDist::Uniform, params: 1 }, d),
            i(InstOp::Scalar(0), d),
            i(InstOp::Cmp(CmpOp::Ge, 1, 2), DType::Bool),
            i(InstOp::Scalar(5), d),
            i(InstOp::Binary(BinaryOp::Mul, 0, 4), d),
            i(InstOp::Const(0.0), d),
            i(InstOp::Where(3, 5, 6), d),
            i(InstOp::Rand { dist: RandDist::Normal, params: 1 }, d),
            i(InstOp::Binary(BinaryOp::Mul, 8, 0), d),
        ],
        outputs: vec![7, 9],
    }
}

/// The dropout kernels' input, outputs and expected values in element type `T`.
struct Dropout<T> {
    x: Vec<T>,
    kept: Vec<T>,
    noisy: Vec<T>,
    scalars: Vec<f64>,
    draw: Philox,
}

impl<T: FloatElement> Dropout<T> {
    /// Buffers of `n` elements (outputs NaN).
    fn new(n: usize) -> Dropout<T> {
        let draw = draw();
        let mut scalars = scalars(&draw);
        scalars.push(SCALE);
        Dropout {
            x: (0..n).map(|i| T::from_f64(((i * 37 % 101) as f64 - 50.0) / 16.0)).collect(),
            kept: vec![T::from_f64(f64::NAN); n],
            noisy: vec![T::from_f64(f64::NAN); n],
            scalars,
            draw,
        }
    }

    /// Calls `kern` on the elements from `at` of every buffer: `shape` (rank 1 or 2), rows
    /// `rows`, the call's element 0 being element `index_base` of the draw.
    fn call(&mut self, kern: &CpuKernel, at: usize, shape: &[usize], rows: Range<usize>, index_base: usize) {
        let ins = [self.x[at..].as_ptr() as *const u8];
        let outs = [self.kept[at..].as_mut_ptr() as *mut u8, self.noisy[at..].as_mut_ptr() as *mut u8];
        let strides: Vec<isize> = if shape.len() == 2 { vec![shape[1] as isize, 1] } else { vec![1] };
        let args = common::kernel_args_at(&ins, &outs, &self.scalars, shape, &strides, rows, index_base);
        // SAFETY: the input and both outputs hold `shape`'s elements after `at` (the callers
        // size the buffers so), the outputs are distinct buffers from the input.
        unsafe { kern.call(&args) };
    }

    /// Element `i` of both outputs equals the eager computation on element `i + shift` of the
    /// draw, bit for bit, for `i` in `range`; the elements outside `range` are untouched.
    fn check(&self, range: Range<usize>, shift: usize, label: &str) {
        let n = self.x.len();
        let (mut u, mut z) = (vec![T::zero(); n + shift], vec![T::zero(); n + shift]);
        philox::uniform(&mut u, &self.draw, 0.0, 1.0);
        philox::normal(&mut z, &self.draw, 0.0, 1.0);
        let bits = |v: T| v.to_f64().to_bits();
        for i in 0..n {
            if !range.contains(&i) {
                assert!(self.kept[i].to_f64().is_nan() && self.noisy[i].to_f64().is_nan(), "{label}: {i} untouched");
                continue;
            }
            let (k, x) = (i + shift, self.x[i].to_f64());
            // Each product is exact in f64, so rounding it once to T is T's product.
            let kept = if u[k] >= T::from_f64(0.5) { T::from_f64(x * SCALE) } else { T::zero() };
            let noisy = T::from_f64(z[k].to_f64() * x);
            assert_eq!(bits(self.kept[i]), bits(kept), "{label}: kept at {i} (draw element {k})");
            assert_eq!(bits(self.noisy[i]), bits(noisy), "{label}: noise at {i} (draw element {k})");
        }
    }
}

/// Runs a compiled dropout kernel of element type `T` (rank 2 from `kern2`, rank 1 from
/// `kern1`) on rows longer than a tile and not a multiple of it, rows shorter than a group,
/// calls from `row_start > 0` with `index_base > 0`, and moved rank-1 chunks.
fn check_dropout<T: FloatElement>(kern2: &CpuKernel, kern1: &CpuKernel, label: &str) {
    for (rows, inner, base) in [(3usize, 2 * TILE + 301, 0usize), (3, TILE, 6), (5, 3, 7), (4, 1, 1), (2, 9, 2)] {
        let mut d = Dropout::<T>::new(rows * inner);
        d.call(kern2, 0, &[rows, inner], 1..rows, base);
        d.check(inner..rows * inner, base, &format!("{label} {rows}x{inner} from row 1, index_base {base}"));
    }
    let n = TILE + 517;
    let mut d = Dropout::<T>::new(n);
    // Chunks as `launch` splits a rank-1 space: base pointers moved, `index_base` the start.
    for (start, end) in [(0usize, 333usize), (333, 334), (334, 338), (338, n)] {
        d.call(kern1, start, &[end - start], 0..1, 1000 + start);
    }
    d.check(0..n, 1000, &format!("{label} rank-1 chunks"));
}

/// Whether `kern` calls the native routine `name`.
fn calls(kern: &CpuKernel, name: &str) -> bool {
    kern.native_calls().iter().any(|c| c == name)
}

#[test]
fn f32_dropout_draws_whole_tiles_natively() {
    let kern2 = CpuKernel::compile(&dropout_kernel(2, DType::F32), "dropout2").unwrap();
    let kern1 = CpuKernel::compile(&dropout_kernel(1, DType::F32), "dropout1").unwrap();
    for kern in [&kern2, &kern1] {
        assert!(kern.is_vectorized() && kern.is_tiled(), "a draw alone makes an f32 kernel tiled");
        assert!(calls(kern, "kiln_rand_uniform_f32_slice") && calls(kern, "kiln_rand_normal_f32_slice"));
        assert!(!calls(kern, "kiln_rand_uniform_f32"), "no per-element draw: {:?}", kern.native_calls());
    }
    check_dropout::<f32>(&kern2, &kern1, "tiled f32");
}

#[test]
fn untiled_vector_kernels_draw_lane_by_lane() {
    let kern2 = CpuKernel::compile_untiled(&dropout_kernel(2, DType::F32), "dropout2").unwrap();
    let kern1 = CpuKernel::compile_untiled(&dropout_kernel(1, DType::F32), "dropout1").unwrap();
    for kern in [&kern2, &kern1] {
        assert!(kern.is_vectorized() && !kern.is_tiled());
        assert!(calls(kern, "kiln_rand_uniform_f32") && !calls(kern, "kiln_rand_uniform_f32_slice"));
    }
    check_dropout::<f32>(&kern2, &kern1, "untiled f32");
    let kern2 = CpuKernel::compile(&dropout_kernel(2, DType::F64), "dropout2").unwrap();
    let kern1 = CpuKernel::compile(&dropout_kernel(1, DType::F64), "dropout1").unwrap();
    for kern in [&kern2, &kern1] {
        assert!(kern.is_vectorized() && !kern.is_tiled(), "f64 kernels are never tiled");
        assert!(calls(kern, "kiln_rand_uniform_f64") && calls(kern, "kiln_rand_normal_f64"));
    }
    check_dropout::<f64>(&kern2, &kern1, "vector f64");
}

/// `count` f32 draws as outputs, alternately uniform and normal, from draws `s / 2`
/// (`draw_of(s / 2)`, its words at scalars `1 + 4 (s / 2)..`), and the kernel's scalars.
fn many_draws(count: usize) -> (ElementwiseKernel, Vec<f64>) {
    let dist = |s: usize| if s.is_multiple_of(2) { RandDist::Uniform } else { RandDist::Normal };
    let insts: Vec<Inst> = (0..count)
        .map(|s| Inst { op: InstOp::Rand { dist: dist(s), params: 1 + 4 * (s / 2) as u32 }, dtype: DType::F32 })
        .collect();
    let n_draws = count.div_ceil(2);
    let mut scalars = vec![0.5];
    for g in 0..n_draws {
        scalars.extend(draw_words(&draw_of(g)).map(f64::from));
    }
    let k = ElementwiseKernel {
        rank: 2,
        inputs: vec![],
        scalars: scalars.len(),
        insts,
        outputs: (0..count as u32).collect(),
    };
    (k, scalars)
}

/// Draw `g` of [`many_draws`].
fn draw_of(g: usize) -> Philox {
    Philox::new(0x0123_4567_89ab_cdef + g as u64, 4 * ((1u64 << 32) + 5 + 1000 * g as u64))
}

#[test]
fn more_draws_than_stages_keep_the_vector_loop() {
    for count in [MAX_STAGES, MAX_STAGES + 1] {
        let (k, scalars) = many_draws(count);
        let kern = CpuKernel::compile(&k, "draws").unwrap();
        assert!(kern.is_vectorized());
        assert_eq!(kern.is_tiled(), count <= MAX_STAGES, "{count} draws");
        let (rows, inner, base) = (3usize, TILE + 7, 5usize);
        let n = rows * inner;
        let mut outs = vec![vec![f32::NAN; n]; count];
        let ptrs: Vec<*mut u8> = outs.iter_mut().map(|o| o.as_mut_ptr() as *mut u8).collect();
        let shape = [rows, inner];
        let args = common::kernel_args_at(&[], &ptrs, &scalars, &shape, &[], 1..rows, base);
        // SAFETY: the kernel has no inputs; each output holds all `n` elements of the space.
        unsafe { kern.call(&args) };
        for (s, out) in outs.iter().enumerate() {
            let mut want = vec![0f32; base + n];
            match s % 2 {
                0 => philox::uniform(&mut want, &draw_of(s / 2), 0.0, 1.0),
                _ => philox::normal(&mut want, &draw_of(s / 2), 0.0, 1.0),
            }
            assert!(out[..inner].iter().all(|x| x.is_nan()), "{count} draws: row 0 untouched");
            for i in inner..n {
                assert_eq!(out[i].to_bits(), want[base + i].to_bits(), "{count} draws: output {s} at {i}");
            }
        }
    }
}
