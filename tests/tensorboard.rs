//! `kiln::tensorboard::SummaryWriter`: every kind of summary is written, read back through
//! `read_events` (which checks each record's length and data CRCs) and checked field by
//! field — wall time, step, tag, value, histogram against the tensor, image PNG against the
//! pixels, text and hparams plugin data, a compiled step's GraphDef; a corrupted byte is
//! found; bad input is an error naming the method and the caller's line. When the
//! `tensorboard` Python package is installed, its own event reader loads the run too.

use kiln::prelude::*;
use kiln::tensorboard::proto::{
    Attr, Event, GraphDef, HParamsData, HParamsPluginData, Kind, Message, NodeDef, SummaryValue, Value, What,
};
use kiln::tensorboard::{read_events, SummaryWriter, WriterOpts};
use kiln::vision::io::decode_image;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh folder for one test.
fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-tensorboard-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// The events of the one event file in `dir`.
fn events_in(dir: &Path) -> Vec<Event> {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("events.out.tfevents."))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    read_events(&files[0]).unwrap()
}

/// The single summary value of `event`.
fn value_of(event: &Event) -> &SummaryValue {
    match &event.what {
        Some(What::Summary(s)) if s.value.len() == 1 => &s.value[0],
        other => panic!("not a one-value summary: {other:?}"),
    }
}

#[test]
fn scalars_are_written_with_step_time_and_file_version() {
    let dir = temp("scalars");
    let before = now();
    let mut w = SummaryWriter::new(&dir).unwrap();
    assert_eq!(w.get_logdir(), dir);
    let name = w.event_file().unwrap().file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with("events.out.tfevents.") && name.contains(&format!(".{}.", std::process::id())), "{name}");
    for step in 0..5 {
        w.add_scalar("loss/train", 1.0 / (step as f64 + 1.0), step).unwrap();
    }
    w.add_scalar("count", 7i64, 9).unwrap();
    w.add_scalar("lr", 0.25f32, -1).unwrap();
    w.close().unwrap();
    let after = now();
    let events = events_in(&dir);
    assert_eq!(events.len(), 8);
    assert_eq!(events[0].what, Some(What::FileVersion("brain.Event:2".into())));
    assert_eq!(events[0].source_metadata.as_ref().unwrap().writer, "kiln.tensorboard");
    let mut last = 0.0;
    for e in &events {
        assert!(e.wall_time >= before - 1.0 && e.wall_time <= after + 1.0 && e.wall_time >= last, "{e:?}");
        last = e.wall_time;
    }
    let scalars: Vec<(String, i64, f32)> = events[1..]
        .iter()
        .map(|e| match value_of(e) {
            SummaryValue { tag, value: Some(Value::SimpleValue(v)), metadata: None } => (tag.clone(), e.step, *v),
            other => panic!("not a scalar: {other:?}"),
        })
        .collect();
    let mut want: Vec<(String, i64, f32)> =
        (0..5).map(|s| ("loss/train".to_string(), s, (1.0 / (s as f64 + 1.0)) as f32)).collect();
    want.push(("count".into(), 9, 7.0));
    want.push(("lr".into(), -1, 0.25));
    assert_eq!(scalars, want);
}

#[test]
fn a_corrupted_or_cut_file_is_an_error_naming_the_record() {
    let dir = temp("corrupt");
    let mut w = SummaryWriter::new(&dir).unwrap();
    w.add_scalar("a", 1.0, 1).unwrap();
    w.add_text("t", "some text to corrupt", 2).unwrap();
    let path = w.event_file().unwrap().to_path_buf();
    w.close().unwrap();
    let good = std::fs::read(&path).unwrap();
    assert_eq!(read_events(&path).unwrap().len(), 3);
    // The last record starts where the first two end: walk the lengths.
    let mut starts = vec![0usize];
    while *starts.last().unwrap() < good.len() {
        let at = *starts.last().unwrap();
        let len = u64::from_le_bytes(good[at..at + 8].try_into().unwrap()) as usize;
        starts.push(at + len + 16);
    }
    assert_eq!(starts.len(), 4);
    let last = starts[2];
    for (byte, what) in [(last + 20, "bad data CRC"), (last + 2, "bad length CRC"), (good.len() - 1, "bad data CRC")] {
        let mut bad = good.clone();
        bad[byte] ^= 0x01;
        std::fs::write(&path, &bad).unwrap();
        let e = read_events(&path).unwrap_err().to_string();
        assert!(e.starts_with("read_events: ") && e.contains(&format!("record at byte {last} has a {what}")), "{e}");
        assert!(e.contains(path.to_str().unwrap()) && e.contains("tests/tensorboard.rs"), "{e}");
    }
    std::fs::write(&path, &good[..good.len() - 3]).unwrap();
    let e = read_events(&path).unwrap_err().to_string();
    assert!(e.contains(&format!("record at byte {last} is truncated")), "{e}");
}

