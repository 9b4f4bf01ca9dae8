#!/usr/bin/env python3
"""Write PyTorch's recurrent layers' results as a safetensors fixture for tests/nn_rnn.rs.

Usage:  python3 scripts/fixtures_rnn.py      (needs torch, safetensors and numpy)

Writes tests/fixtures/rnn.safetensors: for each case (RNN tanh/relu, LSTM with and without
proj_size, GRU, and the three cells; 1 or 2 layers, one or two directions, batch_first, with and
without biases, with and without an initial state, batched and unbatched input), in f64:

  {case}/sd/{key}      the module's state dict, as PyTorch names it
  {case}/input         the input; {case}/h0 and {case}/c0 the initial state, when the case has one
  {case}/output        the output sequence (for a cell: h')
  {case}/h_n           the final hidden state (layers only)
  {case}/c_n           the final cell state (LSTM; for LSTMCell: c')
  {case}/dout, /dh, /dc   fixed random weights of the scalar loss
                       sum(output * dout) + sum(h_n * dh) + sum(c_n * dc)
  {case}/grad/input, /grad/h0, /grad/c0, /grad/{key}   that loss's gradients

and in the file's metadata, per case, `case:{case}` = the configuration
(`mode=LSTM;input_size=3;hidden_size=4;num_layers=2;bias=1;batch_first=0;bidirectional=1;
proj_size=2;nonlinearity=tanh;state=1;unbatched=0;seq=5;batch=2`) and `keys:{case}` = the state
dict's keys with their shapes in PyTorch's order (`weight_ih_l0:16x3,weight_hh_l0:16x2,...`).
"""
import os

import torch
import torch.nn as nn
from safetensors.torch import save_file

INPUT, HIDDEN, SEQ, BATCH = 3, 4, 5, 2

# (name, mode, options, initial state?, unbatched?)
LAYERS = [
    ("rnn_tanh", "RNN", {}, True, False),
    ("rnn_relu_2l_bidir", "RNN", dict(nonlinearity="relu", num_layers=2, bidirectional=True), False, False),
    ("rnn_nobias_batch_first", "RNN", dict(bias=False, batch_first=True), True, False),
    ("rnn_unbatched_bidir", "RNN", dict(bidirectional=True), True, True),
    ("lstm", "LSTM", {}, True, False),
    ("lstm_zero_state", "LSTM", {}, False, False),
    ("lstm_2l_bidir_batch_first", "LSTM", dict(num_layers=2, bidirectional=True, batch_first=True), False, False),
    ("lstm_proj_2l", "LSTM", dict(proj_size=2, num_layers=2), True, False),
    ("lstm_proj_2l_bidir", "LSTM", dict(proj_size=2, num_layers=2, bidirectional=True), True, False),
    ("lstm_nobias_unbatched", "LSTM", dict(bias=False), True, True),
    ("lstm_unbatched_bidir_zero_state", "LSTM", dict(bidirectional=True), False, True),
    ("gru", "GRU", {}, True, False),
    ("gru_2l_bidir", "GRU", dict(num_layers=2, bidirectional=True), False, False),
    ("gru_nobias_batch_first", "GRU", dict(bias=False, batch_first=True), True, False),
    ("gru_unbatched", "GRU", {}, False, True),
]

# (name, mode, options, initial state?, unbatched?)
CELLS = [
    ("rnncell_tanh", "RNNCell", {}, True, False),
    ("rnncell_relu_nobias", "RNNCell", dict(nonlinearity="relu", bias=False), False, False),
    ("lstmcell", "LSTMCell", {}, True, False),
    ("lstmcell_nobias_unbatched", "LSTMCell", dict(bias=False), True, True),
    ("grucell", "GRUCell", {}, True, False),
    ("grucell_unbatched_zero_state", "GRUCell", {}, False, True),
]


def config(mode, opts, state, unbatched):
    o = dict(num_layers=1, bias=True, batch_first=False, bidirectional=False, proj_size=0, nonlinearity="tanh")
    o.update(opts)
    return ";".join(
        f"{k}={int(v) if isinstance(v, bool) else v}"
        for k, v in [
            ("mode", mode),
            ("input_size", INPUT),
            ("hidden_size", HIDDEN),
            ("num_layers", o["num_layers"]),
            ("bias", o["bias"]),
            ("batch_first", o["batch_first"]),
            ("bidirectional", o["bidirectional"]),
            ("proj_size", o["proj_size"]),
            ("nonlinearity", o["nonlinearity"]),
            ("state", state),
            ("unbatched", unbatched),
            ("seq", SEQ),
            ("batch", BATCH),
        ]
    )


