//! Philox 4x32-10: the counter-based random number generator of Random123, used by PyTorch's
//! CUDA kernels and by JAX, and the CPU kernels that turn its output into distributions.
//!
//! # The contract
//!
//! A *draw* is one call that fills `n` elements (`rand`, `normal_`, …). It is given by a seed and
//! an offset (in elements, a multiple of 4) reserved from a generator, which then advances its
//! offset by `n` rounded up to a multiple of 4. Element `i` of the draw is a pure function of
//! `(seed, offset, i)` and of the distribution's parameters — not of the thread count, the chunk
//! a thread got, or the order in which elements are produced — so a generated CPU or GPU kernel
//! can reproduce eager results from `(seed, offset)` alone:
//!
//! - the key is the seed split into two words, `key = [seed as u32, (seed >> 32) as u32]`;
//! - element `i` belongs to *group* `g = offset / 4 + i / 4` and *lane* `l = i % 4`;
//! - plane `p`'s four words for group `g` are `philox4x32_10([g as u32, (g >> 32) as u32, p, 0],
//!   key)`; a draw that needs 32 random bits per element uses word `l` of plane 0, one that needs
//!   64 bits uses `(plane0[l] << 32) | plane1[l]`.
//!
//! # Distributions
//!
//! - **uniform** on `[low, high)` for a float type with `d` mantissa digits (f32 24, f64 53,
//!   f16 11, bf16 8): `u = top d bits * 2^-d` (32-bit words; 64-bit words for f64), so `u` is
//!   exactly representable and strictly below 1; the value is `low + u * (high - low)` computed
//!   in f32 (f64 for f64). When rounding lands it on `high`, `low` is returned instead (as
//!   PyTorch's CUDA kernel does), so the result always lies in `[low, high)`.
//! - **normal**: Box–Muller on lane pairs (0, 1) and (2, 3) of a group: with `u` uniforms of
//!   24 bits (53 for f64), `r = sqrt(-2 ln(1 - u_a))`, `θ = 2π u_b`, the pair is
//!   `(r cos θ, r sin θ)`, then `mean + std * z`. Tails are cut at `sqrt(2 ln 2^24) ≈ 5.8` σ
//!   (8.6 σ for f64).
//! - **integers** in `[low, low + range)`: 64-bit multiply–shift, `low + (w64 * range) >> 64`
//!   (Lemire's method without rejection): no modulo bias beyond `range / 2^64` relative error per
//!   value, which is below 2^-32 for every range up to 2^32.
//! - **bernoulli**(p): `w32 < p * 2^32`, so `p = 0` never and `p = 1` always gives 1.

use super::parallel::for_chunks_mut;
use super::parallel::GRAIN;
use crate::dtype::num_like::Float;
use crate::dtype::{DType, Element, FloatElement};

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Elements per parallel chunk: Philox costs ~10× a copy per element, so chunks are smaller
/// than the elementwise grain.
const RANDOM_GRAIN: usize = GRAIN / 4;

/// The Philox 4x32 block function with 10 rounds: four random words for a 128-bit counter and
/// a 64-bit key.
#[inline(always)]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mulhilo = |a: u32, b: u32| {
        let p = a as u64 * b as u64;
        ((p >> 32) as u32, p as u32)
    };
    let [mut c0, mut c1, mut c2, mut c3] = counter;
    let [mut k0, mut k1] = key;
    for round in 0..10 {
        if round > 0 {
            k0 = k0.wrapping_add(W0);
            k1 = k1.wrapping_add(W1);
        }
        let (hi0, lo0) = mulhilo(M0, c0);
        let (hi1, lo1) = mulhilo(M1, c2);
        (c0, c1, c2, c3) = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0);
    }
    [c0, c1, c2, c3]
}

/// One draw: the key and the first group of the elements it fills (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Philox {
    seed: u64,
    offset: u64,
}

