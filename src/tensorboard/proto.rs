//! TensorBoard's protobuf messages, the fields kiln writes, as `prost` derives written by hand
//! (no `protoc` at build time). Names and field numbers are those of TensorBoard's
//! `compat/proto` (`event.proto`, `summary.proto`, `tensor.proto`, `tensor_shape.proto`,
//! `types.proto`, `graph.proto`, `node_def.proto`, `attr_value.proto`, `versions.proto`) and of
//! its plugins' `plugin_data.proto` (text, hparams) and `api.proto` (hparams); fields kiln does
//! not write are left out, and a decoder skips them when reading files other writers made.

use prost::{Enumeration, Oneof};
use std::collections::BTreeMap;

/// `prost`'s trait that encodes and decodes these messages (`Event::decode(bytes)`,
/// `HParamsPluginData::decode(&plugin_data.content[..])`, `graph.encode_to_vec()`).
pub use prost::Message;

/// One record of an event file (`tensorboard.Event`).
#[derive(Clone, PartialEq, Message)]
pub struct Event {
    /// Seconds since the Unix epoch when the event was written.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    /// The global step the event belongs to (0 when none was given).
    #[prost(int64, tag = "2")]
    pub step: i64,
    /// What the event holds.
    #[prost(oneof = "What", tags = "3, 4, 5")]
    pub what: Option<What>,
    /// Who wrote the file (in its first event).
    #[prost(message, optional, tag = "10")]
    pub source_metadata: Option<SourceMetadata>,
}

/// The contents of an [`Event`] (its `what` oneof).
#[derive(Clone, PartialEq, Oneof)]
pub enum What {
    /// The file format's version, `brain.Event:2`, in a file's first event.
    #[prost(string, tag = "3")]
    FileVersion(String),
    /// A serialized [`GraphDef`] (the Graphs tab).
    #[prost(bytes, tag = "4")]
    GraphDef(Vec<u8>),
    /// Summary values (scalars, histograms, images, text, hparams).
    #[prost(message, tag = "5")]
    Summary(Summary),
}

/// The program that wrote an event file (`tensorboard.SourceMetadata`).
#[derive(Clone, PartialEq, Message)]
pub struct SourceMetadata {
    /// Its name.
    #[prost(string, tag = "1")]
    pub writer: String,
}

/// A list of tagged values (`tensorboard.Summary`).
#[derive(Clone, PartialEq, Message)]
pub struct Summary {
    /// The values.
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// One tagged value of a [`Summary`] (`tensorboard.Summary.Value`).
#[derive(Clone, PartialEq, Message)]
pub struct SummaryValue {
    /// The series it belongs to.
    #[prost(string, tag = "1")]
    pub tag: String,
    /// Which plugin reads it, for plugin values (text, hparams).
    #[prost(message, optional, tag = "9")]
    pub metadata: Option<SummaryMetadata>,
    /// The value.
    #[prost(oneof = "Value", tags = "2, 4, 5, 8")]
    pub value: Option<Value>,
}

/// The value of a [`SummaryValue`] (its `value` oneof).
#[derive(Clone, PartialEq, Oneof)]
pub enum Value {
    /// A scalar (the Scalars tab).
    #[prost(float, tag = "2")]
    SimpleValue(f32),
    /// An encoded image (the Images tab).
    #[prost(message, tag = "4")]
    Image(Image),
    /// A histogram (the Histograms and Distributions tabs).
    #[prost(message, tag = "5")]
    Histo(HistogramProto),
    /// A tensor for a plugin (text).
    #[prost(message, tag = "8")]
    Tensor(TensorProto),
}

/// An encoded image (`tensorboard.Summary.Image`).
#[derive(Clone, PartialEq, Message)]
pub struct Image {
    /// Rows of pixels.
    #[prost(int32, tag = "1")]
    pub height: i32,
    /// Columns of pixels.
    #[prost(int32, tag = "2")]
    pub width: i32,
    /// Channels: 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA.
    #[prost(int32, tag = "3")]
    pub colorspace: i32,
    /// The image as a PNG file.
    #[prost(bytes = "vec", tag = "4")]
    pub encoded_image_string: Vec<u8>,
}

/// Which plugin reads a value, and its settings (`tensorboard.SummaryMetadata`).
#[derive(Clone, PartialEq, Message)]
pub struct SummaryMetadata {
    /// The plugin and its data.
    #[prost(message, optional, tag = "1")]
    pub plugin_data: Option<PluginData>,
}

/// A plugin's name and its serialized data (`tensorboard.SummaryMetadata.PluginData`).
#[derive(Clone, PartialEq, Message)]
pub struct PluginData {
    /// The plugin: `text`, `hparams`, …
    #[prost(string, tag = "1")]
    pub plugin_name: String,
    /// Its own message, serialized ([`TextPluginData`], [`HParamsPluginData`]).
    #[prost(bytes = "vec", tag = "2")]
    pub content: Vec<u8>,
}

/// A histogram (`tensorboard.HistogramProto`): bucket `i` counts the values in
/// `(bucket_limit[i - 1], bucket_limit[i]]`, bucket 0 those up to `bucket_limit[0]`.
#[derive(Clone, PartialEq, Message)]
pub struct HistogramProto {
    /// The smallest value.
    #[prost(double, tag = "1")]
    pub min: f64,
    /// The largest value.
    #[prost(double, tag = "2")]
    pub max: f64,
    /// How many values.
    #[prost(double, tag = "3")]
    pub num: f64,
    /// Their sum.
    #[prost(double, tag = "4")]
    pub sum: f64,
    /// The sum of their squares.
    #[prost(double, tag = "5")]
    pub sum_squares: f64,
    /// Each bucket's right edge.
    #[prost(double, repeated, tag = "6")]
    pub bucket_limit: Vec<f64>,
    /// Each bucket's count.
    #[prost(double, repeated, tag = "7")]
    pub bucket: Vec<f64>,
}

/// A tensor's dtype (`tensorboard.DataType`, TensorFlow's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Enumeration)]
#[repr(i32)]
pub enum DataType {
    /// No dtype.
    DtInvalid = 0,
    /// f32.
    DtFloat = 1,
    /// f64.
    DtDouble = 2,
    /// i32.
    DtInt32 = 3,
    /// u8.
    DtUint8 = 4,
    /// Byte strings.
    DtString = 7,
    /// i64.
    DtInt64 = 9,
    /// bool.
    DtBool = 10,
    /// bf16.
    DtBfloat16 = 14,
    /// f16.
    DtHalf = 19,
}

/// A tensor (`tensorboard.TensorProto`); kiln writes string tensors (text).
#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    /// Its dtype, a [`DataType`].
    #[prost(enumeration = "DataType", tag = "1")]
    pub dtype: i32,
    /// Its shape.
    #[prost(message, optional, tag = "2")]
    pub tensor_shape: Option<TensorShapeProto>,
    /// The elements of a `DT_STRING` tensor.
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
}

