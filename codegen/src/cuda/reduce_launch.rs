//! Launching reduction kernels ([`super::reduce`]): the input's dims split into kept and
//! reduced dims and collapsed ([`ReduceDims`]), the group size and grid ([`reduce_geometry`]),
//! and checked launches ([`LoadedReduce`]).

use super::launch::{launch_as, load_on, StridedOperand};
use super::reduce::{CudaReduce, CudaReduceKernel, REDUCE_BLOCK};
use kiln_runtime::cpu::strided::collapse;
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, Param};
use kiln_runtime::DType;

/// The longest row a warp reduces alone; longer rows get a whole block.
pub const WARP_ROW_MAX: usize = 512;

/// A reduction's index space: the kept dims (one output each, row-major) and the reduced dims
/// (the row, row-major: an element's linear index here is its logical index over the reduced
/// dims, what argmax reports), each collapsed (size-1 dims dropped, neighbours contiguous in
/// every operand merged, which keeps row-major order), with the input's and the output's
/// strides (in elements) for each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceDims {
    /// Sizes of the kept dims.
    pub kept: Vec<usize>,
    /// Sizes of the reduced dims.
    pub red: Vec<usize>,
    /// The input's strides along the kept dims.
    pub x_kept: Vec<usize>,
    /// The input's strides along the reduced dims.
    pub x_red: Vec<usize>,
    /// The output's strides along the kept dims.
    pub out_kept: Vec<usize>,
    /// The output's strides along the reduced dims (softmax's; 0 for reductions).
    pub out_red: Vec<usize>,
}

impl ReduceDims {
    /// Splits `shape` (the input's, with its `x_strides`) by `reduced` (one flag per dim). The
    /// output's strides are `out_strides` (one per input dim: softmax's output, shaped like the
    /// input) or, for `None`, a reduction's contiguous output over the kept dims.
    pub fn new(shape: &[usize], x_strides: &[usize], out_strides: Option<&[usize]>, reduced: &[bool]) -> ReduceDims {
        let pick = |v: &[usize], want: bool| -> Vec<usize> {
            v.iter().zip(reduced).filter(|(_, &r)| r == want).map(|(&s, _)| s).collect()
        };
        let kept_shape = pick(shape, false);
        let (out_kept, out_red) = match out_strides {
            Some(o) => (pick(o, false), pick(o, true)),
            None => (
                kiln_runtime::layout::contiguous_strides(&kept_shape).to_vec(),
                vec![0; reduced.iter().filter(|&&r| r).count()],
            ),
        };
        let k = collapse::<2>(&kept_shape, [&pick(x_strides, false), &out_kept]);
        let r = collapse::<2>(&pick(shape, true), [&pick(x_strides, true), &out_red]);
        ReduceDims {
            kept: k.shape.to_vec(),
            red: r.shape.to_vec(),
            x_kept: k.strides[0].to_vec(),
            x_red: r.strides[0].to_vec(),
            out_kept: k.strides[1].to_vec(),
            out_red: r.strides[1].to_vec(),
        }
    }

    /// Number of outputs (rows).
    pub fn n_out(&self) -> usize {
        self.kept.iter().product()
    }

    /// Elements per row.
    pub fn n_red(&self) -> usize {
        self.red.iter().product()
    }
}

/// Where a reduction launch puts its threads: `group` threads per row (32: a warp; or the
/// whole block of [`REDUCE_BLOCK`]), `grid` blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReduceGeometry {
    /// Blocks in the grid (at least 1; at most the device's cap, the groups then stride).
    pub grid: u32,
    /// Threads per row.
    pub group: u32,
}

/// The geometry of `kind` for `n_out` rows of `n_red` elements with at most `max_grid` blocks:
/// a warp per row up to [`WARP_ROW_MAX`] elements (and for scans, whose one lane per row walks
/// it), a block per row beyond.
pub fn reduce_geometry(kind: CudaReduce, n_out: usize, n_red: usize, max_grid: u32) -> ReduceGeometry {
    let group = if n_red <= WARP_ROW_MAX || kind.is_scan() { 32 } else { REDUCE_BLOCK };
    let per_block = (REDUCE_BLOCK / group) as usize;
    let grid = n_out.div_ceil(per_block).clamp(1, max_grid.max(1) as usize) as u32;
    ReduceGeometry { grid, group }
}

