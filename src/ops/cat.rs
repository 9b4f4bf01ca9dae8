//! Joining tensors: `cat` along an existing dim and `stack` along a new one.
//!
//! The result dtype is the promotion of every input's dtype (as PyTorch's `cat` does); inputs of
//! another dtype are converted first. The output is filled in parallel chunks; within a chunk,
//! each input's rows are copied with `copy_from_slice` where its elements are adjacent and walked
//! with their strides otherwise; only transposed layouts are made contiguous first (tiled).
//!
//! On CUDA each input is copied into its slice of the output by the strided copy kernel,
//! converting its dtype on the way (`crate::cuda::join`).
//!
//! Autograd: each input's gradient is its slice of the output's (`narrow` for `cat`, `select`
//! for `stack`), cast back to the input's dtype by the engine.

use super::kernel_op;
use crate::autograd::{self, Grads};
use crate::error::{bail, OrPanic, Result};
use crate::tensor::{check_shape, normalize_dim, Tensor};
use kiln_runtime::cpu::parallel::{for_chunks_mut, GRAIN};
use kiln_runtime::cpu::strided::{collapse, Collapsed};
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{match_dtype, DType};
use std::borrow::Borrow;

impl Tensor {
    /// Concatenates tensors along `dim` (`torch.cat`): all must have the same shape except in
    /// `dim`; 1-D empty tensors (shape `[0]`) are skipped, as PyTorch allows; the dtype is the
    /// promotion of all inputs' dtypes. Accepts `&[&Tensor]` or `&[Tensor]`.
    #[track_caller]
    pub fn cat<T: Borrow<Tensor>>(tensors: &[T], dim: i64) -> Tensor {
        Tensor::try_cat(tensors, dim).or_panic()
    }

    /// [`Tensor::cat`] returning an error for an empty list, 0-dim inputs, mismatched shapes, a
    /// dim out of range, or inputs on different devices.
    #[track_caller]
    pub fn try_cat<T: Borrow<Tensor>>(tensors: &[T], dim: i64) -> Result<Tensor> {
        let tensors: Vec<&Tensor> = tensors.iter().map(Borrow::borrow).collect();
        let out = cat("cat", &tensors, dim)?;
        if !autograd::is_recording(&tensors) {
            return Ok(out);
        }
        // Each input's extent along the dim (`None`: a skipped 1-D empty input).
        let kept = tensors.iter().find(|t| !is_skipped(t));
        let d = match kept {
            Some(t) => t.normalize_dim("cat", dim)?,
            None => 0,
        };
        let mut start = 0;
        let pieces: Vec<Option<(i64, usize)>> = tensors
            .iter()
            .map(|t| {
                (!is_skipped(t)).then(|| {
                    start += t.shape()[d];
                    ((start - t.shape()[d]) as i64, t.shape()[d])
                })
            })
            .collect();
        Ok(autograd::record(out, "CatBackward0", &tensors, [], move |ctx, g, _| {
            let each = |(i, p): (usize, &Option<(i64, usize)>)| {
                p.filter(|_| ctx.needs_input_grad(i)).map(|(start, len)| g.narrow(d as i64, start, len))
            };
            pieces.iter().enumerate().map(each).collect::<Grads>()
        }))
    }

    /// Stacks tensors of one shape along a new dim `dim` (`torch.stack`), which may be
    /// `-(ndim + 1)..=ndim`; the dtype is the promotion of all inputs' dtypes.
    #[track_caller]
    pub fn stack<T: Borrow<Tensor>>(tensors: &[T], dim: i64) -> Tensor {
        Tensor::try_stack(tensors, dim).or_panic()
    }

