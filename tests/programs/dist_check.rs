//! The program `tests/distributed.rs` runs under `mpirun -np 2` (a `[[bin]]` of the `kiln`
//! package so that the test finds it through `CARGO_BIN_EXE_kiln-dist-check`). One mode per
//! run, the first argument:
//!
//! - `collectives`: every collective on known values, every dtype, views, mismatches.
//! - `chunks`: collectives split into pieces (run with `KILN_DIST_MAX_CHUNK=3`): values that
//!   differ per element and rank land where they belong.
//! - `train`: DDP training; every step both ranks must end with bit-identical parameters, equal
//!   within 1e-5 to one process training on the concatenated batch (also with `no_sync`).
//! - `unused`: DDP with `find_unused_parameters` on a net with a branch only rank 0 uses and
//!   one no rank uses: bit-identical parameters, equal to one process, `.grad` of the branch no
//!   rank used stays `None`.
//! - `unused-error`: the same net without `find_unused_parameters`: backward fails at once on
//!   both ranks, naming the parameters each got no gradient for, and the ranks stay in step.
//! - `stall`: rank 1 stops taking part; rank 0's all-reduce must fail with the timeout error.
//! - `ddp-stall`: rank 1 stops before backward; rank 0's backward must fail with the timeout.
//! - `die`: rank 1 kills itself mid-run; the job must end within the timeout.
//!
//! Each rank prints `rank R: MODE ok` when its checks pass, and errors on stderr otherwise.

use kiln::data::{DistributedSampler, Sampler};
use kiln::distributed::{self as dist, Backend, InitOptions, ReduceOp};
use kiln::nn::parallel::{DdpOptions, DistributedDataParallel};
use kiln::prelude::*;
use std::time::Duration;

/// The collective timeout of every mode (the test checks the failures come within it).
const TIMEOUT: Duration = Duration::from_secs(3);

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    kiln::set_num_threads(1);
    dist::init_process_group(Backend::Mpi, InitOptions::with_timeout(TIMEOUT)).expect("init_process_group");
    let rank = dist::rank().unwrap();
    let result = match mode.as_str() {
        "collectives" => collectives(rank),
        "chunks" => chunks(rank),
        "train" => train(rank),
        "train-compiled" => train_compiled(rank),
        "unused" => unused(rank),
        "unused-error" => unused_error(rank),
        "stall" => stall(rank),
        "ddp-stall" => ddp_stall(rank),
        "die" => die(rank),
        other => Err(format!("unknown mode {other:?}")),
    };
    match result {
        Ok(()) => {
            println!("rank {rank}: {mode} ok");
            dist::destroy_process_group().expect("destroy_process_group");
        }
        Err(e) => {
            eprintln!("rank {rank}: {mode} FAILED: {e}");
            std::process::exit(1);
        }
    }
}

