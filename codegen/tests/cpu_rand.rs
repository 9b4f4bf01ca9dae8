//! `InstOp::Rand` in the Cranelift CPU back end against `kiln_runtime`'s Philox fillers: every
//! element equals the eager draw bit for bit, for calls that start mid-space (`row_start > 0`)
//! and for rank-1 chunks whose base pointers were moved (`index_base > 0`); a Rand in a
//! reduction prologue, or reading scalars that don't exist, is refused.

use kiln_codegen::cpu::CpuKernel;
use kiln_codegen::ir::{draw_words, RandDist};
use kiln_codegen::kernel::{ElementwiseKernel, Inst, InstOp, KernelInput, ReduceKernel, ReduceStage};
use kiln_runtime::cpu::philox::{self, Philox};
use kiln_runtime::op_kind::{CmpOp, ReduceOp};
use kiln_runtime::DType;

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
    assert!(!kern.is_vectorized(), "a kernel that draws runs the scalar loop");
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
