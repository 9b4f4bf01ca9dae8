//! The tiled path of the CPU back end (`cpu/tiled_rows.rs`): f32 kernels whose transcendentals run
//! as native slice routines per tile. Tiled kernels equal, bit for bit, the scalar reference
//! whose staged ops compute what the routines compute (`slice_math::slice_scalar`), and the
//! f64 truth within the stated bounds; for inner lengths around the tile boundaries, broadcast
//! inputs (along the row and across rows), several outputs and stages, row ranges starting
//! mid-way and rank-1 calls split into chunks. Kernels that do not qualify keep the untiled
//! path. And the accuracy of each native routine over the whole f32 range.

use kiln_codegen::cpu::{CpuKernel, MAX_STAGES, TILE};
use kiln_codegen::kernel::{ElementwiseKernel, InnerStride, Inst, InstOp, KernelInput, Val};
use kiln_runtime::cpu::simd::slice_math;
use kiln_runtime::op_kind::{BinaryOp, UnaryOp};
use kiln_runtime::DType;
use std::ops::Range;

mod common;
use common::kernel_args;
use common::reference::{eval_ref, ulp_error, whole_f32_range, Sv};

const F32: DType = DType::F32;

/// The ops with a native slice routine.
const NATIVE: [UnaryOp; 3] = [UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Sigmoid];

// ---------------------------------------------------------------- kernels

/// Builds a kernel's instructions one at a time.
#[derive(Default)]
struct Build {
    insts: Vec<Inst>,
}

impl Build {
    fn push(&mut self, op: InstOp, dtype: DType) -> Val {
        self.insts.push(Inst { op, dtype });
        (self.insts.len() - 1) as Val
    }
    fn load(&mut self, i: u32) -> Val {
        self.push(InstOp::Load(i), F32)
    }
    fn c(&mut self, v: f64) -> Val {
        self.push(InstOp::Const(v), F32)
    }
    fn un(&mut self, op: UnaryOp, a: Val) -> Val {
        self.push(InstOp::Unary(op, a), F32)
    }
    fn bin(&mut self, op: BinaryOp, a: Val, b: Val) -> Val {
        self.push(InstOp::Binary(op, a, b), F32)
    }
    fn kernel(self, rank: usize, inputs: &[InnerStride], scalars: usize, outputs: &[Val]) -> ElementwiseKernel {
        let inputs = inputs.iter().map(|&inner| KernelInput { dtype: F32, inner }).collect();
        ElementwiseKernel { rank, inputs, scalars, insts: self.insts, outputs: outputs.to_vec() }
    }
}

/// `z = x*a + b; 0.5*z*(1 + tanh(0.7978845608*(z + 0.044715*z*z*z)))` as primitive ops (`a`
/// input 1 with inner stride `a_inner`, `b` scalar 0); also returns `z`.
fn gelu_chain(b: &mut Build, a_inner: InnerStride) -> (Val, Val, InnerStride) {
    use BinaryOp::*;
    let x = b.load(0);
    let a = b.load(1);
    let s = b.push(InstOp::Scalar(0), F32);
    let xa = b.bin(Mul, x, a);
    let z = b.bin(Add, xa, s);
    let c = b.c(0.044715);
    let t = b.bin(Mul, c, z);
    let t = b.bin(Mul, t, z);
    let t = b.bin(Mul, t, z);
    let t = b.bin(Add, z, t);
    let k = b.c(0.797_884_560_8);
    let t = b.bin(Mul, k, t);
    let t = b.un(UnaryOp::Tanh, t);
    let one = b.c(1.0);
    let t = b.bin(Add, one, t);
    let h = b.c(0.5);
    let hz = b.bin(Mul, h, z);
    (b.bin(Mul, hz, t), z, a_inner)
}

fn gelu_kernel(a_inner: InnerStride) -> ElementwiseKernel {
    let mut b = Build::default();
    let (y, _, a_inner) = gelu_chain(&mut b, a_inner);
    b.kernel(2, &[InnerStride::Unit, a_inner], 1, &[y])
}

// ---------------------------------------------------------------- running kernels

/// One input: its elements and its strides (in elements) over the iteration space.
struct Input {
    vals: Vec<f32>,
    strides: Vec<isize>,
}

