//! The NCCL backend on a GPU with a world of one process: `init_process_group(Backend::Nccl)`
//! through the `env://` rendezvous (RANK=0, WORLD_SIZE=1, MASTER_ADDR=127.0.0.1, a free
//! MASTER_PORT), every collective on CUDA tensors, the device errors, and a DDP step on CUDA.
//! Without libnccl or a CUDA device each test prints a skip line and returns (run by
//! scripts/gpu-check.sh on a GPU machine).

use kiln::distributed::{self as dist, Backend, InitOptions, ReduceOp};
use kiln::nn::parallel::{DdpOptions, DistributedDataParallel};
use kiln::prelude::*;
use kiln_runtime::cuda::nccl;
use std::sync::Mutex;
use std::time::Duration;

/// One process group at a time in this process.
static GROUP: Mutex<()> = Mutex::new(());

/// Runs `f` inside a fresh NCCL group of one rank on cuda:0 (these tests are ignored unless
/// asked for; a missing device or libnccl fails them).
fn in_group(f: impl FnOnce(Device)) {
    let version = nccl::nccl_version("cuda_nccl").unwrap_or_else(|e| panic!("this test needs libnccl: {e}"));
    assert!(kiln_runtime::cuda::is_available(), "this test needs a CUDA device");
    let _one = GROUP.lock().unwrap_or_else(|e| e.into_inner());
    println!("NCCL {}", nccl::version_text(version));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for (k, v) in [
        ("RANK", "0".to_string()),
        ("WORLD_SIZE", "1".into()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
        ("LOCAL_RANK", "0".into()),
    ] {
        std::env::set_var(k, v);
    }
    dist::init_process_group(Backend::Nccl, InitOptions::with_timeout(Duration::from_secs(60))).unwrap();
    assert_eq!(
        (dist::get_backend().unwrap(), dist::rank().unwrap(), dist::world_size().unwrap()),
        (Backend::Nccl, 0, 1)
    );
    f(Device::Cuda(0));
    dist::destroy_process_group().unwrap();
}

#[test]
#[ignore = "needs a CUDA device and libnccl (run with --include-ignored on a GPU machine)"]
fn every_collective_runs_on_cuda_tensors() {
    in_group(|dev| {
        let values = vec![1.0f32, -2.0, 3.5, 0.25];
        let t = Tensor::from_vec(values.clone(), [4]).to(&dev);
        for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product] {
            let x = t.deep_clone();
            dist::all_reduce(&x, op).unwrap();
            assert_eq!(x.device(), dev);
            assert_eq!(x.to_vec::<f32>(), values, "{op:?}");
        }
        // Other dtypes: native (i64, bool as bytes) and staged through f32 (f16).
        let i = Tensor::from_vec(vec![7i64, -3, 1 << 40], [3]).to(&dev);
        dist::all_reduce(&i, ReduceOp::Sum).unwrap();
        assert_eq!(i.to_vec::<i64>(), vec![7, -3, 1 << 40]);
        let b = Tensor::from_vec(vec![true, false, true], [3]).to(&dev);
        dist::all_reduce(&b, ReduceOp::Product).unwrap();
        assert_eq!(b.to_vec::<bool>(), vec![true, false, true]);
        let h = t.to_dtype(DType::F16);
        dist::all_reduce(&h, ReduceOp::Avg).unwrap();
        assert_eq!((h.dtype(), h.to_dtype(DType::F32).to_vec::<f32>()), (DType::F16, values.clone()));
        // A strided view: the result is written into its elements only.
        let m = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], [2, 3]).to(&dev);
        dist::all_reduce(&m.select(1, 1), ReduceOp::Sum).unwrap();
        assert_eq!(m.to_vec::<f32>(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);

        let x = t.deep_clone();
        dist::broadcast(&x, 0).unwrap();
        assert_eq!(x.to_vec::<f32>(), values);
        let e = dist::broadcast(&x, 1).unwrap_err();
        assert!(e.message.contains("src=1 is not a rank of a group of 1"), "{e}");

        let outputs = [Tensor::zeros([4]).to(&dev)];
        dist::all_gather(&outputs, &t).unwrap();
        assert_eq!(outputs[0].to_vec::<f32>(), values);

        let out = Tensor::zeros([4]).to(&dev);
        dist::reduce_scatter(&out, &[t.deep_clone()], ReduceOp::Sum).unwrap();
        assert_eq!(out.to_vec::<f32>(), values);

        dist::barrier().unwrap();
    });
}

#[test]
#[ignore = "needs a CUDA device and libnccl (run with --include-ignored on a GPU machine)"]
fn a_cpu_tensor_given_to_the_nccl_group_names_the_op_devices_and_line() {
    in_group(|_| {
        let e = dist::all_reduce(&Tensor::ones([2]), ReduceOp::Sum).unwrap_err();
        assert_eq!((e.op, e.kind), ("all_reduce", kiln::ErrorKind::Device));
        assert!(e.message.contains("the nccl backend moves CUDA tensors on this rank's device cuda:0 only"), "{e}");
        assert!(e.message.contains("this tensor is on cpu"), "{e}");
        assert!(e.location.file().ends_with("cuda_nccl.rs"), "{e}");
        let e = dist::all_gather(&[Tensor::zeros([2])], &Tensor::ones([2]).to(&Device::Cuda(0))).unwrap_err();
        assert!(e.message.contains("this tensor is on cpu") && e.location.file().ends_with("cuda_nccl.rs"), "{e}");
    });
}

#[test]
#[ignore = "needs a CUDA device and libnccl (run with --include-ignored on a GPU machine)"]
fn a_ddp_step_on_cuda_matches_plain_training() {
    in_group(|dev| {
        kiln::manual_seed(0);
        let mut plain = nn::Linear::new(4, 3);
        plain.to(&dev);
        let mut wrapped = nn::Linear::new(4, 3);
        wrapped.load_state_dict(&plain.state_dict()).unwrap();
        wrapped.to(&dev);
        let ddp = DistributedDataParallel::new(wrapped, DdpOptions::default()).unwrap();
        let x = Tensor::randn([8, 4]).to(&dev);
        let y = Tensor::randn([8, 3]).to(&dev);
        F::mse_loss(&plain.forward(&x), &y).backward();
        F::mse_loss(&ddp.forward(&x), &y).backward();
        for ((name, p), q) in ddp.named_parameters().into_iter().zip(plain.parameters()) {
            let (g, want) = (p.grad().expect("an averaged gradient"), q.grad().expect("a gradient"));
            assert_eq!(g.device(), dev, "{name}");
            let (g, want) = (g.to_vec::<f32>(), want.to_vec::<f32>());
            assert!(
                g.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-6 * b.abs().max(1.0)),
                "{name}: {g:?} vs {want:?}"
            );
        }
    });
}
