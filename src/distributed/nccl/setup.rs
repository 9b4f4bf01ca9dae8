//! Starting an NCCL rank: what the machine must have, which GPU this process uses, and the
//! unique id rank 0 hands every rank through the `env://` store.

use crate::cuda::OrOp;
use crate::distributed::env::LaunchEnv;
use crate::distributed::options::InitOptions;
use crate::distributed::rendezvous::EnvRendezvous;
use crate::error::{Error, ErrorKind, Result};
use kiln_runtime::cuda::nccl::UniqueId;

/// The op every setup error names.
pub(super) const OP: &str = "init_process_group";

/// The store key of NCCL's unique id.
const ID_KEY: &str = "kiln/nccl_unique_id";

/// Ok when this machine can run the NCCL backend; else one error naming everything missing
/// (libnccl, a CUDA device), checked before anything calls into NCCL.
#[track_caller]
pub(super) fn check_available() -> Result<()> {
    let mut missing = Vec::new();
    if let Err(e) = kiln_runtime::cuda::nccl::nccl_version(OP) {
        missing.push(e.message);
    }
    if !kiln_runtime::cuda::is_available() {
        missing.push(kiln_runtime::cuda::no_device(OP, 0).message);
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        OP,
        ErrorKind::Device,
        format!("the NCCL backend cannot start on this machine: {}", missing.join("; ")),
    ))
}

/// The variables that give a process's rank on its machine, in order of preference:
/// `torchrun`'s, Open MPI's, MPICH's.
const LOCAL_RANK_VARS: [&str; 3] = ["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"];

/// The ordinal of the GPU this rank uses: its local rank (read through `var`), else
/// `rank % devices`. Errors: a malformed local rank, or one past the machine's devices.
#[track_caller]
pub(super) fn local_device(var: impl Fn(&str) -> Option<String>, rank: usize, devices: usize) -> Result<usize> {
    let Some((name, value)) = LOCAL_RANK_VARS.iter().find_map(|n| var(n).map(|v| (*n, v))) else {
        return Ok(rank % devices.max(1));
    };
    let Ok(local) = value.trim().parse::<usize>() else {
        return Err(Error::new(OP, ErrorKind::Value, format!("{name}={value:?} is not a non-negative integer")));
    };
    if local >= devices {
        return Err(Error::new(
            OP,
            ErrorKind::Device,
            format!("{name}={local}, but this machine has {devices} CUDA device(s): start one process per GPU"),
        ));
    }
    Ok(local)
}

/// Rank and world size for the rendezvous: the launcher's (`RANK`/`WORLD_SIZE`, or `mpirun`'s
/// own variables), else the options; `None` parts are left for the rendezvous to report.
fn place(env: Option<LaunchEnv>, opts: &InitOptions) -> (Option<usize>, Option<usize>) {
    match env {
        Some(e) => (Some(e.rank), Some(e.world_size)),
        None => (opts.rank, opts.world_size),
    }
}

/// Meets the other ranks at `MASTER_ADDR:MASTER_PORT` and returns (rank, world size, the
/// unique id rank 0 made). Every wait is bounded by `opts.timeout`.
#[track_caller]
pub(super) fn rendezvous(opts: &InitOptions) -> Result<(usize, usize, UniqueId)> {
    let (rank, world_size) = place(crate::distributed::env::from_process()?, opts);
    let var = |k: &str| match k {
        "RANK" => rank.map(|r| r.to_string()),
        "WORLD_SIZE" => world_size.map(|w| w.to_string()),
        _ => std::env::var(k).ok(),
    };
    let rv = EnvRendezvous::from_vars(var, opts.timeout)?;
    // Made before the exchange, so a failure on rank 0 is its error, not a hang elsewhere.
    let mine = if rv.rank == 0 { UniqueId::new(OP).or_op(OP)?.as_bytes().to_vec() } else { Vec::new() };
    let bytes = rv.share_from_rank0(ID_KEY, move || mine)?;
    let id = UniqueId::from_bytes(OP, &bytes).or_op(OP)?;
    Ok((rv.rank, rv.world_size, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn the_device_is_the_local_rank_else_rank_modulo_devices() {
        assert_eq!(local_device(vars(&[]), 5, 4).unwrap(), 1);
        assert_eq!(local_device(vars(&[("LOCAL_RANK", "2")]), 5, 4).unwrap(), 2);
        assert_eq!(
            local_device(vars(&[("OMPI_COMM_WORLD_LOCAL_RANK", "3"), ("MPI_LOCALRANKID", "0")]), 0, 4).unwrap(),
            3
        );
        let e = local_device(vars(&[("LOCAL_RANK", "4")]), 0, 4).unwrap_err();
        assert!(e.message.contains("LOCAL_RANK=4, but this machine has 4 CUDA device(s)"), "{e}");
        let e = local_device(vars(&[("LOCAL_RANK", "x")]), 0, 4).unwrap_err();
        assert!(e.message.contains("LOCAL_RANK=\"x\""), "{e}");
    }

    #[test]
    fn the_launcher_wins_over_the_options() {
        let opts = InitOptions { rank: Some(1), world_size: Some(3), ..Default::default() };
        assert_eq!(place(None, &opts), (Some(1), Some(3)));
        let env = LaunchEnv { rank: 0, world_size: 2, source: "RANK" };
        assert_eq!(place(Some(env), &opts), (Some(0), Some(2)));
    }
}
