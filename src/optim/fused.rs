//! The one-pass optimizer kernel (PyTorch's `fused=True`, and kiln's default for eager steps):
//! every parameter of a step that it can take, per dtype (f32, f64, f16, bf16), in one
//! parallel launch that reads each element of the parameter, its gradient and its state once
//! and writes the parameter and the state back in place. The arithmetic is the optimizer's
//! [`OptimizerConfig::rule`] on single numbers (half values as [`HalfNumber`]s, each op rounded
//! to the half type as the op-by-op path rounds it), so the results are the op-by-op formula's
//! bits.

use super::optimizer::OptimizerConfig;
use super::rule::{ops, HalfNumber, Values};
use crate::Tensor;
use ahash::AHashSet;
use half::{bf16, f16};
use kiln_runtime::cpu::parallel::{for_ranges, GRAIN};
use kiln_runtime::storage::StorageElement;
use kiln_runtime::{DType, Storage};
use smallvec::SmallVec;
use std::sync::{RwLockReadGuard, RwLockWriteGuard};

/// One parameter's update: its configuration and constants, the parameter, its gradient and
/// the state tensors the rule replaces.
pub(crate) struct Update<'c, C: OptimizerConfig> {
    /// The parameter's group's configuration.
    pub(crate) config: &'c C,
    /// The update's constants.
    pub(crate) k: C::Consts,
    /// The parameter.
    pub(crate) param: Tensor,
    /// Its gradient.
    pub(crate) grad: Tensor,
    /// The state tensors, in the rule's order.
    pub(crate) slots: SmallVec<[Tensor; 3]>,
}

impl<C: OptimizerConfig> Update<'_, C> {
    /// Runs the rule on whole tensors, op by op (captured inside `kiln::compile`), and writes
    /// the results into the parameter and the state tensors.
    pub(crate) fn op_by_op(self) {
        let mut values: SmallVec<[Tensor; 3]> = self.slots.clone();
        let new_param = self.config.rule(&self.k, &self.param, &self.grad, &mut values);
        for (slot, value) in self.slots.iter().zip(&values) {
            if !value.is_same(slot) {
                slot.copy_(value);
            }
        }
        self.param.copy_(&new_param);
    }
}

/// The updates one step gives the one-pass kernel.
pub(crate) struct Batch<'c, C: OptimizerConfig> {
    updates: Vec<Update<'c, C>>,
    /// The storages the batch's tensors use (by address): each may appear once, since the
    /// kernel locks every one of them.
    storages: AHashSet<usize>,
}

impl<C: OptimizerConfig> Default for Batch<'_, C> {
    fn default() -> Self {
        Batch { updates: Vec::new(), storages: AHashSet::new() }
    }
}

/// The most state tensors a rule replaces (Adam with AMSGrad, centered RMSprop with momentum).
const MAX_SLOTS: usize = 3;

