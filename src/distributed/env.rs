//! The launcher's environment: which rank this process is and how many there are, as
//! `mpirun` (Open MPI's `OMPI_COMM_WORLD_*`, MPICH's `PMI_*`) or `torchrun`-style launchers
//! (`RANK`, `WORLD_SIZE`) set them.

use crate::error::{Error, ErrorKind, Result};
use std::panic::Location;

/// Rank and world size as the environment gives them, with the variable names they came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LaunchEnv {
    pub rank: usize,
    pub world_size: usize,
    /// Which variables said so (for error messages).
    pub source: &'static str,
}

/// The variable pairs read, in order of preference.
const PAIRS: [(&str, &str); 3] =
    [("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"), ("RANK", "WORLD_SIZE")];

/// Reads the launcher's environment through `var`; `Ok(None)` when no launcher set it.
#[track_caller]
pub(crate) fn read(var: impl Fn(&str) -> Option<String>) -> Result<Option<LaunchEnv>> {
    for (rank_var, size_var) in PAIRS {
        let (Some(rank), Some(size)) = (var(rank_var), var(size_var)) else { continue };
        let at = Location::caller();
        let parse = |name: &str, value: &str| {
            value.trim().parse::<usize>().map_err(|_| {
                Error::at(
                    "init_process_group",
                    ErrorKind::Value,
                    format!("{name}={value:?} is not a non-negative integer"),
                    at,
                )
            })
        };
        let (rank, world_size) = (parse(rank_var, &rank)?, parse(size_var, &size)?);
        if rank >= world_size {
            return Err(Error::new(
                "init_process_group",
                ErrorKind::Value,
                format!("{rank_var}={rank} is not below {size_var}={world_size}"),
            ));
        }
        return Ok(Some(LaunchEnv { rank, world_size, source: rank_var }));
    }
    Ok(None)
}

/// [`read`] on this process's environment.
#[track_caller]
pub(crate) fn from_process() -> Result<Option<LaunchEnv>> {
    read(|k| std::env::var(k).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn prefers_mpirun_over_rank() {
        let e = read(env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
        ]))
        .unwrap();
        assert_eq!(e, Some(LaunchEnv { rank: 1, world_size: 2, source: "OMPI_COMM_WORLD_RANK" }));
        assert_eq!(read(env(&[("RANK", "3"), ("WORLD_SIZE", "4")])).unwrap().unwrap().rank, 3);
        assert_eq!(read(env(&[("RANK", "3")])).unwrap(), None);
    }

    #[test]
    fn refuses_bad_values() {
        let e = read(env(&[("RANK", "2"), ("WORLD_SIZE", "2")])).unwrap_err();
        assert!(e.message.contains("RANK=2 is not below WORLD_SIZE=2"), "{e}");
        let e = read(env(&[("RANK", "x"), ("WORLD_SIZE", "2")])).unwrap_err();
        assert!(e.message.contains("RANK=\"x\""), "{e}");
    }
}