impl Philox {
    /// The draw at `offset` (in elements) of the stream of `seed`. Generators only hand out
    /// multiples of 4; a remainder would be ignored (the draw starts at the group of `offset`).
    pub fn new(seed: u64, offset: u64) -> Philox {
        Philox { seed, offset }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The offset of element 0, in elements.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    #[inline(always)]
    fn plane(&self, group: u64, plane: u32) -> [u32; 4] {
        let g = (self.offset / 4).wrapping_add(group);
        philox4x32_10([g as u32, (g >> 32) as u32, plane, 0], [self.seed as u32, (self.seed >> 32) as u32])
    }

    /// The 32-bit words of the four elements of `group` (relative to this draw).
    #[inline(always)]
    pub fn words32(&self, group: u64) -> [u32; 4] {
        self.plane(group, 0)
    }

    /// The 64-bit words of the four elements of `group` (relative to this draw).
    #[inline(always)]
    pub fn words64(&self, group: u64) -> [u64; 4] {
        let (a, b) = (self.plane(group, 0), self.plane(group, 1));
        [0, 1, 2, 3].map(|l| ((a[l] as u64) << 32) | b[l] as u64)
    }

    /// Four uniforms in `[0, 1)` with `grid.bits` random bits each, in the compute type `C`.
    #[inline(always)]
    fn units<C: Float>(&self, group: u64, grid: Grid<C>) -> [C; 4] {
        if grid.bits > 32 {
            self.words64(group).map(|w| C::from_i64((w >> (64 - grid.bits)) as i64) * grid.scale)
        } else {
            self.words32(group).map(|w| C::from_i64((w >> (32 - grid.bits)) as i64) * grid.scale)
        }
    }
}

/// The grid of uniforms with `bits` random bits (at most 24 from 32-bit words, or 53 from
/// 64-bit words): `k * scale` for `k < 2^bits`, all exact in `C`.
#[derive(Clone, Copy)]
struct Grid<C> {
    bits: u32,
    scale: C,
}

impl<C: Float> Grid<C> {
    fn new(bits: u32) -> Grid<C> {
        Grid { bits, scale: C::c((-(bits as f64)).exp2()) }
    }
}

/// Fills `out` (the draw's elements in order) with `gen(group)`'s lanes, in parallel; element
/// `i` gets lane `i % 4` of group `i / 4` however the work is split.
fn fill_groups<T: Element>(out: &mut [T], gen: impl Fn(u64) -> [T; 4] + Sync + Send) {
    for_chunks_mut(out, RANDOM_GRAIN, |start, chunk| {
        // A chunk may start and end mid-group: the partial groups at its ends take the lanes
        // they cover, the whole groups between are copied four at a time.
        let head = ((4 - start % 4) % 4).min(chunk.len());
        let (head_part, rest) = chunk.split_at_mut(head);
        if head > 0 {
            let lane = start % 4;
            head_part.copy_from_slice(&gen((start / 4) as u64)[lane..lane + head]);
        }
        let first = (start + head) / 4;
        let whole = rest.len() / 4;
        let mut groups = rest.chunks_exact_mut(4);
        for (k, c) in groups.by_ref().enumerate() {
            c.copy_from_slice(&gen((first + k) as u64));
        }
        let tail = groups.into_remainder();
        if !tail.is_empty() {
            let n = tail.len();
            tail.copy_from_slice(&gen((first + whole) as u64)[..n]);
        }
    });
}

/// Mantissa digits of a float dtype (24 for f32, 53 for f64, 11 for f16, 8 for bf16; 24 for
/// the others, which are never uniform): the random bits of its uniforms, which keep every value
/// of their `[0, 1)` grid exactly representable, and the range in which integers are exact.
pub fn float_digits(dtype: DType) -> u32 {
    match dtype {
        DType::F64 => 53,
        DType::F16 => 11,
        DType::BF16 => 8,
        _ => 24,
    }
}

/// Uniform values on `[low, high)` (see the module docs); `low <= high` and both finite.
pub fn uniform<T: FloatElement>(out: &mut [T], draw: &Philox, low: f64, high: f64) {
    let grid = Grid::new(float_digits(T::DTYPE));
    let (lo, span) = (T::Compute::c(low), T::Compute::c(high - low));
    let (lo_t, hi_t) = (T::from_f64(low), T::from_f64(high));
    fill_groups(out, |g| {
        draw.units::<T::Compute>(g, grid).map(|u| {
            let v = T::from_compute(lo + u * span);
            if v >= hi_t && hi_t > lo_t {
                lo_t
            } else {
                v
            }
        })
    });
}

/// Normal values with `mean` and `std` by Box–Muller (see the module docs).
pub fn normal<T: FloatElement>(out: &mut [T], draw: &Philox, mean: f64, std: f64) {
    let (mean, std) = (T::Compute::c(mean), T::Compute::c(std));
    let two_pi = T::Compute::c(std::f64::consts::TAU);
    let (one, minus_two) = (T::Compute::c(1.0), T::Compute::c(-2.0));
    // Uniforms with the compute type's full precision (24 bits for f32, 53 for f64).
    let grid = Grid::new(float_digits(<T::Compute as Element>::DTYPE));
    fill_groups(out, |g| {
        let u = draw.units::<T::Compute>(g, grid);
        let mut z = [T::Compute::zero(); 4];
        for pair in [0, 2] {
            let r = (minus_two * (one - u[pair]).ln()).sqrt();
            let theta = two_pi * u[pair + 1];
            z[pair] = r * theta.cos();
            z[pair + 1] = r * theta.sin();
        }
        z.map(|z| T::from_compute(mean + std * z))
    });
}

/// Integers in `[low, low + range)` by 64-bit multiply–shift, converted to `T` (`range >= 1`).
pub fn integers<T: Element>(out: &mut [T], draw: &Philox, low: i64, range: u64) {
    fill_groups(out, |g| {
        draw.words64(g).map(|w| {
            let k = ((w as u128 * range as u128) >> 64) as u64;
            T::from_i64(low.wrapping_add(k as i64))
        })
    });
}

/// Ones with probability `p` and zeros otherwise, as `T`.
pub fn bernoulli<T: Element>(out: &mut [T], draw: &Philox, p: f64) {
    let threshold = p * 4_294_967_296.0;
    fill_groups(out, |g| draw.words32(g).map(|w| if (w as f64) < threshold { T::one() } else { T::zero() }));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer vectors for philox4x32_10 from Random123's `examples/kat_vectors`
    /// (columns: counter, key, expected output).
    #[test]
    fn random123_known_answers() {
        let kat: [([u32; 4], [u32; 2], [u32; 4]); 6] = [
            ([0; 4], [0; 2], [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
            ([u32::MAX; 4], [u32::MAX; 2], [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
            (
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0],
                [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
            ),
            ([1, 0, 0, 0], [1, 0], [0xac08141b, 0xdfc5ccbe, 0x79c07a47, 0xa7f66093]),
            ([0, 0, 0, 0x8000_0000], [0, 0x8000_0000], [0xf7a0b371, 0xe51dc93d, 0x56ce135d, 0x1d4b5580]),
            (
                [0x452821e6, 0x38d01377, 0xbe5466cf, 0x34e90c6c],
                [0, u32::MAX],
                [0x72ce44b3, 0xb44f9b78, 0x49af0267, 0x726813ac],
            ),
        ];
        for (ctr, key, want) in kat {
            assert_eq!(philox4x32_10(ctr, key), want, "counter {ctr:08x?} key {key:08x?}");
        }
    }

    #[test]
    fn element_is_a_function_of_seed_offset_and_index() {
        // Several parallel chunks whose boundaries fall mid-group (the length is odd).
        let n = 3 * RANDOM_GRAIN + 7;
        let mut all = vec![0f32; n];
        uniform(&mut all, &Philox::new(42, 8), 0.0, 1.0);
        for (g, lanes) in all.chunks(4).enumerate() {
            // Each group drawn alone at its own offset (a sequential, unsplit fill).
            let mut group = [0f32; 4];
            uniform(&mut group, &Philox::new(42, 8 + 4 * g as u64), 0.0, 1.0);
            assert_eq!(lanes, &group[..lanes.len()], "group {g}");
        }
        let mut other_seed = vec![0f32; 8];
        uniform(&mut other_seed, &Philox::new(43, 8), 0.0, 1.0);
        assert_ne!(&other_seed[..], &all[..8]);
    }

    #[test]
    fn uniform_stays_in_range_for_every_float_type() {
        let draw = Philox::new(7, 0);
        let mut h = vec![half::f16::ZERO; 4096];
        uniform(&mut h, &draw, 0.0, 1.0);
        assert!(h.iter().all(|&x| x >= half::f16::ZERO && x < half::f16::ONE));
        let mut b = vec![half::bf16::ZERO; 4096];
        uniform(&mut b, &draw, -2.0, 2.0);
        assert!(b.iter().all(|&x| x.to_f32() >= -2.0 && x.to_f32() < 2.0));
        let mut d = vec![0f64; 4096];
        uniform(&mut d, &draw, 5.0, 5.0);
        assert!(d.iter().all(|&x| x == 5.0));
    }

    #[test]
    fn integers_cover_the_range_without_leaving_it() {
        let mut v = vec![0i64; 10_000];
        integers(&mut v, &Philox::new(1, 0), -3, 7);
        assert!(v.iter().all(|&x| (-3..4).contains(&x)));
        for k in -3..4 {
            assert!(v.contains(&k), "{k} never drawn");
        }
        let mut full = vec![0i64; 64];
        integers(&mut full, &Philox::new(1, 0), i64::MIN, u64::MAX);
        assert!(full.iter().any(|&x| x < 0) && full.iter().any(|&x| x > 0));
    }

    #[test]
    fn bernoulli_extremes() {
        let mut v = vec![false; 1000];
        bernoulli(&mut v, &Philox::new(3, 0), 1.0);
        assert!(v.iter().all(|&x| x));
        bernoulli(&mut v, &Philox::new(3, 0), 0.0);
        assert!(v.iter().all(|&x| !x));
    }
}
