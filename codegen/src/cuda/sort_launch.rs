//! The launch sequence of a sort ([`SortPlan`]) and checked launches of its kernels
//! ([`LoadedSort`], the four kernels of [`super::sort`] for one dtype on one device).

use super::emit::ELEMENTWISE_BLOCK;
use super::launch::load_on;
use super::sort::{emit_sort, SortStage, SORT_TILE, SORT_TILE_BLOCK};
use kiln_runtime::cuda::{CudaBuffer, CudaError, CudaErrorKind, CudaKernel, KernelArg, LaunchDims, Param};
use kiln_runtime::DType;

/// The longest row a sort takes: positions are stored as `unsigned int`, `~0` marking pads.
pub const SORT_MAX_LEN: usize = u32::MAX as usize - 1;

/// One launch of a sort after the keys are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortLaunch {
    /// The tile kernel for bitonic sizes `k_first ..= k_last` (doubling).
    Tile {
        /// The first bitonic size.
        k_first: usize,
        /// The last bitonic size.
        k_last: usize,
    },
    /// One global compare-exchange step of size `k` and distance `j`.
    Step {
        /// The bitonic size.
        k: usize,
        /// The distance of the compared pairs (at least the tile).
        j: usize,
    },
}

/// How rows of `n` elements are sorted: the padded length, the tile, and the launches between
/// writing the keys and writing the result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortPlan {
    /// Pairs per row: `max(2, n.next_power_of_two())`.
    pub p: usize,
    /// Pairs per tile: `min(p, SORT_TILE)`.
    pub tile: usize,
    /// Threads per block of the tile kernel: `tile / 2`.
    pub tile_block: u32,
    /// The launches, in order.
    pub launches: Vec<SortLaunch>,
}

impl SortPlan {
    /// The plan for rows of `n` elements (`n <= SORT_MAX_LEN`): one tile launch sorting every
    /// tile, then for each larger bitonic size `k` the global steps of distance `k / 2` down
    /// to the tile, and one tile launch finishing that size's merge.
    pub fn new(n: usize) -> SortPlan {
        let p = n.next_power_of_two().max(2);
        let tile = p.min(SORT_TILE);
        let mut launches = vec![SortLaunch::Tile { k_first: 2, k_last: tile }];
        let mut k = 2 * tile;
        while k <= p {
            let mut j = k / 2;
            while j >= tile {
                launches.push(SortLaunch::Step { k, j });
                j /= 2;
            }
            launches.push(SortLaunch::Tile { k_first: k, k_last: k });
            k *= 2;
        }
        SortPlan { p, tile, tile_block: (tile / 2).min(SORT_TILE_BLOCK as usize) as u32, launches }
    }

    /// Dynamic shared memory of a tile launch: a key (8 bytes) and a position (4) per pair.
    pub fn tile_shared_bytes(&self) -> u32 {
        (self.tile * 12) as u32
    }
}

/// The four sort kernels for one dtype, compiled for and loaded on one device.
#[derive(Clone, Debug)]
pub struct LoadedSort {
    keys: CudaKernel,
    tile: CudaKernel,
    step: CudaKernel,
    write: CudaKernel,
    dtype: DType,
    max_grid: u32,
}

/// The scratch pairs of a sort: `rows · p` keys (u64) and positions (u32).
pub struct SortScratch<'a> {
    /// The keys, `rows · p` `u64`s.
    pub keys: &'a mut CudaBuffer,
    /// The positions, `rows · p` `u32`s.
    pub pos: &'a mut CudaBuffer,
}

impl LoadedSort {
    /// Compiles the kernels of `dtype` for `cuda:ordinal`'s arch (through the kernel cache) and
    /// loads them there.
    pub fn load(dtype: DType, ordinal: usize) -> Result<LoadedSort, CudaError> {
        use Param::{In, Out, U64};
        let load = |stage: SortStage, params: Vec<Param>| {
            let k = emit_sort(stage, dtype);
            load_on("cuda_sort", &k.source, &k.name, ordinal, params)
        };
        let (keys, max_grid) = load(SortStage::Keys, vec![In, Out, Out, U64, U64, U64, U64])?;
        let (tile, _) = load(SortStage::Tile, vec![Out, Out, U64, U64, U64, U64, U64])?;
        let (step, _) = load(SortStage::Step, vec![Out, Out, U64, U64, U64, U64])?;
        let (write, _) = load(SortStage::Write, vec![In, In, Out, Out, U64, U64, U64, U64])?;
        Ok(LoadedSort { keys, tile, step, write, dtype, max_grid })
    }

