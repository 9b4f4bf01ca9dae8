//! The hparams plugin's three summaries, as torch's `hparams()` writes them: the experiment
//! (each hyperparameter's name and type, each metric's tag), the session start (this run's
//! values) and the session end (`STATUS_SUCCESS`), each a value with the plugin's data and
//! nothing else.

use super::proto::{
    Experiment, HParamInfo, HParamType, HParamsData, HParamsPluginData, Kind, MetricInfo, MetricName, PluginData,
    ProtoValue, SessionEndInfo, SessionStartInfo, Status, Summary, SummaryMetadata, SummaryValue,
};
use prost::Message;

/// A hyperparameter's value (`add_hparams` takes numbers, strings and booleans, as torch's).
#[derive(Clone, Debug, PartialEq)]
pub enum HParam {
    /// A number (learning rate, batch size, …).
    Number(f64),
    /// A string (the optimizer's name, …).
    Text(String),
    /// A boolean (a switch).
    Bool(bool),
}

macro_rules! hparam_from_number {
    ($($t:ty),*) => {
        $(impl From<$t> for HParam {
            fn from(v: $t) -> HParam {
                HParam::Number(v as f64)
            }
        })*
    };
}
hparam_from_number!(f32, f64, i32, i64, u32, u64, usize);

impl From<&str> for HParam {
    fn from(v: &str) -> HParam {
        HParam::Text(v.to_string())
    }
}

impl From<String> for HParam {
    fn from(v: String) -> HParam {
        HParam::Text(v)
    }
}

impl From<bool> for HParam {
    fn from(v: bool) -> HParam {
        HParam::Bool(v)
    }
}

/// The experiment, session start and session end summaries of a run with `hparams` whose
/// results are the scalars tagged by `metrics`.
pub(crate) fn summaries(hparams: &[(&str, HParam)], metrics: &[&str]) -> [Summary; 3] {
    let mut infos = Vec::new();
    let mut values = std::collections::BTreeMap::new();
    for (name, value) in hparams {
        let (ty, kind) = match value {
            HParam::Number(v) => (HParamType::DataTypeFloat64, Kind::NumberValue(*v)),
            HParam::Text(s) => (HParamType::DataTypeString, Kind::StringValue(s.clone())),
            HParam::Bool(b) => (HParamType::DataTypeBool, Kind::BoolValue(*b)),
        };
        infos.push(HParamInfo { name: name.to_string(), r#type: ty as i32 });
        values.insert(name.to_string(), ProtoValue { kind: Some(kind) });
    }
    let metric_infos = metrics
        .iter()
        .map(|tag| MetricInfo { name: Some(MetricName { group: String::new(), tag: tag.to_string() }) })
        .collect();
    let experiment = HParamsData::Experiment(Experiment { hparam_infos: infos, metric_infos });
    let start = HParamsData::SessionStartInfo(SessionStartInfo { hparams: values });
    let end = HParamsData::SessionEndInfo(SessionEndInfo { status: Status::StatusSuccess as i32 });
    let tagged = [
        ("_hparams_/experiment", experiment),
        ("_hparams_/session_start_info", start),
        ("_hparams_/session_end_info", end),
    ];
    tagged.map(|(tag, data)| {
        let content = HParamsPluginData { version: 0, data: Some(data) }.encode_to_vec();
        let plugin_data = PluginData { plugin_name: "hparams".into(), content };
        Summary {
            value: vec![SummaryValue {
                tag: tag.into(),
                metadata: Some(SummaryMetadata { plugin_data: Some(plugin_data) }),
                value: None,
            }],
        }
    })
}
