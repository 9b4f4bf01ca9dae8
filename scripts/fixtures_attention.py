#!/usr/bin/env python3
"""Write PyTorch's attention and Transformer results as a safetensors fixture for
tests/nn_attention.rs.

Usage:  python3 scripts/fixtures_attention.py      (needs torch, safetensors and numpy)

Writes tests/fixtures/attention.safetensors, in f64. Per case `{case}`:

  {case}/sd/{key}           the module's state dict, as PyTorch names it (modules only)
  {case}/{input}            the inputs (query/key/value, src/tgt, masks)
  {case}/output             the output; {case}/weights the attention weights, when returned
  {case}/dout, /dweights    fixed random weights of the scalar loss
                            sum(output * dout) + sum(weights * dweights)
  {case}/grad/{input}       that loss's gradient for each float input that requires grad
  {case}/grad/{key}         and for each parameter

and in the file's metadata `case:{case}` = the configuration (`kind=mha;embed_dim=8;...`) and,
for modules, `keys:{case}` = the state dict's keys with their shapes in PyTorch's order.
Modules run in eval mode (dropout off) with gradients enabled (PyTorch's training path).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file


def keys(module):
    return ",".join(f"{k}:{'x'.join(str(s) for s in v.shape)}" for k, v in module.state_dict().items())


def conf(**kw):
    return ";".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in kw.items())


def finish(name, module, inputs, results, out):
    """Stores inputs, results, loss weights and gradients of case `name`."""
    loss = 0
    for k, v in results.items():
        w = torch.randn(v.shape)
        out[f"{name}/d{k if k != 'output' else 'out'}"] = w
        loss = loss + (v * w).sum()
    loss.backward()
    if module is not None:
        for k, v in module.state_dict().items():
            out[f"{name}/sd/{k}"] = v
        for k, p in module.named_parameters():
            out[f"{name}/grad/{k}"] = p.grad
    for k, v in inputs.items():
        out[f"{name}/{k}"] = v.detach()
        if v.requires_grad:
            out[f"{name}/grad/{k}"] = v.grad
    for k, v in results.items():
        out[f"{name}/{k}"] = v.detach()


def rand(*shape):
    return torch.randn(*shape).requires_grad_(True)


def sdpa_cases(out, meta):
    # (name, q shape, k shape, v shape, mask, causal, scale)
    bool_mask = torch.rand(3, 5) > 0.4
    bool_mask[1] = False  # a row with no key left: zeros, no gradient
    bool_mask[0, 0] = True
    float_mask = torch.randn(2, 1, 3, 5)
    float_mask[0, 0, 2, 1] = float("-inf")
    cases = [
        ("sdpa_plain", (2, 3, 4), (2, 5, 4), (2, 5, 6), None, False, None),
        ("sdpa_bool_mask", (2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4), bool_mask, False, None),
        ("sdpa_float_mask", (2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3), float_mask, False, None),
        ("sdpa_causal_short_query", (2, 3, 4), (2, 5, 4), (2, 5, 4), None, True, None),
        ("sdpa_causal_long_query", (1, 2, 5, 4), (1, 2, 3, 4), (1, 2, 3, 4), None, True, None),
        ("sdpa_scale_broadcast", (2, 3, 3, 4), (1, 3, 5, 4), (1, 3, 5, 2), None, False, 0.3),
        ("sdpa_2d", (3, 4), (5, 4), (5, 4), None, False, None),
    ]
    for name, qs, ks, vs, mask, causal, scale in cases:
        q, k, v = rand(*qs), rand(*ks), rand(*vs)
        inputs = {"query": q, "key": k, "value": v}
        if mask is not None:
            inputs["attn_mask"] = mask
        kwargs = {} if scale is None else {"scale": scale}
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, **kwargs)
        finish(name, None, inputs, {"output": y}, out)
        meta[f"case:{name}"] = conf(kind="sdpa", causal=causal, scale=scale if scale is not None else "none")


def mha_cases(out, meta):
    E, H, L, S, N = 8, 2, 3, 5, 2
    # (name, options, self-attention?, unbatched?, key padding?, attn_mask kind, need_weights, average)
    cases = [
        ("mha_self", {}, True, False, False, None, True, True),
        ("mha_self_batch_first_per_head", dict(batch_first=True), True, False, False, None, True, False),
        ("mha_cross_padding", {}, False, False, True, None, True, True),
        ("mha_cross_batch_first_float_mask", dict(batch_first=True), False, False, False, "float2d", True, False),
        ("mha_cross_bool_mask3d_padding", {}, False, False, True, "bool3d", True, True),
        ("mha_no_weights_bool_mask_padding", dict(batch_first=True), False, False, True, "bool2d", False, True),
        ("mha_kdim_vdim", dict(kdim=5, vdim=3, batch_first=True), False, False, True, None, True, True),
        ("mha_bias_kv_zero_attn", dict(add_bias_kv=True, add_zero_attn=True), False, False, True, "float2d", True, False),
        ("mha_nobias_unbatched", dict(bias=False), False, True, True, "bool3d", True, True),
    ]
    for name, opts, self_attn, unbatched, padding, mask_kind, need_weights, average in cases:
        m = nn.MultiheadAttention(E, H, dropout=0.1, **opts).eval()
        bf = opts.get("batch_first", False)
        kd, vd = opts.get("kdim", E), opts.get("vdim", E)

        def shape(seq, feat):
            if unbatched:
                return (seq, feat)
            return (N, seq, feat) if bf else (seq, N, feat)

        q = rand(*shape(L, E))
        inputs = {"query": q}
        if self_attn:
            k = v = q
            s = L
        else:
            k, v = rand(*shape(S, kd)), rand(*shape(S, vd))
            inputs["key"], inputs["value"] = k, v
            s = S
        kw = dict(need_weights=need_weights, average_attn_weights=average)
        if padding:
            kpm = torch.zeros((s,) if unbatched else (N, s), dtype=torch.bool)
            if unbatched:
                kpm[-1] = True
            else:
                kpm[0, -1] = True
                kpm[1, 1] = True
            inputs["key_padding_mask"] = kpm
            kw["key_padding_mask"] = kpm
        if mask_kind == "float2d":
            am = torch.randn(L, s)
        elif mask_kind == "bool2d":
            am = torch.zeros(L, s, dtype=torch.bool)
            am[0, 2] = True
        elif mask_kind == "bool3d":
            am = torch.rand((1 if unbatched else N) * H, L, s) > 0.8
            am[..., 0] = False
        else:
            am = None
        if am is not None:
            inputs["attn_mask"] = am
            kw["attn_mask"] = am
        y, w = m(q, k, v, **kw)
        results = {"output": y}
        if w is not None:
            results["weights"] = w
        finish(name, m, inputs, results, out)
        meta[f"case:{name}"] = conf(
            kind="mha",
            embed_dim=E,
            num_heads=H,
            batch_first=bf,
            kdim=kd,
            vdim=vd,
            bias=opts.get("bias", True),
            add_bias_kv=opts.get("add_bias_kv", False),
            add_zero_attn=opts.get("add_zero_attn", False),
            self_attn=self_attn,
            need_weights=need_weights,
            average=average,
        )
        meta[f"keys:{name}"] = keys(m)


def encoder_cases(out, meta):
    D, H, FF, S, N = 8, 2, 16, 4, 2
    # (name, activation, norm_first, batch_first, final norm, padding, causal mask)
    cases = [
        ("encoder_relu_post", "relu", False, False, False, False, False),
        ("encoder_gelu_post_padding", "gelu", False, True, True, True, False),
        ("encoder_relu_pre_causal", "relu", True, True, False, False, True),
        ("encoder_gelu_pre_final_norm", "gelu", True, False, True, True, True),
    ]
    for name, act, norm_first, bf, final_norm, padding, causal in cases:
        layer = nn.TransformerEncoderLayer(
            D, H, dim_feedforward=FF, dropout=0.1, activation=act, batch_first=bf, norm_first=norm_first
        )
        norm = nn.LayerNorm(D) if final_norm else None
        enc = nn.TransformerEncoder(layer, 2, norm=norm, enable_nested_tensor=False)
        # Distinct layers, non-trivial norms: perturb every parameter.
        with torch.no_grad():
            for p in enc.parameters():
                p.add_(0.1 * torch.randn(p.shape))
        enc.eval()
        x = rand(*((N, S, D) if bf else (S, N, D)))
        inputs = {"src": x}
        kw = {}
        if padding:
            kpm = torch.zeros(N, S, dtype=torch.bool)
            kpm[1, -1] = True
            inputs["src_key_padding_mask"] = kpm
            kw["src_key_padding_mask"] = kpm
        if causal:
            mask = nn.Transformer.generate_square_subsequent_mask(S)
            inputs["mask"] = mask
            kw["mask"] = mask
            kw["is_causal"] = True
        y = enc(x, **kw)
        finish(name, enc, inputs, {"output": y}, out)
        meta[f"case:{name}"] = conf(
            kind="encoder", d_model=D, nhead=H, dim_feedforward=FF, activation=act, norm_first=norm_first,
            batch_first=bf, final_norm=final_norm, num_layers=2,
        )
        meta[f"keys:{name}"] = keys(enc)


def transformer_cases(out, meta):
    D, H, FF, S, T, N = 8, 2, 16, 5, 4, 2
    for name, norm_first, bf, act in [("transformer_post", False, False, "relu"), ("transformer_pre", True, True, "gelu")]:
        model = nn.Transformer(
            d_model=D, nhead=H, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=FF, dropout=0.1,
            activation=act, batch_first=bf, norm_first=norm_first,
        )
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1 * torch.randn(p.shape))
        model.eval()
        src = rand(*((N, S, D) if bf else (S, N, D)))
        tgt = rand(*((N, T, D) if bf else (T, N, D)))
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(T)
        kpm = torch.zeros(N, S, dtype=torch.bool)
        kpm[0, -2:] = True
        y = model(src, tgt, tgt_mask=tgt_mask, tgt_is_causal=True, src_key_padding_mask=kpm,
                  memory_key_padding_mask=kpm)
        inputs = {"src": src, "tgt": tgt, "tgt_mask": tgt_mask, "key_padding_mask": kpm}
        finish(name, model, inputs, {"output": y}, out)
        meta[f"case:{name}"] = conf(
            kind="transformer", d_model=D, nhead=H, dim_feedforward=FF, activation=act, norm_first=norm_first,
            batch_first=bf, num_layers=2,
        )
        meta[f"keys:{name}"] = keys(model)


def main():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    out, meta = {}, {}
    sdpa_cases(out, meta)
    mha_cases(out, meta)
    encoder_cases(out, meta)
    transformer_cases(out, meta)
    meta["square_subsequent_mask_4"] = repr(nn.Transformer.generate_square_subsequent_mask(4).tolist())
    out = {k: v.detach().contiguous() for k, v in out.items()}
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "attention.safetensors")
    save_file(out, path, metadata=meta)
    cases = sum(1 for k in meta if k.startswith("case:"))
    print(f"wrote {len(out)} tensors of {cases} cases to {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