impl Input {
    /// An input over `shape` with inner stride `inner` (Unit: contiguous; Broadcast: one value
    /// per row), or with `across_rows` the same row for every row (stride 0 on the outer dims,
    /// as a bias).
    fn new(shape: &[usize], inner: InnerStride, across_rows: bool, seed: u64) -> Input {
        let rank = shape.len();
        let mut strides = vec![0isize; rank];
        let mut n = 1usize;
        for d in (0..rank).rev() {
            let s = if d == rank - 1 {
                match inner {
                    InnerStride::Unit => 1,
                    InnerStride::Broadcast => 0,
                    InnerStride::Strided => 3,
                }
            } else if across_rows {
                0
            } else {
                n as isize
            };
            strides[d] = s;
            if s != 0 {
                n = s as usize * shape[d];
            }
        }
        let mut state = seed.wrapping_mul(0x9E37_79B9) | 1;
        let vals = (0..n.max(1)).map(|_| (8.0 * common::lcg(&mut state) - 4.0) as f32).collect();
        Input { vals, strides }
    }

    /// The element at multi-index `idx`.
    fn at(&self, idx: &[usize]) -> f32 {
        let off: isize = idx.iter().zip(&self.strides).map(|(&i, &s)| i as isize * s).sum();
        self.vals[off as usize]
    }
}

/// The multi-index of element `j` of row `row` of `shape`.
fn index(shape: &[usize], row: usize, j: usize) -> Vec<usize> {
    let rank = shape.len();
    let mut idx = vec![0; rank];
    idx[rank - 1] = j;
    let mut r = row;
    for d in (0..rank - 1).rev() {
        idx[d] = r % shape[d];
        r /= shape[d];
    }
    idx
}

/// Runs `kern` over `shape` for `rows`; the outputs (NaN outside the rows).
fn run(
    kern: &CpuKernel,
    k: &ElementwiseKernel,
    shape: &[usize],
    inputs: &[Input],
    scalars: &[f64],
    rows: Range<usize>,
) -> Vec<Vec<f32>> {
    let n: usize = shape.iter().product();
    let mut outs: Vec<Vec<f32>> = k.outputs.iter().map(|_| vec![f32::NAN; n]).collect();
    let in_ptrs: Vec<*const u8> = inputs.iter().map(|x| x.vals.as_ptr() as *const u8).collect();
    let out_ptrs: Vec<*mut u8> = outs.iter_mut().map(|o| o.as_mut_ptr() as *mut u8).collect();
    let strides: Vec<isize> = inputs.iter().flat_map(|x| x.strides.iter().copied()).collect();
    let args = kernel_args(&in_ptrs, &out_ptrs, scalars, shape, &strides, rows);
    // SAFETY: every input covers the addresses its strides describe, every output holds the
    // whole space.
    unsafe { kern.call(&args) };
    outs
}

/// The reference outputs of `k` at row `row`, element `j` (`native`: the staged ops as the
/// routines compute them).
fn reference(
    k: &ElementwiseKernel,
    shape: &[usize],
    inputs: &[Input],
    scalars: &[f64],
    row: usize,
    j: usize,
    native: bool,
) -> Vec<f32> {
    let idx = index(shape, row, j);
    let load = |i: usize| Sv::F(inputs[i].at(&idx) as f64);
    eval_ref(k, &load, scalars, native)
        .into_iter()
        .map(|v| match v {
            Sv::F(x) => x as f32,
            Sv::I(_) => unreachable!("f32 outputs"),
        })
        .collect()
}