impl<'c, C: OptimizerConfig> Batch<'c, C> {
    /// Takes `update` when the kernel can run it, else gives it back: every tensor on the CPU,
    /// of the parameter's dtype (a float dtype) and shape, contiguous, and of a storage that no
    /// other tensor of the batch uses.
    pub(crate) fn push(&mut self, update: Update<'c, C>) -> Option<Update<'c, C>> {
        let p = &update.param;
        let tensors = || std::iter::once(p).chain([&update.grad]).chain(&update.slots);
        let fits = matches!(p.dtype(), DType::F32 | DType::F64 | DType::F16 | DType::BF16)
            && update.slots.len() <= MAX_SLOTS
            && tensors()
                .all(|t| t.device().is_cpu() && t.dtype() == p.dtype() && t.shape() == p.shape() && t.is_contiguous());
        if !fits {
            return Some(update);
        }
        let addresses: SmallVec<[usize; 5]> = tensors().map(storage_address).collect();
        let distinct = addresses.iter().enumerate().all(|(i, a)| !addresses[..i].contains(a));
        if !distinct || addresses.iter().any(|a| self.storages.contains(a)) {
            return Some(update);
        }
        self.storages.extend(addresses);
        self.updates.push(update);
        None
    }

    /// Runs the kernel: one launch per dtype over all the batch's parameters.
    pub(crate) fn run(self) {
        let mut by_dtype: [Vec<Update<'c, C>>; 4] = Default::default();
        for u in self.updates {
            let i = match u.param.dtype() {
                DType::F32 => 0,
                DType::F64 => 1,
                DType::BF16 => 2,
                _ => 3,
            };
            by_dtype[i].push(u);
        }
        let [f32s, f64s, bf16s, f16s] = by_dtype;
        run_typed::<C, f32>(&f32s);
        run_typed::<C, f64>(&f64s);
        run_typed::<C, bf16>(&bf16s);
        run_typed::<C, f16>(&f16s);
    }
}

/// An element type the kernel updates, and the number type the rule computes with on it.
trait KernelElement: StorageElement + Copy + Default {
    /// The number an element is computed as.
    type Number: LaneNumber;
    /// The element as a number.
    fn load(self) -> Self::Number;
    /// The number as an element.
    fn store(n: Self::Number) -> Self;
}

/// f32 and f64 compute in themselves.
macro_rules! native_element {
    ($($t:ty),*) => {$(
        impl KernelElement for $t {
            type Number = $t;
            #[inline(always)]
            fn load(self) -> $t {
                self
            }
            #[inline(always)]
            fn store(n: $t) -> $t {
                n
            }
        }
    )*};
}
native_element!(f32, f64);

/// f16 and bf16 compute as [`HalfNumber`]s.
macro_rules! half_element {
    ($($t:ty),*) => {$(
        impl KernelElement for $t {
            type Number = HalfNumber<$t>;
            #[inline(always)]
            fn load(self) -> HalfNumber<$t> {
                HalfNumber::new(self)
            }
            #[inline(always)]
            fn store(n: HalfNumber<$t>) -> $t {
                n.get()
            }
        }
    )*};
}
half_element!(f16, bf16);

/// The address that identifies a tensor's storage.
fn storage_address(t: &Tensor) -> usize {
    std::sync::Arc::as_ptr(t.cell()) as usize
}

/// One parameter's configuration, constants and pointers for the kernel.
struct Job<'c, C: OptimizerConfig> {
    config: &'c C,
    k: C::Consts,
    /// The first element of this job in the launch's index space.
    start: usize,
    len: usize,
    param: *mut u8,
    grad: *const u8,
    slots: [*mut u8; MAX_SLOTS],
    n_slots: usize,
}

/// The jobs, shared by the launch's threads.
struct Jobs<'c, C: OptimizerConfig>(Vec<Job<'c, C>>);

// SAFETY: the pointers address storages the launching thread holds locked (written ones
// exclusively) until every thread is done, and the threads write disjoint element ranges;
// configurations and constants are `Sync`.
unsafe impl<C: OptimizerConfig> Sync for Jobs<'_, C> {}

