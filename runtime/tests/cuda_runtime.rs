//! The CUDA runtime: availability and errors without a GPU (always), NVRTC compilation and the
//! kernel cache (where NVRTC loads), and device memory, the allocator and launches (where a GPU
//! is). Missing pieces skip with a printed line.

use kiln_runtime::cuda::{self, CudaBuffer, CudaErrorKind, CudaKernel, KernelArg, LaunchDims, Origin, Param};
use kiln_runtime::Device;
use std::sync::{Mutex, Once};

/// Every test of this binary uses one private disk cache, set before any compile.
fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let dir = std::env::temp_dir().join(format!("kiln-cuda-runtime-test-{}", std::process::id()));
        std::env::set_var("KILN_CACHE_DIR", dir);
    });
}

// ---------------------------------------------------------------- without a GPU (always runs)

#[test]
fn availability_is_consistent_and_errors_are_clear() {
    setup();
    let n = cuda::device_count();
    assert_eq!(Device::cuda_device_count(), n);
    assert_eq!(Device::cuda_is_available(), n > 0);
    assert_eq!(Device::cuda_if_available(0), if n > 0 { Device::Cuda(0) } else { Device::Cpu });
    assert_eq!(Device::cuda_if_available(n), Device::Cpu);
    // The device one past the last never exists: every entry point errs, naming itself.
    let e = CudaBuffer::alloc(n, 16).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::NoDevice);
    assert!(
        e.to_string().starts_with(&format!("CudaBuffer::alloc: no CUDA device available (cuda:{n} requested")),
        "{e}"
    );
    let e = cuda::synchronize(n).unwrap_err();
    assert!(e.to_string().starts_with("synchronize: no CUDA device available"), "{e}");
    let e = cuda::memory_allocated(n).unwrap_err();
    assert!(e.to_string().starts_with("memory_stats: no CUDA device available"), "{e}");
    let e = cuda::empty_cache(n).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::NoDevice);
    let e = CudaBuffer::from_slice(n, &[1.0f32, 2.0]).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::NoDevice);
    if n == 0 {
        println!("no CUDA device here: {e}");
    }
}

#[test]
fn size_classes_round_up() {
    assert_eq!(cuda::alloc::size_class(1), 512);
    assert_eq!(cuda::alloc::size_class(4000), 4096);
    assert_eq!(cuda::alloc::size_class(3 << 20), 4 << 20);
}

#[test]
fn launch_blocking_can_be_switched() {
    // The env var decides at first use; the setter overrides it. (The subprocess test below
    // checks the env var itself.)
    let before = cuda::launch_blocking();
    cuda::set_launch_blocking(!before);
    assert_eq!(cuda::launch_blocking(), !before);
    cuda::set_launch_blocking(before);
    assert_eq!(cuda::launch_blocking(), before);
}

// ---------------------------------------------------------------- NVRTC (where it loads)

fn nvrtc_or_skip() -> bool {
    setup();
    if !cuda::nvrtc_for_tests("an NVRTC test") {
        return false;
    }
    let info = cuda::nvrtc::nvrtc("test").expect("loaded");
    println!(
        "NVRTC {}.{} ({})",
        info.version.0,
        info.version.1,
        info.path.as_ref().map(|p| p.display().to_string()).unwrap_or("found by name".into())
    );
    true
}

const ADD_ONE: &str = "extern \"C\" __global__ void add_one(const float* x, float* y, unsigned long long n) {\n    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = x[i] + 1.0f;\n}\n";

