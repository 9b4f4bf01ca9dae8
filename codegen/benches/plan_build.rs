//! Plan-build time (a plan-cache miss) of the codegen passes on captured-graph shapes of
//! training steps: common subexpressions and liveness, fusion, scheduling and lowering every
//! group, without compiling the kernels (the back ends' cost, cached per kernel). The graphs
//! are built here the way `kiln::compile` captures them: MLPs' training steps with Adam (the
//! forward, the backward's products and masks, one `m`/`v`/`p` update per parameter), one
//! with layer norms (reductions with stages and epilogues), and random DAGs of the size of a
//! large step. `cargo bench -p kiln-codegen --bench plan_build [-- WORD]` prints a Markdown table
//! (of the graphs whose name holds WORD).

use kiln_codegen::ir::{Graph, Node, NodeId, NodeKind, Phase, Use};
use kiln_codegen::passes::{self, StepKind};
use kiln_runtime::op_kind::{BinaryOp, CmpOp, ReduceOp, UnaryOp};
use kiln_runtime::{DType, Layout};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A graph under construction: each node with the shape its readers see.
struct Builder {
    g: Graph,
    /// Per node, the logical shape of its value (an input's storage is flat in its node).
    shapes: Vec<Vec<usize>>,
    phase: Phase,
    inputs: u32,
    scalars: u32,
    closures: u32,
}

impl Builder {
    fn new() -> Builder {
        Builder { g: Graph::default(), shapes: Vec::new(), phase: Phase::Forward, inputs: 0, scalars: 0, closures: 0 }
    }

    fn node(&mut self, kind: NodeKind, shape: &[usize], stored: &[usize], reads: Vec<Use>) -> NodeId {
        let node = Node { kind, shape: stored.into(), dtype: DType::F32, reads: reads.into_iter().collect() };
        self.shapes.push(shape.to_vec());
        self.g.push(node, self.phase)
    }

    /// A read of `x` broadcast to `shape`.
    fn read(&self, x: NodeId, shape: &[usize]) -> Use {
        let layout = Layout::contiguous(&self.shapes[x as usize]).broadcast_to(shape).expect("broadcasts");
        Use { node: x, layout }
    }

    /// A read of the 2-D `x` transposed.
    fn read_t(&self, x: NodeId) -> Use {
        Use { node: x, layout: Layout::contiguous(&self.shapes[x as usize]).transpose(0, 1) }
    }

    fn input(&mut self, shape: &[usize]) -> NodeId {
        let len = shape.iter().product();
        self.inputs += 1;
        self.node(NodeKind::Input { slot: self.inputs - 1, len }, shape, &[len], vec![])
    }

    fn scalar(&mut self) -> NodeId {
        self.scalars += 1;
        self.node(NodeKind::Scalar { slot: self.scalars - 1 }, &[], &[], vec![])
    }

    /// A node of kind `kind` reading `xs` broadcast to their common shape.
    fn elementwise(&mut self, kind: NodeKind, xs: &[NodeId]) -> NodeId {
        let rank = xs.iter().map(|&x| self.shapes[x as usize].len()).max().unwrap_or(0);
        let mut shape = vec![1; rank];
        for &x in xs {
            let s = &self.shapes[x as usize];
            for (d, &n) in s.iter().enumerate() {
                let o = &mut shape[rank - s.len() + d];
                *o = (*o).max(n);
            }
        }
        let reads = xs.iter().map(|&x| self.read(x, &shape)).collect();
        self.node(kind, &shape, &shape, reads)
    }

    fn unary(&mut self, op: UnaryOp, x: NodeId) -> NodeId {
        self.elementwise(NodeKind::Unary(op), &[x])
    }

    fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> NodeId {
        self.elementwise(NodeKind::Binary(op), &[a, b])
    }

    fn cmp(&mut self, op: CmpOp, a: NodeId, b: NodeId) -> NodeId {
        let id = self.elementwise(NodeKind::Cmp(op), &[a, b]);
        self.g.nodes[id as usize].dtype = DType::Bool;
        id
    }

    fn where_cond(&mut self, c: NodeId, a: NodeId, b: NodeId) -> NodeId {
        self.elementwise(NodeKind::Where, &[c, a, b])
    }

    fn opaque(&mut self, name: &'static str, shape: &[usize], reads: Vec<Use>) -> NodeId {
        self.closures += 1;
        self.node(NodeKind::Opaque { name, key: name.len() as u64, index: self.closures - 1 }, shape, shape, reads)
    }