/// Compiles `k` both ways, runs both over `shape` for `rows`, and checks: the default kernel is
/// tiled as `tiled` says; it equals the reference with native stages bit for bit (the untiled
/// one the eager reference), or within `tol` ulp for kernels with inline ops that are not
/// bit-exact (log, sin, …); rows outside the range stay unwritten. Returns the default
/// kernel's outputs.
#[allow(clippy::too_many_arguments)]
fn check_tol(
    k: &ElementwiseKernel,
    shape: &[usize],
    inputs: &[Input],
    scalars: &[f64],
    rows: Range<usize>,
    tiled: bool,
    tol: f64,
    label: &str,
) -> Vec<Vec<f32>> {
    let kern = CpuKernel::compile(k, "tiles").unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(kern.is_tiled(), tiled, "{label}: tiled");
    let untiled = CpuKernel::compile_untiled(k, "untiled").unwrap();
    assert!(!untiled.is_tiled());
    let inner = shape[shape.len() - 1];
    let n_rows: usize = shape[..shape.len() - 1].iter().product();
    let got = run(&kern, k, shape, inputs, scalars, rows.clone());
    let got_untiled = run(&untiled, k, shape, inputs, scalars, rows.clone());
    let same =
        |g: f32, w: f32| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()) || ulp_error(g, w as f64) <= tol;
    for row in 0..n_rows {
        for j in 0..inner {
            let e = row * inner + j;
            if !rows.contains(&row) {
                assert!(got.iter().all(|o| o[e].is_nan()), "{label}: row {row} outside the range was written");
                continue;
            }
            let want = reference(k, shape, inputs, scalars, row, j, tiled);
            let want_eager = reference(k, shape, inputs, scalars, row, j, false);
            for o in 0..k.outputs.len() {
                assert!(
                    same(got[o][e], want[o]),
                    "{label}: output {o} row {row} j {j}: got {}, want {}",
                    got[o][e],
                    want[o]
                );
                assert!(same(got_untiled[o][e], want_eager[o]), "{label}: untiled output {o} row {row} j {j}");
            }
        }
    }
    got
}

/// [`check_tol`], bit for bit.
fn check(
    k: &ElementwiseKernel,
    shape: &[usize],
    inputs: &[Input],
    scalars: &[f64],
    rows: Range<usize>,
    tiled: bool,
    label: &str,
) -> Vec<Vec<f32>> {
    check_tol(k, shape, inputs, scalars, rows, tiled, 0.0, label)
}

/// Inner lengths around the tile boundaries (and tiny ones).
fn lengths() -> Vec<usize> {
    vec![1, 3, 4, 5, 15, 16, 17, TILE - 1, TILE, TILE + 1, 2 * TILE + 16, 3 * TILE + 5]
}

// ---------------------------------------------------------------- the native routines

#[test]
fn native_routines_accuracy_over_the_f32_range() {
    let xs = whole_f32_range();
    let sigmoid = |x: f64| if x < -88.72 { 0.0 } else { 1.0 / (1.0 + (-x).exp()) };
    type Truth<'a> = &'a dyn Fn(f64) -> f64;
    // (op, truth, ulp bound).
    let cases: [(UnaryOp, Truth, f64); 3] =
        [(UnaryOp::Exp, &f64::exp, 2.0), (UnaryOp::Tanh, &f64::tanh, 3.0), (UnaryOp::Sigmoid, &sigmoid, 3.0)];
    for (op, truth, bound) in cases {
        let f = slice_math::slice_fn(op).expect("a native routine");
        let mut got = vec![0f32; xs.len()];
        // SAFETY: xs and got hold xs.len() f32 each and do not overlap.
        unsafe { f(xs.as_ptr(), got.as_mut_ptr(), xs.len()) };
        let mut worst = (0.0, 0.0f32);
        for (&x, &g) in xs.iter().zip(&got) {
            let want = truth(x as f64);
            let e = ulp_error(g, want);
            if e > worst.0 {
                worst = (e, x);
            }
        }
        eprintln!(
            "{:>10} native (fma variant: {}): max {:.2} ulp at {:e}",
            op.name(),
            slice_math::has_fma_variant(),
            worst.0,
            worst.1
        );
        assert!(worst.0 <= bound, "{}: {} ulp at {:e} > {bound}", op.name(), worst.0, worst.1);
        // The special values are the eager op's.
        for x in [0.0f32, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            let mut y = [x];
            // SAFETY: in place on one element.
            unsafe { f(y.as_ptr(), y.as_mut_ptr(), 1) };
            let w = op.eval(x);
            assert!(
                y[0].to_bits() == w.to_bits() || (y[0].is_nan() && w.is_nan()),
                "{}({x}) = {}, eager {w}",
                op.name(),
                y[0]
            );
        }
    }
}

#[test]
fn tiled_unary_kernels_are_the_routines() {
    // A unit-stride operand goes to the routine directly (no pass before it).
    let xs: Vec<f32> = whole_f32_range().into_iter().take(3 * TILE + 5).collect();
    for op in NATIVE {
        let mut b = Build::default();
        let x = b.load(0);
        let y = b.un(op, x);
        let k = b.kernel(1, &[InnerStride::Unit], 0, &[y]);
        let input = Input { vals: xs.clone(), strides: vec![1] };
        check(&k, &[xs.len()], &[input], &[], 0..1, true, op.name());
    }
}