#[test]
fn add_scalars_writes_one_sub_run_per_tag() {
    let dir = temp("scalars-sub");
    let mut w = SummaryWriter::new(&dir).unwrap();
    w.add_scalars("loss/run", &[("train", 0.5), ("test", 0.75)], 3).unwrap();
    w.add_scalars("loss/run", &[("train", 0.25)], 4).unwrap();
    w.close().unwrap();
    assert_eq!(events_in(&dir).len(), 1, "the main run holds only its first event");
    for (sub, want) in [("loss_run_train", vec![(3, 0.5), (4, 0.25)]), ("loss_run_test", vec![(3, 0.75)])] {
        let events = events_in(&dir.join(sub));
        let got: Vec<(i64, f32)> = events[1..]
            .iter()
            .map(|e| {
                let v = value_of(e);
                assert_eq!(v.tag, "loss/run");
                match v.value {
                    Some(Value::SimpleValue(x)) => (e.step, x),
                    ref other => panic!("{other:?}"),
                }
            })
            .collect();
        assert_eq!(got, want, "{sub}");
    }
}

#[test]
fn histograms_describe_the_tensor() {
    let dir = temp("histogram");
    let mut w = SummaryWriter::new(&dir).unwrap();
    let values: Vec<f32> = (0..200).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
    let t = Tensor::from_vec(values.clone(), [10, 20]);
    w.add_histogram("weights", &t, 5).unwrap();
    w.close().unwrap();
    let events = events_in(&dir);
    let v = value_of(&events[1]);
    let Some(Value::Histo(h)) = &v.value else { panic!("{v:?}") };
    assert_eq!((v.tag.as_str(), events[1].step), ("weights", 5));
    let xs: Vec<f64> = values.iter().map(|&x| x as f64).collect();
    assert_eq!(h.min, xs.iter().copied().fold(f64::INFINITY, f64::min));
    assert_eq!(h.max, xs.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    assert_eq!(h.num, 200.0);
    assert!((h.sum - xs.iter().sum::<f64>()).abs() < 1e-9);
    assert!((h.sum_squares - xs.iter().map(|x| x * x).sum::<f64>()).abs() < 1e-9);
    assert_eq!(h.bucket.len(), h.bucket_limit.len());
    assert!(h.bucket_limit.windows(2).all(|p| p[0] < p[1]));
    assert_eq!(h.bucket[0], 0.0);
    // Bucket k (k >= 1) holds the values in [limit[k-1], limit[k]).
    for k in 1..h.bucket.len() {
        let n = xs.iter().filter(|&&x| h.bucket_limit[k - 1] <= x && x < h.bucket_limit[k]).count();
        assert_eq!(h.bucket[k], n as f64, "bucket {k}");
    }
    assert_eq!(h.bucket.iter().sum::<f64>(), 200.0);
}

/// The image of an event, decoded: (shape `[C, H, W]`, pixels).
fn decoded(event: &Event) -> (Vec<usize>, Vec<u8>, [i32; 3]) {
    let Some(Value::Image(img)) = &value_of(event).value else { panic!("{event:?}") };
    let t = decode_image(&img.encoded_image_string).unwrap();
    (t.shape().to_vec(), t.to_vec::<u8>(), [img.height, img.width, img.colorspace])
}

#[test]
fn images_hold_the_pixels_in_png() {
    let dir = temp("images");
    let mut w = SummaryWriter::new(&dir).unwrap();
    // A float CHW image: values ×255, clipped, truncated.
    let f: Vec<f32> = (0..24).map(|i| i as f32 / 20.0 - 0.1).collect();
    let chw = Tensor::from_vec(f.clone(), [3, 2, 4]);
    w.add_image("float", &chw, 1, "CHW").unwrap();
    // The same pixels as u8 HWC, kept as they are.
    let bytes: Vec<u8> = f.iter().map(|&x| (x * 255.0).clamp(0.0, 255.0) as u8).collect();
    let u8_chw = Tensor::from_vec(bytes.clone(), [3, 2, 4]);
    w.add_image("hwc", &u8_chw.permute(&[1, 2, 0]), 2, "HWC").unwrap();
    // Gray HW: three equal channels.
    w.add_image("gray", &Tensor::from_vec(vec![0u8, 50, 100, 150, 200, 250], [2, 3]), 3, "HW").unwrap();
    // RGBA stays RGBA.
    w.add_image("rgba", &Tensor::full([4, 1, 2], 1.0), 4, "CHW").unwrap();
    // A batch of ten 2×3 gray images: a grid of 8 per row, no padding.
    let batch = Tensor::arange(10).to_dtype(DType::U8).view([10, 1, 1, 1]).expand([10, 1, 2, 3]).contiguous();
    w.add_images("batch", &batch, 5, "NCHW").unwrap();
    w.add_images("batch_nhwc", &batch.permute(&[0, 2, 3, 1]), 6, "NHWC").unwrap();
    w.close().unwrap();
    let events = events_in(&dir);
    assert_eq!(events.len(), 7);
    assert_eq!(decoded(&events[1]), (vec![3, 2, 4], bytes.clone(), [2, 4, 3]));
    assert_eq!(decoded(&events[2]), (vec![3, 2, 4], bytes, [2, 4, 3]));
    let gray: Vec<u8> = [0u8, 50, 100, 150, 200, 250].repeat(3);
    assert_eq!(decoded(&events[3]), (vec![3, 2, 3], gray, [2, 3, 3]));
    assert_eq!(decoded(&events[4]), (vec![4, 1, 2], vec![255; 8], [1, 2, 4]));
    for e in &events[5..] {
        let (shape, pixels, dims) = decoded(e);
        assert_eq!((shape.as_slice(), dims), (&[3, 4, 24][..], [4, 24, 3]));
        for (i, p) in pixels.iter().enumerate() {
            let (y, x) = (i / 24 % 4, i % 24);
            let k = (y / 2) * 8 + x / 3;
            assert_eq!(*p as usize, if k < 10 { k } else { 0 }, "pixel {i}");
        }
    }
}

#[test]
fn text_and_hparams_carry_their_plugin_data() {
    let dir = temp("text-hparams");
    let mut w = SummaryWriter::new(&dir).unwrap();
    w.add_text("notes", "**lr** 0.1 — ünïcode", 7).unwrap();
    let hparams = [("lr", 0.1.into()), ("optimizer", "adam".into()), ("nesterov", true.into()), ("bs", 64.into())];
    w.add_hparams(&hparams, &[("hparam/accuracy", 0.5), ("hparam/loss", 2.0)], Some("trial")).unwrap();
    w.close().unwrap();
    let events = events_in(&dir);
    let text = value_of(&events[1]);
    assert_eq!((text.tag.as_str(), events[1].step), ("notes/text_summary", 7));
    assert_eq!(text.metadata.as_ref().unwrap().plugin_data.as_ref().unwrap().plugin_name, "text");
    let Some(Value::Tensor(t)) = &text.value else { panic!("{text:?}") };
    assert_eq!(t.dtype, 7, "DT_STRING");
    assert_eq!(t.tensor_shape.as_ref().unwrap().dim.iter().map(|d| d.size).collect::<Vec<_>>(), [1]);
    assert_eq!(t.string_val, vec!["**lr** 0.1 — ünïcode".as_bytes().to_vec()]);

    let run = events_in(&dir.join("trial"));
    assert_eq!(run.len(), 6);
    let tags: Vec<&str> = run[1..].iter().map(|e| value_of(e).tag.as_str()).collect();
    assert_eq!(
        tags,
        [
            "_hparams_/experiment",
            "_hparams_/session_start_info",
            "_hparams_/session_end_info",
            "hparam/accuracy",
            "hparam/loss"
        ]
    );
    let plugin = |e: &Event| {
        let v = value_of(e);
        assert!(v.value.is_none());
        let data = v.metadata.as_ref().unwrap().plugin_data.as_ref().unwrap();
        assert_eq!(data.plugin_name, "hparams");
        HParamsPluginData::decode(data.content.as_slice()).unwrap().data.unwrap()
    };
    let HParamsData::Experiment(exp) = plugin(&run[1]) else { panic!() };
    let infos: Vec<(&str, i32)> = exp.hparam_infos.iter().map(|i| (i.name.as_str(), i.r#type)).collect();
    assert_eq!(infos, [("lr", 3), ("optimizer", 1), ("nesterov", 2), ("bs", 3)]);
    let metrics: Vec<&str> = exp.metric_infos.iter().map(|m| m.name.as_ref().unwrap().tag.as_str()).collect();
    assert_eq!(metrics, ["hparam/accuracy", "hparam/loss"]);
    let HParamsData::SessionStartInfo(start) = plugin(&run[2]) else { panic!() };
    let values: Vec<(&str, Kind)> = start.hparams.iter().map(|(k, v)| (k.as_str(), v.kind.clone().unwrap())).collect();
    assert_eq!(
        values,
        [
            ("bs", Kind::NumberValue(64.0)),
            ("lr", Kind::NumberValue(0.1)),
            ("nesterov", Kind::BoolValue(true)),
            ("optimizer", Kind::StringValue("adam".into()))
        ]
    );
    let HParamsData::SessionEndInfo(end) = plugin(&run[3]) else { panic!() };
    assert_eq!(end.status, 1, "STATUS_SUCCESS");
    assert_eq!(value_of(&run[5]).value, Some(Value::SimpleValue(2.0)));
}

/// A small training step, compiled and called once.
fn trained_step_graph(dir: &Path) -> (GraphDef, Vec<String>) {
    kiln::manual_seed(0);
    let model = nn::Linear::new(4, 3);
    let mut opt = optim::SGD::new(model.parameters(), optim::SGDConfig { lr: 0.1, ..Default::default() });
    let (x, y) = (Tensor::randn([8, 4]), Tensor::randn([8, 3]));
    let mut step = kiln::compile(|(x, y): (&Tensor, &Tensor)| {
        opt.zero_grad();
        let loss = F::mse_loss(&model.forward(x), y);
        loss.backward();
        opt.step();
        loss
    });
    let mut w = SummaryWriter::new(dir).unwrap();
    let line = line!() + 1;
    let e = w.add_graph(&step).unwrap_err().to_string();
    assert!(e.starts_with("add_graph: the compiled step has no graph yet"), "{e}");
    assert!(e.ends_with(&format!("(at tests/tensorboard.rs:{line})")), "{e}");
    step.call((&x, &y));
    w.add_graph(&step).unwrap();
    w.close().unwrap();
    let events = events_in(dir);
    let Some(What::GraphDef(bytes)) = &events[1].what else { panic!("{:?}", events[1]) };
    (GraphDef::decode(bytes.as_slice()).unwrap(), step.kernels().into_iter().map(|k| k.name).collect())
}

#[test]
fn add_graph_writes_the_compiled_step_by_phase_and_kernel() {
    let dir = temp("graph");
    let (graph, kernels) = trained_step_graph(&dir);
    assert!(!kernels.is_empty());
    assert_eq!(graph.versions.as_ref().unwrap().producer, 22);
    let names: Vec<&str> = graph.node.iter().map(|n| n.name.as_str()).collect();
    for phase in ["forward/", "backward/", "update/"] {
        assert!(names.iter().any(|n| n.starts_with(phase)), "no {phase} node in {names:?}");
    }
    let mut clustered = 0;
    for n in &graph.node {
        assert!(n.input.iter().all(|i| names.contains(&i.as_str())), "{n:?}");
        assert!(n.name.ends_with(&format!("/{}_{}", n.op, n.name.rsplit('_').next().unwrap())), "{n:?}");
        assert_eq!(n.device, "/device:CPU:0");
        let Some(Attr::List(shapes)) = &n.attr["_output_shapes"].value else { panic!("{n:?}") };
        assert_eq!(shapes.shape.len(), 1);
        assert!(matches!(n.attr["dtype"].value, Some(Attr::Type(1))), "{n:?}");
        if let Some(Attr::S(kernel)) = n.attr.get("_XlaCluster").and_then(|a| a.value.as_ref()) {
            let kernel = String::from_utf8(kernel.clone()).unwrap();
            assert!(kernels.contains(&kernel) && n.name.contains(&format!("/{kernel}/")), "{n:?}");
            clustered += 1;
        }
    }
    assert!(clustered > 0, "no node names its kernel: {names:?}");
    let matmul = graph.node.iter().find(|n| n.op == "matmul").expect("a matmul");
    assert!(matmul.name.starts_with("forward/matmul_"), "{matmul:?}");
    let Some(Attr::List(shapes)) = &matmul.attr["_output_shapes"].value else { panic!() };
    assert_eq!(shapes.shape[0].dim.iter().map(|d| d.size).collect::<Vec<_>>(), [8, 3]);
    let updated = |n: &&NodeDef| {
        n.name.starts_with("update/")
            && matches!(n.attr.get("output").and_then(|a| a.value.as_ref()), Some(Attr::B(true)))
    };
    assert_eq!(graph.node.iter().filter(updated).count(), 2, "the weight and the bias: {names:?}");
}

#[test]
fn bad_input_is_an_error_naming_the_method_and_line() {
    let dir = temp("bad");
    let mut w = SummaryWriter::with_opts(&dir, &WriterOpts { max_queue: 1, ..Default::default() }).unwrap();
    let at = |line: u32| format!("(at tests/tensorboard.rs:{line})");
    let img = Tensor::rand([3, 4, 5]);
    let cases: Vec<(kiln::Error, u32, &str)> = vec![
        (w.add_image("i", &img, 0, "CHWX").unwrap_err(), line!(), "add_image: dataformats \"CHWX\" must order"),
        (w.add_image("i", &img, 0, "NCHW").unwrap_err(), line!(), "(a batch takes add_images)"),
        (w.add_image("i", &img, 0, "HW").unwrap_err(), line!(), "names 2 dims, the tensor has 3 (shape [3, 4, 5])"),
        (w.add_image("i", &img, 0, "HWC").unwrap_err(), line!(), "expected 1, 3 or 4 channels"),
        (w.add_images("i", &img, 0, "CHW").unwrap_err(), line!(), "add_images: dataformats \"CHW\" must order"),
        (w.add_images("i", &Tensor::rand([0, 3, 2, 2]), 0, "NCHW").unwrap_err(), line!(), "no empty dim"),
        (w.add_histogram("h", &Tensor::zeros([0]), 0).unwrap_err(), line!(), "add_histogram: the tensor has no el"),
        (w.add_histogram("h", &Tensor::from_slice(&[1.0f32, f32::NAN]), 0).unwrap_err(), line!(), "hold NaN"),
    ];
    for (e, line, want) in cases {
        let s = e.to_string();
        assert!(s.contains(want) && s.ends_with(&at(line)), "{s}\nwants {want:?} at line {line}");
    }
    // Nothing bad was written; max_queue 1 flushed each good event at once.
    w.add_scalar("ok", 1, 0).unwrap();
    assert_eq!(read_events(w.event_file().unwrap()).unwrap().len(), 2);
    w.close().unwrap();
    w.close().unwrap();
    let line = line!() + 1;
    let e = w.add_scalar("late", 1.0, 1).unwrap_err().to_string();
    assert!(
        e.starts_with("add_scalar: the SummaryWriter of ") && e.contains("was closed") && e.ends_with(&at(line)),
        "{e}"
    );
    let line = line!() + 1;
    let e = w.flush().unwrap_err().to_string();
    assert!(e.starts_with("flush: ") && e.ends_with(&at(line)), "{e}");
    let file = dir.join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let line = line!() + 1;
    let e = SummaryWriter::new(&file).err().expect("a file is not a folder").to_string();
    assert!(e.starts_with("SummaryWriter: cannot create an event file in ") && e.ends_with(&at(line)), "{e}");
}

/// TensorBoard's own reader (its Python `EventAccumulator`) loads what kiln wrote: scalars,
/// a histogram whose buckets NumPy's `histogram` over TensorFlow's default edges agrees with,
/// an image, the text, the graph (parsed by TensorBoard's own `GraphDef`) and the hparams
/// plugin's session start.
#[test]
fn tensorboards_reader_loads_the_run() {
    let probe = std::process::Command::new("python3").args(["-c", "import tensorboard"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        println!("skipping: the tensorboard Python package is not installed");
        return;
    }
    let dir = temp("python");
    let mut w = SummaryWriter::new(&dir).unwrap();
    for step in 0..4 {
        w.add_scalar("loss", 0.5 + step as f64, step * 10).unwrap();
    }
    let values: Vec<f32> = (0..50).map(|i| (i as f32 - 20.0) * 0.37).collect();
    w.add_histogram("w", &Tensor::from_slice(&values), 3).unwrap();
    w.add_image("img", &Tensor::rand([3, 5, 7]), 1, "CHW").unwrap();
    w.add_text("notes", "hello", 2).unwrap();
    let x = Tensor::randn([3, 4]);
    let mut step = kiln::compile(|x: &Tensor| (x * 2.0).exp().sum());
    step.call(&x);
    w.add_graph(&step).unwrap();
    w.add_hparams(&[("lr", 0.5.into()), ("opt", "sgd".into())], &[("acc", 0.75)], Some("trial")).unwrap();
    w.close().unwrap();
    let script = r#"
import sys
import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1], size_guidance={'histograms': 0, 'images': 0, 'tensors': 0})
ea.Reload()
for s in ea.Scalars('loss'):
    print('scalar', s.step, repr(s.value))
h = ea.Histograms('w')[0]
values = np.array([float(v) for v in sys.argv[2].split(',')])
edges, v = [], 1e-12
while v < 1e20:
    edges.append(v)
    v *= 1.1
edges = [-e for e in reversed(edges)] + [0.0] + edges
counts, _ = np.histogram(values, bins=edges)
hv = h.histogram_value
limits = list(hv.bucket_limit)
first = edges.index(limits[0])
print('histogram', h.step, hv.num, hv.min, hv.max, list(hv.bucket[1:]) == list(counts[first:first + len(limits) - 1]))
img = ea.Images('img')[0]
print('image', img.step, img.width, img.height)
t = ea.Tensors('notes/text_summary')[0]
print('text', t.step, t.tensor_proto.string_val[0].decode())
print('graph', sorted(n.op for n in ea.Graph().node))
from tensorboard.plugins.hparams import metadata
hp = EventAccumulator(sys.argv[1] + '/trial')
hp.Reload()
content = hp.PluginTagToContent('hparams')
start = metadata.parse_session_start_info_plugin_data(content['_hparams_/session_start_info'])
print('hparams', start.hparams['lr'].number_value, start.hparams['opt'].string_value, hp.Scalars('acc')[0].value)
"#;
    let arg: Vec<String> = values.iter().map(|v| format!("{}", *v as f64)).collect();
    let out = std::process::Command::new("python3")
        .args(["-c", script, dir.to_str().unwrap(), &arg.join(",")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "scalar 0 0.5",
            "scalar 10 1.5",
            "scalar 20 2.5",
            "scalar 30 3.5",
            "histogram 3 50.0 -7.400000095367432 10.730000495910645 True",
            "image 1 7 5",
            "text 2 hello",
            "graph ['exp', 'input0', 'mul', 'scalar0', 'sum']",
            "hparams 0.5 sgd 0.75"
        ]
    );
}