#[test]
fn compiles_cubin_and_ptx() {
    if !nvrtc_or_skip() {
        return;
    }
    for arch in [80, 90] {
        let c = cuda::compile(ADD_ONE, "add_one", arch).unwrap();
        assert_eq!(&c.cubin[..4], b"\x7fELF");
        assert_eq!(c.arch, arch);
        assert!(c.key.starts_with(&format!("add_one-sm{arch}-")), "{}", c.key);
        if c.origin == Origin::Nvrtc {
            assert!(c.ptx.contains(".entry add_one"), "{}", c.ptx);
            assert!(c.ptx.contains(&format!(".target sm_{arch}")), "{}", c.ptx);
        }
    }
    // The GPU-only fault test's kernel compiles too.
    assert_eq!(&cuda::compile(TRAP, "kiln_test_trap", 90).unwrap().cubin[..4], b"\x7fELF");
}

#[test]
fn kernels_are_cached_in_memory_and_on_disk() {
    if !nvrtc_or_skip() {
        return;
    }
    // A source no earlier run has seen: the first compile must reach NVRTC.
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let src = format!("// {stamp} {}\n{ADD_ONE}", std::process::id());
    let before = cuda::compile_stats();
    let a = cuda::compile(&src, "add_one", 80).unwrap();
    assert_eq!(a.origin, Origin::Nvrtc);
    let b = cuda::compile(&src, "add_one", 80).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b), "the second compile comes from memory");
    let dir = cuda::compile::cache_dir().unwrap();
    assert!(dir.join(format!("{}.cubin", a.key)).is_file(), "disk entry in {}", dir.display());
    cuda::compile::clear_memory_cache();
    let c = cuda::compile(&src, "add_one", 80).unwrap();
    assert_eq!(c.origin, Origin::Disk);
    assert_eq!(c.cubin, a.cubin);
    let d = cuda::compile(&src, "add_one", 90).unwrap();
    assert_ne!(d.key, a.key, "the arch is part of the key");
    let after = cuda::compile_stats();
    assert!(after.nvrtc_compiles > before.nvrtc_compiles);
    assert!(after.disk_hits > before.disk_hits);
    assert!(after.memory_hits > before.memory_hits);
}

#[test]
fn compile_errors_are_errors() {
    if !nvrtc_or_skip() {
        return;
    }
    let e = cuda::compile("extern \"C\" __global__ void k() { int x = ; }", "k", 80).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::Compile);
    assert!(e.message.contains("NVRTC failed to compile k for sm_80") && e.message.contains("error"), "{e}");
}

// ---------------------------------------------------------------- GPU (where a device is)

/// GPU tests share the allocator statistics of device 0: one at a time.
static GPU: Mutex<()> = Mutex::new(());

