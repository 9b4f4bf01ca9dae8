//! `SummaryWriter` (torch.utils.tensorboard's): the `add_*` methods turn values into summaries
//! and write them as events, to the run's event file or, for `add_scalars` and `add_hparams`,
//! to sub-runs beside it.

use super::event_file::EventFile;
use super::graph::graph_def;
use super::histogram::histogram;
use super::hparams::{summaries, HParam};
use super::image::image;
use super::names::{default_log_dir, wall_time};
use super::proto::{
    DataType, Dim, PluginData, Summary, SummaryMetadata, SummaryValue, TensorProto, TensorShapeProto, TextPluginData,
    Value, What,
};
use crate::error::{Error, ErrorKind, Result};
use crate::{CompiledStep, Scalar, Tensor};
use prost::Message;
use std::collections::BTreeMap;
use std::panic::Location;
use std::path::{Path, PathBuf};

/// How a [`SummaryWriter`] writes its files, with torch's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriterOpts {
    /// Events buffered before they are written to the file (10).
    pub max_queue: usize,
    /// Seconds after which buffered events are written at the next `add_*` call (120).
    pub flush_secs: u64,
    /// Appended to every event file's name ("").
    pub filename_suffix: String,
}

impl Default for WriterOpts {
    fn default() -> WriterOpts {
        WriterOpts { max_queue: 10, flush_secs: 120, filename_suffix: String::new() }
    }
}

/// Writes a TensorBoard run: scalars, histograms, images, text, hyperparameters and a compiled
/// step's graph, as event files in its log folder (torch's
/// `torch.utils.tensorboard.SummaryWriter`; see [the module docs](super) for the
/// differences). Every method returns a [`Result`]: an I/O failure, bad input or a closed
/// writer is an error naming the method and the caller's line. Dropping the writer closes it.
pub struct SummaryWriter {
    /// The run's folder.
    log_dir: PathBuf,
    /// How files are written (sub-runs too).
    opts: WriterOpts,
    /// The run's event file; `None` once closed.
    file: Option<EventFile>,
    /// `add_scalars`' sub-runs, by folder.
    sub_runs: BTreeMap<PathBuf, EventFile>,
}

impl SummaryWriter {
    /// A writer of a new event file in `log_dir`, which is created if missing
    /// (`SummaryWriter(log_dir)`).
    #[track_caller]
    pub fn new(log_dir: impl AsRef<Path>) -> Result<SummaryWriter> {
        SummaryWriter::with_opts(log_dir, &WriterOpts::default())
    }

    /// A writer in torch's default folder, `runs/{date}_{host}{comment}` (`Dec08_14-03-59`,
    /// local time): `with_comment("")` is torch's `SummaryWriter()`,
    /// `with_comment("_lr0.1")` its `SummaryWriter(comment="_lr0.1")`.
    #[track_caller]
    pub fn with_comment(comment: &str) -> Result<SummaryWriter> {
        SummaryWriter::new(default_log_dir(comment))
    }

    /// A writer of a new event file in `log_dir` (created if missing), written as `opts` says.
    #[track_caller]
    pub fn with_opts(log_dir: impl AsRef<Path>, opts: &WriterOpts) -> Result<SummaryWriter> {
        let at = Location::caller();
        let log_dir = log_dir.as_ref().to_path_buf();
        let file = open("SummaryWriter", &log_dir, opts, at)?;
        Ok(SummaryWriter { log_dir, opts: opts.clone(), file: Some(file), sub_runs: BTreeMap::new() })
    }

    /// The run's folder (`get_logdir()`).
    pub fn get_logdir(&self) -> &Path {
        &self.log_dir
    }

    /// The path of the run's event file, `None` once closed.
    pub fn event_file(&self) -> Option<&Path> {
        self.file.as_ref().map(EventFile::path)
    }

    /// Logs `value` under `tag` at `step` (`add_scalar`): the Scalars tab plots one curve per
    /// tag. Numbers of any type are stored as f32, as torch's `simple_value` is.
    #[track_caller]
    pub fn add_scalar(&mut self, tag: &str, value: impl Into<Scalar>, step: i64) -> Result<()> {
        let value = Value::SimpleValue(value.into().to_f64() as f32);
        self.write("add_scalar", summary(tag, None, value), step, Location::caller())
    }

