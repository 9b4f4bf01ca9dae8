//! [`ImageFolder`]: images in a folder per class (`root/dog/xxx.png`, `root/cat/123.jpg`).

use super::transform_item;
use crate::data::{check_index, Dataset};
use crate::error::{Error, ErrorKind, Result};
use crate::vision::io::read_rgb;
use crate::vision::transforms::Transform;
use crate::vision::Pixels;
use crate::Tensor;
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file extensions [`ImageFolder`] takes by default: the formats kiln decodes.
pub const IMG_EXTENSIONS: [&str; 3] = [".jpg", ".jpeg", ".png"];

/// A function that reads one image file as pixels (the dataset's `loader=`).
pub type Loader = Arc<dyn Fn(&Path) -> Result<Pixels> + Send + Sync>;

/// Images arranged in one sub-folder per class (`torchvision.datasets.ImageFolder`):
/// the classes are the sub-folders of `root`, sorted by name and numbered from 0; the items
/// are the files under each class folder (searched recursively, following links) whose
/// names end in one of the extensions (case-insensitive), folders in sorted path order and
/// files sorted by name within each, as torchvision lists them. Items are `(image, class)`:
/// the file read as RGB pixels (grey replicated, alpha dropped, as PIL's `convert("RGB")`)
/// through the [`transform`](ImageFolder::transform), or `ToTensor` alone.
///
/// The constructor lists the files and returns an error for a missing root, a root with no
/// class folder or a class folder with no image; files are read when an item is asked for,
/// and one that cannot be decoded panics naming it (as torchvision raises).
#[derive(Clone)]
pub struct ImageFolder {
    root: PathBuf,
    classes: Arc<Vec<String>>,
    samples: Arc<Vec<(PathBuf, usize)>>,
    transform: Option<Arc<dyn Transform>>,
    loader: Loader,
}

impl ImageFolder {
    /// The images under `root` with the default extensions ([`IMG_EXTENSIONS`]).
    #[track_caller]
    pub fn new(root: impl AsRef<Path>) -> Result<ImageFolder> {
        ImageFolder::with_extensions(root, &IMG_EXTENSIONS)
    }