/// `Err(message)` unless `cond`.
fn ensure(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

fn collectives(rank: usize) -> Result<(), String> {
    let ws = dist::world_size().unwrap();
    ensure(ws == 2, || format!("world size {ws}"))?;
    let r = rank as f64;
    // Sum on every dtype: rank r holds r + 1 (Bool: rank 0 false, rank 1 true).
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8] {
        let t = Tensor::full([5], r + 1.0).to_dtype(dtype);
        dist::all_reduce(&t, ReduceOp::Sum).map_err(|e| e.to_string())?;
        let got: Vec<f64> = t.to_dtype(DType::F64).to_vec();
        ensure(got == vec![3.0; 5] && t.dtype() == dtype, || format!("Sum on {dtype}: {got:?}"))?;
    }
    let b = Tensor::full([3], r).to_dtype(DType::Bool);
    dist::all_reduce(&b, ReduceOp::Sum).map_err(|e| e.to_string())?;
    ensure(b.to_vec::<bool>() == vec![true; 3], || format!("Bool Sum (or): {b}"))?;
    let b = Tensor::full([3], r).to_dtype(DType::Bool);
    dist::all_reduce(&b, ReduceOp::Min).map_err(|e| e.to_string())?;
    ensure(b.to_vec::<bool>() == vec![false; 3], || format!("Bool Min (and): {b}"))?;
    // Max, Min, Product, Avg with known results.
    let cases = [(ReduceOp::Max, 2.0), (ReduceOp::Min, 1.0), (ReduceOp::Product, 2.0), (ReduceOp::Avg, 1.5)];
    for (op, want) in cases {
        let t = Tensor::full([4], r + 1.0);
        dist::all_reduce(&t, op).map_err(|e| e.to_string())?;
        ensure(t.to_vec::<f32>() == vec![want as f32; 4], || format!("{op:?}: {t}"))?;
    }
    let t = Tensor::from_vec(vec![7i64 * (rank as i64 + 1), -(rank as i64)], [2]);
    dist::all_reduce(&t, ReduceOp::Max).map_err(|e| e.to_string())?;
    ensure(t.to_vec::<i64>() == vec![14, 0], || format!("I64 Max: {t}"))?;
    // A non-contiguous view and a narrow view of a larger storage are reduced in place.
    let base = Tensor::arange_step(0.0, 6.0, 1.0).reshape([2, 3]).mul(r + 1.0);
    let tr = base.transpose(0, 1);
    dist::all_reduce(&tr, ReduceOp::Sum).map_err(|e| e.to_string())?;
    ensure(base.to_vec::<f32>() == vec![0.0, 3.0, 6.0, 9.0, 12.0, 15.0], || format!("transposed view: {base}"))?;
    let big = Tensor::full([6], r + 1.0);
    dist::all_reduce(&big.narrow(0, 2, 2), ReduceOp::Sum).map_err(|e| e.to_string())?;
    ensure(
        big.to_vec::<f32>() == vec![r as f32 + 1.0, r as f32 + 1.0, 3.0, 3.0, r as f32 + 1.0, r as f32 + 1.0],
        || format!("narrow view: {big}"),
    )?;
    // A large tensor: 2^20 elements.
    let t = Tensor::full([1 << 20], r + 0.5);
    dist::all_reduce(&t, ReduceOp::Sum).map_err(|e| e.to_string())?;
    ensure(t.sum().item::<f32>() as f64 == 2.0 * (1 << 20) as f64, || "2^20-element sum".into())?;
    // Broadcast from rank 1, in several dtypes.
    for dtype in [DType::F32, DType::BF16, DType::I32] {
        let t = Tensor::arange_step(0.0, 4.0, 1.0).mul(r + 1.0).to_dtype(dtype);
        dist::broadcast(&t, 1).map_err(|e| e.to_string())?;
        ensure(t.to_dtype(DType::F64).to_vec::<f64>() == vec![0.0, 2.0, 4.0, 6.0], || {
            format!("broadcast {dtype}: {t}")
        })?;
    }
    // all_gather: rank r contributes [r, r, r] as [3]; outputs are [3] each.
    let outs = [Tensor::zeros([3]), Tensor::zeros([3])];
    dist::all_gather(&outs, &Tensor::full([3], r)).map_err(|e| e.to_string())?;
    ensure(outs[0].to_vec::<f32>() == vec![0.0; 3] && outs[1].to_vec::<f32>() == vec![1.0; 3], || {
        format!("all_gather: {} {}", outs[0], outs[1])
    })?;
    // reduce_scatter: input i of rank r is (10 i + r); rank r gets Σ over ranks of input r.
    let inputs: Vec<Tensor> = (0..2).map(|i| Tensor::full([2], 10.0 * i as f64 + r)).collect();
    let out = Tensor::zeros([2]);
    dist::reduce_scatter(&out, &inputs, ReduceOp::Sum).map_err(|e| e.to_string())?;
    let want = 2.0 * 10.0 * r as f32 + 1.0;
    ensure(out.to_vec::<f32>() == vec![want; 2], || format!("reduce_scatter: {out}"))?;
    dist::barrier().map_err(|e| e.to_string())?;
    // Ranks that disagree fail together with a clear error, and the group stays usable.
    let t = Tensor::zeros([3 + rank]);
    let e = dist::all_reduce(&t, ReduceOp::Sum).err().ok_or("mismatched sizes did not fail")?;
    ensure(e.kind == kiln::ErrorKind::Distributed && e.message.contains("between 3 and 4 elements"), || {
        format!("mismatch error: {e}")
    })?;
    let t = if rank == 0 { Tensor::zeros([3]) } else { Tensor::zeros([3]).to_dtype(DType::F64) };
    let e = dist::all_reduce(&t, ReduceOp::Sum).err().ok_or("mismatched dtypes did not fail")?;
    ensure(e.message.contains("different dtypes"), || format!("dtype mismatch error: {e}"))?;
    let e = dist::all_reduce(&Tensor::zeros([2]).to_dtype(DType::I64), ReduceOp::Avg)
        .err()
        .ok_or("Avg on I64 did not fail")?;
    ensure(e.message.contains("Avg needs a floating-point tensor"), || format!("Avg error: {e}"))?;
    let t = Tensor::ones([2]);
    dist::all_reduce(&t, ReduceOp::Sum).map_err(|e| e.to_string())?;
    ensure(t.to_vec::<f32>() == vec![2.0; 2], || "the group after the mismatches".into())?;
    // The sampler shards by rank.
    let s = DistributedSampler::for_process_group(5).map_err(|e| e.to_string())?.shuffle(false);
    ensure(s.indices() == if rank == 0 { vec![0, 2, 4] } else { vec![1, 3, 0] }, || {
        format!("sampler: {:?}", s.indices())
    })?;
    Ok(())
}

