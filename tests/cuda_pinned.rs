//! Pinned host memory and non-blocking copies. Without a GPU: `pin_memory` fails with "no CUDA
//! device available" naming the op and the caller's line, and a `DataLoader` with
//! `pin_memory(true)` yields unpinned batches after one `KILN_DEBUG=data` line. With one:
//! pinned copies keep their values, `to_non_blocking` from pinned memory gives the values of
//! `to`, even when the pinned tensor is dropped (or its block reused) right after the call,
//! `to_non_blocking(&Device::Cpu)` from a device gives pinned tensors with the values of `to`
//! however soon they are read (and whatever the device does after the call), and a pinning
//! loader yields pinned batches.

use kiln::data::{DataLoader, TensorDataset};
use kiln::{DType, Device, Tensor};

#[path = "common/child.rs"]
mod child;

fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let e = std::panic::catch_unwind(f).expect_err("expected a panic");
    e.downcast_ref::<String>().cloned().unwrap_or_else(|| e.downcast_ref::<&str>().unwrap_or(&"").to_string())
}

/// Items `(row [3] f32, label i64)`: row `i` holds `i, i + 0.5, -i`.
fn rows(n: usize) -> TensorDataset<(Tensor, Tensor)> {
    let x: Vec<f32> = (0..n).flat_map(|i| [i as f32, i as f32 + 0.5, -(i as f32)]).collect();
    TensorDataset::new((Tensor::from_vec(x, [n, 3]), Tensor::from_vec((0..n as i64).collect::<Vec<i64>>(), [n])))
        .unwrap()
}

// ------------------------------------------------------------------ without a GPU

#[test]
fn without_a_gpu_pin_memory_fails_naming_the_op_and_line() {
    if Device::cuda_is_available() {
        return println!("a CUDA device is present, skipping the no-device checks");
    }
    let x = Tensor::arange(6).reshape([2, 3]);
    assert!(!x.is_pinned());
    let line = line!() + 1;
    let e = x.try_pin_memory().unwrap_err();
    assert_eq!(e.op, "pin_memory");
    let s = e.to_string();
    assert!(s.starts_with("pin_memory: no CUDA device available (cuda:0 requested;"), "{s}");
    assert!(s.ends_with(&format!("(at tests/cuda_pinned.rs:{line})")), "{s}");
    let m = panic_message(|| {
        Tensor::ones([4]).t().pin_memory();
    });
    assert!(m.starts_with("pin_memory: no CUDA device available") && m.contains("tests/cuda_pinned.rs:"), "{m}");
    let e = x.try_to_non_blocking(&Device::Cuda(0)).unwrap_err();
    assert!(e.to_string().starts_with("to: no CUDA device available"), "{e}");
    assert!(x.to_non_blocking(&Device::Cpu).shares_storage_with(&x));
    Device::Cpu.synchronize().unwrap();
    let e = Device::Cuda(0).synchronize().unwrap_err();
    assert!(e.to_string().starts_with("synchronize: no CUDA device available"), "{e}");
}

#[test]
fn without_a_gpu_a_pinning_loader_yields_unpinned_batches() {
    if Device::cuda_is_available() {
        return println!("a CUDA device is present, skipping the no-device checks");
    }
    let plain = DataLoader::new(rows(7)).batch_size(3);
    let pinning = DataLoader::new(rows(7)).batch_size(3).num_workers(2).pin_memory(true);
    assert!(pinning.get_pin_memory());
    let mut n = 0;
    for ((x, y), (px, py)) in plain.iter().zip(&pinning) {
        assert!(!px.is_pinned() && !py.is_pinned());
        assert_eq!((px.to_vec::<f32>(), py.to_vec::<i64>()), (x.to_vec::<f32>(), y.to_vec::<i64>()));
        n += 1;
    }
    assert_eq!(n, 3);
}

/// The `KILN_DEBUG=data` line, checked in a child process (the topics are read once).
#[test]
fn without_a_gpu_a_pinning_loader_says_so_once_under_kiln_debug() {
    if child::is_child() {
        let loader = DataLoader::new(rows(5)).batch_size(2).pin_memory(true);
        assert_eq!(loader.iter().count() + loader.iter().count(), 6);
        return;
    }
    if Device::cuda_is_available() {
        return println!("a CUDA device is present, skipping the no-device checks");
    }
    let err = child::stderr_of_child("without_a_gpu_a_pinning_loader_says_so_once_under_kiln_debug", "data");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("[kiln data]")).collect();
    assert_eq!(
        lines,
        ["[kiln data] DataLoader: pin_memory(true) but no CUDA device is available; batches stay unpinned"],
        "{err}"
    );
}