/// The kernel over the updates of element type `T`.
fn run_typed<C: OptimizerConfig, T: KernelElement>(updates: &[Update<'_, C>]) {
    if updates.is_empty() {
        return;
    }
    // Lock every storage in address order (a fixed order, so two threads locking some of the
    // same storages cannot wait on each other in a cycle): parameters and state for writing,
    // gradients for reading.
    let mut order: Vec<(usize, &Tensor, bool)> = Vec::new();
    for u in updates {
        order.push((storage_address(&u.param), &u.param, true));
        order.push((storage_address(&u.grad), &u.grad, false));
        order.extend(u.slots.iter().map(|s| (storage_address(s), s, true)));
    }
    order.sort_unstable_by_key(|o| o.0);
    enum Guard<'a> {
        Read(RwLockReadGuard<'a, Storage>),
        Write(RwLockWriteGuard<'a, Storage>),
    }
    let mut guards: Vec<(usize, Guard<'_>)> = order
        .iter()
        .map(|&(a, t, write)| (a, if write { Guard::Write(t.write_storage()) } else { Guard::Read(t.read_storage()) }))
        .collect();
    let mut pointer = |t: &Tensor| -> *mut u8 {
        let a = storage_address(t);
        let i = guards.binary_search_by_key(&a, |g| g.0).expect("every storage is locked");
        let offset = t.storage_offset() * std::mem::size_of::<T>();
        match &mut guards[i].1 {
            Guard::Write(g) => {
                let buf = g.as_cpu_mut().and_then(|s| s.as_buf_mut::<T>()).expect("checked: a CPU tensor of T");
                buf.as_mut_ptr().wrapping_byte_add(offset) as *mut u8
            }
            Guard::Read(g) => {
                let buf = g.as_cpu().and_then(|s| s.as_buf::<T>()).expect("checked: a CPU tensor of T");
                buf.as_ptr().wrapping_byte_add(offset) as *mut u8
            }
        }
    };
    let mut start = 0;
    let mut jobs = Vec::with_capacity(updates.len());
    for u in updates {
        let mut slots = [std::ptr::null_mut(); MAX_SLOTS];
        for (s, t) in slots.iter_mut().zip(&u.slots) {
            *s = pointer(t);
        }
        let len = u.param.numel();
        jobs.push(Job {
            config: u.config,
            k: u.k,
            start,
            len,
            param: pointer(&u.param),
            grad: pointer(&u.grad),
            slots,
            n_slots: u.slots.len(),
        });
        start += len;
    }
    let jobs = Jobs(jobs);
    for_ranges(start, GRAIN, |range| {
        let jobs = &jobs;
        let first = jobs.0.partition_point(|j| j.start + j.len <= range.start);
        for j in &jobs.0[first..] {
            if j.start >= range.end {
                break;
            }
            let from = range.start.max(j.start) - j.start;
            let to = range.end.min(j.start + j.len) - j.start;
            // SAFETY: `from..to` lies inside the job's tensors (each of `len` elements of T,
            // locked above); ranges of different threads are disjoint.
            unsafe { update_elements::<C, T>(j, from, to) };
        }
    });
    drop(guards);
}

/// The rule over elements `from..to` of one job, compiled for the widest vector unit present.
///
/// # Safety
/// `from..to` must lie inside every one of the job's tensors, which must stay valid and not be
/// touched by anyone else meanwhile.
unsafe fn update_elements<C: OptimizerConfig, T: KernelElement>(j: &Job<'_, C>, from: usize, to: usize) {
    let (config, n) = (j.config, to - from);
    let at = |p: *mut u8| (p as *mut T).wrapping_add(from);
    let (p, g) = (at(j.param), at(j.grad as *mut u8) as *const T);
    let s = j.slots.map(at);
    // SAFETY: (each arm) the caller's contract; the slices are disjoint (distinct storages,
    // checked by `Batch::push`), so `&mut` ones alias nothing.
    unsafe {
        match j.n_slots {
            0 => lanes::<C, T, 0>(config, &j.k, p, g, [], n),
            1 => lanes::<C, T, 1>(config, &j.k, p, g, [s[0]], n),
            2 => lanes::<C, T, 2>(config, &j.k, p, g, [s[0], s[1]], n),
            _ => lanes::<C, T, 3>(config, &j.k, p, g, s, n),
        }
    }
}

/// [`update_elements`] with `N` state tensors: the loop compiled for AVX-512, AVX2 or the
/// baseline, picked at run time.
///
/// # Safety
/// As [`update_elements`]: `n` elements from each pointer, disjoint.
unsafe fn lanes<C: OptimizerConfig, T: KernelElement, const N: usize>(
    config: &C,
    k: &C::Consts,
    p: *mut T,
    g: *const T,
    s: [*mut T; N],
    n: usize,
) {
    // SAFETY: the caller's contract.
    let (p, g) = unsafe { (std::slice::from_raw_parts_mut(p, n), std::slice::from_raw_parts(g, n)) };
    // SAFETY: the caller's contract.
    let s = s.map(|s| unsafe { std::slice::from_raw_parts_mut(s, n) });
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { lanes_avx512(config, k, p, g, s) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { lanes_avx2(config, k, p, g, s) };
        }
    }
    lanes_plain(config, k, p, g, s)
}

/// Elements per block: the rule runs on [`Lanes`] of this many numbers (so its branches on
/// hyperparameters are taken once per block, and each operation is a loop over a fixed-size
/// array that the compiler turns into vector instructions), the tail one number at a time.
/// Measured (`cargo bench --bench compile -- optimizers`): with 16, LLVM unrolled each
/// operation fully and vectorized the loop over blocks instead, with AVX-512 scatters (SGD with
/// momentum ran 7× slower than the memory allows); 64 keeps each operation a vector loop and
/// both SGD and Adam at the in-place update's speed; 128 and 256 are 5–45% slower (the
/// temporaries outgrow the registers).
const BLOCK: usize = 64;

/// The loop itself: the rule on blocks of [`BLOCK`] elements, then on each remaining element.
#[inline(always)]
fn lanes_plain<C: OptimizerConfig, T: KernelElement, const N: usize>(
    config: &C,
    k: &C::Consts,
    p: &mut [T],
    g: &[T],
    s: [&mut [T]; N],
) {
    let n = p.len();
    assert!(g.len() == n && s.iter().all(|s| s.len() == n));
    let block = |x: &[T]| -> Lanes<T::Number> {
        let x: &[T; BLOCK] = x.try_into().expect("a block");
        Lanes(x.map(T::load))
    };
    let full = n - n % BLOCK;
    for at in (0..full).step_by(BLOCK) {
        let r = at..at + BLOCK;
        let mut v: [Lanes<T::Number>; N] = std::array::from_fn(|j| block(&s[j][r.clone()]));
        let new = config.rule(k, &block(&p[r.clone()]), &block(&g[r.clone()]), &mut v);
        p[r.clone()].copy_from_slice(&new.0.map(T::store));
        for j in 0..N {
            s[j][r.clone()].copy_from_slice(&v[j].0.map(T::store));
        }
    }
    for i in full..n {
        let mut v: [T::Number; N] = std::array::from_fn(|j| s[j][i].load());
        p[i] = T::store(config.rule(k, &p[i].load(), &g[i].load(), &mut v));
        for j in 0..N {
            s[j][i] = T::store(v[j]);
        }
    }
}

/// [`BLOCK`] numbers on which the rule runs at once: each operation applies the numbers' own
/// (so the same bits), lane by lane.
#[derive(Clone, Copy)]
struct Lanes<T>([T; BLOCK]);

impl<T: Values + Copy> Lanes<T> {
    #[inline(always)]
    fn map(&self, f: impl Fn(&T) -> T) -> Self {
        Lanes(std::array::from_fn(|i| f(&self.0[i])))
    }

    #[inline(always)]
    fn zip(&self, o: &Self, f: impl Fn(&T, &T) -> T) -> Self {
        Lanes(std::array::from_fn(|i| f(&self.0[i], &o.0[i])))
    }

    #[inline(always)]
    fn zip3(&self, a: &Self, b: &Self, f: impl Fn(&T, &T, &T) -> T) -> Self {
        Lanes(std::array::from_fn(|i| f(&self.0[i], &a.0[i], &b.0[i])))
    }
}

/// A number the kernel computes with: whether its ops of several operations (`add_scaled`,
/// `addcmul`, `addcdiv`, `lerp`) round once per op (half numbers, run lane by lane) or once per
/// operation (f32 and f64, run as those operations over whole blocks, which vectorize).
trait LaneNumber: Values + Copy + Default {
    /// True when the composite ops must run lane by lane.
    const LANE_BY_LANE: bool;
}

impl LaneNumber for f32 {
    const LANE_BY_LANE: bool = false;
}

impl LaneNumber for f64 {
    const LANE_BY_LANE: bool = false;
}

impl<H: kiln_runtime::FloatElement<Compute = f32>> LaneNumber for HalfNumber<H> {
    const LANE_BY_LANE: bool = true;
}

/// `impl Values for Lanes<T>`: each method applies `T`'s lane by lane (the composite ops of
/// f32 and f64 as their operations over the block).
macro_rules! lane_wise {
    (binary: $($b:ident),*; scalar: $($s:ident),*; unary: $($u:ident),*) => {
        impl<T: LaneNumber> Values for Lanes<T> {
            $(
                #[inline(always)]
                fn $b(&self, o: &Self) -> Self {
                    self.zip(o, T::$b)
                }
            )*
            $(
                #[inline(always)]
                fn $s(&self, c: f64) -> Self {
                    self.map(|x| x.$s(c))
                }
            )*
            $(
                #[inline(always)]
                fn $u(&self) -> Self {
                    self.map(T::$u)
                }
            )*

            #[inline(always)]
            fn add_scaled(&self, o: &Self, alpha: f64) -> Self {
                if T::LANE_BY_LANE {
                    self.zip(o, |x, y| x.add_scaled(y, alpha))
                } else {
                    ops::add_scaled(self, o, alpha)
                }
            }

            #[inline(always)]
            fn addcmul(&self, a: &Self, b: &Self, value: f64) -> Self {
                if T::LANE_BY_LANE {
                    self.zip3(a, b, |x, a, b| x.addcmul(a, b, value))
                } else {
                    ops::addcmul(self, a, b, value)
                }
            }

            #[inline(always)]
            fn addcdiv(&self, a: &Self, b: &Self, value: f64) -> Self {
                if T::LANE_BY_LANE {
                    self.zip3(a, b, |x, a, b| x.addcdiv(a, b, value))
                } else {
                    ops::addcdiv(self, a, b, value)
                }
            }

            #[inline(always)]
            fn lerp(&self, end: &Self, w: f64) -> Self {
                if T::LANE_BY_LANE {
                    self.zip(end, |x, e| x.lerp(e, w))
                } else {
                    ops::lerp(self, end, w)
                }
            }
        }
    };
}
lane_wise!(binary: add, sub, mul, div, maximum; scalar: add_s, mul_s, div_s; unary: sqrt, neg);

/// [`lanes_plain`] compiled with the target features named (no FMA: the rule's rounding stays
/// the eager ops').
macro_rules! lanes_for {
    ($($name:ident: $features:literal),*) => {$(
        #[doc = concat!("[`lanes_plain`] with `", $features, "`.")]
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name<C: OptimizerConfig, T: KernelElement, const N: usize>(
            config: &C,
            k: &C::Consts,
            p: &mut [T],
            g: &[T],
            s: [&mut [T]; N],
        ) {
            lanes_plain(config, k, p, g, s)
        }
    )*};
}
lanes_for!(lanes_avx512: "avx512f,avx2", lanes_avx2: "avx2");
