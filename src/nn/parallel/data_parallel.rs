//! [`DataParallel`]: one process running a module on several devices at once
//! (`torch.nn.DataParallel`): the batch scattered, the module replicated, the replicas run on
//! threads, the outputs gathered; gradients come back to the wrapped module's parameters
//! through the copies' autograd records.

use crate::error::{bail, AtCaller, Error, ErrorKind, OrPanic, Result};
use crate::nn::{FieldVisitor, FieldVisitorMut, Module, Visit};
use crate::{Device, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::Mutex;

/// The name in errors.
const OP: &str = "DataParallel";

/// Options of [`DataParallel::with_opts`] (PyTorch's keyword arguments); `Default` is
/// PyTorch's defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataParallelOpts {
    /// The devices replicas run on (`device_ids=`); `None` means every visible CUDA device
    /// (`kiln::cuda::device_count()`, which honours `CUDA_VISIBLE_DEVICES`). The wrapped module
    /// lives on the first. Unlike PyTorch, a device may appear more than once (its replicas
    /// share it, each on its own thread) and may be the CPU, which runs the multi-replica
    /// path without a GPU.
    pub device_ids: Option<Vec<Device>>,
    /// Where the outputs are gathered (`output_device=`); `None` means the first device.
    pub output_device: Option<Device>,
    /// The dim the input is scattered along and the outputs gathered along (`dim=`, 0).
    pub dim: usize,
}

/// Runs a module on several devices of this process (`torch.nn.DataParallel`): each forward
/// splits the batch into one chunk per device along [`DataParallelOpts::dim`], copies the
/// module's parameters and buffers to every device, runs the replicas on threads (in grad mode
/// as the caller), and concatenates their outputs on the output device. The copies are
/// recorded by autograd, so backward sums each replica's gradient into the wrapped module's
/// parameters, and an optimizer built on [`DataParallel::parameters`](Module::parameters)
/// trains the model. PyTorch recommends [`DistributedDataParallel`](super::DistributedDataParallel)
/// instead; this is the wrapper of its tutorials.
///
/// - With no CUDA device (and no `device_ids`) the module runs unchanged; with one device the
///   module is moved there and the input is moved to it, as in PyTorch.
/// - **Construction differs from PyTorch**: Rust cannot copy an arbitrary module, so
///   `DataParallel::new(Net::new)` takes the module's *constructor*. It builds the wrapped
///   module, then one replica per further device, whose parameters are replaced by copies of
///   the wrapped module's at every forward (the constructor's own draws for the replicas are
///   undone: the global generator continues as if one module had been built, so a seeded run
///   starts from the same weights on any number of devices). Load a checkpoint through
///   [`module_mut`](Self::module_mut).
/// - As a [`Module`] it is the wrapped module under the child name `module`: parameter names
///   and `state_dict` keys carry PyTorch's `module.` prefix.
/// - Inside [`kiln::compile`](crate::compile) the replicas run one after the other on the
///   calling thread, so that every op joins the step's trace.
/// - Buffers are copied to the replicas without gradient, as PyTorch's `replicate`; a
///   replica's in-place buffer updates (BatchNorm's running statistics) are lost except the
///   first device's, which is the wrapped module itself.
pub struct DataParallel<M: Module> {
    module: M,
    /// One per device after the first, built by the constructor; their tensors are replaced
    /// at each forward.
    replicas: Mutex<Vec<M>>,
    device_ids: Vec<Device>,
    output_device: Option<Device>,
    dim: usize,
}

impl<M: Module + Sync> DataParallel<M> {
    /// Wraps the module `make` builds (`nn.DataParallel(module)`), over every visible CUDA
    /// device; see the type's doc for why it takes the constructor.
    #[track_caller]
    pub fn new(make: impl Fn() -> M) -> DataParallel<M> {
        DataParallel::with_opts(make, DataParallelOpts::default())
    }

    /// [`DataParallel::new`] with PyTorch's `device_ids`, `output_device` and `dim`. Panics on
    /// options that cannot be used, naming them.
    #[track_caller]
    pub fn with_opts(make: impl Fn() -> M, opts: DataParallelOpts) -> DataParallel<M> {
        DataParallel::try_with_opts(make, opts).or_panic()
    }