// ------------------------------------------------------------------ with a GPU

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn pinned_copies_keep_values_dtypes_and_views() {
    let base = Tensor::from_vec((0..24).map(|v| v as f32 * 0.75 - 4.0).collect::<Vec<f32>>(), [4, 6]);
    for x in [
        base.clone(),
        base.to_dtype(DType::F16),
        base.to_dtype(DType::BF16),
        base.to_dtype(DType::I64),
        base.gt(0.0),
        base.t(),
        base.narrow(1, 2, 3),
    ] {
        let p = x.pin_memory();
        assert!(p.is_pinned() && !x.is_pinned(), "{:?}", x.dtype());
        assert_eq!((p.shape(), p.dtype()), (x.shape(), x.dtype()));
        assert!(p.is_contiguous());
        assert_eq!(p.to_dtype(DType::F64).to_vec::<f64>(), x.to_dtype(DType::F64).contiguous().to_vec::<f64>());
        // Pinning a pinned tensor is a no-op; views of it are pinned; a clone is not.
        assert!(p.pin_memory().shares_storage_with(&p));
        assert!(p.narrow(0, 1, 2).is_pinned() && !p.deep_clone().is_pinned());
        // Round trip through the device, blocking and not.
        let back = p.to_non_blocking(&Device::Cuda(0)).to(&Device::Cpu);
        assert_eq!(back.to_dtype(DType::F64).to_vec::<f64>(), x.to_dtype(DType::F64).contiguous().to_vec::<f64>());
        assert_eq!(
            p.to(&Device::Cuda(0)).to_dtype(DType::F64).to_vec::<f64>(),
            x.to_dtype(DType::F64).contiguous().to_vec::<f64>()
        );
    }
    let e = base.to(&Device::Cuda(0)).try_pin_memory().unwrap_err();
    assert!(
        e.to_string().starts_with("pin_memory: cannot pin a tensor on cuda:0: only CPU tensors can be pinned"),
        "{e}"
    );
    assert!(!base.to(&Device::Cuda(0)).is_pinned());
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn non_blocking_copies_then_use_give_the_values_of_to() {
    let d = Device::Cuda(0);
    let n = 3_000_001; // large enough for the copy to outlast the call
    let mut on_device = Vec::new();
    for k in 0..6 {
        // Each pinned source is dropped while its copy may still be queued; the next one is
        // the same size, so it would get the same block if the block were reused too early.
        let src = Tensor::full([n], k as f32 + 0.25).pin_memory();
        let y = src.to_non_blocking(&d);
        assert_eq!(y.device(), d);
        drop(src);
        on_device.push(&(&y * 2.0) + 1.0);
    }
    for (k, y) in on_device.iter().enumerate() {
        let want = (k as f32 + 0.25) * 2.0 + 1.0;
        let got = y.to_vec::<f32>();
        assert_eq!(got.len(), n);
        assert!(
            got.iter().all(|&v| v == want),
            "copy {k}: expected {want}, found {:?}",
            got.iter().find(|&&v| v != want)
        );
    }
    // A pageable source and a pinned view (not its whole storage) take the blocking path.
    let x = Tensor::arange(10).to_dtype(DType::F32);
    assert_eq!(x.to_non_blocking(&d).to_vec::<f32>(), x.to_vec::<f32>());
    let view = x.pin_memory().narrow(0, 3, 4);
    assert_eq!(view.to_non_blocking(&d).to_vec::<f32>(), vec![3.0, 4.0, 5.0, 6.0]);
    // Gradients flow back through both copies.
    let w = Tensor::ones([3]).requires_grad_(true);
    let loss = (&w.pin_memory().to_non_blocking(&d) * 3.0).sum();
    loss.backward();
    assert_eq!(w.grad().unwrap().to_vec::<f32>(), vec![3.0; 3]);
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn a_pinning_loader_yields_pinned_batches() {
    let plain = DataLoader::new(rows(7)).batch_size(3);
    for workers in [0, 2] {
        let pinning = DataLoader::new(rows(7)).batch_size(3).num_workers(workers).pin_memory(true);
        for ((x, y), (px, py)) in plain.iter().zip(&pinning) {
            assert!(px.is_pinned() && py.is_pinned());
            let (gx, gy) = (px.to_non_blocking(&Device::Cuda(0)), py.to_non_blocking(&Device::Cuda(0)));
            assert_eq!((gx.to_vec::<f32>(), gy.to_vec::<i64>()), (x.to_vec::<f32>(), y.to_vec::<i64>()));
        }
    }
}

/// `n` f32 values on `device` computed there (so the copy back queues behind a kernel): `i / 7`.
fn computed_on(device: &Device, n: usize) -> Tensor {
    &Tensor::arange(n as i64).to_dtype(DType::F32).to(device) / 7.0
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn non_blocking_copies_to_the_cpu_are_pinned_and_give_the_values_of_to() {
    let d = Device::Cuda(0);
    let n = 3_000_001;
    let x = computed_on(&d, n);
    let y = x.to_non_blocking(&Device::Cpu);
    assert_eq!((y.device(), y.shape(), y.dtype()), (Device::Cpu, &[n][..], DType::F32));
    assert!(y.is_pinned() && y.is_contiguous());
    // Read at once: the read waits for the copy.
    assert_eq!(y.to_vec::<f32>(), x.to(&Device::Cpu).to_vec::<f32>());
    // Every dtype, and views (made contiguous on the device first).
    let small = Tensor::from_vec((0..24).map(|v| v as f32 * 0.75 - 4.0).collect::<Vec<f32>>(), [4, 6]).to(&d);
    for x in [
        small.to_dtype(DType::F64),
        small.to_dtype(DType::F16),
        small.to_dtype(DType::BF16),
        small.to_dtype(DType::I64),
        small.to_dtype(DType::I32),
        small.abs().to_dtype(DType::U8),
        small.gt(0.0),
        small.t(),
        small.narrow(1, 2, 3),
    ] {
        let y = x.to_non_blocking(&Device::Cpu);
        assert!(y.is_pinned() && y.is_contiguous(), "{:?}", x.dtype());
        assert_eq!((y.shape(), y.dtype()), (x.shape(), x.dtype()));
        assert_eq!(
            y.to_dtype(DType::F64).to_vec::<f64>(),
            x.to(&Device::Cpu).to_dtype(DType::F64).to_vec::<f64>(),
            "{:?}",
            x.dtype()
        );
    }
    // Each access path waits: item, printing, a CPU op, an in-place write, a device sync.
    let total = computed_on(&d, n).sum();
    assert_eq!(total.to_non_blocking(&Device::Cpu).item::<f32>(), total.item::<f32>());
    assert_eq!(
        format!("{}", computed_on(&d, 3).to_non_blocking(&Device::Cpu)),
        format!("{}", computed_on(&d, 3).to(&Device::Cpu))
    );
    let want: Vec<f32> = (0..n).map(|i| i as f32 / 7.0 * 2.0).collect();
    assert_eq!((&computed_on(&d, n).to_non_blocking(&Device::Cpu) * 2.0).to_vec::<f32>(), want);
    let y = computed_on(&d, n).to_non_blocking(&Device::Cpu);
    y.narrow(0, 0, 2).fill_(-1.0);
    assert_eq!(y.narrow(0, 0, 3).to_vec::<f32>(), vec![-1.0, -1.0, 2.0 / 7.0], "the write lands after the copy");
    let y = computed_on(&d, n).to_non_blocking(&Device::Cpu);
    d.synchronize().unwrap();
    assert_eq!(y.narrow(0, n as i64 - 1, 1).item::<f32>(), (n - 1) as f32 / 7.0);
    // Gradients flow back to the device.
    let w = Tensor::ones([3]).to(&d).requires_grad_(true);
    (&w.to_non_blocking(&Device::Cpu) * 3.0).sum().backward();
    assert_eq!(w.grad().unwrap().to_vec::<f32>(), vec![3.0; 3]);
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn device_writes_after_a_non_blocking_copy_to_the_cpu_do_not_change_it() {
    let d = Device::Cuda(0);
    let n = 3_000_001;
    let mut copies = Vec::new();
    for k in 0..6 {
        let x = Tensor::full([n], k as f32 + 0.5).to(&d);
        let y = x.to_non_blocking(&Device::Cpu);
        // Queued behind the copy on the stream: the copy has read the old values.
        x.fill_(-7.0);
        x.add_(1.0);
        copies.push(y);
        // A copy dropped unread: its block must not be handed out while the copy may write it.
        drop(Tensor::full([n], 99.0).to(&d).to_non_blocking(&Device::Cpu));
    }
    for (k, y) in copies.iter().enumerate() {
        let want = k as f32 + 0.5;
        let got = y.to_vec::<f32>();
        assert!(
            got.iter().all(|&v| v == want),
            "copy {k}: expected {want}, found {:?}",
            got.iter().find(|&&v| v != want)
        );
    }
}

#[test]
#[ignore = "needs a CUDA device (run with --include-ignored on a GPU machine)"]
fn non_blocking_round_trips_device_host_device() {
    let d = Device::Cuda(0);
    let n = 3_000_001;
    let x = computed_on(&d, n);
    let back = x.to_non_blocking(&Device::Cpu).to_non_blocking(&d);
    assert_eq!(back.device(), d);
    assert_eq!((&back - &x).abs().max().item::<f32>(), 0.0);
    // Several hops in a row, each result used on the device at once.
    let mut t = x.clone();
    for _ in 0..3 {
        t = &t.to_non_blocking(&Device::Cpu).to_non_blocking(&d) + 1.0;
    }
    assert_eq!((&t - &(&x + 3.0)).abs().max().item::<f32>(), 0.0);
}