/// Every collective on tensors larger than the piece limit the test sets (3 elements), with
/// values that differ per element and rank, so a piece in the wrong place shows.
fn chunks(rank: usize) -> Result<(), String> {
    let limit = std::env::var("KILN_DIST_MAX_CHUNK").unwrap_or_default();
    ensure(limit == "3", || format!("run with KILN_DIST_MAX_CHUNK=3, not {limit:?}"))?;
    let r = rank as f64;
    let ramp = |n: usize, base: f64| Tensor::arange_step(0.0, n as f64, 1.0).add(base);
    let floats = |t: &Tensor| t.to_dtype(DType::F64).to_vec::<f64>();
    let want = |n: usize, f: &dyn Fn(f64) -> f64| (0..n).map(|i| f(i as f64)).collect::<Vec<f64>>();
    for dtype in [DType::F32, DType::I64, DType::U8] {
        let t = ramp(10, 100.0 * r).to_dtype(dtype);
        dist::all_reduce(&t, ReduceOp::Sum).map_err(|e| e.to_string())?;
        ensure(floats(&t) == want(10, &|i: f64| 2.0 * i + 100.0), || format!("all_reduce Sum {dtype}: {t}"))?;
    }
    let t = ramp(7, 0.0).mul(if rank == 0 { -1.0 } else { 1.0 }).to_dtype(DType::F64);
    dist::all_reduce(&t, ReduceOp::Max).map_err(|e| e.to_string())?;
    ensure(floats(&t) == want(7, &|i: f64| i), || format!("all_reduce Max: {t}"))?;
    let t = ramp(8, 10.0 * r).to_dtype(DType::I32);
    dist::broadcast(&t, 1).map_err(|e| e.to_string())?;
    ensure(floats(&t) == want(8, &|i: f64| i + 10.0), || format!("broadcast: {t}"))?;
    let outs = [Tensor::zeros([5]), Tensor::zeros([5])];
    dist::all_gather(&outs, &ramp(5, 10.0 * r)).map_err(|e| e.to_string())?;
    for (q, o) in outs.iter().enumerate() {
        ensure(floats(o) == want(5, &|i: f64| i + 10.0 * q as f64), || format!("all_gather from rank {q}: {o}"))?;
    }
    // Input q of rank r is 100 q + 10 r + i; rank r gets the sum over ranks of input r.
    let inputs: Vec<Tensor> = (0..2).map(|q| ramp(4, 100.0 * q as f64 + 10.0 * r)).collect();
    let out = Tensor::zeros([4]);
    dist::reduce_scatter(&out, &inputs, ReduceOp::Sum).map_err(|e| e.to_string())?;
    ensure(floats(&out) == want(4, &|i: f64| 2.0 * (100.0 * r + i) + 10.0), || format!("reduce_scatter: {out}"))?;
    dist::barrier().map_err(|e| e.to_string())?;
    Ok(())
}

/// A small model with several parameter tensors (so several gradient buckets).
#[derive(Module)]
struct Mlp {
    fc1: nn::Linear,
    fc2: nn::Linear,
    fc3: nn::Linear,
}

impl Mlp {
    fn new() -> Mlp {
        Mlp { fc1: nn::Linear::new(6, 16), fc2: nn::Linear::new(16, 16), fc3: nn::Linear::new(16, 3) }
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.fc3.forward(&self.fc2.forward(&self.fc1.forward(x).relu()).tanh())
    }
}