    /// Logs several scalars as curves of one chart (`add_scalars`): as torch does, each
    /// `(tag, value)` goes to the sub-run `{log_dir}/{main_tag}_{tag}` (`/` in `main_tag`
    /// written `_`) under the tag `main_tag`, so TensorBoard draws the runs' curves together.
    #[track_caller]
    pub fn add_scalars(&mut self, main_tag: &str, values: &[(&str, f64)], step: i64) -> Result<()> {
        const OP: &str = "add_scalars";
        let at = Location::caller();
        self.check_open(OP, at)?;
        for (tag, value) in values {
            let dir = self.log_dir.join(format!("{}_{tag}", main_tag.replace('/', "_")));
            let file = match self.sub_runs.entry(dir) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    let file = open(OP, e.key(), &self.opts, at)?;
                    e.insert(file)
                }
            };
            let what = What::Summary(summary(main_tag, None, Value::SimpleValue(*value as f32)));
            file.write(what, step).map_err(|e| io_error(OP, file.path(), e, at))?;
        }
        Ok(())
    }

    /// Logs the histogram of `values`' elements under `tag` at `step` (`add_histogram` with
    /// its default `bins="tensorflow"`): TensorFlow's exponential buckets, trimmed to the
    /// non-empty span (see [`HistogramProto`](super::proto::HistogramProto)). An empty tensor,
    /// a NaN or an infinity is an error.
    #[track_caller]
    pub fn add_histogram(&mut self, tag: &str, values: &Tensor, step: i64) -> Result<()> {
        const OP: &str = "add_histogram";
        let at = Location::caller();
        let data = values.try_to_vec::<f64>().map_err(|e| Error { op: OP, location: at, ..e })?;
        let histo = histogram(&data)
            .map_err(|m| Error::at(OP, ErrorKind::Value, format!("{m} (tensor of shape {:?})", values.shape()), at))?;
        self.write(OP, summary(tag, None, Value::Histo(histo)), step, at)
    }

    /// Logs one image under `tag` at `step` (`add_image`). `dataformats` names the dims of
    /// `image`: `"CHW"` (torch's default), `"HWC"` or `"HW"`; 1 (gray, shown as RGB), 3 (RGB)
    /// or 4 (RGBA) channels. A `U8` image is stored as is; any other dtype is taken as values
    /// in `[0, 1]`: scaled by 255, clipped and truncated to bytes.
    #[track_caller]
    pub fn add_image(&mut self, tag: &str, image_data: &Tensor, step: i64, dataformats: &str) -> Result<()> {
        const OP: &str = "add_image";
        let img = image(OP, image_data, dataformats, false)?;
        self.write(OP, summary(tag, None, Value::Image(img)), step, Location::caller())
    }

    /// Logs a batch of images as one grid image under `tag` at `step` (`add_images`):
    /// `dataformats` is `"NCHW"` (torch's default) or `"NHWC"`; up to 8 images per row, no
    /// padding, as torch lays them out; values as in [`SummaryWriter::add_image`].
    #[track_caller]
    pub fn add_images(&mut self, tag: &str, images: &Tensor, step: i64, dataformats: &str) -> Result<()> {
        const OP: &str = "add_images";
        let img = image(OP, images, dataformats, true)?;
        self.write(OP, summary(tag, None, Value::Image(img)), step, Location::caller())
    }

    /// Logs `text` (Markdown) under `tag` at `step` (`add_text`): as torch does, the value's
    /// tag is `{tag}/text_summary`, a string tensor for the text plugin.
    #[track_caller]
    pub fn add_text(&mut self, tag: &str, text: &str, step: i64) -> Result<()> {
        let plugin = PluginData { plugin_name: "text".into(), content: TextPluginData { version: 0 }.encode_to_vec() };
        let tensor = TensorProto {
            dtype: DataType::DtString as i32,
            tensor_shape: Some(TensorShapeProto { dim: vec![Dim { size: 1 }] }),
            string_val: vec![text.as_bytes().to_vec()],
        };
        let s = summary(&format!("{tag}/text_summary"), Some(plugin), Value::Tensor(tensor));
        self.write("add_text", s, step, Location::caller())
    }

    /// Logs a run of a hyperparameter search (`add_hparams`): as torch does, a sub-run
    /// `{log_dir}/{run_name}` (`run_name` `None`: the current time in seconds, torch's default)
    /// gets the hparams plugin's experiment, session start and end summaries and each metric
    /// as a scalar at step 0, and the HParams tab shows `hparams` beside the metrics.
    #[track_caller]
    pub fn add_hparams(
        &mut self,
        hparams: &[(&str, HParam)],
        metrics: &[(&str, f64)],
        run_name: Option<&str>,
    ) -> Result<()> {
        const OP: &str = "add_hparams";
        let at = Location::caller();
        self.check_open(OP, at)?;
        let run = match run_name {
            Some(name) if !name.is_empty() => name.to_string(),
            _ => wall_time().to_string(),
        };
        let dir = self.log_dir.join(run);
        let mut file = open(OP, &dir, &self.opts, at)?;
        let tags: Vec<&str> = metrics.iter().map(|(tag, _)| *tag).collect();
        let scalars = metrics.iter().map(|(tag, v)| summary(tag, None, Value::SimpleValue(*v as f32)));
        for s in summaries(hparams, &tags).into_iter().chain(scalars) {
            file.write(What::Summary(s), 0).map_err(|e| io_error(OP, file.path(), e, at))?;
        }
        file.flush().map_err(|e| io_error(OP, file.path(), e, at))
    }

    /// Logs the graph of `step`'s last call (`add_graph`): the Graphs tab shows its forward,
    /// backward and update nodes, each fused kernel as a box (see [`super::graph`] for the
    /// names and attributes). Call the step once first; a step not yet called is an error.
    #[track_caller]
    pub fn add_graph<F>(&mut self, step: &CompiledStep<F>) -> Result<()> {
        const OP: &str = "add_graph";
        let at = Location::caller();
        let nodes = step.graph_nodes();
        if nodes.is_empty() {
            return Err(Error::at(
                OP,
                ErrorKind::Value,
                "the compiled step has no graph yet: call it once before add_graph",
                at,
            ));
        }
        self.write_event(OP, What::GraphDef(graph_def(&nodes).encode_to_vec()), 0, at)
    }

    /// Writes every buffered event to its file (`flush`).
    #[track_caller]
    pub fn flush(&mut self) -> Result<()> {
        const OP: &str = "flush";
        let at = Location::caller();
        self.check_open(OP, at)?;
        for file in self.file.iter_mut().chain(self.sub_runs.values_mut()) {
            file.flush().map_err(|e| io_error(OP, file.path(), e, at))?;
        }
        Ok(())
    }

    /// Flushes and closes the event files (`close`); closing twice does nothing, and any
    /// `add_*` or `flush` after it is an error. Dropping the writer closes it too (ignoring
    /// errors: close it to see them).
    #[track_caller]
    pub fn close(&mut self) -> Result<()> {
        if self.file.is_none() {
            return Ok(());
        }
        let flushed = self.flush();
        self.file = None;
        self.sub_runs.clear();
        flushed
    }

    /// An error unless the writer is open.
    fn check_open(&self, op: &'static str, at: &'static Location<'static>) -> Result<()> {
        match self.file {
            Some(_) => Ok(()),
            None => Err(Error::at(
                op,
                ErrorKind::Value,
                format!("the SummaryWriter of {} was closed", self.log_dir.display()),
                at,
            )),
        }
    }

    /// Writes `summary` at `step` to the run's event file.
    fn write(&mut self, op: &'static str, summary: Summary, step: i64, at: &'static Location<'static>) -> Result<()> {
        self.write_event(op, What::Summary(summary), step, at)
    }

    /// Writes an event holding `what` at `step` to the run's event file.
    fn write_event(&mut self, op: &'static str, what: What, step: i64, at: &'static Location<'static>) -> Result<()> {
        self.check_open(op, at)?;
        let file = self.file.as_mut().expect("checked open");
        file.write(what, step).map_err(|e| io_error(op, file.path(), e, at))
    }
}

impl Drop for SummaryWriter {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// A summary of one value.
fn summary(tag: &str, plugin: Option<PluginData>, value: Value) -> Summary {
    let metadata = plugin.map(|p| SummaryMetadata { plugin_data: Some(p) });
    Summary { value: vec![SummaryValue { tag: tag.to_string(), metadata, value: Some(value) }] }
}

/// A new event file in `dir`, or `op`'s error.
fn open(op: &'static str, dir: &Path, opts: &WriterOpts, at: &'static Location<'static>) -> Result<EventFile> {
    EventFile::create(dir, opts).map_err(|e| {
        Error::at(op, ErrorKind::Io, format!("cannot create an event file in {}: {e}", dir.display()), at).caused_by(e)
    })
}

/// `op`'s error for an I/O failure writing `path`.
fn io_error(op: &'static str, path: &Path, e: std::io::Error, at: &'static Location<'static>) -> Error {
    Error::at(op, ErrorKind::Io, format!("cannot write {}: {e}", path.display()), at).caused_by(e)
}