/// A [`CudaReduceKernel`] compiled for, and loaded on, one device.
#[derive(Clone, Debug)]
pub struct LoadedReduce {
    kernel: CudaKernel,
    kind: CudaReduce,
    dtype: DType,
    out: DType,
    kept: usize,
    red: usize,
    max_grid: u32,
}

impl LoadedReduce {
    /// Compiles `k` for `cuda:ordinal`'s arch (through the kernel cache) and loads it there.
    pub fn load(k: &CudaReduceKernel, ordinal: usize) -> Result<LoadedReduce, CudaError> {
        let mut params = vec![Param::In, Param::Out];
        if k.kind.has_indices() {
            params.push(Param::Out);
        }
        let views = if k.kind.keeps_shape() { 2 } else { 1 };
        params.extend(std::iter::repeat_n(Param::U64, 4 + k.kept + k.red + views * (1 + k.kept + k.red)));
        let (kernel, max_grid) = load_on("cuda_reduce", &k.source, &k.name, ordinal, params)?;
        Ok(LoadedReduce { kernel, kind: k.kind, dtype: k.dtype, out: k.out, kept: k.kept, red: k.red, max_grid })
    }

    /// The loaded kernel (name, device, signature).
    pub fn kernel(&self) -> &CudaKernel {
        &self.kernel
    }