/// The GPU lock, for tests that need a CUDA device (ignored unless asked for; a missing
/// device fails them).
fn gpu() -> std::sync::MutexGuard<'static, ()> {
    setup();
    let dev = cuda::device("test", 0).unwrap_or_else(|e| panic!("this test needs a CUDA device: {e}"));
    println!("{} (sm_{}, {} SMs)", dev.name(), dev.arch(), dev.sm_count());
    GPU.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn copies_round_trip() {
    let _g = gpu();
    let f: Vec<f32> = (0..10_000).map(|i| i as f32 * 0.25 - 7.0).collect();
    assert_eq!(CudaBuffer::from_slice(0, &f).unwrap().to_vec::<f32>().unwrap(), f);
    let d: Vec<f64> = (0..777).map(|i| (i as f64).sin()).collect();
    assert_eq!(CudaBuffer::from_slice(0, &d).unwrap().to_vec::<f64>().unwrap(), d);
    let b: Vec<u8> = (0..=255).collect();
    let buf = CudaBuffer::from_slice(0, &b).unwrap();
    assert_eq!(buf.len_bytes(), 256);
    assert_eq!(buf.to_vec::<u8>().unwrap(), b);
    let h: Vec<half::bf16> = (0..100).map(|i| half::bf16::from_f32(i as f32 / 3.0)).collect();
    assert_eq!(CudaBuffer::from_slice(0, &h).unwrap().to_vec::<half::bf16>().unwrap(), h);
    // Device-to-device, zeros, and a partial overwrite.
    let src = CudaBuffer::from_slice(0, &f).unwrap();
    let mut dst = CudaBuffer::zeros(0, 40_000).unwrap();
    assert!(dst.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    dst.copy_from_buffer(&src).unwrap();
    dst.copy_from_slice(&[42.0f32, 43.0]).unwrap();
    let back = dst.to_vec::<f32>().unwrap();
    assert_eq!(&back[..2], &[42.0, 43.0]);
    assert_eq!(&back[2..], &f[2..]);
    let e = dst.copy_from_slice(&vec![0.0f32; 10_001]).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::InvalidArgument);
    let e = CudaBuffer::from_slice(0, &[1u8, 2, 3]).unwrap().to_vec::<f32>().unwrap_err();
    assert!(e.message.contains("not a whole number of 4-byte elements"), "{e}");
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn allocator_reuses_blocks_and_counts() {
    let _g = gpu();
    cuda::synchronize(0).unwrap();
    let base = cuda::memory_stats(0).unwrap();
    let a = CudaBuffer::alloc(0, 3000).unwrap();
    assert_eq!(a.capacity_bytes(), 4096);
    let ptr = a.device_ptr();
    assert_eq!(ptr % 256, 0, "device blocks are 256-byte aligned");
    assert_eq!(cuda::memory_allocated(0).unwrap(), base.allocated + 4096);
    let big = CudaBuffer::alloc(0, 5 << 20).unwrap();
    assert_eq!(big.capacity_bytes(), 6 << 20);
    cuda::reset_peak_memory_stats(0).unwrap();
    let peak = cuda::max_memory_allocated(0).unwrap();
    assert_eq!(peak, base.allocated + 4096 + (6 << 20));
    drop(a);
    drop(big);
    assert_eq!(cuda::memory_allocated(0).unwrap(), base.allocated);
    assert_eq!(cuda::max_memory_allocated(0).unwrap(), peak, "the peak stays");
    // The same size class comes back from the free list: same block, no driver call.
    let hits = cuda::memory_stats(0).unwrap().cache_hits;
    let b = CudaBuffer::alloc(0, 2049).unwrap();
    assert_eq!(b.device_ptr(), ptr);
    assert_eq!(cuda::memory_stats(0).unwrap().cache_hits, hits + 1);
    drop(b);
    let reserved = cuda::memory_reserved(0).unwrap();
    assert!(reserved >= base.allocated + 4096 + (6 << 20));
    cuda::empty_cache(0).unwrap();
    let after = cuda::memory_stats(0).unwrap();
    assert_eq!(after.reserved, after.allocated, "only live blocks stay reserved");
    assert!(after.reserved < reserved);
}

fn load_add_one() -> CudaKernel {
    let dev = cuda::device("test", 0).unwrap();
    let c = cuda::compile(ADD_ONE, "add_one", dev.arch()).unwrap();
    CudaKernel::load(0, &c, vec![Param::In, Param::Out, Param::U64]).unwrap()
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn launches_a_compiled_kernel() {
    let _g = gpu();
    let k = load_add_one();
    let n = 10_000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let xb = CudaBuffer::from_slice(0, &x).unwrap();
    let mut y = CudaBuffer::alloc(0, n * 4).unwrap();
    let dims = LaunchDims { grid: n.div_ceil(256) as u32, block: 256, shared_bytes: 0 };
    k.launch(dims, &mut [KernelArg::In(&xb), KernelArg::Out(&mut y), KernelArg::U64(n as u64)]).unwrap();
    let got = y.to_vec::<f32>().unwrap();
    assert!(got.iter().zip(&x).all(|(g, x)| *g == x + 1.0));
    // Loading again reuses the module.
    let k2 = load_add_one();
    assert_eq!(k2.name(), "add_one");
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn mismatched_launches_are_errors() {
    let _g = gpu();
    let k = load_add_one();
    let xb = CudaBuffer::from_slice(0, &[1.0f32; 4]).unwrap();
    let mut y = CudaBuffer::alloc(0, 16).unwrap();
    let dims = LaunchDims { grid: 1, block: 32, shared_bytes: 0 };
    let e = k.launch(dims, &mut [KernelArg::In(&xb), KernelArg::Out(&mut y)]).unwrap_err();
    assert!(e.kind == CudaErrorKind::InvalidArgument && e.message.contains("add_one takes 3 arguments"), "{e}");
    let e = k.launch(dims, &mut [KernelArg::U64(4), KernelArg::Out(&mut y), KernelArg::U64(4)]).unwrap_err();
    assert!(e.message.contains("argument 0 is U64, the kernel's parameter is In"), "{e}");
    let e = k
        .launch(
            LaunchDims { grid: 0, block: 32, shared_bytes: 0 },
            &mut [KernelArg::In(&xb), KernelArg::Out(&mut y), KernelArg::U64(4)],
        )
        .unwrap_err();
    assert!(e.message.contains("empty launch"), "{e}");
    // Too many threads per block: the driver refuses the launch, and that is an Err too.
    let e = k
        .launch(
            LaunchDims { grid: 1, block: 4096, shared_bytes: 0 },
            &mut [KernelArg::In(&xb), KernelArg::Out(&mut y), KernelArg::U64(4)],
        )
        .unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::Launch, "{e}");
    // The device is still usable afterwards.
    k.launch(dims, &mut [KernelArg::In(&xb), KernelArg::Out(&mut y), KernelArg::U64(4)]).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0f32; 4]);
}