// ---------------------------------------------------------------- tiled kernels

#[test]
fn gelu_chain_around_tile_boundaries() {
    for a_inner in [InnerStride::Broadcast, InnerStride::Unit] {
        let k = gelu_kernel(a_inner);
        for inner in lengths() {
            let shape = [3, inner];
            let inputs = [Input::new(&shape, InnerStride::Unit, false, 1), Input::new(&shape, a_inner, false, 2)];
            for rows in [0..3, 1..3] {
                let got = check(
                    &k,
                    &shape,
                    &inputs,
                    &[0.25],
                    rows.clone(),
                    true,
                    &format!("gelu {a_inner:?} inner {inner} rows {rows:?}"),
                );
                // Close to the f64 truth.
                for row in rows {
                    for j in 0..inner {
                        let idx = index(&shape, row, j);
                        let z = inputs[0].at(&idx) as f64 * inputs[1].at(&idx) as f64 + 0.25;
                        let want = 0.5 * z * (1.0 + (0.797_884_560_8 * (z + 0.044715 * z * z * z)).tanh());
                        let g = got[0][row * inner + j] as f64;
                        assert!((g - want).abs() <= 1e-6 * (1.0 + z.abs()), "z = {z}: got {g}, want {want}");
                    }
                }
            }
        }
    }
}

#[test]
fn several_stages_and_outputs_with_broadcasts() {
    use BinaryOp::*;
    // x unit, s broadcast along the row, bias the same row for every row (stride 0 on the outer
    // dims). Stages: e = exp(x*s) (a pass), t = tanh(e*0.1) (a pass reading e's buffer), g =
    // sigmoid(x) (the input directly).
    let mut b = Build::default();
    let x = b.load(0);
    let s = b.load(1);
    let bias = b.load(2);
    let xs = b.bin(Mul, x, s);
    let e = b.un(UnaryOp::Exp, xs);
    let tenth = b.c(0.1);
    let e10 = b.bin(Mul, e, tenth);
    let t = b.un(UnaryOp::Tanh, e10);
    let g = b.un(UnaryOp::Sigmoid, x);
    let tg = b.bin(Mul, t, g);
    let y = b.bin(Add, tg, bias);
    let z = b.bin(Add, xs, bias);
    let k4 = b.kernel(3, &[InnerStride::Unit, InnerStride::Broadcast, InnerStride::Unit], 0, &[y, e, z, t]);
    for inner in lengths() {
        let shape = [2, 3, inner];
        let inputs = [
            Input::new(&shape, InnerStride::Unit, false, 3),
            Input::new(&shape, InnerStride::Broadcast, false, 4),
            Input::new(&shape, InnerStride::Unit, true, 5),
        ];
        check(&k4, &shape, &inputs, &[], 1..6, true, &format!("3 stages, 4 outputs, inner {inner}"));
    }
    // Four stages: exp, tanh (of the exp's buffer scaled), sigmoid (of the exp's buffer
    // directly) and tanh (of the sigmoid's buffer directly).
    // `extra` more stages (sigmoids of sigmoids of x) after the four.
    let four = |extra: usize| {
        let mut b = Build::default();
        let x = b.load(0);
        let s = b.load(1);
        let bias = b.load(2);
        let xs = b.bin(Mul, x, s);
        let e = b.un(UnaryOp::Exp, xs);
        let tenth = b.c(0.1);
        let e10 = b.bin(Mul, e, tenth);
        let t = b.un(UnaryOp::Tanh, e10);
        let u = b.un(UnaryOp::Sigmoid, e);
        let v = b.un(UnaryOp::Tanh, u);
        let tv = b.bin(Add, t, v);
        let mut y = b.bin(Add, tv, bias);
        let mut g = x;
        for _ in 0..extra {
            g = b.un(UnaryOp::Sigmoid, g);
            y = b.bin(Mul, y, g);
        }
        b.kernel(3, &[InnerStride::Unit, InnerStride::Broadcast, InnerStride::Unit], 0, &[y, t])
    };
    let shape = [2, 2, TILE + 3];
    let inputs = [
        Input::new(&shape, InnerStride::Unit, false, 6),
        Input::new(&shape, InnerStride::Broadcast, false, 7),
        Input::new(&shape, InnerStride::Unit, true, 8),
    ];
    check(&four(0), &shape, &inputs, &[], 1..4, true, "4 stages");
    check(&four(MAX_STAGES - 4), &shape, &inputs, &[], 1..4, true, "MAX_STAGES stages");
    check(&four(MAX_STAGES - 3), &shape, &inputs, &[], 0..4, false, "MAX_STAGES + 1 native ops");
}

