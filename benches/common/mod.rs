//! Timing shared by the benches.

use std::hint::black_box;
use std::time::Instant;

/// Median seconds of `reps` runs of `f`, after two warm-up runs.
pub fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t[reps / 2]
}

/// Median seconds of each of `fs` over `reps` rounds, after two warm-up rounds; each round runs
/// every `f` once, in turn, so a slow stretch of the machine (other load, a VM's steal time)
/// falls on all of them alike rather than on whichever was being timed then. Each round starts
/// one function later than the one before, so no `f` always follows the same one (a function
/// that runs right after a large copy pays for writing back the copy's dirty cache lines: a
/// fixed order once made compiled layer norm look 0.8x eager when the two take the same time).
#[allow(dead_code)]
pub fn time_interleaved(reps: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    let n = fs.len();
    let mut t = vec![Vec::with_capacity(reps); n];
    for round in 0..reps + 2 {
        for k in 0..n {
            let i = (round + k) % n;
            let s = Instant::now();
            (fs[i])();
            if round >= 2 {
                t[i].push(s.elapsed().as_secs_f64());
            }
        }
    }
    t.into_iter()
        .map(|mut t| {
            t.sort_by(|a, b| a.partial_cmp(b).unwrap());
            t[reps / 2]
        })
        .collect()
}

/// Row-major f32 operands for a list of matrix products `(m, k, n)`, each run through the gemm
/// crate with the faster of its two threading modes for that product: split across kiln's
/// threads, or on one thread (measured when the operands are made; small products run slower
/// split). This is the best each product does as a library call on its own.
#[allow(dead_code)]
pub struct GemmProducts {
    products: Vec<Product>,
}

/// One product's operands and the threading it runs with.
struct Product {
    dims: (usize, usize, usize),
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    par: gemm::Parallelism,
}

impl Product {
    fn run(&mut self) {
        let (m, k, n) = self.dims;
        // SAFETY: a is m*k, b is k*n, c is m*n, all row-major and alive for the call; c is
        // not aliased.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                self.c.as_mut_ptr(),
                1,
                n as isize,
                false,
                self.a.as_ptr(),
                1,
                k as isize,
                self.b.as_ptr(),
                1,
                n as isize,
                0.0f32,
                1.0f32,
                false,
                false,
                false,
                self.par,
            );
        }
        black_box(&self.c);
    }
}

#[allow(dead_code)]
impl GemmProducts {
    /// Fresh operands for each product, and its faster threading mode.
    pub fn new(products: &[(usize, usize, usize)]) -> GemmProducts {
        let threads = kiln::get_num_threads();
        let products = products
            .iter()
            .map(|&(m, k, n)| {
                let mut p = Product {
                    dims: (m, k, n),
                    a: vec![0.5f32; m * k],
                    b: vec![0.25f32; k * n],
                    c: vec![0.0f32; m * n],
                    par: gemm::Parallelism::None,
                };
                if threads > 1 {
                    let alone = time(7, || p.run());
                    p.par = gemm::Parallelism::Rayon(threads);
                    if time(7, || p.run()) >= alone {
                        p.par = gemm::Parallelism::None;
                    }
                }
                p
            })
            .collect();
        GemmProducts { products }
    }

    /// Runs every product once.
    pub fn run(&mut self) {
        self.products.iter_mut().for_each(Product::run);
    }
}

/// One gemm `m x k` by `k x n` (row-major, fresh operands) timed with gemm's threading: seconds.
#[allow(dead_code)]
pub fn gemm_secs(m: usize, k: usize, n: usize) -> f64 {
    let mut g = GemmProducts::new(&[(m, k, n)]);
    time(9, || g.run())
}

/// Source and destination of the memcpy baseline: `elems` f32 values, copied on one thread or
/// across the pool.
#[allow(dead_code)]
pub struct Memcpy {
    src: Vec<f32>,
    dst: Vec<f32>,
}

#[allow(dead_code)]
impl Memcpy {
    /// Buffers for a copy of `elems` f32 values.
    pub fn new(elems: usize) -> Memcpy {
        Memcpy { src: vec![1.0f32; elems], dst: vec![0.0f32; elems] }
    }

    /// One single-threaded copy.
    pub fn single(&mut self) {
        self.dst.copy_from_slice(black_box(&self.src));
        black_box(&self.dst);
    }