def keys(module):
    return ",".join(f"{k}:{'x'.join(str(s) for s in v.shape)}" for k, v in module.state_dict().items())


def layer_case(name, mode, opts, state, unbatched, out, meta):
    module = getattr(nn, mode)(INPUT, HIDDEN, **opts)
    d = 2 if opts.get("bidirectional") else 1
    layers = opts.get("num_layers", 1)
    h_out = opts.get("proj_size") or HIDDEN
    if unbatched:
        x = torch.randn(SEQ, INPUT)
        hshape, cshape = (d * layers, h_out), (d * layers, HIDDEN)
    else:
        x = torch.randn(BATCH, SEQ, INPUT) if opts.get("batch_first") else torch.randn(SEQ, BATCH, INPUT)
        hshape, cshape = (d * layers, BATCH, h_out), (d * layers, BATCH, HIDDEN)
    x.requires_grad_(True)
    inputs = {"input": x}
    if state:
        inputs["h0"] = torch.randn(*hshape).requires_grad_(True)
        if mode == "LSTM":
            inputs["c0"] = torch.randn(*cshape).requires_grad_(True)
    if mode == "LSTM":
        hx = (inputs["h0"], inputs["c0"]) if state else None
        y, (h_n, c_n) = module(x, hx)
        results = {"output": y, "h_n": h_n, "c_n": c_n}
    else:
        y, h_n = module(x, inputs.get("h0"))
        results = {"output": y, "h_n": h_n}
    finish(name, module, inputs, results, out)
    meta[f"case:{name}"] = config(mode, opts, state, unbatched)
    meta[f"keys:{name}"] = keys(module)


def cell_case(name, mode, opts, state, unbatched, out, meta):
    module = getattr(nn, mode)(INPUT, HIDDEN, **opts)
    x = torch.randn(INPUT) if unbatched else torch.randn(BATCH, INPUT)
    x.requires_grad_(True)
    hshape = (HIDDEN,) if unbatched else (BATCH, HIDDEN)
    inputs = {"input": x}
    if state:
        inputs["h0"] = torch.randn(*hshape).requires_grad_(True)
        if mode == "LSTMCell":
            inputs["c0"] = torch.randn(*hshape).requires_grad_(True)
    if mode == "LSTMCell":
        h, c = module(x, (inputs["h0"], inputs["c0"]) if state else None)
        results = {"output": h, "c_n": c}
    else:
        results = {"output": module(x, inputs.get("h0"))}
    finish(name, module, inputs, results, out)
    meta[f"case:{name}"] = config(mode, opts, state, unbatched)
    meta[f"keys:{name}"] = keys(module)


def finish(name, module, inputs, results, out):
    loss = 0
    weights = {"output": "dout", "h_n": "dh", "c_n": "dc"}
    for k, v in results.items():
        w = torch.randn(v.shape)
        out[f"{name}/{weights[k]}"] = w
        loss = loss + (v * w).sum()
    loss.backward()
    for k, v in module.state_dict().items():
        out[f"{name}/sd/{k}"] = v
    for k, p in module.named_parameters():
        out[f"{name}/grad/{k}"] = p.grad
    for k, v in inputs.items():
        out[f"{name}/{k}"] = v.detach()
        out[f"{name}/grad/{k}"] = v.grad
    for k, v in results.items():
        out[f"{name}/{k}"] = v.detach()


def save(out, meta, name):
    """Writes the tensors `out` and the metadata `meta` (two entries a case) to tests/fixtures/name."""
    out = {k: v.detach().contiguous() for k, v in out.items()}
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", name)
    save_file(out, path, metadata=meta)
    print(f"wrote {len(out)} tensors of {len(meta) // 2} cases to {os.path.normpath(path)}")


def main():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    out, meta = {}, {}
    for case in LAYERS:
        layer_case(*case, out, meta)
    for case in CELLS:
        cell_case(*case, out, meta)
    save(out, meta, "rnn.safetensors")


if __name__ == "__main__":
    main()
