//! Random tensors: the global generator, [`manual_seed`], `rand`/`randn`/`randint`, the
//! in-place `uniform_`/`normal_`/`random_`/`bernoulli_`, and `bernoulli` of a tensor of
//! probabilities (`bernoulli`).
//!
//! Every generator is a counter-based Philox 4x32-10 stream: a seed and an offset. A draw of `n`
//! elements takes the generator's current `(seed, offset)` and advances the offset by `n` rounded
//! up to a multiple of 4. Element `i` of the draw is a pure function of `(seed, offset, i)`
//! (see [`kiln_runtime::cpu::philox`] for the exact mapping and the distributions), so:
//! - the numbers do not depend on the number of CPU threads;
//! - a generated kernel (CPU or CUDA, under `kiln::compile`) that is handed the same
//!   `(seed, offset)` reproduces the eager numbers exactly, and reserving the same number of
//!   elements keeps every later draw in step with eager execution.
//!
//! Inside `kiln::compile`, `rand`, `randn`, `rand_like` and `randn_like` of an f32 or f64 CPU
//! tensor reserve their draw from the global generator when the op is recorded, exactly as
//! eager code does, and record a `Rand` node whose seed and offset are run-time arguments of
//! the plan: the numbers are generated inside the fused kernel that consumes them (dropout's
//! mask never reaches memory), a cached plan draws fresh numbers on every call, and they equal
//! the eager numbers bit for bit. The other random ops (the in-place forms, draws from an
//! explicit generator, `randint`, f16/bf16) run eagerly at that point, as before.
//!
//! Differences from PyTorch: the numbers differ from PyTorch's (its CPU generator is a Mersenne
//! Twister); generators are passed to the in-place forms (`x.uniform_with_(0.0, 1.0, &mut g)`)
//! rather than as a `generator=` keyword, and `Generator::get_state` returns a
//! [`GeneratorState`] (seed and offset) rather than a byte tensor.

use crate::error::{bail, Error, ErrorKind, OrPanic, Result};
use crate::tensor::{sizes, IntoShape};
use crate::Tensor;
use kiln_codegen::ir::RandDist;
use kiln_runtime::cpu::elementwise::map2_inplace;
use kiln_runtime::cpu::philox::{self, float_digits, Philox};
use kiln_runtime::cpu::CpuBuf;
use kiln_runtime::{match_cpu, CpuStorage, DType, Device, Element, Layout};
use std::sync::{Mutex, MutexGuard};

mod bernoulli;

/// The seed of a generator nobody seeded (PyTorch's default CPU seed).
pub const DEFAULT_SEED: u64 = 67_280_421_310_721;

/// A Philox 4x32-10 random stream (`torch.Generator`): a seed and the offset of the next draw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generator {
    seed: u64,
    offset: u64,
}

/// A generator's full state: restoring it replays the same numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GeneratorState {
    /// The seed (the Philox key).
    pub seed: u64,
    /// Elements drawn so far (a multiple of 4).
    pub offset: u64,
}

impl Default for Generator {
    fn default() -> Self {
        Generator::new()
    }
}

impl Generator {
    /// A generator with [`DEFAULT_SEED`].
    pub const fn new() -> Generator {
        Generator::with_seed(DEFAULT_SEED)
    }

    /// A generator seeded with `seed`, at offset 0.
    pub const fn with_seed(seed: u64) -> Generator {
        Generator { seed, offset: 0 }
    }

    /// Re-seeds and rewinds to offset 0 (`g.manual_seed(seed)`).
    pub fn manual_seed(&mut self, seed: u64) -> &mut Generator {
        *self = Generator::with_seed(seed);
        self
    }

    /// Re-seeds from a non-deterministic source and returns the new seed (`g.seed()`).
    pub fn seed(&mut self) -> u64 {
        use std::hash::BuildHasher;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let seed = std::collections::hash_map::RandomState::new().hash_one(now);
        self.manual_seed(seed);
        seed
    }