    /// Reduces `x` (its element `x_offset + Σ coord · stride` over `dims`) into `out`: a
    /// reduction writes `out[o]` (and `idx[o]` for `max_dim`/`min_dim`) for each row `o`;
    /// softmax and cumsum write each element at `out_offset + Σ coord · out stride`. `param` is
    /// `var`/`std`'s correction (as the bits of an `i64`). Errors (op `cuda_reduce`, nothing
    /// launched): dims that differ from the kernel's, a view reaching past its buffer, an
    /// index buffer given to a kernel without one or missing, or a buffer on another device.
    pub fn run(
        &self,
        x: &CudaBuffer,
        x_offset: usize,
        dims: &ReduceDims,
        out: &mut CudaBuffer,
        out_offset: usize,
        idx: Option<&mut CudaBuffer>,
        param: u64,
    ) -> Result<(), CudaError> {
        let op = "cuda_reduce";
        let bad =
            |m: String| Err(CudaError::new(op, CudaErrorKind::InvalidArgument, format!("{}: {m}", self.kernel.name())));
        let (k, r) = (dims.kept.len(), dims.red.len());
        if (k, r) != (self.kept, self.red)
            || [dims.x_kept.len(), dims.out_kept.len()] != [k; 2]
            || [dims.x_red.len(), dims.out_red.len()] != [r; 2]
        {
            return bad(format!("indexes {} kept and {} reduced dim(s), {dims:?} given", self.kept, self.red));
        }
        if idx.is_some() != self.kind.has_indices() {
            return bad(format!("{} an index output", if self.kind.has_indices() { "needs" } else { "has no" }));
        }
        let shape: Vec<usize> = dims.kept.iter().chain(&dims.red).copied().collect();
        let x_strides: Vec<usize> = dims.x_kept.iter().chain(&dims.x_red).copied().collect();
        let held = |b: &CudaBuffer, d: DType| b.len_bytes() / d.size_in_bytes();
        let x_end = StridedOperand { offset: x_offset, strides: &x_strides }.end(&shape);
        if x_end > held(x, self.dtype) {
            return bad(format!(
                "the input reaches element {} of a buffer of {} {} elements",
                x_end - 1,
                held(x, self.dtype),
                self.dtype
            ));
        }
        let n_out = dims.n_out();
        let out_end = if self.kind.keeps_shape() {
            let o_strides: Vec<usize> = dims.out_kept.iter().chain(&dims.out_red).copied().collect();
            StridedOperand { offset: out_offset, strides: &o_strides }.end(&shape)
        } else if out_offset != 0 {
            return bad(format!("a reduction writes its output from element 0, offset {out_offset} given"));
        } else {
            n_out
        };
        if out_end > held(out, self.out) {
            return bad(format!(
                "the output needs {out_end} {} elements, its buffer holds {}",
                self.out,
                held(out, self.out)
            ));
        }
        if let Some(i) = &idx {
            if n_out > held(i, DType::I64) {
                return bad(format!(
                    "the indices need {n_out} i64 elements, their buffer holds {}",
                    held(i, DType::I64)
                ));
            }
        }
        if n_out == 0 || (self.kind.keeps_shape() && dims.n_red() == 0) {
            return Ok(());
        }
        let g = reduce_geometry(self.kind, n_out, dims.n_red(), self.max_grid);
        let mut words: Vec<u64> = vec![n_out as u64, dims.n_red() as u64, g.group as u64, param];
        words.extend(shape.iter().map(|&s| s as u64));
        words.push(x_offset as u64);
        words.extend(x_strides.iter().map(|&s| s as u64));
        if self.kind.keeps_shape() {
            words.push(out_offset as u64);
            words.extend(dims.out_kept.iter().chain(&dims.out_red).map(|&s| s as u64));
        }
        let mut args: Vec<KernelArg<'_>> = vec![KernelArg::In(x), KernelArg::Out(out)];
        if let Some(i) = idx {
            args.push(KernelArg::Out(i));
        }
        args.extend(words.into_iter().map(KernelArg::U64));
        launch_as(op, &self.kernel, g.grid, REDUCE_BLOCK, &mut args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_split_into_kept_and_reduced_and_collapse() {
        // [2, 3, 4] contiguous, reducing dim 1: kept [2, 4] (strides 12, 1), reduced [3] (4).
        let d = ReduceDims::new(&[2, 3, 4], &[12, 4, 1], None, &[false, true, false]);
        assert_eq!(
            (d.kept.as_slice(), d.x_kept.as_slice(), d.out_kept.as_slice()),
            (&[2, 4][..], &[12, 1][..], &[4, 1][..])
        );
        assert_eq!((d.red.as_slice(), d.x_red.as_slice()), (&[3][..], &[4][..]));
        // Reducing the two trailing dims of a contiguous tensor: one row of 12.
        let d = ReduceDims::new(&[2, 3, 4], &[12, 4, 1], None, &[false, true, true]);
        assert_eq!((d.kept, d.red, d.x_red), (vec![2], vec![12], vec![1]));
        // Every dim of a transposed [3, 2]: the reduced dims stay in logical order (the index
        // argmax reports), so they do not merge.
        let d = ReduceDims::new(&[3, 2], &[1, 3], None, &[true, true]);
        assert_eq!((d.kept.len(), d.red, d.x_red), (0, vec![3, 2], vec![1, 3]));
        // Size-1 dims vanish; a broadcast (stride 0) kept dim stays apart from a real one.
        let d = ReduceDims::new(&[4, 1, 5, 6], &[0, 7, 6, 1], None, &[false, false, false, true]);
        assert_eq!((d.kept, d.x_kept, d.out_kept), (vec![4, 5], vec![0, 6], vec![5, 1]));
        // A 0-dim input: nothing kept, nothing reduced, one row of one element.
        let d = ReduceDims::new(&[], &[], None, &[]);
        assert_eq!((d.n_out(), d.n_red()), (1, 1));
        // Softmax along dim 0 of [3, 4]: output strides of its own.
        let d = ReduceDims::new(&[3, 4], &[1, 3], Some(&[4, 1]), &[true, false]);
        assert_eq!(
            (d.kept, d.x_kept, d.out_kept, d.red, d.x_red, d.out_red),
            (vec![4], vec![3], vec![1], vec![3], vec![1], vec![4])
        );
    }

    #[test]
    fn short_rows_get_a_warp_long_rows_a_block() {
        let sum = CudaReduce::Sum;
        let g = reduce_geometry(sum, 1000, 100, 1 << 20);
        assert_eq!(g, ReduceGeometry { grid: 125, group: 32 }, "8 rows per block of 256");
        assert_eq!(reduce_geometry(sum, 3, WARP_ROW_MAX, 100), ReduceGeometry { grid: 1, group: 32 });
        assert_eq!(reduce_geometry(sum, 3, WARP_ROW_MAX + 1, 100), ReduceGeometry { grid: 3, group: REDUCE_BLOCK });
        // A scan's one lane per row gets a warp, however long the row.
        assert_eq!(reduce_geometry(CudaReduce::CumSum, 3, 100_000, 100), ReduceGeometry { grid: 1, group: 32 });
        // The grid is capped; groups then stride over the rows. Empty rows still launch one block.
        assert_eq!(reduce_geometry(sum, 1 << 30, 4096, 2112).grid, 2112);
        assert_eq!(reduce_geometry(sum, 1, 0, 2112), ReduceGeometry { grid: 1, group: 32 });
    }
}
