//! Helpers shared by the reduction kernel tests (`cpu_reduce.rs`, `cpu_reduce_epilogue.rs`):
//! input layouts over an iteration space, seeded input data, the bytes of buffers, and the
//! arguments of a call (also used by `cpu_kernels.rs`); [`reference`] the scalar reference of
//! elementwise kernels (`cpu_kernels.rs`, `cpu_tiles.rs`); [`compile_each_to_cubin`] the NVRTC
//! check of the CUDA kernel tests.

// Each test binary uses its own subset.
#![allow(dead_code)]

pub mod reduce_run;
pub mod reference;

use kiln_codegen::kernel::{InnerStride, KernelArgs};
use kiln_runtime::DType;
use std::ops::Range;

/// How an input is laid out over the iteration space.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lay {
    /// Varies over every dim; the last dim has this inner stride (Strided: 3, Broadcast: 0).
    Full(InnerStride),
    /// One value per output (stride 0 over every reduced dim): a broadcast inner stride.
    PerOutput,
    /// Varies over the reduced dims only, contiguously (stride 0 over every kept dim, as a
    /// layer norm weight): a unit inner stride.
    OverReduced,
}

impl Lay {
    /// The inner stride a kernel input of this layout declares.
    pub fn inner(self) -> InnerStride {
        match self {
            Lay::Full(s) => s,
            Lay::PerOutput => InnerStride::Broadcast,
            Lay::OverReduced => InnerStride::Unit,
        }
    }
}

/// An input's elements (as f64, exact for every dtype used) and its strides in elements.
pub struct Input {
    /// The elements, in memory order.
    pub vals: Vec<f64>,
    /// Per dim of the iteration space, the stride in elements.
    pub strides: Vec<isize>,
    /// The element type in memory.
    pub dtype: DType,
}

impl Input {
    /// The element at multi-index `idx` of the iteration space.
    pub fn at(&self, idx: &[usize]) -> f64 {
        let off: isize = idx.iter().zip(&self.strides).map(|(&i, &s)| i as isize * s).sum();
        self.vals[off as usize]
    }
}

/// A step of a 64-bit LCG, as a uniform value in `[0, 1)`.
pub fn lcg(seed: &mut u64) -> f64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*seed >> 11) as f64) / ((1u64 << 53) as f64)
}

/// The strides of layout `lay` over `shape` (the last `rr` dims reduced) and how many elements
/// its buffer needs.
pub fn layout(shape: &[usize], rr: usize, lay: Lay) -> (Vec<isize>, usize) {
    let rank = shape.len();
    let mut strides = vec![0isize; rank];
    let mut n = 1usize;
    for d in (0..rank).rev() {
        let size = shape[d].max(1);
        let s = match lay {
            Lay::Full(InnerStride::Unit) if d == rank - 1 => 1,
            Lay::Full(InnerStride::Broadcast) if d == rank - 1 => 0,
            Lay::Full(InnerStride::Strided) if d == rank - 1 => 3,
            Lay::PerOutput if d >= rank - rr => 0,
            Lay::OverReduced if d < rank - rr => 0,
            _ => n as isize,
        };
        strides[d] = s;
        if s != 0 {
            n = s as usize * size + usize::from(d == rank - 1 && s == 3);
        }
    }
    (strides, n.max(1))
}

/// Builds an input of `dtype` for `shape` (the last `rr` dims reduced); `small` keeps values
/// near 1 in magnitude (products).
pub fn make_input(dtype: DType, shape: &[usize], rr: usize, lay: Lay, seed: u64, small: bool) -> Input {
    let (strides, n) = layout(shape, rr, lay);
    let mut seed = seed.wrapping_mul(0x9E37_79B9) | 1;
    let vals = (0..n)
        .map(|_| {
            let u = lcg(&mut seed);
            match dtype {
                DType::F32 => (if small { 0.5 + u } else { 4.0 * u - 2.0 }) as f32 as f64,
                DType::F64 => {
                    if small {
                        0.5 + u
                    } else {
                        4.0 * u - 2.0
                    }
                }
                DType::Bool => (u < 0.5) as i64 as f64,
                DType::U8 => (u * 256.0).floor(),
                _ if small => (u * 7.0).floor() - 3.0,
                _ => (u * 2001.0).floor() - 1000.0,
            }
        })
        .collect();
    Input { vals, strides, dtype }
}

/// The bytes of an input's elements in its dtype.
pub fn bytes(x: &Input) -> Vec<u8> {
    let mut b = Vec::new();
    for &v in &x.vals {
        match x.dtype {
            DType::F32 => b.extend((v as f32).to_le_bytes()),
            DType::F64 => b.extend(v.to_le_bytes()),
            DType::I64 => b.extend((v as i64).to_le_bytes()),
            DType::I32 => b.extend((v as i32).to_le_bytes()),
            DType::U8 | DType::Bool => b.push(v as u8),
            _ => unreachable!(),
        }
    }
    b
}

/// Reads element `o` of `dtype` from `buf` as f64 (integers exactly within ±2^53, as used here).
pub fn read_out(buf: &[u8], dtype: DType, o: usize) -> f64 {
    let sz = dtype.size_in_bytes();
    let b = &buf[o * sz..(o + 1) * sz];
    match dtype {
        DType::F32 => f32::from_le_bytes(b.try_into().unwrap()) as f64,
        DType::F64 => f64::from_le_bytes(b.try_into().unwrap()),
        DType::I64 => i64::from_le_bytes(b.try_into().unwrap()) as f64,
        DType::I32 => i32::from_le_bytes(b.try_into().unwrap()) as f64,
        _ => b[0] as f64,
    }
}

/// The arguments of a call over rows `rows`, pointing into the slices given (which must outlive
/// the call).
pub fn kernel_args(
    inputs: &[*const u8],
    outputs: &[*mut u8],
    scalars: &[f64],
    shape: &[usize],
    strides: &[isize],
    rows: Range<usize>,
) -> KernelArgs {
    kernel_args_at(inputs, outputs, scalars, shape, strides, rows, 0)
}

/// [`kernel_args`] for a call whose first element has linear index `index_base`.
pub fn kernel_args_at(
    inputs: &[*const u8],
    outputs: &[*mut u8],
    scalars: &[f64],
    shape: &[usize],
    strides: &[isize],
    rows: Range<usize>,
    index_base: usize,
) -> KernelArgs {
    KernelArgs {
        inputs: inputs.as_ptr(),
        outputs: outputs.as_ptr(),
        scalars: scalars.as_ptr(),
        shape: shape.as_ptr(),
        strides: strides.as_ptr(),
        row_start: rows.start,
        row_end: rows.end,
        index_base,
    }
}

/// Compiles each `(name, source)` CUDA kernel to CUBIN for sm_80 and sm_90 with NVRTC, panicking
/// on any error (with the source); without NVRTC prints a skip line instead. `what` names the
/// kernels in the printed lines.
pub fn compile_each_to_cubin(what: &str, kernels: &[(String, String)]) {
    use kiln_runtime::cuda;
    if !cuda::nvrtc_for_tests(what) {
        return;
    }
    for (name, source) in kernels {
        for arch in [80, 90] {
            let c = cuda::compile(source, name, arch).unwrap_or_else(|e| panic!("{name} (sm_{arch}): {e}\n{source}"));
            assert_eq!(&c.cubin[..4], b"\x7fELF", "{name}: not a CUBIN");
        }
    }
    println!("{} {what} kernels compiled to CUBIN", kernels.len() * 2);
}