    /// The images under `root` whose names end in one of `extensions` (`".png"`; compared
    /// ignoring case), as torchvision's `DatasetFolder(extensions=…)`.
    #[track_caller]
    pub fn with_extensions(root: impl AsRef<Path>, extensions: &[&str]) -> Result<ImageFolder> {
        let at = Location::caller();
        let root = root.as_ref().to_path_buf();
        let io_error = |what: &Path, e: std::io::Error| {
            Error::at("ImageFolder", ErrorKind::Io, format!("cannot read the folder {}: {e}", what.display()), at)
                .caused_by(e)
        };
        let mut classes = Vec::new();
        for entry in std::fs::read_dir(&root).map_err(|e| io_error(&root, e))? {
            let entry = entry.map_err(|e| io_error(&root, e))?;
            if entry.path().is_dir() {
                classes.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        classes.sort();
        if classes.is_empty() {
            return Err(Error::at(
                "ImageFolder",
                ErrorKind::Io,
                format!("cannot find any class folder in {}", root.display()),
                at,
            ));
        }
        let lower: Vec<String> = extensions.iter().map(|e| e.to_lowercase()).collect();
        let wanted = |name: &str| {
            let name = name.to_lowercase();
            lower.iter().any(|e| name.ends_with(e.as_str()))
        };
        let mut samples = Vec::new();
        let mut empty = Vec::new();
        for (class, name) in classes.iter().enumerate() {
            let mut folders = Vec::new();
            walk(&root.join(name), &mut folders).map_err(|(dir, e)| io_error(&dir, e))?;
            folders.sort_by(|a, b| a.0.cmp(&b.0));
            let before = samples.len();
            for (_, dir, mut files) in folders {
                files.sort();
                samples.extend(files.into_iter().filter(|f| wanted(f)).map(|f| (dir.join(f), class)));
            }
            if samples.len() == before {
                empty.push(name.as_str());
            }
        }
        if !empty.is_empty() {
            return Err(Error::at(
                "ImageFolder",
                ErrorKind::Io,
                format!(
                    "found no valid file for the classes {} in {}; supported extensions are {}",
                    empty.join(", "),
                    root.display(),
                    extensions.join(", ")
                ),
                at,
            ));
        }
        let loader: Loader = Arc::new(|path: &Path| read_rgb(path, "ImageFolder", Location::caller()));
        Ok(ImageFolder { root, classes: Arc::new(classes), samples: Arc::new(samples), transform: None, loader })
    }

    /// The same images with `transform` applied to each item's pixels.
    pub fn transform(self, transform: impl Transform) -> ImageFolder {
        ImageFolder { transform: Some(Arc::new(transform)), ..self }
    }

    /// The same files read by `loader` instead of the RGB reader (`loader=`).
    pub fn loader(self, loader: impl Fn(&Path) -> Result<Pixels> + Send + Sync + 'static) -> ImageFolder {
        ImageFolder { loader: Arc::new(loader), ..self }
    }

    /// The folder the classes are in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The class names, sorted: class `i` is `classes()[i]`.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// The index of the class named `name` (torchvision's `class_to_idx[name]`).
    pub fn class_to_idx(&self, name: &str) -> Option<usize> {
        self.classes.binary_search_by(|c| c.as_str().cmp(name)).ok()
    }

    /// Every item's file and class, in item order (torchvision's `samples`).
    pub fn samples(&self) -> &[(PathBuf, usize)] {
        &self.samples
    }

    /// Every item's class as an i64 tensor `[N]` (torchvision's `targets`).
    pub fn targets(&self) -> Tensor {
        Tensor::from_vec(self.samples.iter().map(|&(_, c)| c as i64).collect::<Vec<i64>>(), [self.len()])
    }
}

/// A folder's path as text, the folder, and its file names.
type Listing = (String, PathBuf, Vec<String>);

/// Appends the [`Listing`] of `dir` and of every folder below it (following links, as
/// `os.walk(followlinks=True)`, but entering each real folder once, so a link cycle ends);
/// an error names the folder.
fn walk(dir: &Path, out: &mut Vec<Listing>) -> std::result::Result<(), (PathBuf, std::io::Error)> {
    walk_once(dir, out, &mut std::collections::HashSet::new())
}

/// [`walk`], skipping the folders in `seen` (canonical paths).
fn walk_once(
    dir: &Path,
    out: &mut Vec<Listing>,
    seen: &mut std::collections::HashSet<PathBuf>,
) -> std::result::Result<(), (PathBuf, std::io::Error)> {
    if !seen.insert(std::fs::canonicalize(dir).map_err(|e| (dir.to_path_buf(), e))?) {
        return Ok(());
    }
    let mut files = Vec::new();
    let mut subdirs = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| (dir.to_path_buf(), e))? {
        let entry = entry.map_err(|e| (dir.to_path_buf(), e))?;
        let path = entry.path();
        if path.is_dir() {
            subdirs.push(path);
        } else {
            files.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    out.push((dir.to_string_lossy().into_owned(), dir.to_path_buf(), files));
    for sub in subdirs {
        walk_once(&sub, out, seen)?;
    }
    Ok(())
}

impl Dataset for ImageFolder {
    type Item = (Tensor, i64);

    fn len(&self) -> usize {
        self.samples.len()
    }

    #[track_caller]
    fn get(&self, index: usize) -> (Tensor, i64) {
        check_index("ImageFolder", index, self.len());
        let (path, class) = &self.samples[index];
        let pixels = match (self.loader)(path) {
            Ok(p) => p,
            Err(e) => panic!("ImageFolder: cannot load item {index}: {e}"),
        };
        (transform_item("ImageFolder", index, pixels, self.transform.as_ref()), *class as i64)
    }
}