    /// [`Tensor::stack`] returning an error for an empty list, inputs of different shapes, a dim
    /// out of range, or inputs on different devices.
    #[track_caller]
    pub fn try_stack<T: Borrow<Tensor>>(tensors: &[T], dim: i64) -> Result<Tensor> {
        let tensors: Vec<&Tensor> = tensors.iter().map(Borrow::borrow).collect();
        let Some(first) = tensors.first() else {
            bail!("stack", Value, "expected a non-empty list of tensors");
        };
        if let Some((i, t)) = tensors.iter().enumerate().find(|(_, t)| t.shape() != first.shape()) {
            bail!(
                "stack",
                Shape,
                "expected each tensor to be equal size, but got {:?} at entry 0 and {:?} at entry {i}",
                first.shape(),
                t.shape()
            );
        }
        let d = normalize_dim("stack", dim, first.dim() + 1)?;
        // The views carry no history: the stack records its own node on the inputs.
        let views: Vec<Tensor> = tensors.iter().map(|t| t.with_layout(t.layout().unsqueeze(d))).collect();
        let out = cat("stack", &views.iter().collect::<Vec<_>>(), d as i64)?;
        if !autograd::is_recording(&tensors) {
            return Ok(out);
        }
        let n = tensors.len();
        Ok(autograd::record(out, "StackBackward0", &tensors, [], move |ctx, g, _| {
            (0..n).map(|i| ctx.needs_input_grad(i).then(|| g.select(d as i64, i as i64))).collect::<Grads>()
        }))
    }
}

/// A 1-D empty tensor, which `cat` skips whatever the other inputs' shapes.
fn is_skipped(t: &Tensor) -> bool {
    t.dim() == 1 && t.numel() == 0
}

/// `cat` with its checks; `op` names the public op in errors.
#[track_caller]
fn cat(op: &'static str, tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
    let Some(first) = tensors.first() else {
        bail!(op, Value, "expected a non-empty list of tensors");
    };
    for (i, t) in tensors.iter().enumerate() {
        first.check_same_device(op, t)?;
        if t.dim() == 0 {
            bail!(op, Shape, "zero-dimensional tensor (at position {i}) cannot be concatenated");
        }
    }
    let dtype = tensors.iter().map(|t| t.dtype()).fold(first.dtype(), DType::promote);
    let kept: Vec<(usize, &Tensor)> = tensors.iter().copied().enumerate().filter(|(_, t)| !is_skipped(t)).collect();
    let Some(&(i0, reference)) = kept.first() else {
        return Ok(Tensor::empty_opts([0], dtype, first.device()));
    };
    let d = reference.normalize_dim(op, dim)?;
    let mut shape = reference.shape().to_vec();
    shape[d] = 0;
    for &(i, t) in &kept {
        if t.dim() != reference.dim() {
            bail!(
                op,
                Shape,
                "tensors must have the same number of dimensions, but got {:?} (tensor {i0}) and {:?} (tensor {i})",
                reference.shape(),
                t.shape()
            );
        }
        if let Some(bad) = (0..t.dim()).find(|&e| e != d && t.shape()[e] != reference.shape()[e]) {
            bail!(
                op,
                Shape,
                "sizes of tensors must match except in dimension {d}: expected size {} but got size {} in dimension {bad} for tensor {i} (shapes {:?} and {:?})",
                reference.shape()[bad],
                t.shape()[bad],
                reference.shape(),
                t.shape()
            );
        }
        shape[d] = shape[d].saturating_add(t.shape()[d]);
    }
    // The sizes along `dim` add up past what a tensor holds (a sum past 64 bits saturates,
    // which the check refuses too).
    check_shape(op, &shape)?;
    // The CPU kernel reads rows: a transposed part is copied first, in tiles.
    let on_cuda = first.device().is_cuda();
    let parts = kept
        .iter()
        .filter(|(_, t)| t.shape()[d] > 0)
        .map(|(_, t)| t.try_to_dtype(dtype).map(|t| if on_cuda { t } else { read_friendly(t) }))
        .collect::<Result<Vec<Tensor>>>()?;
    if parts.is_empty() {
        return Tensor::try_empty_opts(&shape, dtype, first.device());
    }
    let inner: usize = shape[d + 1..].iter().product();
    let refs: Vec<&Tensor> = parts.iter().collect();
    let out_shape = shape.clone();
    let cpu = move |ins: &[Tensor]| {
        let storage = match_dtype!(dtype, |T| T::wrap(join::<T>(ins, &out_shape, d, inner)));
        Ok(Tensor::from_cpu_storage(storage, &out_shape))
    };
    let out_shape = shape.clone();
    let cuda = move |ins: &[Tensor]| {
        let kiln_runtime::Device::Cuda(ordinal) = ins[0].device() else { unreachable!("a CUDA kernel's operands") };
        crate::cuda::join::cat(op, &ins.iter().collect::<Vec<_>>(), d, &out_shape, dtype, ordinal)
    };
    kernel_op(op, &refs, (&shape, dtype), cpu, cuda)
}

