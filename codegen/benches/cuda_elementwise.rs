//! GPU bench: a fused elementwise kernel's bandwidth against a device-to-device copy of the
//! same bytes, measured in the same run, and the host cost of a launch.
//!
//! Prints one `BENCH <name> <value> <unit>` line per figure (scripts/gpu-check.sh collects
//! them). Without a GPU it prints a skip line and exits 0. Run: `cargo bench --bench
//! cuda_elementwise` (or the binary that scripts/gpu-build.sh copies).

use kiln_codegen::cuda::{emit_elementwise, run_elementwise, LoadedElementwise};
use kiln_codegen::Expr;
use kiln_runtime::cpu::fast_unary::FastUnary;
use kiln_runtime::cuda::{self, CudaBuffer};
use kiln_runtime::op_kind::{BinaryOp, UnaryOp};
use kiln_runtime::DType;
use std::time::Instant;

/// Seconds per call of `f`, after a warm-up, synchronizing before and after the timed loop.
fn time_per_call(iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    cuda::synchronize(0).unwrap();
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    cuda::synchronize(0).unwrap();
    t.elapsed().as_secs_f64() / iters as f64
}

/// `0.5·z·(1 + tanh(0.7978845608·(z + 0.044715·z³)))` as primitive ops, as `kiln::compile`
/// captures `gelu_tanh`.
fn gelu_tanh(z: &Expr) -> Expr {
    let mul = |a: Expr, b: Expr| Expr::binary(BinaryOp::Mul, a, b);
    let cube = mul(mul(z.clone(), z.clone()), z.clone());
    let inner = Expr::binary(BinaryOp::Add, z.clone(), mul(Expr::Const(0.044715), cube));
    let t = Expr::unary(UnaryOp::Tanh, mul(Expr::Const(0.797_884_560_802_865_4), inner));
    mul(mul(Expr::Const(0.5), z.clone()), Expr::binary(BinaryOp::Add, Expr::Const(1.0), t))
}

fn main() {
    if !cuda::is_available() {
        println!("cuda_elementwise: no CUDA device, skipping ({})", cuda::no_device("bench", 0));
        return;
    }
    let dev = cuda::device("bench", 0).unwrap();
    println!("device: {} (sm_{}, {} SMs)", dev.name(), dev.arch(), dev.sm_count());
    let n = 8192 * 8192usize;
    let bytes = n * 4;
    let host: Vec<f32> = (0..n).map(|i| ((i % 1000) as f32 - 500.0) / 250.0).collect();
    let x = CudaBuffer::from_slice(0, &host).unwrap();
    let a = CudaBuffer::from_slice(0, &vec![0.75f32; n]).unwrap();
    let b = CudaBuffer::from_slice(0, &vec![0.125f32; n]).unwrap();
    let mut out = CudaBuffer::alloc(0, bytes).unwrap();
    let gb = |moved: usize, s: f64| moved as f64 / s / 1e9;

    let copy = time_per_call(50, || out.copy_from_buffer(&x).unwrap());
    let copy_gbs = gb(2 * bytes, copy);
    println!("BENCH copy_d2d_8192x8192_f32 {copy_gbs:.1} GB/s ({:.1} us)", copy * 1e6);

    let z = Expr::binary(BinaryOp::Add, Expr::binary(BinaryOp::Mul, Expr::Input(0), Expr::Input(1)), Expr::Input(2));
    let fused = emit_elementwise(&gelu_tanh(&z), 3, DType::F32).unwrap();
    let t = Instant::now();
    let k3 = LoadedElementwise::load(&fused, 0).unwrap();
    println!("BENCH compile_and_load_gelu_tanh_fused {:.2} ms", t.elapsed().as_secs_f64() * 1e3);
    let s3 = time_per_call(50, || k3.run(&[&x, &a, &b], &mut out, n).unwrap());
    let gbs3 = gb(4 * bytes, s3);
    println!("BENCH gelu_tanh(x*a+b)_tensors_8192x8192_f32 {gbs3:.1} GB/s ({:.1} us)", s3 * 1e6);
    println!("BENCH gelu_tanh(x*a+b)_tensors_vs_copy {:.1} %", 100.0 * gbs3 / copy_gbs);
    let got = out.to_vec::<f32>().unwrap();
    for i in [0usize, 1, 4097, n - 1] {
        let want = FastUnary::GeluTanh.eval(host[i] as f64 * 0.75 + 0.125);
        assert!((got[i] as f64 - want).abs() < 1e-5, "element {i}: {} vs {want}", got[i]);
    }

    let zc =
        Expr::binary(BinaryOp::Add, Expr::binary(BinaryOp::Mul, Expr::Input(0), Expr::Const(0.75)), Expr::Const(0.125));
    let k1 = LoadedElementwise::load(&emit_elementwise(&gelu_tanh(&zc), 1, DType::F32).unwrap(), 0).unwrap();
    let s1 = time_per_call(50, || k1.run(&[&x], &mut out, n).unwrap());
    let gbs1 = gb(2 * bytes, s1);
    println!("BENCH gelu_tanh(x*0.75+0.125)_8192x8192_f32 {gbs1:.1} GB/s ({:.1} us)", s1 * 1e6);
    println!("BENCH gelu_tanh(x*0.75+0.125)_vs_copy {:.1} %", 100.0 * gbs1 / copy_gbs);

    // Host cost per launch: a tiny kernel, queued 20,000 times (the GPU keeps up or the queue
    // fills; either way this is an upper bound on the host time).
    let small = CudaBuffer::from_slice(0, &[1.0f32; 1024]).unwrap();
    let mut small_out = CudaBuffer::alloc(0, 4096).unwrap();
    let relu = emit_elementwise(&Expr::unary(UnaryOp::Relu, Expr::Input(0)), 1, DType::F32).unwrap();
    let kr = LoadedElementwise::load(&relu, 0).unwrap();
    let per = time_per_call(20_000, || kr.run(&[&small], &mut small_out, 1024).unwrap());
    println!("BENCH launch_loaded_kernel_1024 {:.2} us/launch", per * 1e6);
    let per = time_per_call(5_000, || run_elementwise(&relu, &[&small], &mut small_out, 1024).unwrap());
    println!("BENCH launch_with_cache_lookup_1024 {:.2} us/launch", per * 1e6);
    let stats = cuda::memory_stats(0).unwrap();
    println!(
        "BENCH memory_allocated {:.1} MiB (peak {:.1} MiB)",
        stats.allocated as f64 / 1048576.0,
        stats.max_allocated as f64 / 1048576.0
    );
}
