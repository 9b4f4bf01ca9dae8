//! TensorBoard logging (PyTorch's `torch.utils.tensorboard`): [`SummaryWriter`] writes a run's
//! scalars, histograms, images, text, hyperparameters and a compiled step's graph as event
//! files that `tensorboard --logdir runs` shows.
//!
//! ```no_run
//! use kiln::prelude::*;
//! use kiln::tensorboard::SummaryWriter;
//! # fn main() -> kiln::Result<()> {
//! let mut writer = SummaryWriter::new("runs/mnist")?;
//! for step in 0..100 {
//!     let loss = 1.0 / (step as f64 + 1.0);
//!     writer.add_scalar("loss/train", loss, step)?;
//! }
//! let w = Tensor::randn([128, 64]);
//! writer.add_histogram("fc1.weight", &w, 0)?;
//! writer.add_images("digits", &Tensor::rand([16, 1, 28, 28]), 0, "NCHW")?;
//! writer.add_text("notes", "**lr** 0.1", 0)?;
//! writer.add_hparams(&[("lr", 0.1.into()), ("optimizer", "adam".into())], &[("hparam/accuracy", 0.98)], None)?;
//! writer.close()?;
//! # Ok(()) }
//! ```
//!
//! The files are in TensorBoard's format: `events.out.tfevents.{secs}.{host}.{pid}.{n}`
//! in the log folder, a sequence of records (`record`: length, masked CRC-32C of the length,
//! data, masked CRC-32C of the data), each an `Event` message (`proto`) whose first says
//! `brain.Event:2`. [`read_events`] reads a file back, checking every CRC.
//!
//! The map:
//! - `writer` — [`SummaryWriter`] and [`WriterOpts`]: the `add_*` methods, `flush`, `close`.
//! - `event_file` — one event file: its name and first event, records behind a buffer
//!   flushed every `max_queue` events or `flush_secs`.
//! - `record` — the record framing both ways, the masked CRC-32C, [`read_events`].
//! - `proto` — TensorBoard's protobuf messages as `prost` derives (the fields kiln writes).
//! - `histogram` — torch's default histogram (TensorFlow's exponential buckets).
//! - `image` — `add_image`/`add_images`: dims by `dataformats`, grid, bytes, PNG.
//! - `hparams` — [`HParam`] and the hparams plugin's three summaries.
//! - `graph` — a compiled step's graph ([`CompiledStep::graph_nodes`]) as a `GraphDef`.
//! - `names` — torch's file and folder names, the wall time.
//!
//! Differences from torch, where Rust or kiln asks for one:
//! - Every method returns [`Result`](crate::Result) (I/O, bad input, a closed writer: torch
//!   would reopen a closed writer, kiln refuses); `step` is an `i64` and always written;
//!   `walltime` is always the current time.
//! - `SummaryWriter()` / `SummaryWriter(comment=c)` is [`SummaryWriter::with_comment`];
//!   `max_queue`, `flush_secs` and `filename_suffix` are [`WriterOpts`]; `purge_step` is not
//!   there. Events go to a buffer written every `max_queue` events, at the first call after
//!   `flush_secs`, on `flush`, `close` and drop (torch writes from a background thread).
//! - `add_image` and `add_images` take `dataformats` as their last argument (torch's defaults
//!   are `"CHW"` and `"NCHW"`); `add_images` needs a 4-letter format. A batch with 4 channels
//!   keeps them (RGBA), where torch's grid refuses them.
//! - `add_histogram` has torch's default bins only (no `bins=` or `max_bins`); a NaN or an
//!   infinity is an error rather than a histogram TensorBoard cannot draw.
//! - `add_scalars` takes `&[(tag, value)]`; `add_hparams` takes `&[(name, HParam)]` and the
//!   metrics as `&[(tag, value)]`, and an optional `run_name` (no `hparam_domain_discrete` or
//!   `global_step`).
//! - `add_graph` takes a [`CompiledStep`] that has been called, and writes the graph kiln
//!   captured and fused (its forward, backward and update, and the kernels), not a trace of
//!   a module; it writes no run metadata (no step stats).
//!
//! [`CompiledStep`]: crate::CompiledStep
//! [`CompiledStep::graph_nodes`]: crate::CompiledStep::graph_nodes

mod event_file;
mod graph;
mod histogram;
mod hparams;
mod image;
mod names;
pub mod proto;
mod record;
mod writer;

pub use hparams::HParam;
pub use record::read_events;
pub use writer::{SummaryWriter, WriterOpts};
