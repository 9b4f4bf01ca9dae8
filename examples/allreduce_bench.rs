//! All-reduce bandwidth across processes: `kiln::distributed::all_reduce` on a 100 MB f32 tensor
//! next to the MPI library's own blocking `MPI_Allreduce` of the same bytes, in the same run
//! (issue 7's target: kiln ≥ 90% of MPI's).
//!
//!     cargo build --release --features mpi --example allreduce_bench
//!     mpirun -np 2 target/release/examples/allreduce_bench [MB] [ITERS]
//!
//! Each measurement starts after a barrier; the two are interleaved, iteration by iteration, so
//! that machine noise hits both alike. GB/s is bytes / time (PyTorch's "algbw"; for 2 ranks
//! the bus bandwidth is the same). Rank 0 prints the table (the median and best time of each).

use kiln::distributed::{self as dist, Backend, InitOptions, ReduceOp};
use kiln::Tensor;
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::topology::SimpleCommunicator;
use std::time::{Duration, Instant};

fn main() -> kiln::Result<()> {
    let mut args = std::env::args().skip(1);
    let mb: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let iters: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    dist::init_process_group(Backend::Mpi, InitOptions::with_timeout(Duration::from_secs(120)))?;
    let (rank, world_size) = (dist::rank()?, dist::world_size()?);
    let n = mb * 1_000_000 / 4;
    let bytes = (n * 4) as f64;
    let world = SimpleCommunicator::world();

    let t = Tensor::full([n], rank as f64 + 1.0);
    let send = vec![rank as f32 + 1.0; n];
    let mut recv = vec![0f32; n];
    let (mut kiln_times, mut mpi_times) = (Vec::new(), Vec::new());
    for i in 0..=iters {
        dist::barrier()?;
        let start = Instant::now();
        dist::all_reduce(&t, ReduceOp::Sum)?;
        let k = start.elapsed();
        dist::barrier()?;
        let start = Instant::now();
        world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
        let m = start.elapsed();
        if i > 0 {
            // Iteration 0 warms the allocator's cache and MPI's connections.
            kiln_times.push(k);
            mpi_times.push(m);
        }
    }
    // Sums grow every iteration (t keeps its result); check one element against the formula.
    let total: f64 = (1..=world_size).map(|r| r as f64).sum();
    let want = total * (world_size as f64).powi(iters as i32);
    let got = t.narrow(0, 0, 1).item::<f32>() as f64;
    assert!((got - want).abs() <= want * 1e-6, "kiln's all-reduce gave {got}, expected {want}");
    assert!(recv.iter().all(|&v| v as f64 == total), "MPI_Allreduce gave a wrong sum");

    if rank == 0 {
        let stats = |v: &mut Vec<Duration>| {
            v.sort();
            (v[v.len() / 2], v[0])
        };
        let ((km, kb), (mm, mb_)) = (stats(&mut kiln_times), stats(&mut mpi_times));
        let gbs = |d: Duration| bytes / d.as_secs_f64() / 1e9;
        println!(
            "all-reduce (sum) of {mb} MB f32 across {world_size} ranks, {iters} iterations, {}",
            dist::mpi_library_version().unwrap_or_default().lines().next().unwrap_or("")
        );
        println!("| implementation | median ms | median GB/s | best ms | best GB/s |");
        println!("|---|---|---|---|---|");
        println!(
            "| kiln::distributed::all_reduce | {:.1} | {:.2} | {:.1} | {:.2} |",
            km.as_secs_f64() * 1e3,
            gbs(km),
            kb.as_secs_f64() * 1e3,
            gbs(kb)
        );
        println!(
            "| MPI_Allreduce (mpi crate) | {:.1} | {:.2} | {:.1} | {:.2} |",
            mm.as_secs_f64() * 1e3,
            gbs(mm),
            mb_.as_secs_f64() * 1e3,
            gbs(mb_)
        );
        println!("kiln / MPI (median): {:.0}%", 100.0 * mm.as_secs_f64() / km.as_secs_f64());
    }
    dist::destroy_process_group()
}
