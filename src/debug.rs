//! `KILN_DEBUG` topics, read at run time:
//! `KILN_DEBUG=graph,fusion,kernels,clif,cuda,cache,recompiles,breaks,tuning,data,profile` (or `all`)
//! prints what the graph compiler (and, under `data`, the data loader) does, to standard error,
//! one `[kiln topic]` line (or block) per event. `KILN_DEBUG=help` lists the topics; a word
//! that names no topic gets one warning, when the variable is first read.

use std::sync::OnceLock;

/// A debug topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    /// Each plan's graph when it is built: nodes, reads, shapes, dtypes, phases.
    Graph,
    /// Why nodes did not fuse with their producers, and kernels left to eager code.
    Fusion,
    /// Each new kernel as a listing a person reads, once, when it is compiled: its inputs
    /// (the graph nodes they read), one line per operation with its node and the source line
    /// that recorded it, its outputs (`kiln_codegen::listing`).
    Kernels,
    /// Each new CPU kernel's Cranelift IR (CLIF), once, when it is compiled.
    Clif,
    /// Each new CUDA kernel's C source, once, when it is generated.
    Cuda,
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
    const ALL: [Topic; 11] = [
        Topic::Graph,
        Topic::Fusion,
        Topic::Kernels,
        Topic::Clif,
        Topic::Cuda,
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
            Topic::Clif => "clif",
            Topic::Cuda => "cuda",
            Topic::Cache => "cache",
            Topic::Recompiles => "recompiles",
            Topic::Breaks => "breaks",
            Topic::Tuning => "tuning",
            Topic::Data => "data",
            Topic::Profile => "profile",
        }
    }

    /// What the topic prints, in one line (for `KILN_DEBUG=help`).
    fn description(self) -> &'static str {
        match self {
            Topic::Graph => "each new plan's graph: nodes, reads, shapes, dtypes, phases",
            Topic::Fusion => "why nodes did not fuse with their producers; kernels left to eager code",
            Topic::Kernels => {
                "each new kernel as a readable listing: inputs, ops with their nodes and source lines, outputs"
            }
            Topic::Clif => "each new CPU kernel's Cranelift IR",
            Topic::Cuda => "each new CUDA kernel's C source",
            Topic::Cache => "plan and kernel cache hits and misses",
            Topic::Recompiles => "for a plan miss of a step that ran before: what changed",
            Topic::Breaks => "each graph break, with the user's file:line",
            Topic::Tuning => "how each large CPU matrix product's split over threads was chosen",
            Topic::Data => "data loader decisions",
            Topic::Profile => "each compiled CPU plan step's time, as a table when the step is dropped",
        }
    }

    fn bit(self) -> u32 {
        1 << Topic::ALL.iter().position(|&t| t == self).expect("listed")
    }
}

/// The topics `KILN_DEBUG` names (read once; the first read prints the help or the warning
/// that [`parse`] asks for).
fn topics() -> u32 {
    static TOPICS: OnceLock<u32> = OnceLock::new();
    *TOPICS.get_or_init(|| {
        let parsed = parse(&std::env::var("KILN_DEBUG").unwrap_or_default());
        if let Some(message) = parsed.message {
            eprintln!("{message}");
        }
        parsed.bits
    })
}

/// A parsed `KILN_DEBUG` value.
struct Parsed {
    /// The topic bits it asks for.
    bits: u32,
    /// The help text (for `help`) or a warning naming its unknown words, to print once.
    message: Option<String>,
}

/// Parses a `KILN_DEBUG` value: topic names and `all`, separated by commas; `help` asks for the
/// list of topics, and words that are neither are ignored with a warning.
fn parse(value: &str) -> Parsed {
    let (mut bits, mut unknown, mut help) = (0, Vec::new(), false);
    for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        match word {
            "all" => bits = u32::MAX,
            "help" => help = true,
            _ => match Topic::ALL.iter().find(|t| t.name() == word) {
                Some(t) => bits |= t.bit(),
                None => unknown.push(word),
            },
        }
    }
    let message = if help {
        Some(help_text())
    } else if !unknown.is_empty() {
        let names: Vec<&str> = Topic::ALL.iter().map(|t| t.name()).collect();
        Some(format!(
            "[kiln] KILN_DEBUG: ignoring {} (not a topic); topics: {}, or all (KILN_DEBUG=help describes them)",
            unknown.iter().map(|w| format!("`{w}`")).collect::<Vec<_>>().join(", "),
            names.join(", ")
        ))
    } else {
        None
    };
    Parsed { bits, message }
}

/// `KILN_DEBUG=help`: every topic with what it prints.
fn help_text() -> String {
    let mut text = String::from("[kiln] KILN_DEBUG=topic,topic,… prints to standard error:\n");
    for t in Topic::ALL {
        text += &format!("  {:<11} {}\n", t.name(), t.description());
    }
    text + "  all         every topic\nKILN_DUMP_DIR=dir also writes each new plan's graph (.dot) and kernels there."
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
        let bits = |v: &str| parse(v).bits;
        assert_eq!(bits(""), 0);
        assert_eq!(bits("kernels"), Topic::Kernels.bit());
        assert_eq!(bits("graph, breaks"), Topic::Graph.bit() | Topic::Breaks.bit());
        assert_eq!(bits("all") & Topic::Cache.bit(), Topic::Cache.bit());
        assert_eq!(bits("data"), Topic::Data.bit());
        assert_eq!(bits("tuning,cache"), Topic::Tuning.bit() | Topic::Cache.bit());
        assert_eq!(bits("profile"), Topic::Profile.bit());
        assert!(parse("graph,kernels").message.is_none());
    }

    #[test]
    fn unknown_words_are_named_in_one_warning_and_known_ones_still_count() {
        let p = parse("fusions, graph,1");
        assert_eq!(p.bits, Topic::Graph.bit());
        let warning = p.message.expect("a warning");
        assert!(warning.starts_with("[kiln] KILN_DEBUG: ignoring `fusions`, `1` (not a topic); topics: graph, fusion,"));
        assert!(warning.contains("KILN_DEBUG=help"), "{warning}");
    }

    #[test]
    fn help_lists_every_topic_with_its_description() {
        let p = parse("help");
        assert_eq!(p.bits, 0);
        let text = p.message.expect("the help");
        for t in Topic::ALL {
            let line = format!("  {:<11} {}", t.name(), t.description());
            assert!(text.lines().any(|l| l == line), "{line:?} missing from {text}");
        }
    }
}