/// `t`, or a contiguous copy of it when it is laid out like a transpose (its row-major walk
/// jumps by more than a dim further out does, touching a new cache line per element):
/// `contiguous()` copies such layouts in cache-sized tiles, much faster than walking them.
fn read_friendly(t: Tensor) -> Tensor {
    let c = collapse(t.shape(), [t.stride()]);
    let s = &c.strides[0];
    match s.split_last() {
        Some((&inner, outer)) if inner > 1 && outer.iter().any(|&o| o > 0 && o < inner) => t.contiguous(),
        _ => t,
    }
}

/// One input of a join: its elements, how to walk them, and its columns in an output row.
struct Part<'a, T> {
    data: &'a [T],
    walk: Collapsed<1>,
    offset: usize,
    /// Where this input's elements start in each output row (`[outer, row]` view).
    start: usize,
    /// How many elements of each output row come from this input.
    width: usize,
}

impl<T: Copy> Part<'_, T> {
    /// Copies this input's row-major elements `from..from + dst.len()` into `dst`.
    fn copy_to(&self, from: usize, dst: &mut [T]) {
        let mut w = 0;
        self.walk.walk([self.offset], from..from + dst.len(), |[o], run, [s]| {
            let dst = &mut dst[w..w + run];
            if s == 1 {
                dst.copy_from_slice(&self.data[o..o + run]);
            } else {
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = self.data[o + j * s];
                }
            }
            w += run;
        });
    }
}

/// The contiguous concatenation of `parts` (all of dtype `T`, each non-empty along `dim`) into
/// `shape`; `inner` is the product of the sizes after `dim`.
fn join<T: StorageElement>(parts: &[Tensor], shape: &[usize], dim: usize, inner: usize) -> CpuBuf<T> {
    let mut out = CpuBuf::<T>::uninit(shape.iter().product());
    if out.is_empty() {
        return out;
    }
    // One read lock per distinct storage (two inputs may be views of one tensor).
    let (guards, guard_of) = Tensor::read_storages(parts);
    let mut start = 0;
    let pieces: Vec<Part<'_, T>> = parts
        .iter()
        .zip(&guard_of)
        .map(|(p, &g)| {
            let s = guards[g].as_cpu().expect("cat checked that its inputs are on the CPU");
            let width = p.shape()[dim] * inner;
            start += width;
            Part {
                data: s.as_buf::<T>().expect("inputs were converted to the output dtype"),
                walk: collapse(p.shape(), [p.stride()]),
                offset: p.storage_offset(),
                start: start - width,
                width,
            }
        })
        .collect();
    let row = start;
    // Input by input inside each chunk, so that a strided input's cache lines are reused from
    // one row to the next before another input evicts them.
    for_chunks_mut(&mut out, GRAIN * 4, |first, chunk| {
        let end = first + chunk.len();
        for p in &pieces {
            for o in first / row..=(end - 1) / row {
                let seg = o * row + p.start;
                let (lo, hi) = (seg.max(first), (seg + p.width).min(end));
                if lo < hi {
                    p.copy_to(o * p.width + lo - seg, &mut chunk[lo - first..hi - first]);
                }
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cross_chunk_boundaries() {
        // Long enough to be split into several parallel chunks, with rows that straddle them.
        let a = Tensor::arange(3 * 100_001).view([3, 100_001]);
        let b = Tensor::arange(3 * 5).view([5, 3]).t();
        let out = Tensor::cat(&[&a, &b], 1);
        assert_eq!(out.shape(), &[3, 100_006]);
        let v = out.to_vec::<i64>();
        for r in 0..3 {
            let row = &v[r * 100_006..(r + 1) * 100_006];
            assert!(row[..100_001].iter().enumerate().all(|(j, &x)| x == (r * 100_001 + j) as i64));
            assert_eq!(&row[100_001..], &[r as i64, r as i64 + 3, r as i64 + 6, r as i64 + 9, r as i64 + 12]);
        }
    }

    #[test]
    fn the_same_storage_twice_takes_one_lock() {
        let a = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]]);
        let out = Tensor::cat(&[&a, &a.t(), &a.narrow(0, 1, 1)], 0);
        assert_eq!(out.to_vec::<f32>(), vec![1.0, 2.0, 3.0, 4.0, 1.0, 3.0, 2.0, 4.0, 3.0, 4.0]);
    }
}