    /// The seed this generator was last seeded with (`g.initial_seed()`).
    pub fn initial_seed(&self) -> u64 {
        self.seed
    }

    /// Elements drawn since the last seeding, rounded up to a multiple of 4 per draw.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The state to restore later with [`Generator::set_state`] (`g.get_state()`).
    pub fn get_state(&self) -> GeneratorState {
        GeneratorState { seed: self.seed, offset: self.offset }
    }

    /// Restores a state from [`Generator::get_state`] (`g.set_state(state)`).
    #[track_caller]
    pub fn set_state(&mut self, state: GeneratorState) -> &mut Generator {
        self.try_set_state(state).or_panic()
    }

    /// [`Generator::set_state`] returning an error for an offset that is not a multiple of 4
    /// (no generator produces one).
    #[track_caller]
    pub fn try_set_state(&mut self, state: GeneratorState) -> Result<&mut Generator> {
        if !state.offset.is_multiple_of(4) {
            bail!("set_state", Value, "the offset must be a multiple of 4, but got {}", state.offset);
        }
        *self = Generator { seed: state.seed, offset: state.offset };
        Ok(self)
    }

    /// Reserves the next `numel` elements of the stream and returns the draw that generates
    /// them; this is how eager kernels and generated kernels stay in step.
    pub fn draw(&mut self, numel: usize) -> Philox {
        let draw = Philox::new(self.seed, self.offset);
        self.offset = self.offset.wrapping_add((numel as u64).div_ceil(4) * 4);
        draw
    }
}

static DEFAULT_GENERATOR: Mutex<Generator> = Mutex::new(Generator::new());

/// The global generator every random op uses unless given one (`torch.default_generator`).
/// Random ops lock it only while a draw reserves its offset, never while numbers are
/// generated; do not call them while holding this guard (they would wait for it forever).
pub fn default_generator() -> MutexGuard<'static, Generator> {
    DEFAULT_GENERATOR.lock().unwrap_or_else(|e| e.into_inner())
}

/// Seeds the global generator (`torch.manual_seed`): the same seed gives the same numbers, on
/// every device and in compiled code.
pub fn manual_seed(seed: u64) {
    default_generator().manual_seed(seed);
}

/// Seeds the global generator non-deterministically and returns the seed (`torch.seed`).
pub fn seed() -> u64 {
    default_generator().seed()
}

/// The global generator's seed (`torch.initial_seed`).
pub fn initial_seed() -> u64 {
    default_generator().initial_seed()
}

/// The global generator's state (`torch.get_rng_state`).
pub fn get_rng_state() -> GeneratorState {
    default_generator().get_state()
}

/// Restores the global generator's state (`torch.set_rng_state`).
#[track_caller]
pub fn set_rng_state(state: GeneratorState) {
    default_generator().set_state(state);
}

/// What to draw; parameters are validated by [`check`] before any draw is reserved.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Dist {
    /// Uniform on `[low, high)` (float dtypes).
    Uniform { low: f64, high: f64 },
    /// Normal with `mean` and `std` (float dtypes).
    Normal { mean: f64, std: f64 },
    /// Integers in `[low, high)` (any dtype holding them).
    Integers { low: i64, high: i64 },
    /// Ones with probability `p`, zeros otherwise (any dtype).
    Bernoulli { p: f64 },
}