    /// `a @ b`, each read transposed when its flag (`ta`, `tb`) says.
    fn matmul(&mut self, a: NodeId, ta: bool, b: NodeId, tb: bool) -> NodeId {
        let dims = |s: &[usize], t: bool| if t { (s[1], s[0]) } else { (s[0], s[1]) };
        let (m, _) = dims(&self.shapes[a as usize], ta);
        let (_, n) = dims(&self.shapes[b as usize], tb);
        let ra = if ta { self.read_t(a) } else { self.read(a, &self.shapes[a as usize].clone()) };
        let rb = if tb { self.read_t(b) } else { self.read(b, &self.shapes[b as usize].clone()) };
        self.opaque("matmul", &[m, n], vec![ra, rb])
    }

    /// A reduction of the 2-D `x` over dim `dim`, keeping it as size 1.
    fn reduce(&mut self, op: ReduceOp, x: NodeId, dim: usize, divide: Option<i64>) -> NodeId {
        let input = self.shapes[x as usize].clone();
        let mut shape = input.clone();
        shape[dim] = 1;
        self.closures += 1;
        let kind = NodeKind::Reduce { op, dims: 1 << dim, divide, index: self.closures - 1 };
        let r = self.read(x, &input);
        self.node(kind, &shape, &shape, vec![r])
    }

    /// The input `storage`'s next value `value` (an in-place update's assignment).
    fn assign(&mut self, storage: NodeId, value: NodeId) -> NodeId {
        let len = self.g.node(storage).shape[0];
        let shape = self.shapes[storage as usize].clone();
        let region = Layout::contiguous(&shape);
        let reads = vec![Use { node: storage, layout: Layout::contiguous(&[len]) }, self.read(value, &shape)];
        let id = self.node(NodeKind::Assign { len, region }, &[len], &[len], reads);
        self.g.outputs.push(id);
        id
    }
}

/// One Adam update of parameter `p` (an input) with gradient `grad`, as `optim::Adam` records
/// it: `m`, `v` and `p` written in place.
fn adam(b: &mut Builder, p: NodeId, grad: NodeId, s: &[NodeId; 6]) {
    let shape = b.shapes[p as usize].clone();
    let (m, v) = (b.input(&shape), b.input(&shape));
    let m1 = b.binary(BinaryOp::Mul, m, s[0]);
    let g1 = b.binary(BinaryOp::Mul, grad, s[1]);
    let m2 = b.binary(BinaryOp::Add, m1, g1);
    b.assign(m, m2);
    let v1 = b.binary(BinaryOp::Mul, v, s[2]);
    let gg = b.binary(BinaryOp::Mul, grad, grad);
    let gg = b.binary(BinaryOp::Mul, gg, s[3]);
    let v2 = b.binary(BinaryOp::Add, v1, gg);
    b.assign(v, v2);
    let d = b.unary(UnaryOp::Sqrt, v2);
    let d = b.binary(BinaryOp::Div, d, s[4]);
    let d = b.binary(BinaryOp::Add, d, s[5]);
    let u = b.binary(BinaryOp::Div, m2, d);
    let u = b.binary(BinaryOp::Mul, u, s[0]);
    let p2 = b.binary(BinaryOp::Sub, p, u);
    b.assign(p, p2);
}

/// Layer norm over the rows of `x` (mean, variance, normalisation).
fn layer_norm(b: &mut Builder, x: NodeId, eps: NodeId) -> NodeId {
    let mean = b.reduce(ReduceOp::Sum, x, 1, Some(0));
    let c = b.binary(BinaryOp::Sub, x, mean);
    let sq = b.binary(BinaryOp::Mul, c, c);
    let var = b.reduce(ReduceOp::Sum, sq, 1, Some(0));
    let ve = b.binary(BinaryOp::Add, var, eps);
    let r = b.unary(UnaryOp::Rsqrt, ve);
    b.binary(BinaryOp::Mul, c, r)
}