/// A shape (`tensorboard.TensorShapeProto`).
#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    /// Its dims, outermost first.
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<Dim>,
}

/// One dim of a [`TensorShapeProto`] (`tensorboard.TensorShapeProto.Dim`).
#[derive(Clone, PartialEq, Message)]
pub struct Dim {
    /// Its size.
    #[prost(int64, tag = "1")]
    pub size: i64,
}

/// A graph for the Graphs tab (`tensorboard.GraphDef`).
#[derive(Clone, PartialEq, Message)]
pub struct GraphDef {
    /// Its nodes; a `/` in a name opens a scope the Graphs tab draws as a box.
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeDef>,
    /// The version of the producer that wrote it.
    #[prost(message, optional, tag = "4")]
    pub versions: Option<VersionDef>,
}

/// One node of a [`GraphDef`] (`tensorboard.NodeDef`).
#[derive(Clone, PartialEq, Message)]
pub struct NodeDef {
    /// Its unique name, `/`-separated scopes first.
    #[prost(string, tag = "1")]
    pub name: String,
    /// The op it runs.
    #[prost(string, tag = "2")]
    pub op: String,
    /// The names of the nodes it reads.
    #[prost(string, repeated, tag = "3")]
    pub input: Vec<String>,
    /// Where it runs (`/device:CPU:0`).
    #[prost(string, tag = "4")]
    pub device: String,
    /// Its attributes (`_output_shapes`, `dtype`, …).
    #[prost(btree_map = "string, message", tag = "5")]
    pub attr: BTreeMap<String, AttrValue>,
}

/// An attribute of a [`NodeDef`] (`tensorboard.AttrValue`).
#[derive(Clone, PartialEq, Message)]
pub struct AttrValue {
    /// The value.
    #[prost(oneof = "Attr", tags = "1, 2, 3, 5, 6")]
    pub value: Option<Attr>,
}

/// The value of an [`AttrValue`] (its `value` oneof).
#[derive(Clone, PartialEq, Oneof)]
pub enum Attr {
    /// A list (`_output_shapes` is a list of shapes).
    #[prost(message, tag = "1")]
    List(ListValue),
    /// A byte string.
    #[prost(bytes, tag = "2")]
    S(Vec<u8>),
    /// An integer.
    #[prost(int64, tag = "3")]
    I(i64),
    /// A boolean.
    #[prost(bool, tag = "5")]
    B(bool),
    /// A dtype, a [`DataType`].
    #[prost(enumeration = "DataType", tag = "6")]
    Type(i32),
}

/// A list attribute (`tensorboard.AttrValue.ListValue`).
#[derive(Clone, PartialEq, Message)]
pub struct ListValue {
    /// Byte strings.
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub s: Vec<Vec<u8>>,
    /// Shapes.
    #[prost(message, repeated, tag = "7")]
    pub shape: Vec<TensorShapeProto>,
}