/// The integers every value of `dtype` in that range can hold exactly: `[min, max]`.
fn integer_bounds(dtype: DType) -> (i64, i64) {
    match dtype {
        DType::Bool => (0, 1),
        DType::U8 => (0, u8::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::I64 => (i64::MIN, i64::MAX),
        float => {
            let m = 1i64 << float_digits(float);
            (-m, m)
        }
    }
}

/// Errors for an unsupported dtype, bad parameters, or an overlapping destination.
#[track_caller]
fn check(op: &'static str, dtype: DType, layout: &Layout, dist: Dist) -> Result<()> {
    if matches!(dist, Dist::Uniform { .. } | Dist::Normal { .. }) && !dtype.is_float() {
        bail!(op, DType, "expected a floating-point dtype, but got {dtype}");
    }
    match dist {
        Dist::Uniform { low, high } => {
            if !(low.is_finite() && high.is_finite()) {
                bail!(op, Value, "expected finite bounds, but got from={low}, to={high}");
            }
            if low > high {
                bail!(op, Value, "expects to return a [from, to) range, but found from={low} > to={high}");
            }
            let max = dtype.finite_max().expect("a float dtype");
            if high - low > max || low.abs() > max || high.abs() > max {
                bail!(
                    op,
                    Value,
                    "expects from, to and to-from within the range of {dtype} (±{max}), but got from={low}, to={high}"
                );
            }
        }
        Dist::Normal { std, .. } => {
            if std.is_nan() || std < 0.0 {
                bail!(op, Value, "expects std >= 0.0, but found std={std}");
            }
        }
        Dist::Integers { low, high } => {
            if low >= high {
                bail!(op, Value, "expects 'from' to be less than 'to', but got from={low} >= to={high}");
            }
            let (min, max) = integer_bounds(dtype);
            if low < min || high - 1 > max {
                bail!(
                    op,
                    Value,
                    "[from, to) = [{low}, {high}) is out of bounds for {dtype} (values must lie in [{min}, {max}])"
                );
            }
        }
        Dist::Bernoulli { p } => {
            if !(0.0..=1.0).contains(&p) {
                bail!(op, Value, "expects p to be in [0, 1], but got p={p}");
            }
        }
    }
    if !layout.is_non_overlapping() {
        bail!(op, Value, "unsupported operation: more than one element of the written-to tensor (shape {:?}, strides {:?}) refers to a single memory location; clone() it first", layout.shape(), layout.strides());
    }
    Ok(())
}

/// Runs `fill` on the elements of `layout` in `buf`, in row-major order: directly when the
/// layout is contiguous, through a contiguous buffer otherwise.
fn write_through<T: Element>(buf: &mut [T], layout: &Layout, fill: impl FnOnce(&mut [T])) {
    let n = layout.numel();
    if layout.is_contiguous() {
        fill(&mut buf[layout.offset()..layout.offset() + n]);
    } else {
        let mut tmp = CpuBuf::<T>::uninit(n);
        fill(&mut tmp);
        map2_inplace(buf, layout, &tmp, &Layout::contiguous(layout.shape()), |_, s| s);
    }
}

/// Binds `$buf` to the buffer of a floating-point storage and `$T` to its element type;
/// `None` for other dtypes (which [`check`] has rejected already).
macro_rules! match_float_cpu {
    ($s:expr, |$buf:ident : $T:ident| $body:expr) => {
        match $s {
            CpuStorage::F32($buf) => {
                type $T = f32;
                Some($body)
            }
            CpuStorage::F64($buf) => {
                type $T = f64;
                Some($body)
            }
            CpuStorage::F16($buf) => {
                type $T = half::f16;
                Some($body)
            }
            CpuStorage::BF16($buf) => {
                type $T = half::bf16;
                Some($body)
            }
            _ => None,
        }
    };
}

/// Draws `dist` into the elements of `layout` in `storage`; `None` when the dtype cannot hold
/// the distribution.
fn fill_storage(storage: &mut CpuStorage, layout: &Layout, dist: Dist, draw: &Philox) -> Option<()> {
    match dist {
        Dist::Uniform { low, high } => {
            match_float_cpu!(storage, |b: T| write_through(b, layout, |o| philox::uniform::<T>(o, draw, low, high)))
        }
        Dist::Normal { mean, std } => {
            match_float_cpu!(storage, |b: T| write_through(b, layout, |o| philox::normal::<T>(o, draw, mean, std)))
        }
        Dist::Integers { low, high } => {
            let range = philox::integer_range(low, high);
            match_cpu!(storage, |b: T| write_through(b, layout, |o| philox::integers::<T>(o, draw, low, range)));
            Some(())
        }
        Dist::Bernoulli { p } => {
            match_cpu!(storage, |b: T| write_through(b, layout, |o| philox::bernoulli::<T>(o, draw, p)));
            Some(())
        }
    }
}

/// The error for a distribution the dtype cannot hold (after [`check`], never reached).
#[track_caller]
fn unsupported(op: &'static str, dtype: DType) -> Error {
    Error::new(op, ErrorKind::DType, format!("expected a floating-point dtype, but got {dtype}"))
}

/// The distribution of a `Rand` node as the eager one.
fn eager_dist(dist: RandDist) -> Dist {
    match dist {
        RandDist::Uniform => Dist::Uniform { low: 0.0, high: 1.0 },
        RandDist::Normal => Dist::Normal { mean: 0.0, std: 1.0 },
    }
}

/// The `Rand` node a draw of `dist` records inside a compiled step: standard uniform or normal
/// f32/f64 samples (on any device: CUDA kernels draw the CPU's numbers too); `None` for what
/// stays eager.
fn captured(dist: Dist, dtype: DType) -> Option<RandDist> {
    if !matches!(dtype, DType::F32 | DType::F64) {
        return None;
    }
    match dist {
        Dist::Uniform { low, high } if low == 0.0 && high == 1.0 => Some(RandDist::Uniform),
        Dist::Normal { mean, std } if mean == 0.0 && std == 1.0 => Some(RandDist::Normal),
        _ => None,
    }
}

/// A new tensor of `dist` samples of `draw`.
#[track_caller]
fn generate(op: &'static str, shape: &[usize], dtype: DType, dist: Dist, draw: &Philox) -> Result<Tensor> {
    let layout = Layout::contiguous(shape);
    let mut storage = CpuStorage::uninit(dtype, layout.numel());
    fill_storage(&mut storage, &layout, dist, draw).ok_or_else(|| unsupported(op, dtype))?;
    Ok(Tensor::from_cpu_storage(storage, shape))
}

/// A new tensor of `dist` samples of `draw` on `device` (parameters and dtype [`check`]ed): on
/// CUDA drawn there by the device Philox kernels, the CPU generator's numbers either way.
#[track_caller]
fn generate_on(
    op: &'static str,
    shape: &[usize],
    dtype: DType,
    dist: Dist,
    draw: &Philox,
    device: Device,
) -> Result<Tensor> {
    if device.is_cuda() {
        crate::cuda::random::generate(op, shape, dtype, dist, draw, device)
    } else {
        generate(op, shape, dtype, dist, draw)
    }
}

/// The value of a `Rand` node computed eagerly on `device` (a plan's fallback): the same
/// numbers as `rand`/`randn` of `dtype` drawing `draw`.
pub(crate) fn rand_value(
    dist: RandDist,
    shape: &[usize],
    dtype: DType,
    draw: &Philox,
    device: Device,
) -> Result<Tensor> {
    generate_on(dist.name(), shape, dtype, eager_dist(dist), draw, device)
}

/// A new tensor of `dist` samples (inside a compiled step, a `Rand` node when [`captured`]
/// allows). A shape too large for a tensor, or CPU memory the system refuses, is an error
/// before any number is drawn: the generator does not advance.
#[track_caller]
fn sample(op: &'static str, shape: &[usize], dtype: DType, device: Device, dist: Dist) -> Result<Tensor> {
    crate::tensor::check_shape(op, shape)?;
    let layout = Layout::contiguous(shape);
    check(op, dtype, &layout, dist)?;
    crate::cuda::check_available(op, device)?;
    let node = captured(dist, dtype).filter(|_| crate::capture::is_active());
    if node.is_none() && device == Device::Cpu {
        crate::tensor::reserve(op, shape, dtype)?;
    }
    let draw = default_generator().draw(layout.numel());
    match node {
        Some(rand) => Ok(crate::capture::rand(rand, &draw, shape, dtype, device)),
        None => generate_on(op, shape, dtype, dist, &draw, device),
    }
}

/// Overwrites `dst` with `dist` samples drawn from `generator` (the global one when `None`).
#[track_caller]
fn sample_into(op: &'static str, dst: &Tensor, dist: Dist, generator: Option<&mut Generator>) -> Result<()> {
    check(op, dst.dtype(), dst.layout(), dist)?;
    let draw = match generator {
        Some(g) => g.draw(dst.numel()),
        None => default_generator().draw(dst.numel()),
    };
    if dst.device().is_cuda() {
        // Drawn on the device in the view's element order, then copied into the view.
        let src = generate_on(op, dst.shape(), dst.dtype(), dist, &draw, dst.device())?;
        return crate::cuda::copy_into(op, dst, &src, src.layout().clone());
    }
    dst.with_cpu_mut(op, |s, l| fill_storage(s, l, dist, &draw))?.ok_or_else(|| unsupported(op, dst.dtype()))
}

impl Tensor {
    /// Uniform f32 samples on `[0, 1)` (`torch.rand`).
    #[track_caller]
    pub fn rand(shape: impl IntoShape) -> Tensor {
        Self::rand_opts(shape, DType::F32, Device::Cpu)
    }

    /// Uniform samples on `[0, 1)` of a floating-point `dtype` on `device`.
    #[track_caller]
    pub fn rand_opts(shape: impl IntoShape, dtype: DType, device: Device) -> Tensor {
        Self::try_rand_opts(shape, dtype, device).or_panic()
    }

    /// [`Tensor::rand_opts`] returning an error for a non-float dtype or an unusable device.
    #[track_caller]
    pub fn try_rand_opts(shape: impl IntoShape, dtype: DType, device: Device) -> Result<Tensor> {
        sample("rand", &sizes("rand", shape)?, dtype, device, Dist::Uniform { low: 0.0, high: 1.0 })
    }

    /// Standard normal f32 samples (`torch.randn`).
    #[track_caller]
    pub fn randn(shape: impl IntoShape) -> Tensor {
        Self::randn_opts(shape, DType::F32, Device::Cpu)
    }

    /// Standard normal samples of a floating-point `dtype` on `device`.
    #[track_caller]
    pub fn randn_opts(shape: impl IntoShape, dtype: DType, device: Device) -> Tensor {
        Self::try_randn_opts(shape, dtype, device).or_panic()
    }

    /// [`Tensor::randn_opts`] returning an error for a non-float dtype or an unusable device.
    #[track_caller]
    pub fn try_randn_opts(shape: impl IntoShape, dtype: DType, device: Device) -> Result<Tensor> {
        sample("randn", &sizes("randn", shape)?, dtype, device, Dist::Normal { mean: 0.0, std: 1.0 })
    }

    /// Uniform int64 integers in `[low, high)` (`torch.randint(low, high, shape)`).
    #[track_caller]
    pub fn randint(low: i64, high: i64, shape: impl IntoShape) -> Tensor {
        Self::randint_opts(low, high, shape, DType::I64, Device::Cpu)
    }

    /// Uniform integers in `[low, high)` stored as `dtype` (any dtype whose values hold the
    /// range exactly) on `device`.
    #[track_caller]
    pub fn randint_opts(low: i64, high: i64, shape: impl IntoShape, dtype: DType, device: Device) -> Tensor {
        Self::try_randint_opts(low, high, shape, dtype, device).or_panic()
    }

    /// [`Tensor::randint_opts`] returning an error for an empty range, a range `dtype` cannot
    /// hold, or an unusable device.
    #[track_caller]
    pub fn try_randint_opts(
        low: i64,
        high: i64,
        shape: impl IntoShape,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        sample("randint", &sizes("randint", shape)?, dtype, device, Dist::Integers { low, high })
    }

    /// Uniform samples on `[0, 1)` with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn rand_like(&self) -> Tensor {
        Self::rand_opts(self.shape(), self.dtype(), self.device())
    }

    /// Standard normal samples with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn randn_like(&self) -> Tensor {
        Self::randn_opts(self.shape(), self.dtype(), self.device())
    }

    /// Integers in `[low, high)` with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn randint_like(&self, low: i64, high: i64) -> Tensor {
        Self::randint_opts(low, high, self.shape(), self.dtype(), self.device())
    }

    /// Fills with uniform samples on `[low, high)` from the global generator (`x.uniform_(a, b)`).
    #[track_caller]
    pub fn uniform_(&self, low: f64, high: f64) -> &Tensor {
        self.try_uniform_(low, high).or_panic()
    }

    /// [`Tensor::uniform_`] returning an error for a non-float dtype or `low > high`.
    #[track_caller]
    pub fn try_uniform_(&self, low: f64, high: f64) -> Result<&Tensor> {
        sample_into("uniform_", self, Dist::Uniform { low, high }, None).map(|_| self)
    }

    /// [`Tensor::uniform_`] drawing from `generator`.
    #[track_caller]
    pub fn uniform_with_(&self, low: f64, high: f64, generator: &mut Generator) -> &Tensor {
        self.try_uniform_with_(low, high, generator).or_panic()
    }

    /// [`Tensor::uniform_with_`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_uniform_with_(&self, low: f64, high: f64, generator: &mut Generator) -> Result<&Tensor> {
        sample_into("uniform_", self, Dist::Uniform { low, high }, Some(generator)).map(|_| self)
    }

    /// Fills with normal samples of `mean` and `std` (`x.normal_(mean, std)`).
    #[track_caller]
    pub fn normal_(&self, mean: f64, std: f64) -> &Tensor {
        self.try_normal_(mean, std).or_panic()
    }

    /// [`Tensor::normal_`] returning an error for a non-float dtype or a negative `std`.
    #[track_caller]
    pub fn try_normal_(&self, mean: f64, std: f64) -> Result<&Tensor> {
        sample_into("normal_", self, Dist::Normal { mean, std }, None).map(|_| self)
    }

    /// [`Tensor::normal_`] drawing from `generator`.
    #[track_caller]
    pub fn normal_with_(&self, mean: f64, std: f64, generator: &mut Generator) -> &Tensor {
        self.try_normal_with_(mean, std, generator).or_panic()
    }

    /// [`Tensor::normal_with_`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_normal_with_(&self, mean: f64, std: f64, generator: &mut Generator) -> Result<&Tensor> {
        sample_into("normal_", self, Dist::Normal { mean, std }, Some(generator)).map(|_| self)
    }

    /// Fills with uniform integers in `[low, high)` (`x.random_(low, high)`).
    #[track_caller]
    pub fn random_(&self, low: i64, high: i64) -> &Tensor {
        self.try_random_(low, high).or_panic()
    }

    /// [`Tensor::random_`] returning an error for an empty range or one the dtype cannot hold.
    #[track_caller]
    pub fn try_random_(&self, low: i64, high: i64) -> Result<&Tensor> {
        sample_into("random_", self, Dist::Integers { low, high }, None).map(|_| self)
    }

    /// [`Tensor::random_`] drawing from `generator`.
    #[track_caller]
    pub fn random_with_(&self, low: i64, high: i64, generator: &mut Generator) -> &Tensor {
        self.try_random_with_(low, high, generator).or_panic()
    }

    /// [`Tensor::random_with_`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_random_with_(&self, low: i64, high: i64, generator: &mut Generator) -> Result<&Tensor> {
        sample_into("random_", self, Dist::Integers { low, high }, Some(generator)).map(|_| self)
    }

    /// Fills with ones with probability `p`, zeros otherwise (`x.bernoulli_(p)`), in any dtype.
    #[track_caller]
    pub fn bernoulli_(&self, p: f64) -> &Tensor {
        self.try_bernoulli_(p).or_panic()
    }

    /// [`Tensor::bernoulli_`] returning an error unless `0 <= p <= 1`.
    #[track_caller]
    pub fn try_bernoulli_(&self, p: f64) -> Result<&Tensor> {
        sample_into("bernoulli_", self, Dist::Bernoulli { p }, None).map(|_| self)
    }

    /// [`Tensor::bernoulli_`] drawing from `generator`.
    #[track_caller]
    pub fn bernoulli_with_(&self, p: f64, generator: &mut Generator) -> &Tensor {
        self.try_bernoulli_with_(p, generator).or_panic()
    }

    /// [`Tensor::bernoulli_with_`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_bernoulli_with_(&self, p: f64, generator: &mut Generator) -> Result<&Tensor> {
        sample_into("bernoulli_", self, Dist::Bernoulli { p }, Some(generator)).map(|_| self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_advance_by_whole_groups() {
        let mut g = Generator::with_seed(5);
        assert_eq!(g.draw(0).offset(), 0);
        assert_eq!(g.draw(5).offset(), 0);
        assert_eq!(g.draw(1).offset(), 8);
        assert_eq!(g.offset(), 12);
        let state = g.get_state();
        let a = g.draw(3);
        g.set_state(state);
        assert_eq!(g.draw(3), a);
        assert!(g.try_set_state(GeneratorState { seed: 1, offset: 6 }).is_err());
        g.manual_seed(9);
        assert_eq!((g.initial_seed(), g.offset()), (9, 0));
    }

    #[test]
    fn parameters_are_checked_before_drawing() {
        let l = Layout::contiguous(&[3]);
        let uni = Dist::Uniform { low: 0.0, high: 1.0 };
        assert!(check("rand", DType::F32, &l, uni).is_ok());
        let e = check("rand", DType::I64, &l, uni).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::DType, "expected a floating-point dtype, but got int64"));
        let bad = Dist::Uniform { low: 2.0, high: 1.0 };
        assert!(check("uniform_", DType::F32, &l, bad).is_err());
        let wide = Dist::Uniform { low: -60000.0, high: 60000.0 };
        assert!(check("uniform_", DType::F16, &l, wide).is_err());
        assert!(check("uniform_", DType::F32, &l, wide).is_ok());
        assert!(check("normal_", DType::F64, &l, Dist::Normal { mean: 0.0, std: -1.0 }).is_err());
        assert!(check("normal_", DType::F64, &l, Dist::Normal { mean: 0.0, std: f64::NAN }).is_err());
        let ints = |low, high| Dist::Integers { low, high };
        assert!(check("randint", DType::U8, &l, ints(0, 256)).is_ok());
        assert!(check("randint", DType::U8, &l, ints(0, 257)).is_err());
        assert!(check("randint", DType::U8, &l, ints(-1, 5)).is_err());
        assert!(check("randint", DType::Bool, &l, ints(0, 2)).is_ok());
        assert!(check("randint", DType::I64, &l, ints(3, 3)).is_err());
        assert!(check("randint", DType::F16, &l, ints(0, 2049)).is_ok());
        assert!(check("randint", DType::F16, &l, ints(0, 2050)).is_err());
        assert!(check("bernoulli_", DType::Bool, &l, Dist::Bernoulli { p: 1.5 }).is_err());
        let expanded = Layout::contiguous(&[1]).broadcast_to(&[3]).unwrap();
        assert!(check("bernoulli_", DType::F32, &expanded, Dist::Bernoulli { p: 0.5 }).is_err());
    }
}