    /// [`DataParallel::with_opts`] returning an error for an empty `device_ids`, an
    /// `output_device` without devices, a CUDA device that does not exist, or replicas whose
    /// parameters or buffers differ from the module's in name or shape.
    #[track_caller]
    pub fn try_with_opts(make: impl Fn() -> M, opts: DataParallelOpts) -> Result<DataParallel<M>> {
        let visible = crate::cuda::device_count();
        if opts.device_ids.as_ref().is_some_and(Vec::is_empty) {
            bail!(
                OP,
                Value,
                "device_ids is empty: name at least one device, or leave it None for every visible CUDA device"
            );
        }
        let device_ids = opts.device_ids.unwrap_or_else(|| (0..visible).map(Device::Cuda).collect());
        if device_ids.is_empty() && opts.output_device.is_some() {
            bail!(OP, Value, "output_device is set, but no CUDA device is visible to run on");
        }
        for device in device_ids.iter().chain(&opts.output_device) {
            if let Device::Cuda(i) = device {
                if *i >= visible {
                    bail!(OP, Device, "{device} does not exist: {visible} CUDA device(s) are visible");
                }
            }
        }
        let mut module = make();
        if let Some(first) = device_ids.first() {
            module.try_to(first)?;
        }
        let state = crate::random::get_rng_state();
        let replicas: Vec<M> = device_ids.iter().skip(1).map(|_| make()).collect();
        crate::random::set_rng_state(state);
        let want = signature(&module);
        if let Some(bad) = replicas.iter().map(signature).find(|s| *s != want) {
            bail!(OP, Value, "the constructor built a replica whose parameters and buffers {bad:?} differ from the module's {want:?}");
        }
        Ok(DataParallel {
            module,
            replicas: Mutex::new(replicas),
            device_ids,
            output_device: opts.output_device,
            dim: opts.dim,
        })
    }

    /// The wrapped module (`dp.module`).
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The wrapped module, mutably (to load a checkpoint, or move it).
    pub fn module_mut(&mut self) -> &mut M {
        &mut self.module
    }

    /// The devices replicas run on (empty when the module runs unchanged).
    pub fn device_ids(&self) -> &[Device] {
        &self.device_ids
    }

    /// Where the outputs are gathered (`None` when the module runs unchanged).
    pub fn output_device(&self) -> Option<Device> {
        self.output_device.or(self.device_ids.first().copied())
    }

    /// The forward over several devices, or an error for a module not on the first device, an
    /// input that has no dim to scatter along, or a replica that failed.
    #[track_caller]
    pub fn try_forward(&self, input: &Tensor) -> Result<Tensor> {
        let Some(&first) = self.device_ids.first() else { return Ok(self.module.forward(input)) };
        let at = Location::caller();
        if let Some((name, t)) = self
            .module
            .named_parameters()
            .into_iter()
            .chain(self.module.named_buffers())
            .find(|(_, t)| t.device() != first)
        {
            bail!(OP, Device, "module must have its parameters and buffers on device {first} (device_ids[0]) but found one of them ({name}) on device: {}", t.device());
        }
        if self.device_ids.len() == 1 {
            return Ok(self.module.forward(&input.try_to(&first)?));
        }
        if input.dim() <= self.dim || input.size(self.dim as i64) == 0 {
            bail!(
                OP,
                Shape,
                "cannot scatter an input of shape {:?} along dim {} over {} devices",
                input.shape(),
                self.dim,
                self.device_ids.len()
            );
        }
        let chunks = input.chunk(self.device_ids.len(), self.dim as i64);
        let devices = &self.device_ids[..chunks.len()];
        let inputs =
            chunks.iter().zip(devices).map(|(c, d)| c.try_to(d)).collect::<Result<Vec<Tensor>>>().at_caller()?;
        let mut replicas = self.replicas.lock().unwrap_or_else(|e| e.into_inner());
        let sources = Tensors::of(&self.module);
        for (replica, device) in replicas.iter_mut().zip(&devices[1..]) {
            sources.copy_into(replica, device);
        }
        let modules: Vec<&M> = std::iter::once(&self.module).chain(replicas.iter()).take(devices.len()).collect();
        let outputs = run_all(&modules, &inputs, devices, at)?;
        let out_device = self.output_device().unwrap_or(first);
        let gathered = outputs.iter().map(|o| o.try_to(&out_device)).collect::<Result<Vec<Tensor>>>().at_caller()?;
        Tensor::try_cat(&gathered, self.dim as i64)
    }
}

/// The names and shapes of a module's parameters and buffers, in walk order.
fn signature<M: Module>(module: &M) -> Vec<(String, Vec<usize>)> {
    let params = module.named_parameters().into_iter();
    params.chain(module.named_buffers()).map(|(k, t)| (k, t.shape().to_vec())).collect()
}

/// Runs `modules[i]` on `inputs[i]` (on `devices[i]`), on threads unless a trace is being
/// captured; a replica's panic becomes an error naming it.
fn run_all<M: Module + Sync>(
    modules: &[&M],
    inputs: &[Tensor],
    devices: &[Device],
    at: &'static Location<'static>,
) -> Result<Vec<Tensor>> {
    let failed = |i: usize, payload: Box<dyn std::any::Any + Send>| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into());
        Error::at(
            OP,
            ErrorKind::Value,
            format!("caught a panic in replica {i} on device {}: {message}", devices[i]),
            at,
        )
    };
    if crate::capture::is_active() {
        return modules
            .iter()
            .zip(inputs)
            .enumerate()
            .map(|(i, (m, x))| catch_unwind(AssertUnwindSafe(|| m.forward(x))).map_err(|p| failed(i, p)))
            .collect();
    }
    let grad = crate::is_grad_enabled();
    std::thread::scope(|s| {
        let handles: Vec<_> = modules
            .iter()
            .zip(inputs)
            .map(|(m, x)| {
                s.spawn(move || {
                    crate::set_grad_enabled(grad);
                    m.forward(x)
                })
            })
            .collect();
        handles.into_iter().enumerate().map(|(i, h)| h.join().map_err(|p| failed(i, p))).collect()
    })
}