/// The global batch of step `step` (the same on every rank): inputs [2b, 6] and targets [2b, 3].
fn batch(step: usize, b: usize) -> (Tensor, Tensor) {
    kiln::manual_seed(1000 + step as u64);
    (Tensor::randn([2 * b, 6]), Tensor::randn([2 * b, 3]))
}

/// Max |a - b| over the parameters, and whether every rank holds bit-identical parameters.
fn compare(ddp: &[Tensor], reference: &[Tensor]) -> Result<(f32, bool), String> {
    let mut worst = 0f32;
    for (a, b) in ddp.iter().zip(reference) {
        worst = worst.max((a - b).abs().max().item::<f32>());
    }
    let flat = Tensor::cat(&ddp.iter().map(|p| p.detach().reshape([-1])).collect::<Vec<_>>(), 0);
    let outs = [flat.zeros_like(), flat.zeros_like()];
    dist::all_gather(&outs, &flat).map_err(|e| e.to_string())?;
    let bits = |t: &Tensor| t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
    Ok((worst, bits(&outs[0]) == bits(&outs[1])))
}

/// Per-rank batch rows.
const B: usize = 8;

/// A DDP replica and a reference model on one process that starts from the same weights, each
/// with SGD-momentum.
struct Training {
    ddp: DistributedDataParallel<Mlp>,
    opt: optim::SGD,
    reference: Mlp,
    ref_opt: optim::SGD,
}

/// Rank 1 starts from other weights: DDP must broadcast rank 0's.
fn training(rank: usize) -> Result<Training, String> {
    kiln::manual_seed(rank as u64);
    let opts = DdpOptions { bucket_cap_mb: 1e-3, ..Default::default() }; // ~1 KiB buckets
    let ddp = DistributedDataParallel::new(Mlp::new(), opts).map_err(|e| e.to_string())?;
    ensure(ddp.num_buckets() >= 3, || format!("{} buckets", ddp.num_buckets()))?;
    ensure(ddp.named_parameters()[0].0 == "module.fc1.weight", || format!("names: {}", ddp.named_parameters()[0].0))?;
    let mut reference = Mlp::new();
    reference.load_state_dict(&ddp.module().state_dict()).map_err(|e| e.to_string())?;
    Ok(Training { opt: sgd(ddp.parameters()), ref_opt: sgd(reference.parameters()), ddp, reference })
}

/// The optimizer of every training mode.
fn sgd(params: Vec<Tensor>) -> optim::SGD {
    optim::SGD::new(params, optim::SGDConfig { lr: 0.1, momentum: 0.9, ..Default::default() })
}

/// Rank `rank`'s rows of a global batch.
fn shard(t: &Tensor, rank: usize) -> Tensor {
    t.narrow(0, (rank * B) as i64, B)
}

/// One eager step of the reference model (`reference`, its parameters) on `ref_loss`, the loss
/// of the whole batch in one process, then the comparison with DDP's parameters.
fn check_step(
    rank: usize,
    step: usize,
    ddp: &[Tensor],
    reference: &[Tensor],
    ref_opt: &mut optim::SGD,
    ref_loss: Tensor,
) -> Result<(), String> {
    const TOL: f32 = 1e-5;
    ref_opt.zero_grad();
    ref_loss.backward();
    ref_opt.step();
    let (worst, identical) = compare(ddp, reference)?;
    ensure(identical, || format!("step {step}: the ranks' parameters differ"))?;
    ensure(worst <= TOL, || format!("step {step}: max |ddp - single process| = {worst:e} > {TOL:e}"))?;
    println!("rank {rank}: step {step}: bit-identical across ranks, max |ddp - single process| = {worst:.2e}");
    Ok(())
}

fn train(rank: usize) -> Result<(), String> {
    let Training { ddp, mut opt, reference, mut ref_opt } = training(rank)?;
    for step in 0..6 {
        let (x, y) = batch(step, B);
        let (xs, ys) = (shard(&x, rank), shard(&y, rank));
        opt.zero_grad();
        if step % 3 == 2 {
            // Gradient accumulation: two half-batches, the first under no_sync.
            let h = B / 2;
            {
                let _guard = ddp.no_sync();
                F::mse_loss(&ddp.forward(&xs.narrow(0, 0, h)), &ys.narrow(0, 0, h)).mul(0.5).backward();
            }
            F::mse_loss(&ddp.forward(&xs.narrow(0, h as i64, h)), &ys.narrow(0, h as i64, h)).mul(0.5).backward();
        } else {
            F::mse_loss(&ddp.forward(&xs), &ys).backward();
        }
        opt.step();
        check_step(
            rank,
            step,
            &ddp.parameters(),
            &reference.parameters(),
            &mut ref_opt,
            F::mse_loss(&reference.forward(&x), &y),
        )?;
    }
    Ok(())
}