    /// One copy split across kiln's pool.
    pub fn parallel(&mut self) {
        kiln_runtime::cpu::parallel::copy(&mut self.dst, black_box(&self.src));
        black_box(&self.dst);
    }
}

/// The faster of a single-threaded and a pool-parallel copy of `elems` f32 values: the
/// memcpy baseline (seconds).
#[allow(dead_code)]
pub fn memcpy_secs(elems: usize) -> f64 {
    let mut m = Memcpy::new(elems);
    time(9, || m.single()).min(time(9, || m.parallel()))
}

/// Median seconds of `f` and of the memcpy baseline of `elems` f32 values (the faster of its
/// single-threaded and parallel forms), timed interleaved round by round over `reps` rounds.
#[allow(dead_code)]
pub fn time_against_memcpy(reps: usize, elems: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut m = Memcpy::new(elems);
    let m = std::cell::RefCell::new(&mut m);
    let t = time_interleaved(reps, &mut [&mut f, &mut || m.borrow_mut().single(), &mut || m.borrow_mut().parallel()]);
    (t[0], t[1].min(t[2]))
}

/// The in-place update baseline: one pass that reads f32 arrays p, g and one or two state
/// arrays (m, and v when there are two) and writes p and the state back in place, with trivial
/// arithmetic: the traffic of an optimizer's one-pass update (20 bytes per element for SGD
/// with momentum, 28 for Adam) at the machine's speed.
#[allow(dead_code)]
pub struct InPlaceUpdate {
    p: Vec<f32>,
    g: Vec<f32>,
    m: Vec<f32>,
    /// Empty with one state array.
    v: Vec<f32>,
}

#[allow(dead_code)]
impl InPlaceUpdate {
    /// Arrays of `elems` values, with `states` (1 or 2) state arrays.
    pub fn new(elems: usize, states: usize) -> InPlaceUpdate {
        assert!(matches!(states, 1 | 2), "1 or 2 state arrays, not {states}");
        let v = if states == 2 { vec![0.0; elems] } else { Vec::new() };
        InPlaceUpdate { p: vec![0.0; elems], g: vec![1e-30; elems], m: vec![0.0; elems], v }
    }

    /// The bytes one element's update moves.
    pub fn bytes_per_element(&self) -> usize {
        if self.v.is_empty() {
            20
        } else {
            28
        }
    }

    /// One pass, split across kiln's pool as its kernels split their work.
    pub fn run(&mut self) {
        let grain = kiln_runtime::cpu::parallel::GRAIN;
        let g = black_box(&self.g[..]);
        let (mut p, mut m, mut v) = (&mut self.p[..], &mut self.m[..], &mut self.v[..]);
        let mut chunks = Vec::new();
        while !p.is_empty() {
            let n = p.len().min(grain);
            let (p0, p1) = p.split_at_mut(n);
            let (m0, m1) = m.split_at_mut(n);
            let (v0, v1) = v.split_at_mut(n.min(v.len()));
            chunks.push((p0, m0, v0));
            (p, m, v) = (p1, m1, v1);
        }
        kiln_runtime::cpu::parallel::pool().install(|| {
            use rayon::prelude::*;
            chunks.into_par_iter().enumerate().for_each(|(c, (p, m, v))| {
                let g = &g[c * grain..c * grain + p.len()];
                if v.is_empty() {
                    for i in 0..p.len() {
                        m[i] += g[i];
                        p[i] += m[i];
                    }
                } else {
                    for i in 0..p.len() {
                        m[i] += g[i];
                        v[i] += g[i];
                        p[i] += m[i] - v[i];
                    }
                }
            })
        });
        black_box(&self.p);
    }
}

/// The products `(m, k, n)` of a stride-1 unpadded convolution with `k`×`k` kernels from `c_in`
/// to `c_out` channels whose output is `out_hw`×`out_hw`, over a batch of `batch`, as im2col
/// makes them: forward, weight gradient, and (unless `first`: the data needs none) input
/// gradient.
#[allow(dead_code)]
pub fn conv_products(
    batch: usize,
    c_in: usize,
    c_out: usize,
    k: usize,
    out_hw: usize,
    first: bool,
) -> Vec<(usize, usize, usize)> {
    let (rows, cols) = (c_in * k * k, batch * out_hw * out_hw);
    let mut p = vec![(c_out, rows, cols), (c_out, cols, rows)];
    if !first {
        p.push((rows, c_out, cols));
    }
    p
}
