//! The CUDA sort and compaction emitters: their text (always); the sort's launch plan, run on
//! the host by a model of the kernels' compare-exchange steps against the CPU's stable order
//! (always); NVRTC compiling every sort kernel (per-dtype stages on all 8 dtypes) and every
//! compaction kernel to CUBIN for sm_80 and sm_90 (skipping with a printed line when NVRTC
//! is absent).

use kiln_codegen::cuda::{
    compact_chunks, emit_compact, emit_sort, sort_kernels, CompactStage, SortLaunch, SortPlan, SortStage,
    COMPACT_CHUNK, SORT_TILE,
};
use kiln_runtime::DType;

mod common;

#[test]
fn keys_follow_the_cpu_order() {
    let f = emit_sort(SortStage::Keys, DType::F32);
    assert!(f.name.starts_with("kiln_sort_keys_f32_"), "{}", f.name);
    let s = &f.source;
    assert!(s.contains("(const float* __restrict__ x, unsigned long long* __restrict__ keys, unsigned int* __restrict__ pos, unsigned long long rows, unsigned long long n, unsigned long long p, unsigned long long flip)"), "{s}");
    // NaN largest, -0.0 as 0.0, negative floats' bits inverted, positive ones' sign bit set.
    assert!(s.contains("if (v != v) return ~0ULL;") && s.contains("if (v == 0.0) v = 0.0;"), "{s}");
    assert!(s.contains("return (b >> 63) ? ~b : (b | (1ULL << 63));"), "{s}");
    assert!(s.contains("keys[i] = kiln_sort_key((double)x[r * n + j]) ^ flip;"), "{s}");
    // Pads sort after every real pair, whatever the direction.
    assert!(s.contains("keys[i] = ~0ULL;") && s.contains("pos[i] = 0xffffffffu;"), "{s}");
    let h = emit_sort(SortStage::Keys, DType::BF16).source;
    assert!(
        h.contains("kiln_sort_key((double)kiln_bf16_to_f32(x[r * n + j]))")
            && h.contains("const unsigned short* __restrict__ x"),
        "{h}"
    );
    let i = emit_sort(SortStage::Keys, DType::I32).source;
    assert!(i.contains("((unsigned long long)(long long)x[r * n + j] ^ (1ULL << 63)) ^ flip"), "{i}");
    assert!(!i.contains("kiln_f16"), "{i}");
}

#[test]
fn pair_stages_are_dtype_free_and_break_ties_by_position() {
    assert_eq!(emit_sort(SortStage::Tile, DType::F32), emit_sort(SortStage::Tile, DType::I64));
    assert_eq!(emit_sort(SortStage::Step, DType::F16).dtype, None);
    let t = emit_sort(SortStage::Tile, DType::F32).source;
    assert!(t.contains("extern __shared__ unsigned long long sk[];") && t.contains("__launch_bounds__(1024)"), "{t}");
    assert!(
        t.contains("const bool b_first = kb < ka || (kb == ka && pb < pa);") && t.contains("if (b_first == up)"),
        "{t}"
    );
    assert!(t.contains("for (unsigned long long j = (k < t ? k : t) >> 1; j > 0; j >>= 1)"), "{t}");
    let w = emit_sort(SortStage::Write, DType::F64).source;
    assert!(w.contains("out[i] = x[r * n + q];") && w.contains("idx[i] = (long long)q;"), "{w}");
    assert_eq!(sort_kernels().len(), 2 * 8 + 2);
}

/// The host model of the kernels: the tile kernel's and the step kernel's compare-exchanges
/// (the same pair and direction formulas as the emitted C) over `rows` rows of pairs.
fn run_plan(plan: &SortPlan, keys: &mut [u64], pos: &mut [u32]) {
    let p = plan.p as u64;
    let exchange = |keys: &mut [u64], pos: &mut [u32], a: usize, b: usize, up: bool| {
        let b_first = keys[b] < keys[a] || (keys[b] == keys[a] && pos[b] < pos[a]);
        if b_first == up {
            keys.swap(a, b);
            pos.swap(a, b);
        }
    };
    let pair = |q: u64, j: u64| ((q & !(j - 1)) << 1) | (q & (j - 1));
    for launch in &plan.launches {
        match *launch {
            SortLaunch::Tile { k_first, k_last } => {
                let t = plan.tile as u64;
                for base in (0..keys.len() as u64).step_by(plan.tile) {
                    let mut k = k_first as u64;
                    while k <= k_last as u64 {
                        let mut j = k.min(t) >> 1;
                        while j > 0 {
                            for q in 0..t / 2 {
                                let a = pair(q, j);
                                let up = ((base + a) & (p - 1)) & k == 0;
                                exchange(keys, pos, (base + a) as usize, (base + (a | j)) as usize, up);
                            }
                            j >>= 1;
                        }
                        k <<= 1;
                    }
                }
            }
            SortLaunch::Step { k, j } => {
                for q in 0..keys.len() as u64 / 2 {
                    let a = pair(q, j as u64);
                    exchange(keys, pos, a as usize, (a | j as u64) as usize, (a & (p - 1)) & k as u64 == 0);
                }
            }
        }
    }
}