/// DDP steps through `kiln::compile`: the gradients are averaged right after backward, at one
/// graph break per call, and the replicas stay equal to each other and to one process.
fn train_compiled(rank: usize) -> Result<(), String> {
    let Training { ddp, mut opt, reference, mut ref_opt } = training(rank)?;
    let mut step_fn = kiln::compile(|(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let loss = F::mse_loss(&ddp.forward(x), y);
        loss.backward();
        opt.step();
        loss
    });
    for step in 0..6 {
        let (x, y) = batch(step, B);
        step_fn.call((&shard(&x, rank), &shard(&y, rank)));
        let breaks = step_fn.stats().graph_breaks;
        ensure(breaks == 1, || {
            format!("step {step}: {breaks} graph breaks (one expected: the all-reduce after backward)")
        })?;
        check_step(
            rank,
            step,
            &ddp.parameters(),
            &reference.parameters(),
            &mut ref_opt,
            F::mse_loss(&reference.forward(&x), &y),
        )?;
    }
    Ok(())
}

/// A trunk and two heads: head `a` is added to the output where `use_a` says, head `b` never.
#[derive(Module)]
struct Branchy {
    trunk: nn::Linear,
    a: nn::Linear,
    b: nn::Linear,
    use_a: bool,
}

impl Branchy {
    fn new(use_a: bool) -> Branchy {
        Branchy { trunk: nn::Linear::new(6, 8), a: nn::Linear::new(8, 3), b: nn::Linear::new(8, 3), use_a }
    }

    fn run(&self, x: &Tensor, use_a: bool) -> Tensor {
        let h = self.trunk.forward(x).tanh();
        let out = h.narrow(1, 0, 3);
        if use_a {
            &out + &self.a.forward(&h)
        } else {
            out
        }
    }
}

impl Module for Branchy {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.run(x, self.use_a)
    }
}

/// `find_unused_parameters`: rank 0 uses head `a`, rank 1 does not, no rank uses head `b`.
/// The reference process computes each half of the batch as its rank does.
fn unused(rank: usize) -> Result<(), String> {
    kiln::manual_seed(rank as u64);
    let opts = DdpOptions { bucket_cap_mb: 1e-4, find_unused_parameters: true, ..Default::default() }; // ~100-byte buckets
    let ddp = DistributedDataParallel::new(Branchy::new(rank == 0), opts).map_err(|e| e.to_string())?;
    let mut reference = Branchy::new(true);
    reference.load_state_dict(&ddp.module().state_dict()).map_err(|e| e.to_string())?;
    let (mut opt, mut ref_opt) = (sgd(ddp.parameters()), sgd(reference.parameters()));
    for step in 0..6 {
        let (x, y) = batch(step, B);
        opt.zero_grad();
        F::mse_loss(&ddp.forward(&shard(&x, rank)), &shard(&y, rank)).backward();
        for (name, p) in ddp.named_parameters() {
            let unused_everywhere = name.starts_with("module.b.");
            ensure(p.grad().is_none() == unused_everywhere, || {
                format!("step {step}: {name} has grad {:?}", p.grad().map(|g| g.shape().to_vec()))
            })?;
        }
        opt.step();
        let half = |r: usize| F::mse_loss(&reference.run(&shard(&x, r), r == 0), &shard(&y, r));
        let ref_loss = (&half(0) + &half(1)).mul(0.5);
        check_step(rank, step, &ddp.parameters(), &reference.parameters(), &mut ref_opt, ref_loss)?;
    }
    Ok(())
}

