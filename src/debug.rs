//! `KILN_DEBUG` topics, read at run time:
//! `KILN_DEBUG=graph,fusion,kernels,cache,recompiles,breaks,tuning,data,profile` (or `all`)
//! prints what the graph compiler (and, under `data`, the data loader) does, to standard error,
//! one `[kiln topic]` line (or block) per event.

use std::sync::OnceLock;

/// A debug topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    /// Each plan's graph when it is built: nodes, reads, shapes, dtypes, phases.
    Graph,
    /// Why nodes did not fuse with their producers, and kernels left to eager code.
    Fusion,
    /// Each generated kernel's source (CLIF), once, when it is compiled.
    Kernels,
    /// Plan and kernel cache hits and misses.
    Cache,
    /// For a plan miss of a step that ran before: what changed.
    Recompiles,
    /// Each graph break, with the user's `file:line`.
    Breaks,
    /// Each matrix product shape whose spread over threads a compiled plan measured: the
    /// choice and every candidate's time.
    Tuning,
    /// Data loader decisions: `pin_memory(true)` without a CUDA device (batches stay unpinned).
    Data,
    /// The time of each step of the compiled CPU plans (kernel, product, other op), summed
    /// over calls and printed as a table, slowest first, when a `CompiledStep` is dropped.
    Profile,
}

impl Topic {
    const ALL: [Topic; 9] = [
        Topic::Graph,
        Topic::Fusion,
        Topic::Kernels,
        Topic::Cache,
        Topic::Recompiles,
        Topic::Breaks,
        Topic::Tuning,
        Topic::Data,
        Topic::Profile,
    ];

    /// The topic's name in `KILN_DEBUG`.
    pub fn name(self) -> &'static str {
        match self {
            Topic::Graph => "graph",
            Topic::Fusion => "fusion",
            Topic::Kernels => "kernels",
            Topic::Cache => "cache",
            Topic::Recompiles => "recompiles",
            Topic::Breaks => "breaks",
            Topic::Tuning => "tuning",
            Topic::Data => "data",
            Topic::Profile => "profile",
        }
    }

    fn bit(self) -> u32 {
        1 << Topic::ALL.iter().position(|&t| t == self).expect("listed")
    }
}

/// The topics `KILN_DEBUG` names (read once).
fn topics() -> u32 {
    static TOPICS: OnceLock<u32> = OnceLock::new();
    *TOPICS.get_or_init(|| parse(&std::env::var("KILN_DEBUG").unwrap_or_default()))
}

/// The topic bits of a `KILN_DEBUG` value (unknown words are ignored).
fn parse(value: &str) -> u32 {
    value
        .split(',')
        .map(str::trim)
        .map(|w| if w == "all" { u32::MAX } else { Topic::ALL.iter().find(|t| t.name() == w).map_or(0, |t| t.bit()) })
        .fold(0, |a, b| a | b)
}

/// Whether `KILN_DEBUG` asks for `topic`.
pub fn enabled(topic: Topic) -> bool {
    topics() & topic.bit() != 0
}

/// Prints `message` under `topic` when it is enabled.
pub fn log(topic: Topic, message: impl AsRef<str>) {
    if enabled(topic) {
        eprintln!("[kiln {}] {}", topic.name(), message.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_parse() {
        assert_eq!(parse(""), 0);
        assert_eq!(parse("kernels"), Topic::Kernels.bit());
        assert_eq!(parse("graph, breaks,bogus"), Topic::Graph.bit() | Topic::Breaks.bit());
        assert_eq!(parse("all") & Topic::Cache.bit(), Topic::Cache.bit());
        assert_eq!(parse("data"), Topic::Data.bit());
        assert_eq!(parse("tuning,cache"), Topic::Tuning.bit() | Topic::Cache.bit());
        assert_eq!(parse("profile"), Topic::Profile.bit());
    }
}