/// The version of the program that wrote a [`GraphDef`] (`tensorboard.VersionDef`).
#[derive(Clone, PartialEq, Message)]
pub struct VersionDef {
    /// The producer's version.
    #[prost(int32, tag = "1")]
    pub producer: i32,
}

/// The text plugin's data (`tensorboard.TextPluginData`).
#[derive(Clone, PartialEq, Message)]
pub struct TextPluginData {
    /// The plugin data's version (0).
    #[prost(int32, tag = "1")]
    pub version: i32,
}

/// The hparams plugin's data (`tensorboard.hparams.HParamsPluginData`): one of the three
/// summaries a run of an experiment writes.
#[derive(Clone, PartialEq, Message)]
pub struct HParamsPluginData {
    /// The plugin data's version (0).
    #[prost(int32, tag = "1")]
    pub version: i32,
    /// Which of the three.
    #[prost(oneof = "HParamsData", tags = "2, 3, 4")]
    pub data: Option<HParamsData>,
}

/// The contents of an [`HParamsPluginData`] (its `data` oneof).
#[derive(Clone, PartialEq, Oneof)]
pub enum HParamsData {
    /// The hyperparameters and metrics of the experiment.
    #[prost(message, tag = "2")]
    Experiment(Experiment),
    /// This run's hyperparameter values.
    #[prost(message, tag = "3")]
    SessionStartInfo(SessionStartInfo),
    /// How this run ended.
    #[prost(message, tag = "4")]
    SessionEndInfo(SessionEndInfo),
}

/// An experiment's hyperparameters and metrics (`tensorboard.hparams.Experiment`).
#[derive(Clone, PartialEq, Message)]
pub struct Experiment {
    /// The hyperparameters.
    #[prost(message, repeated, tag = "4")]
    pub hparam_infos: Vec<HParamInfo>,
    /// The metrics.
    #[prost(message, repeated, tag = "5")]
    pub metric_infos: Vec<MetricInfo>,
}

/// A hyperparameter's name and type (`tensorboard.hparams.HParamInfo`).
#[derive(Clone, PartialEq, Message)]
pub struct HParamInfo {
    /// Its name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its type, an [`HParamType`].
    #[prost(enumeration = "HParamType", tag = "4")]
    pub r#type: i32,
}

/// The type of a hyperparameter (`tensorboard.hparams.DataType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Enumeration)]
#[repr(i32)]
pub enum HParamType {
    /// Not set.
    DataTypeUnset = 0,
    /// A string.
    DataTypeString = 1,
    /// A boolean.
    DataTypeBool = 2,
    /// A number.
    DataTypeFloat64 = 3,
}

/// A metric of an experiment (`tensorboard.hparams.MetricInfo`).
#[derive(Clone, PartialEq, Message)]
pub struct MetricInfo {
    /// Its name.
    #[prost(message, optional, tag = "1")]
    pub name: Option<MetricName>,
}

/// The scalar series a metric reads (`tensorboard.hparams.MetricName`).
#[derive(Clone, PartialEq, Message)]
pub struct MetricName {
    /// The run's sub-folder holding it (empty: the run itself).
    #[prost(string, tag = "1")]
    pub group: String,
    /// The scalar's tag.
    #[prost(string, tag = "2")]
    pub tag: String,
}

/// A run's hyperparameter values (`tensorboard.hparams.SessionStartInfo`).
#[derive(Clone, PartialEq, Message)]
pub struct SessionStartInfo {
    /// Each hyperparameter's value, by name.
    #[prost(btree_map = "string, message", tag = "1")]
    pub hparams: BTreeMap<String, ProtoValue>,
}

/// How a run ended (`tensorboard.hparams.SessionEndInfo`).
#[derive(Clone, PartialEq, Message)]
pub struct SessionEndInfo {
    /// Its status, a [`Status`].
    #[prost(enumeration = "Status", tag = "1")]
    pub status: i32,
}

/// The status of a run (`tensorboard.hparams.Status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Enumeration)]
#[repr(i32)]
pub enum Status {
    /// Not known.
    StatusUnknown = 0,
    /// It ended well (the status kiln writes).
    StatusSuccess = 1,
}

/// A number, a string or a boolean (`google.protobuf.Value`, the kinds hparams use).
#[derive(Clone, PartialEq, Message)]
pub struct ProtoValue {
    /// The value.
    #[prost(oneof = "Kind", tags = "2, 3, 4")]
    pub kind: Option<Kind>,
}

/// The value of a [`ProtoValue`] (its `kind` oneof).
#[derive(Clone, PartialEq, Oneof)]
pub enum Kind {
    /// A number.
    #[prost(double, tag = "2")]
    NumberValue(f64),
    /// A string.
    #[prost(string, tag = "3")]
    StringValue(String),
    /// A boolean.
    #[prost(bool, tag = "4")]
    BoolValue(bool),
}