/// Without `find_unused_parameters` the same net fails backward on both ranks at once (no
/// timeout), naming what each rank got no gradient for; the ranks are still in step after.
fn unused_error(rank: usize) -> Result<(), String> {
    let ddp =
        DistributedDataParallel::new(Branchy::new(rank == 0), DdpOptions::default()).map_err(|e| e.to_string())?;
    let (x, y) = batch(0, B);
    let start = std::time::Instant::now();
    let loss = F::mse_loss(&ddp.forward(&shard(&x, rank)), &shard(&y, rank));
    let line = line!() + 1;
    let result = loss.try_backward_with_opts(None, BackwardOpts::default());
    let e = result.err().ok_or("backward without gradients for some parameters succeeded")?;
    eprintln!("rank {rank}: backward failed as expected after {:.1?}: {e}", start.elapsed());
    // The error is raised by DDP's callback at the end of backward, but names this line.
    ensure(e.location.file().ends_with("dist_check.rs") && e.location.line() == line, || {
        format!("the error names {}, not dist_check.rs:{line}", e.location)
    })?;
    ensure(start.elapsed() < TIMEOUT, || "the error came only after the timeout".into())?;
    let missing = if rank == 0 { "b.weight, b.bias" } else { "a.weight, a.bias, b.weight, b.bias" };
    let want = format!("Parameters which did not receive grad for rank {rank}: {missing}\n");
    ensure(e.message.contains(&want) && e.message.contains("find_unused_parameters: true"), || {
        format!("the error does not say {want:?}")
    })?;
    let t = Tensor::ones([2]);
    dist::all_reduce(&t, ReduceOp::Sum).map_err(|e| e.to_string())?;
    ensure(t.to_vec::<f32>() == vec![2.0; 2], || "the group after the error".into())?;
    Ok(())
}

fn stall(rank: usize) -> Result<(), String> {
    let t = Tensor::ones([4]);
    dist::all_reduce(&t, ReduceOp::Sum).map_err(|e| e.to_string())?;
    if rank == 1 {
        // A hung peer: never joins the next collective.
        std::thread::sleep(TIMEOUT * 20);
        return Err("rank 1 was not stopped".into());
    }
    let start = std::time::Instant::now();
    let e = dist::all_reduce(&t, ReduceOp::Sum).err().ok_or("the all-reduce without a peer succeeded")?;
    eprintln!("rank 0: got the expected error after {:.1?}: {e}", start.elapsed());
    ensure(e.kind == kiln::ErrorKind::Timeout, || format!("kind {:?}", e.kind))?;
    let again = dist::all_reduce(&t, ReduceOp::Sum).err().ok_or("the aborted group still worked")?;
    ensure(again.message.contains("aborted earlier"), || format!("after abort: {again}"))?;
    // Finalizing would wait for rank 1: destroying an aborted group aborts the job.
    println!("rank 0: stall ok");
    dist::destroy_process_group().map_err(|e| e.to_string())?;
    Err("destroy_process_group returned after a timeout".into())
}

fn ddp_stall(rank: usize) -> Result<(), String> {
    let ddp = DistributedDataParallel::new(Mlp::new(), DdpOptions::default()).map_err(|e| e.to_string())?;
    let (x, y) = batch(0, 4);
    if rank == 1 {
        std::thread::sleep(TIMEOUT * 20);
        return Err("rank 1 was not stopped".into());
    }
    let loss = F::mse_loss(&ddp.forward(&x), &y);
    let e =
        loss.try_backward_with_opts(None, BackwardOpts::default()).err().ok_or("backward without a peer succeeded")?;
    eprintln!("rank 0: backward failed as expected: {e}");
    ensure(e.kind == kiln::ErrorKind::Timeout, || format!("kind {:?}", e.kind))?;
    println!("rank 0: ddp-stall ok");
    dist::destroy_process_group().map_err(|e| e.to_string())?;
    Err("destroy_process_group returned after a timeout".into())
}

fn die(rank: usize) -> Result<(), String> {
    let t = Tensor::ones([4]);
    dist::all_reduce(&t, ReduceOp::Sum).map_err(|e| e.to_string())?;
    if rank == 1 {
        eprintln!("rank 1: killing itself");
        // SAFETY: raising SIGKILL on our own process; nothing after it runs.
        unsafe { libc_kill() };
    }
    for _ in 0..1000 {
        if let Err(e) = dist::all_reduce(&t, ReduceOp::Sum) {
            eprintln!("rank 0: collective failed after its peer died: {e}");
            return Err(e.to_string());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Err("rank 0 kept going without its peer".into())
}

/// Sends SIGKILL to this process.
unsafe fn libc_kill() {
    extern "C" {
        fn getpid() -> i32;
        fn kill(pid: i32, sig: i32) -> i32;
    }
    // SAFETY: getpid and kill are the C library's, declared with their C signatures; the
    // signal ends this process, which is the point.
    unsafe { kill(getpid(), 9) };
}
