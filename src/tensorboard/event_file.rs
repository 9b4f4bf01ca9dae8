//! One event file: created in its folder under torch's name, its first event
//! (`file_version: "brain.Event:2"`) written and flushed at once, then each event framed as a
//! record behind a buffer that reaches the file every `max_queue` events, once `flush_secs`
//! have passed since the last flush, and on [`EventFile::flush`].

use super::names::{event_file_name, wall_time};
use super::proto::{Event, SourceMetadata, What};
use super::record::write_record;
use super::WriterOpts;
use prost::Message;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// An open event file.
pub(crate) struct EventFile {
    /// Where it is.
    path: PathBuf,
    /// The file, behind a buffer.
    out: BufWriter<File>,
    /// Events written to the buffer since the last flush.
    pending: usize,
    /// When the buffer was last flushed.
    flushed_at: Instant,
    /// Flush after this many pending events.
    max_queue: usize,
    /// Flush once this long has passed since the last flush.
    flush_every: Duration,
}

impl EventFile {
    /// Creates `dir` (and its parents) and a new event file in it, with its first event.
    pub(crate) fn create(dir: &Path, opts: &WriterOpts) -> io::Result<EventFile> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(event_file_name(&opts.filename_suffix));
        let file = OpenOptions::new().write(true).create_new(true).open(&path)?;
        let mut f = EventFile {
            path,
            out: BufWriter::new(file),
            pending: 0,
            flushed_at: Instant::now(),
            max_queue: opts.max_queue.max(1),
            flush_every: Duration::from_secs(opts.flush_secs),
        };
        let first = Event {
            wall_time: wall_time(),
            step: 0,
            what: Some(What::FileVersion("brain.Event:2".into())),
            source_metadata: Some(SourceMetadata { writer: "kiln.tensorboard".into() }),
        };
        write_record(&mut f.out, &first.encode_to_vec())?;
        f.flush()?;
        Ok(f)
    }

    /// Where the file is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an event holding `what` at `step`, stamped with the current time.
    pub(crate) fn write(&mut self, what: What, step: i64) -> io::Result<()> {
        let event = Event { wall_time: wall_time(), step, what: Some(what), source_metadata: None };
        write_record(&mut self.out, &event.encode_to_vec())?;
        self.pending += 1;
        if self.pending >= self.max_queue || self.flushed_at.elapsed() >= self.flush_every {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the buffered events to the file.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.out.flush()?;
        self.pending = 0;
        self.flushed_at = Instant::now();
        Ok(())
    }
}