    /// Sorts each of the `rows` contiguous rows of `n` elements of `x` (ascending, or
    /// descending when `descending`; stable) and writes the first `kout` values of each into
    /// `out` and their positions into `idx` (int64), both `[rows, kout]` contiguous. Errors (op
    /// `cuda_sort`, nothing launched): `n` over [`SORT_MAX_LEN`], `kout > n`, or a buffer too
    /// small for its part (`x`: `rows · n` values; scratch: `rows · p` pairs; `out`, `idx`:
    /// `rows · kout`).
    pub fn run(
        &self,
        x: &CudaBuffer,
        scratch: SortScratch<'_>,
        (out, idx): (&mut CudaBuffer, &mut CudaBuffer),
        rows: usize,
        n: usize,
        kout: usize,
        descending: bool,
    ) -> Result<(), CudaError> {
        let bad = |m: String| Err(CudaError::new("cuda_sort", CudaErrorKind::InvalidArgument, m));
        if n > SORT_MAX_LEN {
            return bad(format!("rows of {n} elements; the sort takes at most {SORT_MAX_LEN}"));
        }
        if kout > n {
            return bad(format!("{kout} values asked of rows of {n}"));
        }
        let plan = SortPlan::new(n);
        let size = self.dtype.size_in_bytes();
        let need = [
            ("the input", x.len_bytes(), rows * n * size),
            ("the keys", scratch.keys.len_bytes(), rows * plan.p * 8),
            ("the positions", scratch.pos.len_bytes(), rows * plan.p * 4),
            ("the values", out.len_bytes(), rows * kout * size),
            ("the indices", idx.len_bytes(), rows * kout * 8),
        ];
        if let Some((what, held, want)) = need.iter().find(|(_, held, want)| held < want) {
            return bad(format!("{what} hold {held} bytes, {rows} rows of {n} (padded to {}) need {want}", plan.p));
        }
        if rows * kout == 0 {
            return Ok(());
        }
        let total = rows * plan.p;
        let grid = |work: usize| work.div_ceil(ELEMENTWISE_BLOCK as usize).clamp(1, self.max_grid as usize) as u32;
        let dims = |grid: u32| LaunchDims { grid, block: ELEMENTWISE_BLOCK, shared_bytes: 0 };
        let flip = if descending { u64::MAX } else { 0 };
        let (keys, pos) = (scratch.keys, scratch.pos);
        let w = |v: usize| KernelArg::U64(v as u64);
        self.keys.launch(
            dims(grid(total)),
            &mut [
                KernelArg::In(x),
                KernelArg::Out(&mut *keys),
                KernelArg::Out(&mut *pos),
                w(rows),
                w(n),
                w(plan.p),
                KernelArg::U64(flip),
            ],
        )?;
        let tiles = (total / plan.tile).min(self.max_grid as usize) as u32;
        let tile_dims = LaunchDims { grid: tiles, block: plan.tile_block, shared_bytes: plan.tile_shared_bytes() };
        for launch in &plan.launches {
            match *launch {
                SortLaunch::Tile { k_first, k_last } => {
                    let mut args = [
                        KernelArg::Out(&mut *keys),
                        KernelArg::Out(&mut *pos),
                        w(total),
                        w(plan.p),
                        w(plan.tile),
                        w(k_first),
                        w(k_last),
                    ];
                    self.tile.launch(tile_dims, &mut args)?
                }
                SortLaunch::Step { k, j } => self.step.launch(
                    dims(grid(total / 2)),
                    &mut [KernelArg::Out(&mut *keys), KernelArg::Out(&mut *pos), w(total), w(plan.p), w(k), w(j)],
                )?,
            }
        }
        let mut args = [
            KernelArg::In(x),
            KernelArg::In(&*pos),
            KernelArg::Out(out),
            KernelArg::Out(idx),
            w(rows),
            w(n),
            w(plan.p),
            w(kout),
        ];
        self.write.launch(dims(grid(rows * kout)), &mut args)
    }
}