#[test]
fn rank1_chunks_equal_one_call() {
    // A caller that splits one row moves the base pointers to each chunk.
    let mut b = Build::default();
    let (y, z, _) = gelu_chain(&mut b, InnerStride::Unit);
    let k = b.kernel(1, &[InnerStride::Unit, InnerStride::Unit], 1, &[y, z]);
    let kern = CpuKernel::compile(&k, "chunks").unwrap();
    assert!(kern.is_tiled());
    let n = 3 * TILE + 5;
    let inputs = [Input::new(&[n], InnerStride::Unit, false, 9), Input::new(&[n], InnerStride::Unit, false, 10)];
    let whole = run(&kern, &k, &[n], &inputs, &[0.25], 0..1);
    let mut outs = [vec![f32::NAN; n], vec![f32::NAN; n]];
    for chunk in [0..TILE + 3, TILE + 3..2 * TILE + 1, 2 * TILE + 1..n] {
        let shape = [chunk.len()];
        // SAFETY: every chunk lies inside the inputs and the outputs.
        let in_ptrs: Vec<*const u8> =
            inputs.iter().map(|x| unsafe { x.vals.as_ptr().add(chunk.start) } as *const u8).collect();
        // SAFETY: as for the inputs: every chunk lies inside the outputs.
        let out_ptrs: Vec<*mut u8> =
            outs.iter_mut().map(|o| unsafe { o.as_mut_ptr().add(chunk.start) } as *mut u8).collect();
        let args = common::kernel_args_at(&in_ptrs, &out_ptrs, &[0.25], &shape, &[1, 1], 0..1, chunk.start);
        // SAFETY: the chunk's elements of every input and output are valid.
        unsafe { kern.call(&args) };
    }
    for o in 0..2 {
        assert!(whole[o].iter().zip(&outs[o]).all(|(a, b)| a.to_bits() == b.to_bits()), "output {o}");
    }
    check(&k, &[n], &inputs, &[0.25], 0..1, true, "rank 1");
}