/// A training step of an MLP with widths `widths` (ReLU between layers, layer norm before each
/// ReLU when `norm`), cross-entropy loss and Adam, on a batch of `batch`.
fn mlp_step(widths: &[usize], batch: usize, norm: bool) -> Graph {
    let mut b = Builder::new();
    let x = b.input(&[batch, widths[0]]);
    let target = b.input(&[batch, 1]);
    let classes = b.input(&[1, *widths.last().expect("layers")]);
    let eps = b.scalar();
    let params: Vec<(NodeId, NodeId)> =
        widths.windows(2).map(|w| (b.input(&[w[1], w[0]]), b.input(&[1, w[1]]))).collect();
    // Forward.
    let mut acts = vec![x];
    let mut pre = Vec::new();
    let mut h = x;
    for (i, &(w, bias)) in params.iter().enumerate() {
        let z = b.matmul(h, false, w, true);
        let z = b.binary(BinaryOp::Add, z, bias);
        if i + 1 < params.len() {
            let z = if norm { layer_norm(&mut b, z, eps) } else { z };
            pre.push(z);
            let zero = b.scalar();
            h = b.binary(BinaryOp::Maximum, z, zero);
            acts.push(h);
        } else {
            h = z;
        }
    }
    // Cross-entropy: log_softmax, the target's pick, the mean.
    let max = b.reduce(ReduceOp::Max, h, 1, None);
    let shifted = b.binary(BinaryOp::Sub, h, max);
    let e = b.unary(UnaryOp::Exp, shifted);
    let sum = b.reduce(ReduceOp::Sum, e, 1, None);
    let lse = b.unary(UnaryOp::Log, sum);
    let logp = b.binary(BinaryOp::Sub, shifted, lse);
    let hit = b.cmp(CmpOp::Eq, classes, target);
    let zero = b.scalar();
    let picked = b.where_cond(hit, logp, zero);
    let nll = b.reduce(ReduceOp::Sum, picked, 1, None);
    let loss = b.reduce(ReduceOp::Sum, nll, 0, Some(0));
    b.g.outputs.push(loss);
    // Backward: softmax minus the one-hot, then each layer's products, bias sums and masks.
    b.phase = Phase::Backward;
    let p = b.unary(UnaryOp::Exp, logp);
    let scale = b.scalar();
    let one = b.where_cond(hit, scale, zero);
    let gz = b.binary(BinaryOp::Sub, p, one);
    let mut g = b.binary(BinaryOp::Mul, gz, scale);
    let mut grads = Vec::new();
    for i in (0..params.len()).rev() {
        let (w, _) = params[i];
        let gw = b.matmul(g, true, acts[i], false);
        let gb = b.reduce(ReduceOp::Sum, g, 0, None);
        grads.push((gw, gb));
        if i > 0 {
            let gx = b.matmul(g, false, w, false);
            let zero = b.scalar();
            let mask = b.cmp(CmpOp::Gt, pre[i - 1], zero);
            let gx = b.where_cond(mask, gx, zero);
            g = if norm {
                // The layer norm's backward: two row sums and the normalised combination.
                let r = b.reduce(ReduceOp::Sum, gx, 1, Some(0));
                let xg = b.binary(BinaryOp::Mul, gx, pre[i - 1]);
                let r2 = b.reduce(ReduceOp::Sum, xg, 1, Some(0));
                let t = b.binary(BinaryOp::Sub, gx, r);
                let t2 = b.binary(BinaryOp::Mul, pre[i - 1], r2);
                b.binary(BinaryOp::Sub, t, t2)
            } else {
                gx
            };
        }
    }
    // Adam.
    b.phase = Phase::Update;
    let s: [NodeId; 6] = std::array::from_fn(|_| b.scalar());
    for (i, (gw, gb)) in grads.into_iter().rev().enumerate() {
        let (w, bias) = params[i];
        adam(&mut b, w, gw, &s);
        adam(&mut b, bias, gb, &s);
    }
    b.g
}

/// A random DAG of `n` elementwise and opaque nodes over two shapes with transposed reads,
/// reductions and broadcasts (the generator of fusion's property tests, scaled up).
fn random_dag(n: usize, mut seed: u64) -> Graph {
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let mut b = Builder::new();
    let shapes = [[16usize, 16], [8, 32]];
    let inputs = [b.input(&shapes[0]), b.input(&shapes[1])];
    let mut pool: [Vec<NodeId>; 2] = [vec![inputs[0]], vec![inputs[1]]];
    while b.g.nodes.len() < n {
        let si = next(2) as usize;
        let pick = |next: &mut dyn FnMut(u64) -> u64, pool: &[NodeId]| {
            // Mostly recent values, as a trace reads them.
            let back = (next(16) as usize).min(pool.len() - 1);
            pool[pool.len() - 1 - back]
        };
        let (a, c) = (pick(&mut next, &pool[si]), pick(&mut next, &pool[si]));
        let id = match next(10) {
            0 => b.opaque("op", &shapes[si], vec![b.read(a, &shapes[si]), b.read(c, &shapes[si])]),
            1 if si == 0 => {
                let r = b.read_t(a);
                b.node(NodeKind::Unary(UnaryOp::Neg), &shapes[0], &shapes[0], vec![r])
            }
            2 => {
                let r = b.reduce(ReduceOp::Sum, a, 1, None);
                b.binary(BinaryOp::Sub, c, r)
            }
            3 => b.unary(UnaryOp::Exp, a),
            _ => b.binary(BinaryOp::Add, a, c),
        };
        pool[si].push(id);
    }
    b.g.outputs.extend(pool.iter().flat_map(|p| p.iter().rev().take(8)));
    b.g
}