/// What a module's walk meets, in order: each module's own train flag, its parameters and its
/// buffers (a replica built by the same constructor meets the same in the same order).
enum Item {
    Module(Option<bool>),
    Parameter(Tensor),
    Buffer(Tensor),
}

/// The wrapped module's tensors and train flags, read once per forward.
struct Tensors(Vec<Item>);

impl Tensors {
    /// The walk of `module`.
    fn of(module: &dyn Module) -> Tensors {
        struct Collect<'v>(&'v mut Vec<Item>);
        impl<'a> FieldVisitor<'a> for Collect<'_> {
            fn parameter(&mut self, _: &str, tensor: &'a Tensor) {
                self.0.push(Item::Parameter(tensor.clone()));
            }
            fn buffer(&mut self, _: &str, tensor: &'a Tensor) {
                self.0.push(Item::Buffer(tensor.clone()));
            }
            fn child(&mut self, _: &str, module: &'a dyn Module) {
                self.0.push(Item::Module(module.own_training()));
                module.visit_fields(self);
            }
        }
        let mut items = vec![Item::Module(module.own_training())];
        module.visit_fields(&mut Collect(&mut items));
        Tensors(items)
    }

    /// Makes `replica` the module on `device`: its parameters copies recorded by autograd
    /// (a parameter shared within the module stays shared), its buffers copies without
    /// gradient, its train flags the module's.
    fn copy_into(&self, replica: &mut dyn Module, device: &Device) {
        struct Assign<'s> {
            items: std::slice::Iter<'s, Item>,
            device: Device,
            copies: Vec<(Tensor, Tensor)>,
        }
        impl<'s> Assign<'s> {
            fn next(&mut self) -> &'s Item {
                self.items.next().expect("a replica walks as the module does (checked when built)")
            }
        }
        impl FieldVisitorMut for Assign<'_> {
            fn parameter(&mut self, _: &str, tensor: &mut Tensor) {
                let Item::Parameter(p) = self.next() else { unreachable!("a replica walks as the module does") };
                *tensor = match self.copies.iter().find(|(src, _)| src.is_same(p)) {
                    Some((_, copy)) => copy.clone(),
                    None => {
                        let copy = p.to(&self.device);
                        self.copies.push((p.clone(), copy.clone()));
                        copy
                    }
                };
            }
            fn buffer(&mut self, _: &str, tensor: &mut Tensor) {
                let Item::Buffer(b) = self.next() else { unreachable!("a replica walks as the module does") };
                let _off = crate::no_grad_guard();
                *tensor = b.to(&self.device).detach();
            }
            fn child(&mut self, _: &str, module: &mut dyn Module) {
                let Item::Module(flag) = self.next() else { unreachable!("a replica walks as the module does") };
                if let Some(mode) = *flag {
                    module.set_own_training(mode);
                }
                module.visit_fields_mut(self);
            }
        }
        let mut assign = Assign { items: self.0.iter(), device: *device, copies: Vec::new() };
        if let Item::Module(Some(mode)) = assign.next() {
            replica.set_own_training(*mode);
        }
        replica.visit_fields_mut(&mut assign);
    }
}

impl<M: Module + Sync> Visit for DataParallel<M> {
    fn type_name(&self) -> String {
        "DataParallel".into()
    }
    fn visit_fields<'a>(&'a self, visitor: &mut dyn FieldVisitor<'a>) {
        visitor.child("module", self.module.as_dyn());
    }
    fn visit_fields_mut(&mut self, visitor: &mut dyn FieldVisitorMut) {
        visitor.child("module", self.module.as_dyn_mut());
    }
    fn as_dyn(&self) -> &dyn Module {
        self
    }
    fn as_dyn_mut(&mut self) -> &mut dyn Module {
        self
    }
}

impl<M: Module + Sync> Module for DataParallel<M> {
    /// The wrapped module's output for `input`, computed over the devices (see the type's
    /// doc). Panics where [`DataParallel::try_forward`] returns an error.
    #[track_caller]
    fn forward(&self, input: &Tensor) -> Tensor {
        self.try_forward(input).or_panic()
    }
}

impl<M: Module + Sync> std::fmt::Display for DataParallel<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::nn::fmt_module(self, f)
    }
}
