//! The NCCL backend on a machine without it: `init_process_group(Backend::Nccl, …)` must be a
//! clear error naming what is missing (libnccl, a CUDA device), never a panic; and NCCL's unique
//! id must survive the trip through the `env://` store. tests/cuda_nccl.rs runs the collectives
//! where a GPU and libnccl are present.

use kiln::distributed::{self as dist, Backend, InitOptions, TcpStore};
use kiln::ErrorKind;
use kiln_runtime::cuda::nccl::{self, UniqueId, UNIQUE_ID_BYTES};
use std::time::Duration;

#[test]
fn init_without_nccl_or_a_gpu_names_what_is_missing() {
    let (lib, gpu) = (nccl::nccl_available(), kiln_runtime::cuda::is_available());
    if lib && gpu {
        return println!("skipping: libnccl and a CUDA device are present (tests/cuda_nccl.rs runs the backend)");
    }
    let e = dist::init_process_group(Backend::Nccl, InitOptions::with_timeout(Duration::from_secs(5)))
        .expect_err("NCCL started without libnccl or a GPU");
    assert_eq!((e.op, e.kind), ("init_process_group", ErrorKind::Device));
    assert!(e.message.starts_with("the NCCL backend cannot start on this machine: "), "{e}");
    assert_eq!(e.message.contains("NCCL (libnccl.so.2) not found"), !lib, "{e}");
    assert_eq!(e.message.contains("no CUDA device available"), !gpu, "{e}");
    assert!(e.location.file().ends_with("distributed_nccl.rs"), "{e}");
    assert!(!dist::is_initialized());
}

#[test]
fn unique_ids_round_trip_through_the_store() {
    // A port the OS just called free can be taken again before the store listens on it (CI
    // saw "Address already in use"): try a few.
    let (port, master) = (0..5)
        .find_map(|_| {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            TcpStore::new("127.0.0.1", port, true, Duration::from_secs(10)).ok().map(|m| (port, m))
        })
        .expect("the master store listens on one of 5 free ports");
    let worker = TcpStore::new("127.0.0.1", port, false, Duration::from_secs(10)).unwrap();
    // Every byte value, including the ones a C `char` holds as negative.
    let bytes: Vec<u8> = (0..UNIQUE_ID_BYTES).map(|i| (i * 2 + 1) as u8).collect();
    let id = UniqueId::from_bytes("test", &bytes).unwrap();
    master.set("nccl_id", &id.as_bytes()).unwrap();
    let got = UniqueId::from_bytes("test", &worker.get("nccl_id").unwrap()).unwrap();
    assert_eq!(got, id);
    assert_eq!(got.as_bytes().to_vec(), bytes);
    let e = UniqueId::from_bytes("test", &bytes[..100]).unwrap_err();
    assert!(e.message.contains("an NCCL unique id has 128 bytes, got 100"), "{e}");
}

#[test]
fn an_installed_nccl_makes_unique_ids_without_a_gpu() {
    if !nccl::nccl_available() {
        return println!("skipping: no libnccl (pip install nvidia-nccl-cu13 runs this test)");
    }
    println!(
        "NCCL {} from {:?}",
        nccl::version_text(nccl::nccl_version("test").unwrap()),
        nccl::nccl_library_path().unwrap()
    );
    // ncclGetUniqueId names this host and a port; it needs no device, and two ids differ.
    let (a, b) = (UniqueId::new("test").unwrap(), UniqueId::new("test").unwrap());
    assert!(a.as_bytes().iter().any(|&x| x != 0));
    assert_ne!(a, b);
}