/// The time of each phase of one plan build of `g`: CSE and liveness, fusion, the schedule,
/// lowering.
fn build(g: &Graph) -> [Duration; 4] {
    let mut g = g.clone();
    let t0 = Instant::now();
    passes::eliminate_common_subexpressions(&mut g);
    let live = passes::live_nodes(&g);
    let t1 = Instant::now();
    let fusion = passes::fuse(&g, &live);
    let t2 = Instant::now();
    let schedule = passes::schedule(&g, &live, &fusion);
    let t3 = Instant::now();
    for s in &schedule.steps {
        if let StepKind::Group(gid) = *s {
            let members = &fusion.groups[gid as usize];
            black_box(passes::lower_group(&g, members, fusion.parts[gid as usize].as_ref(), |m| {
                fusion.materialized[m as usize]
            }));
        }
    }
    let t4 = Instant::now();
    black_box((&fusion, &schedule));
    [t1 - t0, t2 - t1, t3 - t2, t4 - t3]
}

fn main() {
    let cases: Vec<(&str, Graph)> = vec![
        ("MLP 784-512-512-10 + Adam", mlp_step(&[784, 512, 512, 10], 128, false)),
        (
            "MLP 16×256 layers + Adam",
            mlp_step(&[784; 1].iter().chain(&[256; 16]).chain(&[10]).copied().collect::<Vec<_>>(), 64, false),
        ),
        (
            "MLP 8×256 with layer norm + Adam",
            mlp_step(&[784; 1].iter().chain(&[256; 8]).chain(&[10]).copied().collect::<Vec<_>>(), 64, true),
        ),
        ("random DAG, 1,000 nodes", random_dag(1_000, 0x2545_f491_4f6c_dd1d)),
        ("random DAG, 4,000 nodes", random_dag(4_000, 0x9e37_79b9_7f4a_7c15)),
    ];
    println!("| graph | nodes | steps | CSE + live | fuse | schedule | lower | total |");
    println!("|---|---|---|---|---|---|---|---|");
    // `cargo bench --bench plan_build -- WORD`: only the graphs whose name holds WORD.
    let words: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    for (name, g) in
        cases.iter().filter(|(name, _)| words.is_empty() || words.iter().any(|w| name.contains(w.as_str())))
    {
        let steps = {
            let mut g = g.clone();
            passes::eliminate_common_subexpressions(&mut g);
            let live = passes::live_nodes(&g);
            passes::schedule(&g, &live, &passes::fuse(&g, &live)).steps.len()
        };
        // Best of rounds of at least 0.2 s each, per phase.
        let mut best = [f64::INFINITY; 4];
        let mut best_total = f64::INFINITY;
        for _ in 0..ROUNDS {
            let started = Instant::now();
            let mut sum = [Duration::ZERO; 4];
            let mut runs = 0u32;
            while started.elapsed() < Duration::from_millis(200) {
                for (s, t) in sum.iter_mut().zip(build(g)) {
                    *s += t;
                }
                runs += 1;
            }
            let per: Vec<f64> = sum.iter().map(|s| s.as_secs_f64() / runs as f64).collect();
            for (b, p) in best.iter_mut().zip(&per) {
                *b = b.min(*p);
            }
            best_total = best_total.min(per.iter().sum());
        }
        let us = |s: f64| format!("{:.0} µs", s * 1e6);
        println!(
            "| {name} | {} | {steps} | {} | {} | {} | {} | {} |",
            g.nodes.len(),
            us(best[0]),
            us(best[1]),
            us(best[2]),
            us(best[3]),
            us(best_total)
        );
    }
}

/// Timed rounds per graph (the best is kept, against other work on the machine).
const ROUNDS: usize = 7;