const TRAP: &str =
    "extern \"C\" __global__ void kiln_test_trap(float* p) { if (threadIdx.x == 0) { p[0] = 1.0f; __trap(); } }\n";

/// Under `KILN_CUDA_SYNC=1` a faulting kernel is reported by its own launch, naming it. A fault
/// poisons the CUDA context for the rest of the process, so this runs in a child process: the
/// test binary itself, filtered to [`sync_child`].
#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn kiln_cuda_sync_reports_a_fault_at_its_launch() {
    let _g = gpu();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "sync_child", "--nocapture", "--test-threads=1"])
        .env("KILN_CUDA_SYNC", "1")
        .env("KILN_TEST_SYNC_CHILD", "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("SYNC-CHILD-OK"), "{text}");
}

/// The child half of [`kiln_cuda_sync_reports_a_fault_at_its_launch`]; run directly (without
/// `KILN_TEST_SYNC_CHILD`) it checks which values of the env var turn blocking on.
#[test]
fn sync_child() {
    if std::env::var("KILN_TEST_SYNC_CHILD").is_err() {
        use cuda::kernel::sync_env_value;
        assert!(sync_env_value(Some("1")) && sync_env_value(Some("TRUE")) && sync_env_value(Some(" 1 ")));
        assert!(!sync_env_value(Some("0")) && !sync_env_value(Some("")) && !sync_env_value(None));
        return;
    }
    setup();
    assert!(cuda::launch_blocking(), "KILN_CUDA_SYNC=1 turns blocking launches on");
    let dev = cuda::device("test", 0).unwrap();
    let c = cuda::compile(TRAP, "kiln_test_trap", dev.arch()).unwrap();
    let k = CudaKernel::load(0, &c, vec![Param::Out]).unwrap();
    let mut p = CudaBuffer::alloc(0, 4).unwrap();
    let e = k.launch(LaunchDims { grid: 1, block: 32, shared_bytes: 0 }, &mut [KernelArg::Out(&mut p)]).unwrap_err();
    assert_eq!(e.kind, CudaErrorKind::Launch);
    assert!(e.message.contains("kiln_test_trap on cuda:0 failed") && e.message.contains("KILN_CUDA_SYNC=1"), "{e}");
    println!("SYNC-CHILD-OK: {e}");
}