#[test]
fn the_plan_sorts_stably_for_every_length() {
    // Lengths around the tile and well past it (global steps), with many ties.
    for n in [1, 2, 3, 7, 64, 1000, SORT_TILE - 1, SORT_TILE, SORT_TILE + 1, 3 * SORT_TILE + 5, 5 * SORT_TILE] {
        let plan = SortPlan::new(n);
        assert!(plan.p.is_power_of_two() && plan.p >= n.max(2) && plan.p < 2 * n.max(2));
        let rows = 3;
        for descending in [false, true] {
            let flip = if descending { u64::MAX } else { 0 };
            let mut keys = vec![u64::MAX; rows * plan.p];
            let mut pos = vec![u32::MAX; rows * plan.p];
            let mut want = Vec::new();
            for r in 0..rows {
                let vals: Vec<u64> = (0..n as u64).map(|j| (j * 7919 + r as u64 * 13) % 17).collect();
                for (j, &v) in vals.iter().enumerate() {
                    keys[r * plan.p + j] = v ^ flip;
                    pos[r * plan.p + j] = j as u32;
                }
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by_key(|&j| vals[j] ^ flip); // stable: ties by position
                want.push(order);
            }
            run_plan(&plan, &mut keys, &mut pos);
            for (r, order) in want.iter().enumerate() {
                let got: Vec<usize> = pos[r * plan.p..r * plan.p + n].iter().map(|&q| q as usize).collect();
                assert_eq!(&got, order, "n = {n}, row {r}, descending = {descending}");
                assert!(pos[r * plan.p + n..(r + 1) * plan.p].iter().all(|&q| q == u32::MAX), "pads last");
            }
        }
    }
}

#[test]
fn plan_geometry() {
    let small = SortPlan::new(5);
    assert_eq!((small.p, small.tile, small.tile_block), (8, 8, 4));
    assert_eq!(small.launches, vec![SortLaunch::Tile { k_first: 2, k_last: 8 }]);
    assert_eq!(small.tile_shared_bytes(), 96);
    assert_eq!(SortPlan::new(1).p, 2);
    let big = SortPlan::new(4 * SORT_TILE);
    assert_eq!((big.tile, big.tile_block), (SORT_TILE, SORT_TILE as u32 / 2));
    assert_eq!(big.tile_shared_bytes(), 24 * 1024);
    let t = SORT_TILE;
    assert_eq!(
        big.launches,
        vec![
            SortLaunch::Tile { k_first: 2, k_last: t },
            SortLaunch::Step { k: 2 * t, j: t },
            SortLaunch::Tile { k_first: 2 * t, k_last: 2 * t },
            SortLaunch::Step { k: 4 * t, j: 2 * t },
            SortLaunch::Step { k: 4 * t, j: t },
            SortLaunch::Tile { k_first: 4 * t, k_last: 4 * t },
        ]
    );
}

#[test]
fn compaction_kernels_scan_in_order() {
    let c = emit_compact(CompactStage::Count);
    assert!(c.name.starts_with("kiln_compact_count_"), "{}", c.name);
    assert!(c.source.contains("(const unsigned char* __restrict__ flags, long long* __restrict__ counts, unsigned long long n, unsigned long long chunks)"), "{}", c.source);
    assert!(
        c.source.contains("__shfl_up_sync(0xffffffffu, x, d)") && c.source.contains("if (k < w) before += t;"),
        "{}",
        c.source
    );
    let s = emit_compact(CompactStage::Scan).source;
    assert!(
        s.contains("if (c < chunks) counts[c] = carry + before;")
            && s.contains("if (threadIdx.x == 0) counts[chunks] = carry;"),
        "{s}"
    );
    let w = emit_compact(CompactStage::Write).source;
    assert!(w.contains("long long row = counts[c] + kiln_block_scan(mine, &total);"), "{w}");
    assert!(w.contains("out[(unsigned long long)row * ndim + d] = (long long)(rest % s);"), "{w}");
    assert_eq!(
        (compact_chunks(0), compact_chunks(1), compact_chunks(COMPACT_CHUNK), compact_chunks(COMPACT_CHUNK + 1)),
        (0, 1, 1, 2)
    );
}

#[test]
fn every_sort_and_compaction_kernel_compiles_to_cubin_for_sm80_and_sm90() {
    let mut kernels: Vec<(String, String)> = sort_kernels().into_iter().map(|k| (k.name, k.source)).collect();
    kernels.extend(CompactStage::ALL.iter().map(|&s| emit_compact(s)).map(|k| (k.name, k.source)));
    assert_eq!(kernels.len(), 21);
    common::compile_each_to_cubin("sort and compaction", &kernels);
}