#[test]
fn in_place_output_over_its_input() {
    // Elementwise in place: the output is the input x.
    let k = gelu_kernel(InnerStride::Broadcast);
    let kern = CpuKernel::compile(&k, "inplace").unwrap();
    let (rows, inner) = (2, 2 * TILE + 7);
    let shape = [rows, inner];
    let inputs =
        [Input::new(&shape, InnerStride::Unit, false, 11), Input::new(&shape, InnerStride::Broadcast, false, 12)];
    let want = run(&kern, &k, &shape, &inputs, &[0.25], 0..rows);
    let mut x = inputs[0].vals.clone();
    let in_ptrs = [x.as_ptr() as *const u8, inputs[1].vals.as_ptr() as *const u8];
    let out_ptrs = [x.as_mut_ptr() as *mut u8];
    let strides: Vec<isize> = inputs.iter().flat_map(|i| i.strides.iter().copied()).collect();
    let args = kernel_args(&in_ptrs, &out_ptrs, &[0.25], &shape, &strides, 0..rows);
    // SAFETY: x is input 0 and output 0, read and written at the same index (in place).
    unsafe { kern.call(&args) };
    assert!(x.iter().zip(&want[0]).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn kernels_that_keep_the_untiled_path() {
    use BinaryOp::*;
    let shape = [2, TILE + 9];
    let unit = || Input::new(&shape, InnerStride::Unit, false, 13);
    // No transcendental with a routine.
    let mut b = Build::default();
    let x = b.load(0);
    let y = b.un(UnaryOp::Sin, x);
    check_tol(&b.kernel(2, &[InnerStride::Unit], 0, &[y]), &shape, &[unit()], &[], 0..2, false, 2.0, "sin");
    // A dead tanh.
    let mut b = Build::default();
    let x = b.load(0);
    b.un(UnaryOp::Tanh, x);
    let y = b.bin(Mul, x, x);
    check(&b.kernel(2, &[InnerStride::Unit], 0, &[y]), &shape, &[unit()], &[], 0..2, false, "dead tanh");
    // A strided input: the scalar plan.
    let mut b = Build::default();
    let x = b.load(0);
    let y = b.un(UnaryOp::Tanh, x);
    let strided = Input::new(&shape, InnerStride::Strided, false, 14);
    check(&b.kernel(2, &[InnerStride::Strided], 0, &[y]), &shape, &[strided], &[], 0..2, false, "strided");
    // An inline log that both the tanh's pass and the final pass would compute.
    let mut b = Build::default();
    let x = b.load(0);
    let a = b.un(UnaryOp::Abs, x);
    let l = b.un(UnaryOp::Log, a);
    let t = b.un(UnaryOp::Tanh, l);
    let y = b.bin(Mul, t, l);
    check_tol(
        &b.kernel(2, &[InnerStride::Unit], 0, &[y]),
        &shape,
        &[unit()],
        &[],
        0..2,
        false,
        8.0,
        "log in two passes",
    );
    // ... but a log needed by the tanh's pass only is fine.
    let mut b = Build::default();
    let x = b.load(0);
    let a = b.un(UnaryOp::Abs, x);
    let l = b.un(UnaryOp::Log, a);
    let t = b.un(UnaryOp::Tanh, l);
    let y = b.bin(Mul, t, x);
    check_tol(&b.kernel(2, &[InnerStride::Unit], 0, &[y]), &shape, &[unit()], &[], 0..2, true, 8.0, "log in one pass");
    // f64 kernels.
    let k = ElementwiseKernel {
        rank: 1,
        inputs: vec![KernelInput { dtype: DType::F64, inner: InnerStride::Unit }],
        scalars: 0,
        insts: vec![
            Inst { op: InstOp::Load(0), dtype: DType::F64 },
            Inst { op: InstOp::Unary(UnaryOp::Tanh, 0), dtype: DType::F64 },
        ],
        outputs: vec![1],
    };
    assert!(!CpuKernel::compile(&k, "f64").unwrap().is_tiled());
}

#[test]
fn clif_shows_the_tiles() {
    let k = gelu_kernel(InnerStride::Broadcast);
    let tiled = CpuKernel::compile(&k, "clif").unwrap();
    let untiled = CpuKernel::compile_untiled(&k, "clif").unwrap();
    // The tile buffer and the routine's call.
    assert!(tiled.clif().contains(&format!("explicit_slot {}", 4 * TILE)), "{}", tiled.clif());
    assert!(tiled.clif().contains("call fn"));
    assert!(!untiled.clif().contains("explicit_slot"));
    assert!(tiled.is_vectorized() && untiled.is_vectorized());
}

#[test]
fn threads_share_a_tiled_kernel() {
    let k = gelu_kernel(InnerStride::Unit);
    let kern = CpuKernel::compile(&k, "threads").unwrap();
    let (rows, inner) = (8, TILE + 33);
    let shape = [rows, inner];
    let inputs = [Input::new(&shape, InnerStride::Unit, false, 15), Input::new(&shape, InnerStride::Unit, false, 16)];
    let want = run(&kern, &k, &shape, &inputs, &[0.25], 0..rows);
    let mut out = vec![0f32; rows * inner];
    let out_addr = out.as_mut_ptr() as usize;
    let strides: Vec<isize> = inputs.iter().flat_map(|i| i.strides.iter().copied()).collect();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (kern, inputs, strides) = (&kern, &inputs, &strides);
            s.spawn(move || {
                let in_ptrs: Vec<*const u8> = inputs.iter().map(|x| x.vals.as_ptr() as *const u8).collect();
                let out_ptrs = [out_addr as *mut u8];
                let args = kernel_args(&in_ptrs, &out_ptrs, &[0.25], &shape, strides, 2 * t..2 * t + 2);
                // SAFETY: the inputs and out cover the space; each thread writes its own rows.
                unsafe { kern.call(&args) };
            });
        }
    });
    assert!(out.iter().zip(&want[0]).all(|(a, b)| a.to_bits() == b.to_bits()));
}
